"""Run the README's quick start (`bash scripts/quickstart.sh`) and record it in a results JSON.

The machine's 1-minute load average is sampled every 5 s while it runs, so a timing taken on a
shared machine says how busy it was. The JSON (default `benchmarks/results/quickstart/quickstart.json`)
holds the run's results.json (scores before and after, train seconds, pairs/s, threads, precision,
peak memory), the load, the CPU and the date; docs/results.md and the README's figures read it.

    .venv/bin/python benchmarks/bench_quickstart.py
    .venv/bin/python benchmarks/bench_quickstart.py --from-run runs/quickstart --load-log LOG   # record a run made by hand

A load log has one `EPOCH_SECONDS LOAD1 LOAD5 LOAD15 ...` line per sample (`/proc/loadavg` after a
timestamp), the format this script writes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def read_load_log(path: Path) -> list[tuple[float, float]]:
    """(time, 1-minute load) samples; a malformed line is an error naming the file and line."""
    samples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            samples.append((float(parts[0]), float(parts[1])))
        except (IndexError, ValueError):
            raise SystemExit(f"bench_quickstart: error: {path}:{number}: expected 'EPOCH_SECONDS LOAD1 ...', got {line[:60]!r}") from None
    return samples


def load_summary(samples: list[tuple[float, float]], start: float, end: float) -> dict[str, Any]:
    inside = [load for when, load in samples if start <= when <= end]
    if not inside:
        raise SystemExit("bench_quickstart: error: no load sample falls within the run")
    return {"samples": len(inside), "mean_1min": sum(inside) / len(inside), "min_1min": min(inside), "max_1min": max(inside), "cpus": os.cpu_count()}


def record(run_dir: Path, samples: list[tuple[float, float]], start: float, end: float, out: Path, command: str) -> dict[str, Any]:
    results_path = run_dir / "results.json"
    try:
        result = json.loads(results_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"bench_quickstart: error: {results_path}: {exc}") from None
    for key in ("before", "after", "train_seconds", "pairs_per_second"):
        if key not in result:
            raise SystemExit(f"bench_quickstart: error: {results_path}: no field {key!r}")
    data = {
        "benchmark": "quickstart",
        "command": command,
        "date": dt.datetime.fromtimestamp(end, dt.timezone.utc).strftime("%Y-%m-%d"),
        "cpu": cpu_name(),
        "wall_seconds": end - start,
        "load": load_summary(samples, start, end),
        **{k: v for k, v in result.items() if k not in ("output_dir", "model_dir")},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/quickstart/quickstart.json")
    parser.add_argument("--from-run", type=Path, help="record this finished run folder instead of running the quick start")
    parser.add_argument("--load-log", type=Path, help="with --from-run: the load samples taken during it")
    parser.add_argument("--start", type=float, help="with --from-run: the run's start (epoch seconds; default: the log's first sample)")
    parser.add_argument("--end", type=float, help="with --from-run: the run's end (epoch seconds; default: the log's last sample)")
    args = parser.parse_args(argv)
    command = "bash scripts/quickstart.sh"
    if args.from_run:
        if not args.load_log:
            parser.error("--from-run needs --load-log")
        samples = read_load_log(args.load_log)
        if not samples:
            parser.error(f"--load-log {args.load_log}: no samples")
        start = args.start if args.start is not None else samples[0][0]
        end = args.end if args.end is not None else samples[-1][0]
        data = record(args.from_run, samples, start, end, args.out, command)
    else:
        samples: list[tuple[float, float]] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                samples.append((time.time(), os.getloadavg()[0]))
                done.wait(5)

        thread = threading.Thread(target=sample, daemon=True)
        start = time.time()
        thread.start()
        completed = subprocess.run(["bash", "scripts/quickstart.sh"], cwd=ROOT)
        end = time.time()
        done.set()
        thread.join()
        if completed.returncode != 0:
            print(f"bench_quickstart: error: scripts/quickstart.sh exited {completed.returncode}", file=sys.stderr)
            return completed.returncode
        data = record(ROOT / "runs/quickstart", samples, start, end, args.out, command)
    print(
        f"STS-B {data['before']['spearman']:.2f} -> {data['after']['spearman']:.2f}, {data['train_seconds']:.0f} s, {data['pairs_per_second']:.1f} pairs/s, load {data['load']['mean_1min']:.1f} on {data['load']['cpus']} CPUs -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
