#!/usr/bin/env python
"""GradCache benchmark: large in-batch-negative batches with and without GradCache, and the
unsupervised contrastive objective at an effective batch of 1024 under 3 GB.

Protocol: all-MiniLM-L6-v2 (mean pooling), max length 64, constant LR 2e-5, no warmup, 1 epoch,
CPU. Rows (each configuration in its own process, so peak RSS is that configuration's):

* ``ibn-256`` / ``ibn-256-gc32`` / ``ibn-1024`` / ``ibn-1024-gc32``: the ``ibn`` preset (in-batch
  negatives, paper eq. 2; positive = label >= 4) on STS-B train at batch 256 and 1024 pairs, without
  and with ``--gradcache-chunk-size 32``: peak RSS, pairs/s and STS-B test Spearman x 100;
* ``simcse-unsup-1024-gc32``: ``simcse-unsup`` on the distinct sentences of STS-B train at batch 1024
  (2048 dropout views per step) with ``--gradcache-chunk-size 32``: target peak RSS < 3 GB.

Per-run JSON lands in benchmarks/results/gradcache/; the table is printed and written to
benchmarks/results/bench_gradcache.json.

    .venv/bin/python benchmarks/bench_gradcache.py                          # the full run
    .venv/bin/python benchmarks/bench_gradcache.py --max-steps 1 --only ibn-256-gc32   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
MAIN_PYTHON = ROOT / ".venv" / "bin" / "python"
RSS_TARGET_MB = 3 * 1024

# name -> (objective, batch size, GradCache chunk or None)
ROWS: dict[str, tuple[str, int, int | None]] = {
    "ibn-256": ("ibn", 256, None),
    "ibn-256-gc32": ("ibn", 256, 32),
    "ibn-1024": ("ibn", 1024, None),
    "ibn-1024-gc32": ("ibn", 1024, 32),
    "simcse-unsup-1024-gc32": ("simcse-unsup", 1024, 32),
}


def worker(args: argparse.Namespace) -> dict:
    import contextlib
    import tempfile

    import common  # type: ignore[import-not-found]

    common.set_threads(args.threads)
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    objective, batch, chunk = ROWS[args.row]
    with tempfile.TemporaryDirectory(prefix="anglekit-gc-") as out, contextlib.redirect_stdout(sys.stderr):
        if objective == "simcse-unsup":
            t1, t2, _ = common.read_stsb("train")
            sentences = Path(out) / "sentences.txt"
            sentences.write_text("\n".join(common.unique_sentences(t1, t2)) + "\n", encoding="utf-8")
            data = {"train_data": str(sentences)}
        else:
            data = {"train_data": str(common.stsb_dir()) + ":train", "positive_threshold": 4.0}
        config = TrainConfig.from_dict(dict(
            model=str(common.minilm_dir(args.model_zip)), pooling="last_avg", max_length=common.TRAIN_MAX_LENGTH,
            test_data=str(common.stsb_dir()) + ":test", objective=objective, epochs=1.0,
            batch_size=batch, gradcache_chunk_size=chunk, learning_rate=common.LEARNING_RATE, scheduler="constant",
            warmup_steps=0, seed=args.seed, eval_batch_size=common.EVAL_BATCH_SIZE, output_dir=str(Path(out) / "run"),
            quiet=True, device="cpu", logging_steps=1, **data,
            **({"max_steps": args.max_steps} if args.max_steps else {}),  # None: the whole epoch
        ))  # fmt: skip
        result = train(config)
    return {
        "row": args.row, "objective": objective, "batch_size": batch, "gradcache_chunk_size": chunk, "seed": args.seed,
        "steps": result.steps, "train_seconds": result.train_seconds, "rows_per_s": result.pairs_per_second,
        "unit": result.unit, "spearman": result.after.get("spearman"), "peak_rss_mb": common.peak_rss_mb(),
        "max_steps": args.max_steps, "versions": common.versions("anglekit", "torch", "transformers"),
    }  # fmt: skip


def run_one(row: str, *, seed: int, max_steps: int | None, reuse: bool, threads: int) -> dict | None:
    suffix = f"-steps{max_steps}" if max_steps else ""
    out = RESULTS / "gradcache" / f"{row}-seed{seed}{suffix}.json"
    if reuse and out.exists():
        return json.loads(out.read_text())
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(MAIN_PYTHON), str(Path(__file__).resolve()), "--worker", "--row", row, "--seed", str(seed), "--out", str(out), "--threads", str(threads)]
    if max_steps:
        cmd += ["--max-steps", str(max_steps)]
    print(f"--- {row}", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(HERE / "peers")})
    if proc.returncode != 0 or not out.exists():
        print(f"FAILED {row} (exit {proc.returncode}; a killed process, e.g. out of memory, also shows here)", file=sys.stderr)
        return {"row": row, "failed": True, "exit": proc.returncode}
    return json.loads(out.read_text())


def print_table(results: list[dict]) -> None:
    header = f"{'row':<24} {'objective':<13} {'batch':>6} {'chunk':>6} {'steps':>6} {'rows/s':>8} {'peak RSS MB':>12} {'STS-B':>7}"
    print(header)
    print("-" * len(header))
    for r in results:
        if r.get("failed"):
            print(f"{r['row']:<24} FAILED (exit {r['exit']})")
            continue
        spearman = f"{r['spearman']:.2f}" if r.get("spearman") is not None else "-"
        flag = " (< 3 GB)" if r["objective"] == "simcse-unsup" and r["peak_rss_mb"] < RSS_TARGET_MB else ""
        print(f"{r['row']:<24} {r['objective']:<13} {r['batch_size']:>6} {str(r['gradcache_chunk_size'] or '-'):>6} {r['steps']:>6} "
              f"{r['rows_per_s']:>8.1f} {r['peak_rss_mb']:>12.0f} {spearman:>7}{flag}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", default=None, choices=list(ROWS), help="rows to run (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="seed of each run (default: 0)")
    parser.add_argument("--max-steps", type=int, default=None, help="stop each training after N steps (smoke runs)")
    parser.add_argument("--reuse", action="store_true", help="reuse per-run JSON already in benchmarks/results/gradcache")
    parser.add_argument("--threads", type=int, default=0, help="torch threads per run (0 = torch default)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--row", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model-zip", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE / "peers"))
    import common  # type: ignore[import-not-found]  (workers write their run; main the command it ran)

    if args.worker:
        common.write_result(worker(args), args.out)
        return 0
    started = time.perf_counter()
    results = []
    for row in args.only or list(ROWS):
        for seed in args.seeds:
            result = run_one(row, seed=seed, max_steps=args.max_steps, reuse=args.reuse, threads=args.threads)
            if result is not None:
                results.append(result)
    print_table(results)
    name = "bench_gradcache.json" if not args.max_steps else f"bench_gradcache-steps{args.max_steps}.json"
    summary = {
        "protocol": "all-MiniLM-L6-v2 last_avg, max length 64, constant LR 2e-5, 1 epoch, CPU; ibn on STS-B train pairs "
        "(positive: label >= 4), simcse-unsup on STS-B train's distinct sentences; STS-B test Spearman x100",
        "rss_target_mb": RSS_TARGET_MB, "max_steps": args.max_steps, "seconds": time.perf_counter() - started, "rows": results,
    }  # fmt: skip
    (RESULTS / name).write_text(json.dumps({"command": common.invocation(), **summary}, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
