#!/usr/bin/env python
"""Padding batches to a multiple of 8 tokens: OpenVINO (bf16, static int8) against onnxruntime.

OpenVINO's CPU plugin prepares its kernels for every new input shape (batch size x width), which
costs a few milliseconds the first time a shape comes; onnxruntime does not. A server sees a new
shape whenever a batch's size or longest text is new, so this bench replays what ``anglekit
serve``'s batcher runs: 1024 STS-B test sentences in random batches of up to ``--batch`` texts
(sizes ``batch-3..batch``), each padded to its longest text rounded up to the multiple, and reports
sentences/s over a first (cold) pass in a fresh process and two more passes of new random batches
(warm: most shapes seen). Every row is its own process; rows are interleaved over ``--repeats``.

    .venv/bin/python benchmarks/bench_ov_padding.py                     # the table and JSON
    .venv/bin/python benchmarks/bench_ov_padding.py --batches 8 --repeats 1   # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402

RUNTIMES = ("openvino-bf16", "openvino-int8-static", "onnx-fp32", "onnx-int8")
ONNX_DIR = Path.home() / ".cache" / "anglekit" / "bench_ov_padding"


def prepare(runtime: str) -> Path:
    """The model folder of ``runtime`` (exported once, by ``anglekit export``)."""
    import bench_serve

    model_dir = common.minilm_dir()
    if runtime == "openvino-bf16":
        return bench_serve.prepare_bf16_model(model_dir)
    if runtime == "openvino-int8-static":
        return bench_serve.prepare_int8_model(model_dir) / "openvino-int8"
    out = ONNX_DIR / runtime
    if not (out / "model.onnx").is_file():
        argv = [sys.executable, "-m", "anglekit", "export", str(model_dir), "--format", "onnx", "--output-dir", str(out), "--overwrite"]
        argv += ["--quantize", "int8"] if runtime == "onnx-int8" else []
        subprocess.run(argv, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return out


def replay(folder: str, multiple: int, batch: int, threads: int, seed: int) -> dict[str, Any]:
    """One row, in this process: cold and warm sentences/s."""
    from anglekit.model.embedder import Embedder

    common.set_threads(threads)  # the exported runtimes take torch's thread count
    model = Embedder.from_pretrained(folder)
    model.pad_multiple = multiple
    s1, s2, _ = common.read_stsb("test")
    ids = model.tokenize_unpadded((s1 + s2)[:1024])
    rng = random.Random(seed)

    def stream() -> list[list[list[int]]]:
        order = list(range(len(ids)))
        rng.shuffle(order)
        batches = [[ids[j] for j in order[i : i + batch]] for i in range(0, len(order), batch)]
        return [b[: rng.randint(max(1, batch - 3), batch)] for b in batches]

    def run(batches: list[list[list[int]]]) -> float:
        started = time.perf_counter()
        for rows in batches:
            model.embed_padded(model.pad(rows), normalize=False)
        return sum(map(len, batches)) / (time.perf_counter() - started)

    model.embed_padded(model.pad([ids[0]] * batch), normalize=False)  # what the server's warm-up runs
    cold = run(stream())
    warm = [run(stream()) for _ in range(2)]
    return {"cold": cold, "warm": float(np.mean(warm)), "warm_passes": warm, "precision": getattr(model, "precision", "fp32")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", nargs="+", choices=RUNTIMES, default=list(RUNTIMES))
    parser.add_argument("--multiples", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32], help="largest batch of the replay (sizes batch-3..batch)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(HERE / "results" / "bench_ov_padding.json"))
    parser.add_argument("--row", help=argparse.SUPPRESS)  # a child process: runtime,multiple,batch,seed
    args = parser.parse_args()
    if args.row:
        runtime, multiple, batch, seed = args.row.split(",")
        print(json.dumps(replay(str(prepare(runtime)), int(multiple), int(batch), args.threads, int(seed))))
        return 0
    from anglekit.model.hardware import cpu_has_native_bf16

    runtimes = [r for r in args.runtimes if r != "openvino-bf16" or cpu_has_native_bf16()]
    for runtime in runtimes:
        prepare(runtime)
    rows: dict[str, list[dict[str, Any]]] = {}
    for repeat in range(args.repeats):
        for batch in args.batches:
            for runtime in runtimes:
                for multiple in args.multiples:
                    key = f"{runtime} x{multiple} b{batch}"
                    argv = [sys.executable, __file__, "--row", f"{runtime},{multiple},{batch},{repeat}", "--threads", str(args.threads)]
                    done = subprocess.run(argv, capture_output=True, text=True, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
                    rows.setdefault(key, []).append(json.loads(done.stdout.strip().splitlines()[-1]))
                    print(f"{key:34s} cold {rows[key][-1]['cold']:7.0f}  warm {rows[key][-1]['warm']:7.0f} sent/s", flush=True)
    print(
        f"\n{'runtime':22s} {'batch':>5s} "
        + " ".join(f"{'cold x' + str(m):>10s} {'warm x' + str(m):>10s}" for m in args.multiples)
        + "   ratio x8/x1 cold, warm"
    )
    summary = []
    for batch in args.batches:
        for runtime in runtimes:
            cells = {m: rows[f"{runtime} x{m} b{batch}"] for m in args.multiples}
            mean = {m: (float(np.mean([r["cold"] for r in c])), float(np.mean([r["warm"] for r in c]))) for m, c in cells.items()}
            line = f"{runtime:22s} {batch:5d} " + " ".join(f"{mean[m][0]:10.0f} {mean[m][1]:10.0f}" for m in args.multiples)
            entry = {"runtime": runtime, "batch": batch, "rows": {str(m): c for m, c in cells.items()}}
            if 1 in mean and 8 in mean:
                per_run = [(a["cold"] / b["cold"], a["warm"] / b["warm"]) for a, b in zip(cells[8], cells[1], strict=False)]
                entry["ratio_8_over_1"] = per_run
                line += "   " + ", ".join(f"{c:.2f}/{w:.2f}" for c, w in per_run)
            summary.append(entry)
            print(line)
    result = {"bench": "ov_padding", "threads": args.threads, "sentences": 1024, "repeats": args.repeats, "cpu_flags_bf16": cpu_has_native_bf16(),
              "versions": common.versions("openvino", "onnxruntime", "numpy"), "cells": summary}  # fmt: skip
    common.write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
