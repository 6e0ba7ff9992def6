"""Run the serving peer infinity (PyPI ``infinity-emb``, in ``.venv-infinity``) on 127.0.0.1.

    from infinity_peer import serve_with_infinity

    with serve_with_infinity(model_dir) as base_url:            # engine="torch" (default) or "optimum"
        httpx.post(f"{base_url}/embeddings", json={"input": ["a"], "model": "all-MiniLM-L6-v2"})

``base_url`` is also the OpenAI SDK's ``base_url`` (infinity serves ``/embeddings``, ``/models``
and ``/health`` at the root). The served model name is the folder's name unless given. The
server is stopped (SIGINT, then SIGKILL after 30 s) when the block ends. When infinity cannot
start, :class:`InfinityUnavailable` says why (the venv is missing, or the tail of its log).

Set it up once with ``bash benchmarks/peers/setup_infinity.sh``. Everything is offline:
``HF_HUB_OFFLINE=1``, and telemetry is off (``DO_NOT_TRACK=1``).

Engines: ``torch`` loads the sentence-transformers folder as it is. ``optimum`` (ONNX Runtime)
needs an ONNX file in the folder and does not export one: :func:`onnx_folder` exports the model
once with optimum's exporter (in ``.venv-infinity``) into a cached copy of the folder. infinity
0.0.78 with optimum 2.x accepts the ONNX file only as a path relative to the working directory,
so the server is started inside that folder with ``--model-id .``; and its ONNX engine pools by
the CLS token unless told otherwise, so the folder's own pooling (``1_Pooling/config.json``) is
passed as ``--pooling-method``; its ONNX graph optimisation is off (``--onnx-disable-optimize``),
as with optimum 2.x it fails anyway (``OptimizationConfig`` no longer takes infinity's arguments).

Only the standard library is used, so this file works from any venv.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("ANGLEKIT_INFINITY_VENV", REPO_ROOT / ".venv-infinity"))
ENGINES = ("torch", "optimum", "optimum-int8")


class InfinityUnavailable(RuntimeError):
    """infinity could not be started; the message says why."""


def _python() -> Path:
    python = VENV / "bin" / "python"
    if not python.is_file():
        raise InfinityUnavailable(f"{VENV} is missing: run `bash benchmarks/peers/setup_infinity.sh` first")
    return python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cache_root() -> Path:
    """Where the peers keep files: ``$ANGLEKIT_CACHE/peers``, else ``~/.cache/anglekit/peers``."""
    return Path(os.environ.get("ANGLEKIT_CACHE", Path.home() / ".cache" / "anglekit")) / "peers"


def offline_env(threads: int | None = None) -> dict[str, str]:
    """The environment of a peer server: offline, no telemetry, infinity's cache (``INFINITY_HOME``)
    out of the working directory, and ``threads`` OpenMP/MKL threads when given."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "DO_NOT_TRACK": "1",
           "INFINITY_ANONYMOUS_USAGE_STATS": "0", "TOKENIZERS_PARALLELISM": "false",
           "INFINITY_HOME": os.environ.get("INFINITY_HOME", str(cache_root() / "infinity"))}  # fmt: skip
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


def _pooling(model_dir: Path) -> str:
    config = model_dir / "1_Pooling" / "config.json"
    if config.is_file():
        modes = json.loads(config.read_text())
        if modes.get("pooling_mode_mean_tokens"):
            return "mean"
        if modes.get("pooling_mode_cls_token"):
            return "cls"
    return "auto"


def onnx_folder(model_dir: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None) -> Path:
    """A copy of ``model_dir`` with ``model.onnx`` beside its weights, exported once into ``cache``
    (default: ``$ANGLEKIT_CACHE/peers``, else ``~/.cache/anglekit/peers``)."""
    source = Path(model_dir).resolve()
    root = Path(cache) if cache else cache_root()
    target = root / f"{source.name}-onnx"
    if (target / "model.onnx").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    code = (
        "import sys\nfrom optimum.exporters.onnx import main_export\n"
        "main_export(sys.argv[1], output=sys.argv[2], task='feature-extraction', library_name='transformers')\n"
    )
    return _made_in_peer_venv(target, source, code, "model.onnx", "exporting to ONNX")


def _made_in_peer_venv(target: Path, base: Path, code: str, produced: str, what: str) -> Path:
    """``target``: a copy of the folder ``base`` plus the file ``produced``, which ``code`` writes when
    run in infinity's venv with ``base`` and an output folder as its arguments; staged beside
    ``target`` and moved into place whole, so a failed or interrupted run leaves nothing half made."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        shutil.copytree(base, staging / "model")
        done = subprocess.run([str(_python()), "-c", code, str(base), str(staging / "out")],
                              capture_output=True, text=True, env=offline_env(), timeout=900)  # fmt: skip
        if done.returncode != 0 or not (staging / "out" / produced).is_file():
            raise InfinityUnavailable(f"{what} failed for {base}:\n{done.stderr[-3000:]}")
        shutil.copy(staging / "out" / produced, staging / "model" / produced)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging / "model", target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def onnx_int8_folder(model_dir: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None) -> Path:
    """:func:`onnx_folder` plus ``model_quantized.onnx``: the graph quantized to int8 by optimum's
    ``ORTQuantizer`` (``AutoQuantizationConfig.avx512_vnni``, dynamic: onnxruntime's dynamic int8,
    the form infinity's docs point to), made once. On the CPU infinity's optimum engine prefers a
    file whose name holds "quantize" (``get_onnx_files(prefer_quantized=True)``): its best setting."""
    plain = onnx_folder(model_dir, cache)
    target = plain.with_name(plain.name + "-int8")
    if (target / "model_quantized.onnx").is_file():
        return target
    code = (
        "import sys\nfrom optimum.onnxruntime import ORTQuantizer\n"
        "from optimum.onnxruntime.configuration import AutoQuantizationConfig\n"
        "q = ORTQuantizer.from_pretrained(sys.argv[1], file_name='model.onnx')\n"
        "q.quantize(save_dir=sys.argv[2], quantization_config=AutoQuantizationConfig.avx512_vnni(is_static=False))\n"
    )
    return _made_in_peer_venv(target, plain, code, "model_quantized.onnx", "quantizing to int8")


def _get(url: str, timeout: float = 2.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return 0


@contextlib.contextmanager
def serve_with_infinity(
    model_dir: str | os.PathLike[str],
    engine: str = "torch",
    *,
    served_model_name: str | None = None,
    threads: int | None = None,
    batch_size: int | None = None,
    port: int | None = None,
    startup_timeout: float = 600.0,
    log_file: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    dtype: str | None = None,
) -> Iterator[str]:
    """Start ``infinity_emb v2`` for ``model_dir`` on 127.0.0.1, yield its base URL once
    ``/health`` answers, stop it on exit. ``threads`` sets OMP/MKL threads (torch's too);
    ``batch_size`` is infinity's ``--batch-size`` (default: its own, 32); ``env``: more environment;
    ``dtype``: infinity's ``--dtype`` (default: its own, auto)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    python = _python()
    source = Path(model_dir).resolve()
    if not (source / "config.json").is_file():
        raise InfinityUnavailable(f"{source} is not a model folder (no config.json)")
    name = served_model_name or source.name
    port = port or free_port()
    cwd: Path | None = None
    model_id = str(source)
    extra: list[str] = []
    if engine in ("optimum", "optimum-int8"):
        cwd, model_id = (onnx_folder(source) if engine == "optimum" else onnx_int8_folder(source)), "."
        extra = ["--pooling-method", _pooling(source), "--onnx-disable-optimize"]
        engine = "optimum"
    argv = [str(python.with_name("infinity_emb")), "v2", "--model-id", model_id, "--served-model-name", name,
            "--engine", engine, "--device", "cpu", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
            *extra]  # fmt: skip
    if batch_size:
        argv += ["--batch-size", str(batch_size)]
    if dtype:
        argv += ["--dtype", dtype]
    log = open(log_file, "w+b") if log_file else tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    process = subprocess.Popen(argv, cwd=cwd, env={**offline_env(threads), **(env or {})}, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def tail() -> str:
        log.flush()
        log.seek(0)
        return log.read().decode("utf-8", "replace")[-4000:]

    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                raise InfinityUnavailable(f"infinity ({engine}) exited with status {process.returncode} before it was ready:\n{tail()}")
            if _get(f"{url}/health") == 200:
                break
            if time.monotonic() > deadline:
                raise InfinityUnavailable(f"infinity ({engine}) was not ready after {startup_timeout:.0f} s:\n{tail()}")
            time.sleep(0.25)
        yield url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        log.close()


if __name__ == "__main__":  # smoke check: python benchmarks/peers/infinity_peer.py MODEL_DIR [ENGINE]
    folder, which = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "torch")
    with serve_with_infinity(folder, which) as base:
        request = urllib.request.Request(
            f"{base}/embeddings", data=json.dumps({"input": ["hello"], "model": Path(folder).resolve().name}).encode(),
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=60) as response:
            print(base, len(json.loads(response.read())["data"][0]["embedding"]), "dimensions")
