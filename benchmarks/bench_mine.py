#!/usr/bin/env python
"""Hard-negative mining: ``anglekit mine`` (exact) against sentence-transformers' ``mine_hard_negatives``.

Data: Flickr30k train, the first ``--rows`` images: (caption 1, caption 2) pairs; the corpus is the
distinct positives (both tools' default). Model: all-MiniLM-L6-v2 (offline), on the CPU, the same
torch thread count for every method; each is timed end to end from a loaded model (encode, search,
select, write) after one untimed warm-up run of each on 64 pairs, in ``--repeats`` rounds that run
every method once, in turn (interleaved, so the machine's drift falls on all of them). Methods:

- ``anglekit``: :func:`anglekit.mining.mine_hard_negatives`, exact search, its default batch size,
  a fresh work folder (nothing resumed);
- ``st-default``: ``mine_hard_negatives`` at its defaults (batch_size 32, torch search);
- ``st-best``: ``use_faiss=True`` and ``batch_size`` = anglekit's.

Both tools take ``--num-negatives`` (default 5) with ``relative_margin`` 0.05 (NV-Retriever's
setting, sentence-transformers' recommendation). ``same_negatives``: the share of output rows whose
negatives (in order) equal those of ``st-default``, and whether the two outputs hold the same rows.

    .venv/bin/python benchmarks/bench_mine.py --rows 2000 --threads 2 --repeats 3

Results: a table, and benchmarks/results/bench_mine.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402

DATA = HERE.parent.parent / "shared" / "data" / "flickr30k" / "Train"


def pairs(rows: int) -> list[dict[str, str]]:
    first = (DATA / "train.1").read_text(encoding="utf-8").splitlines()[:rows]
    second = (DATA / "train.2").read_text(encoding="utf-8").splitlines()[:rows]
    return [{"anchor": a, "positive": p} for a, p in zip(first, second, strict=False)]


def run_anglekit(model: Any, rows: list[dict[str, str]], negatives: int, folder: Path) -> tuple[float, dict[tuple[str, str], list[str]]]:
    from anglekit.mining import MineSettings, mine_hard_negatives

    source = folder / "pairs.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    start = time.perf_counter()
    report = mine_hard_negatives(model, source, folder / "mined.jsonl", settings=MineSettings(num_negatives=negatives, relative_margin=0.05))
    seconds = time.perf_counter() - start
    out = {}
    for line in report.output.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        out[(r["anchor"], r["positive"])] = [r[f"negative_{j + 1}"] for j in range(negatives)]
    return seconds, out


def run_st(model: Any, rows: list[dict[str, str]], negatives: int, **options: Any) -> tuple[float, dict[tuple[str, str], list[str]]]:
    import datasets
    from sentence_transformers.util import mine_hard_negatives

    dataset = datasets.Dataset.from_list(rows)
    start = time.perf_counter()
    mined = mine_hard_negatives(dataset, model, num_negatives=negatives, relative_margin=0.05, output_format="n-tuple", verbose=False, **options)
    seconds = time.perf_counter() - start
    return seconds, {(r["anchor"], r["positive"]): [r[f"negative_{j + 1}"] for j in range(negatives)] for r in mined}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000, help="Flickr30k train images (pairs) to mine for (default: 2000)")
    parser.add_argument("--num-negatives", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="rounds; each times every method once, in turn (the best is reported, and per-round ratios)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for every method (default: 2)")
    parser.add_argument("--out", default=str(HERE / "results" / "bench_mine.json"))
    args = parser.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    from anglekit.model import DEFAULT_BATCH_SIZE
    from anglekit.model.embedder import Embedder
    from anglekit.model.offline import minilm_dir

    torch.set_num_threads(args.threads)
    model = Embedder.from_pretrained(minilm_dir(), device="cpu")
    st_model = SentenceTransformer(str(minilm_dir()), device="cpu")
    rows = pairs(args.rows)
    methods = {
        "anglekit": lambda r, d: run_anglekit(model, r, args.num_negatives, d),
        "st-default": lambda r, d: run_st(st_model, r, args.num_negatives),
        "st-best": lambda r, d: run_st(st_model, r, args.num_negatives, use_faiss=True, batch_size=DEFAULT_BATCH_SIZE),
    }
    results: dict[str, Any] = {}
    outputs: dict[str, dict[tuple[str, str], list[str]]] = {}
    times: dict[str, list[float]] = {name: [] for name in methods}
    folder = Path(tempfile.mkdtemp(prefix="bench-mine-"))
    load_start, started = os.getloadavg(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        for name, method in methods.items():
            (folder / f"warm-{name}").mkdir()
            method(pairs(64), folder / f"warm-{name}")  # untimed: first-call costs (thread pools, allocators)
        for repeat in range(args.repeats):  # interleaved: each round runs every method once, in turn
            for name, method in methods.items():
                work = folder / f"{name}-run{repeat}"
                work.mkdir()
                seconds, outputs[name] = method(rows, work)
                times[name].append(seconds)
                print(f"round {repeat + 1}: {name:<11} {seconds:8.2f} s  {len(outputs[name])} rows", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for name in methods:
        results[name] = {"seconds": min(times[name]), "all_seconds": times[name], "rows_out": len(outputs[name])}
    reference = outputs["st-default"]
    for name in methods:
        same = sum(outputs[name].get(key) == value for key, value in reference.items())
        results[name]["same_negatives_as_st_default"] = same / max(1, len(reference))
        results[name]["same_rows_as_st_default"] = set(outputs[name]) == set(reference)
    for name in ("st-default", "st-best"):
        results[f"speedup_vs_{name}"] = results[name]["seconds"] / results["anglekit"]["seconds"]
        # per round: the same round's runs, so the machine's drift cancels
        results[f"speedup_vs_{name}_per_round"] = [b / a for a, b in zip(times["anglekit"], times[name], strict=True)]
    table = ["| method | seconds | rows | same negatives as st-default |", "|---|---:|---:|---:|"]
    for name in methods:
        r = results[name]
        table.append(f"| {name} | {r['seconds']:.2f} | {r['rows_out']} | {100 * r['same_negatives_as_st_default']:.2f}% |")
    print("\n".join(table))
    print(f"anglekit is {results['speedup_vs_st-default']:.2f}x st-default and {results['speedup_vs_st-best']:.2f}x st-best")
    result = {"bench": "bench_mine", "rows": args.rows, "num_negatives": args.num_negatives, "relative_margin": 0.05, "threads": args.threads,
              "batch_size": {"anglekit": DEFAULT_BATCH_SIZE, "st-default": 32, "st-best": DEFAULT_BATCH_SIZE}, "results": results,
              "machine": {"cpu": common.cpu_flags(), "started": started, "load_average_start": load_start, "load_average_end": os.getloadavg()},
              "versions": common.versions("torch", "sentence-transformers", "faiss-cpu", "transformers")}  # fmt: skip
    common.write_result({"command": common.invocation(), **result}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
