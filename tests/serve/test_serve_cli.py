"""``anglekit serve`` as a command: its flags, its errors, and a real server process that drains
the requests in flight on SIGTERM and exits 0."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import helpers
from serving import sentences, wait_for

SLOW_SERVE = Path(__file__).with_name("slow_serve.py")


def test_help_lists_the_server_flags_and_imports_neither_fastapi_nor_torch() -> None:
    code = (
        "import contextlib, io, sys\n"
        "from anglekit.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        main(['serve', '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in ('torch', 'fastapi', 'uvicorn', 'transformers', 'prometheus_client') if m in sys.modules))\n"
        "print(out.getvalue())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    first, _, help_text = done.stdout.partition("\n")
    assert first == "[]"
    for flag in (
        "--host", "--port", "--backend", "--max-batch-tokens", "--max-batch-size", "--max-client-batch", "--max-queue",
        "--payload-limit", "--no-auto-truncate", "--api-key", "--threads", "--served-model-name", "--quiet", "--device",
        "--dtype", "--revision", "--trust-remote-code", "--max-length", "--prompt",
    ):  # fmt: skip
        assert flag in help_text, flag
    assert "default: 16384" in help_text and "default: 2048" in help_text and "ANGLEKIT_API_KEY" in help_text
    assert help_text.split("positional arguments:")[1].split()[0] == "MODEL"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--max-client-batch", "10", "--max-queue", "5"], "may not exceed max_queue"),
        (["--port", "70000"], "--port: must be <= 65535, got 70000"),
        (["--max-batch-tokens", "0"], "--max-batch-tokens: must be >= 1, got 0"),
        (["--payload-limit", "-1"], "--payload-limit: must be >= 1, got -1"),
        (["--threads", "0"], "--threads: must be >= 1, got 0"),
        (["--warmup-seconds", "-1"], "--warmup-seconds: must be >= 0, got -1"),
        (["--api-key", " "], "api_key may not be empty"),
    ],
)
def test_bad_settings_are_errors(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = helpers.run_cli(["serve", "some-model", *argv], capsys)
    assert code == 2 and words in err, err


@pytest.mark.parametrize("argv", [["--backend", "tensorflow"], ["--max-queue", "many"], ["--warmup-seconds", "soon"], ["--unknown"]])
def test_bad_flags_are_argparse_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = helpers.run_cli(["serve", "some-model", *argv], capsys)
    assert code == 2 and "usage:" in err


def test_without_the_serve_extra_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("anglekit.serve.server", "anglekit.serve.app"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "fastapi", None)
    code, _, err = helpers.run_cli(["serve", "some-model"], capsys)
    assert code == 2 and "pip install 'anglekit[serve]'" in err and "fastapi" in err


class _Process:
    """``anglekit serve`` in a subprocess; its stderr lines are collected on a thread."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)

    def expect(self, pattern: str, timeout: float = 120) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match
        raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(self.seen)}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def test_sigterm_finishes_the_requests_in_flight_and_exits_0(tiny_bert_dir: Path, reference: Any, tmp_path: Path) -> None:
    """The backend is held at a gate while SIGTERM arrives, so every request is in flight by
    construction; the gate opens once the server refuses new connections."""
    gate = tmp_path / "open"
    env = {**os.environ, "ANGLEKIT_TEST_BATCH_SLEEP": "0", "ANGLEKIT_TEST_BATCH_GATE": str(gate), "ANGLEKIT_API_KEY": "from-env"}
    server = _Process(
        [sys.executable, str(SLOW_SERVE), "serve", str(tiny_bert_dir), "--port", "0", "--device", "cpu", "--threads", "1",
         "--max-batch-size", "2", "--quiet"],
        env,
    )  # fmt: skip
    try:
        url = server.expect(r"listening on (http://127\.0\.0\.1:\d+)").group(1)
        server.expect(r"anglekit serve: ready")
        auth = {"Authorization": "Bearer from-env"}
        assert httpx.post(f"{url}/v1/embeddings", json={"input": "a"}).status_code == 401  # the key came from the environment
        groups = [sentences(3, seed=200 + i) for i in range(12)]  # 36 texts, 2 per forward pass, held at the gate
        responses: list[Any] = [None] * len(groups)

        def post(i: int) -> None:
            try:
                responses[i] = httpx.post(f"{url}/v1/embeddings", json={"input": groups[i]}, headers=auth, timeout=120)
            except Exception as exc:  # noqa: BLE001 - recorded, asserted below
                responses[i] = exc

        threads = [threading.Thread(target=post, args=(i,)) for i in range(len(groups))]
        for t in threads:
            t.start()
        wait_for(lambda: "anglekit_queue_requests 12.0" in httpx.get(f"{url}/metrics").text, what="all requests accepted")
        server.proc.send_signal(signal.SIGTERM)
        refused_in_flight = False
        deadline = time.monotonic() + 60  # only a guard against a hang
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{url}/health", timeout=5)
            except httpx.TransportError:
                refused_in_flight = all(t.is_alive() for t in threads)  # none can have finished: the gate is closed
                break
            time.sleep(0.05)
        gate.write_text("open")
        for t in threads:
            t.join(120)
        assert server.proc.wait(60) == 0, "".join(server.seen)
    finally:
        server.stop()
    assert refused_in_flight, "new connections were still accepted while draining"
    for texts, response in zip(groups, responses, strict=False):
        assert isinstance(response, httpx.Response) and response.status_code == 200, response
        got = np.array([d["embedding"] for d in response.json()["data"]])
        np.testing.assert_allclose(got, reference.encode(texts), rtol=1e-5, atol=1e-5)


def test_a_model_that_cannot_load_exits_2_with_the_reason(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    done = subprocess.run(
        [sys.executable, "-m", "anglekit", "serve", str(missing), "--port", "0", "--quiet", "--device", "cpu"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "anglekit serve: error:" in done.stderr and "no-such-model" in done.stderr


def test_openmp_threads_wait_passively_unless_the_environment_says_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    from anglekit.cli.serve import OPENMP_WAIT_VARIABLES, passive_openmp

    for name in OPENMP_WAIT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    passive_openmp()  # torch is already loaded here: too late to matter, so nothing is set
    assert "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.delitem(sys.modules, "torch")
    passive_openmp()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setenv("GOMP_SPINCOUNT", "100000")
    passive_openmp()
    assert "OMP_WAIT_POLICY" not in os.environ
