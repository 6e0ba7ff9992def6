#!/usr/bin/env python
"""Time of each evaluation suite for all-MiniLM-L6-v2 on this machine, cold and with a warm cache.

Every suite runs twice with one fresh embedding cache: the first run encodes (cold), the second
reads every embedding back (warm). Scores are printed with the times so the run is also a check.

    .venv/bin/python benchmarks/bench_eval_suites.py [--suite sts --suite geometry ...] [--threads 2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402  (the command a results file records)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The suites read the data root; anglekit's default is $ANGLEKIT_DATA, else the per-user folder.
os.environ.setdefault("ANGLEKIT_DATA", str(HERE.parent.parent / "shared" / "data"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", action="append", default=None, help="suites to time (default: all)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)

    import torch

    from anglekit import Embedder
    from anglekit.evaluation.suites import SUITES, run_suite

    if args.threads:
        torch.set_num_threads(args.threads)
    suites = args.suite or list(SUITES)
    model = Embedder.from_pretrained("pypi:all-minilm-l6-v2", pooling="last_avg", device="cpu")
    rows = []
    with tempfile.TemporaryDirectory(prefix="anglekit-cache-") as cache, tempfile.TemporaryDirectory() as out:
        for name in suites:
            timings = []
            for attempt in ("cold", "warm"):
                started = time.perf_counter()
                result = run_suite(
                    name,
                    model,
                    batch_size=args.batch_size,
                    max_length=model.config.max_length,
                    cache=cache,
                    model_name="all-MiniLM-L6-v2",
                    out_dir=Path(out) / attempt,
                    progress=False,
                )
                timings.append(time.perf_counter() - started)
            info = result["model"].get("cache", {})
            rows.append(
                {
                    "suite": name,
                    "cold_seconds": timings[0],
                    "warm_seconds": timings[1],
                    "speedup": timings[0] / timings[1] if timings[1] else None,
                    "warm_cache_misses": info.get("misses"),
                    "warm_cache_hits": info.get("hits"),
                    "markdown": (Path(out) / "warm" / f"{name}.md").read_text(encoding="utf-8"),
                }
            )
            print(f"{name}: cold {timings[0]:.1f} s, warm {timings[1]:.1f} s", file=sys.stderr, flush=True)
    print(f"all-MiniLM-L6-v2, batch {args.batch_size}, {torch.get_num_threads()} torch threads")
    print(f"{'suite':<14} {'cold s':>8} {'warm s':>8} {'speed-up':>9} {'warm misses':>12}")
    for row in rows:
        print(f"{row['suite']:<14} {row['cold_seconds']:>8.1f} {row['warm_seconds']:>8.1f} {row['speedup']:>8.1f}x {row['warm_cache_misses']!s:>12}")
    for row in rows:
        print("\n" + row["markdown"])
    target = HERE / "results" / "bench_eval_suites.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(
        json.dumps(
            {
                "date": datetime.date.today().isoformat(),
                "command": common.invocation(),
                "model": "all-MiniLM-L6-v2",
                "threads": torch.get_num_threads(),
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    os.replace(tmp, target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
