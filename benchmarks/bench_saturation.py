"""Issue 30: where the cosine saturates. The reproduce protocol's full objective (cosine + ibn +
angle, the `objectives` table's first row) trained from each start for the first hundred steps,
probing every few steps: the share of training pairs with |cos| > 0.99, the anisotropy (mean
cosine between the batch's texts) and each objective term's gradient norm with respect to the
embeddings. Before training, the same saturation and anisotropy are measured on STS-B train
pairs encoded by the start model as shipped.

    .venv/bin/python benchmarks/bench_saturation.py                  # minilm and smollm2, seed 0
    .venv/bin/python benchmarks/bench_saturation.py --seeds 0 1 2 --starts minilm

Writes benchmarks/results/saturation/bench_saturation.json, each run's metrics.jsonl and
saturation.png (anglekit plot-dynamics over the runs).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import torch

from anglekit.data import resolve_dataset
from anglekit.reproduce import ReproduceConfig
from anglekit.reproduce.cells import _embedder, make_cell
from anglekit.reproduce.protocol import make_protocol, prepare_start
from anglekit.reproduce.runner import _data_env, data_root, prepare_data
from anglekit.reproduce.tables import build_tables
from anglekit.training.config import TrainConfig
from anglekit.training.dynamics import load_metrics, plot_dynamics
from anglekit.training.probes import anisotropy, saturated_share
from anglekit.training.run import train

ROW = "all: cosine + ibn + angle"
WORK = Path("runs/bench_saturation")  # data files and re-initialised starts (not results)
KEYS = ("probe_saturated", "probe_anisotropy", "probe_grad_cosine", "probe_grad_angle", "probe_grad_ibn", "loss")


def start_geometry(model: str, cell, pairs: int) -> dict[str, float]:
    """Saturation and anisotropy of the first ``pairs`` STS-B train pairs, encoded by the untrained start."""
    data = resolve_dataset(cell.train["train_data"], default_split="train")
    embedder = _embedder(model, cell)  # as the reproduce cells score: the start's pooling, prompt and length
    x = torch.as_tensor(np.asarray(embedder.encode(list(data.text1[:pairs]), 32)), dtype=torch.float64)
    y = torch.as_tensor(np.asarray(embedder.encode(list(data.text2[:pairs]), 32)), dtype=torch.float64)
    return {"saturated": saturated_share(x, y), "anisotropy": anisotropy(torch.cat([x, y])), "pairs": pairs}


def run(start: str, seed: int, steps: int, probe_steps: int, out: Path, root: Path) -> dict:
    protocol = make_protocol("cpu", start=start, max_steps=steps)
    config = ReproduceConfig(seeds=(seed,), output_dir=str(WORK), start=start, max_steps=steps, quiet=True)
    data, options = prepare_data(["objectives"], config, protocol, root, WORK / "data")
    table = build_tables(data, options)["objectives"]
    row = next(r for r in table.rows if r.name == ROW)
    with _data_env(root):
        model = prepare_start(protocol, WORK)
        cell = make_cell(row, table.tasks[0], seed, protocol, model)
        before = start_geometry(model, cell, 512)
        run_dir = out / f"{start}-s{seed}"
        settings = {**cell.train, "probe_steps": probe_steps, "output_dir": str(run_dir), "overwrite_output_dir": True, "quiet": True}
        started = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):
            result = train(TrainConfig.from_dict(settings, source=f"{start} seed {seed}"))
    records = [r for r in load_metrics(run_dir) if "probe_saturated" in r]
    for sub in ("checkpoint", "model"):
        for path in run_dir.glob(f"{sub}*"):
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else None
    return {
        "start": start,
        "seed": seed,
        "steps": result.steps,
        "seconds": round(time.perf_counter() - started, 1),
        "precision": getattr(result, "precision", None),
        "before": before,
        "first": {k: records[0].get(k) for k in KEYS} | {"step": records[0]["step"]},
        "last": {k: records[-1].get(k) for k in KEYS} | {"step": records[-1]["step"]},
        "records": [{k: r.get(k) for k in ("step", *KEYS)} for r in records],
    }


def fmt(value) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", nargs="+", default=["minilm", "smollm2"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--probe-steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="benchmarks/results/saturation")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = data_root(None)
    runs = [run(start, seed, args.steps, args.probe_steps, out, root) for start in args.starts for seed in args.seeds]
    header = (
        f"{'start':<8} {'seed':>4} {'sat@0':>7} {'aniso@0':>8} | {'step':>4} {'sat':>7} {'aniso':>7} {'g_cos':>9} {'g_angle':>9} {'g_ibn':>9} {'angle/cos':>9}"
    )
    print(header)
    for r in runs:
        for when in ("first", "last"):
            p = r[when]
            ratio = p["probe_grad_angle"] / p["probe_grad_cosine"] if p.get("probe_grad_cosine") else float("nan")
            print(
                f"{r['start']:<8} {r['seed']:>4} {fmt(r['before']['saturated']):>7} {fmt(r['before']['anisotropy']):>8} | {p['step']:>4} "
                f"{fmt(p['probe_saturated']):>7} {fmt(p['probe_anisotropy']):>7} {fmt(p['probe_grad_cosine']):>9} "
                f"{fmt(p['probe_grad_angle']):>9} {fmt(p['probe_grad_ibn']):>9} {fmt(ratio):>9}"
            )
    figure = plot_dynamics([out / f"{r['start']}-s{r['seed']}" for r in runs], out / "saturation.png", labels=[f"{r['start']} s{r['seed']}" for r in runs],
                           title="first steps: saturation, anisotropy, gradient norm per term")  # fmt: skip
    payload = {"args": vars(args), "threads": torch.get_num_threads(), "runs": runs, "figure": str(figure)}
    (out / "bench_saturation.json").write_text(json.dumps({"date": datetime.date.today().isoformat(), **payload}, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out / 'bench_saturation.json'} and {figure}")


if __name__ == "__main__":
    main()
