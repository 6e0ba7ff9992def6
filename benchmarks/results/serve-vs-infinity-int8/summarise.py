"""Issue 31's throughput target over three bench_serve runs: anglekit at its best against infinity
at its best (the faster of its torch, ONNX and ONNX-int8 rows in each run), cell by cell.

    .venv/bin/python benchmarks/results/serve-vs-infinity-int8/summarise.py [DIR]   # reads DIR/bench_serve_run{1,2,3}.json

DIR defaults to this script's folder. Prints a markdown table and writes DIR/summary.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
INFINITY = ("infinity-torch", "infinity-torch-bf16", "infinity-onnx", "infinity-onnx-int8")
ANGLEKIT = ("anglekit", "anglekit-int8", "anglekit-bf16")


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("bench_serve_run[0-9].json"))]
    if not runs:
        raise SystemExit(f"no bench_serve_run<N>.json in {folder}")
    cells = sorted({(r["size"], r["concurrency"]) for run in runs for r in run["rows"]})
    out = []
    lines = [
        "| sentences x concurrency | anglekit's best sent/s (row per run) | anglekit torch | infinity best (engine per run) | ratio per run | min ratio | p99 ratio per run |",
        "|---|---|---|---|---|---|---|",
    ]
    for size, conc in cells:
        per_run = []
        for run in runs:
            rows = {r["peer"]: r for r in run["rows"] if (r["size"], r["concurrency"]) == (size, conc)}
            ours = max((rows[p] for p in ANGLEKIT if p in rows), key=lambda r: r["sentences_per_s"])
            theirs = max((rows[p] for p in INFINITY if p in rows), key=lambda r: r["sentences_per_s"])
            per_run.append({
                "anglekit": ours["peer"], "anglekit_sps": ours["sentences_per_s"], "anglekit_p99": ours["p99_ms"],
                "torch_sps": rows["anglekit"]["sentences_per_s"] if "anglekit" in rows else None,
                "infinity": theirs["peer"], "infinity_sps": theirs["sentences_per_s"], "infinity_p99": theirs["p99_ms"],
                "ratio": ours["sentences_per_s"] / theirs["sentences_per_s"], "p99_ratio": ours["p99_ms"] / theirs["p99_ms"],
            })  # fmt: skip
        out.append({"size": size, "concurrency": conc, "runs": per_run, "min_ratio": min(r["ratio"] for r in per_run)})

        def joined(key: str, fmt: str) -> str:
            return ", ".join(fmt.format(r[key]) for r in per_run if r[key] is not None)

        mine = ", ".join("{:.0f} ({})".format(r["anglekit_sps"], r["anglekit"].removeprefix("anglekit-")) for r in per_run)
        engines = ", ".join("{:.0f} ({})".format(r["infinity_sps"], r["infinity"].removeprefix("infinity-")) for r in per_run)
        lines.append(
            f"| {size} x {conc} | {mine} | {joined('torch_sps', '{:.0f}')} | {engines} | "
            f"{joined('ratio', '{:.2f}')} | {min(r['ratio'] for r in per_run):.2f} | {joined('p99_ratio', '{:.2f}')} |"
        )
    met = all(c["min_ratio"] >= 1.5 for c in out)
    p99 = all(r["p99_ratio"] < 1 for c in out if c["concurrency"] == 32 for r in c["runs"])
    lines.append("")
    lines.append(
        f"{len(runs)} runs; >= 1.5x infinity's best in every cell and run: {'yes' if met else 'no'}; p99 lower at concurrency 32 in every run: {'yes' if p99 else 'no'}"
    )
    (folder / "summary.json").write_text(json.dumps({"runs": len(runs), "cells": out, "target_met": met, "p99_lower_at_32": p99}, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
