"""A rerun of a finished encode has nothing to do and does not load the model; a resumed one says
which shards were done and where it restarts; workers exit cleanly (no leaked semaphores)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.corpus import EncodeRequest, encode_corpus, open_shards
from anglekit.model.embedder import Embedder

import helpers


def _corpus(path: Path, n: int) -> list[str]:
    import random

    rng = random.Random(5)
    texts = [helpers.random_sentence(rng) for _ in range(n)]
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return texts


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every Embedder.from_pretrained call, by name (the real loader still runs)."""
    calls: list[str] = []
    real = Embedder.from_pretrained.__func__  # type: ignore[attr-defined]

    def spy(cls: Any, name: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(os.fspath(name))
        return real(cls, name, *args, **kwargs)

    monkeypatch.setattr(Embedder, "from_pretrained", classmethod(spy))
    return calls


def test_nothing_to_do_does_not_load_the_model(tmp_path: Path, tiny_bert_dir: Path, copy_model: Any, loads: list[str]) -> None:
    model_dir = copy_model(tiny_bert_dir)
    texts = _corpus(tmp_path / "c.txt", 14)
    out = tmp_path / "out"
    kwargs = {"model_kwargs": {"device": "cpu"}, "shard_size": 4}
    first = encode_corpus(str(model_dir), EncodeRequest(tmp_path / "c.txt", out, **kwargs))
    assert (first.encoded, first.reused, first.loaded_model, first.resumed) == (4, 0, True, None) and len(loads) == 1
    files = {p.name: p.read_bytes() for p in out.iterdir()}

    again = encode_corpus(str(model_dir), EncodeRequest(tmp_path / "c.txt", out, **kwargs))
    assert (again.rows, again.shards, again.encoded, again.reused, again.dim) == (14, 4, 0, 4, 32)
    assert not again.loaded_model and len(loads) == 1 and "nothing to do" in again.summary()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == files

    # Anything that could change the vectors means the model is loaded (and the shards checked).
    # (Each run records its request, so each change below is the only difference from the run before.)
    changes = {
        "model files": (kwargs, (0, 4)),
        "damaged shard": (kwargs, (1, 3)),
        "settings": ({**kwargs, "model_kwargs": {"device": "cpu", "dtype": "fp32"}}, (0, 4)),
    }
    for change, (given, expected) in changes.items():
        if change == "model files":
            stat = (model_dir / "config.json").stat()
            os.utime(model_dir / "config.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        elif change == "damaged shard":
            (out / "shard-000002.npy").write_bytes(b"damaged")
        calls = len(loads)
        report = encode_corpus(str(model_dir), EncodeRequest(tmp_path / "c.txt", out, **given))  # type: ignore[arg-type]
        assert report.loaded_model and len(loads) == calls + 1, change
        assert (report.encoded, report.reused) == expected, change
    ids, vectors = open_shards(out).load()
    np.testing.assert_allclose(vectors, Embedder.from_pretrained(model_dir, device="cpu").encode(texts), atol=1e-5, rtol=0)
    settings = changes["settings"][0]
    assert not encode_corpus(str(model_dir), EncodeRequest(tmp_path / "c.txt", out, **settings)).loaded_model  # type: ignore[arg-type]


def test_a_resumed_encode_says_where_it_restarts(tmp_path: Path, tiny_bert_dir: Path) -> None:
    _corpus(tmp_path / "c.txt", 14)
    out = tmp_path / "out"
    encode_corpus(str(tiny_bert_dir), EncodeRequest(tmp_path / "c.txt", out, shard_size=4, model_kwargs={"device": "cpu"}))
    for index in (2, 3):  # as if killed after shard 1
        (out / f"shard-{index:06d}.json").unlink()
    said: list[str] = []
    report = encode_corpus(str(tiny_bert_dir), EncodeRequest(tmp_path / "c.txt", out, shard_size=4, model_kwargs={"device": "cpu"}), say=said.append)
    note = "resumed: shards 0-1 (8 texts) were already done; restarting at shard 2 (row 8)"
    assert said == [f"{out}: {note}"] and report.resumed == note and note in report.summary()
    assert (report.encoded, report.reused) == (2, 2)
    # A fresh folder says nothing of resuming.
    said.clear()
    fresh = encode_corpus(
        str(tiny_bert_dir), EncodeRequest(tmp_path / "c.txt", tmp_path / "fresh", shard_size=4, model_kwargs={"device": "cpu"}), say=said.append
    )
    assert said == [] and fresh.resumed is None


def test_workers_exit_cleanly_and_a_rerun_is_quick(tmp_path: Path, tiny_bert_dir: Path) -> None:
    _corpus(tmp_path / "c.txt", 14)
    out = tmp_path / "out"
    argv = [
        sys.executable,
        "-m",
        "anglekit",
        "encode",
        str(tiny_bert_dir),
        "--input",
        str(tmp_path / "c.txt"),
        "--output-dir",
        str(out),
        "--shard-size",
        "3",
        "--workers",
        "2",
        "--device",
        "cpu",
    ]
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    first = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert first.returncode == 0, first.stderr
    assert "5 encoded now" in first.stdout
    for noise in ("leaked semaphore", "resource_tracker", "Loading weights", "Traceback"):
        assert noise not in first.stderr, first.stderr
    # Nothing to do: the rerun never imports torch (it neither loads the model nor starts workers).
    probe = (
        "import sys, runpy; sys.argv = ['anglekit'] + sys.argv[1:]\n"
        "try:\n    runpy.run_module('anglekit', run_name='__main__')\n"
        "except SystemExit as exc:\n    code = exc.code\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', code)"
    )
    again = subprocess.run([sys.executable, "-c", probe, *argv[3:]], capture_output=True, text=True, env=env, check=False)
    assert again.returncode == 0, again.stderr
    assert "0 encoded now, 5 already done" in again.stdout and "nothing to do" in again.stdout
    assert again.stdout.strip().endswith("NO-TORCH 0"), again.stdout


def test_workers_are_joined_not_terminated(tmp_path: Path, tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed with terminate() while it exits leaks its semaphores (the warning at exit):
    finished workers are waited for, and all exit with status 0."""
    from multiprocessing.context import SpawnProcess

    terminated: list[int] = []
    started: list[SpawnProcess] = []
    real_terminate, real_start = SpawnProcess.terminate, SpawnProcess.start

    def terminate(self: SpawnProcess) -> None:
        terminated.append(self.pid or -1)
        real_terminate(self)

    def start(self: SpawnProcess) -> None:
        started.append(self)
        real_start(self)

    monkeypatch.setattr(SpawnProcess, "terminate", terminate)
    monkeypatch.setattr(SpawnProcess, "start", start)
    _corpus(tmp_path / "c.txt", 14)
    report = encode_corpus(str(tiny_bert_dir), EncodeRequest(tmp_path / "c.txt", tmp_path / "out", shard_size=3, workers=2, model_kwargs={"device": "cpu"}))
    assert report.encoded == 5
    assert len(started) == 2 and terminated == [] and [p.exitcode for p in started] == [0, 0]
