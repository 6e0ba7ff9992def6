"""Issue 30, reduced budget: the smollm2 start, rows all / without angle / only cosine / only ibn (InfoNCE) /
only angle, seeds 0 1 2 (seed-major), 30 steps each; cells in runs/repro-smollm2/cells (resumable)."""
import sys
from pathlib import Path
from anglekit.reproduce import ReproduceConfig
from anglekit.reproduce.config import expand_tables
from anglekit.reproduce.protocol import make_protocol, prepare_start
from anglekit.reproduce.runner import data_root, prepare_data, _data_env, plan_cells
from anglekit.reproduce.tables import build_tables
from anglekit.reproduce.cells import read_cell, run_cell

ROWS = ["all: cosine + ibn + angle", "without angle", "only cosine", "only ibn", "only angle"]
config = ReproduceConfig(seeds=(0, 1, 2), output_dir="runs/repro-smollm2", start="smollm2", max_steps=30, quiet=True)
protocol = make_protocol(config.preset, start="smollm2", max_steps=30)
root = data_root(None)
out = Path(config.output_dir); cells_dir = out / "cells"; cells_dir.mkdir(parents=True, exist_ok=True)
data, options = prepare_data(["objectives"], config, protocol, root, out / "data")
table = build_tables(data, options)["objectives"]
with _data_env(root):
    model = prepare_start(protocol, out)
    planned = plan_cells(table, (0, 1, 2), protocol, model)
    chosen = [(c, m) for c, m in planned if c.row.kind == "zero-shot"] + sorted(
        [(c, m) for c, m in planned if c.row.name in ROWS], key=lambda cm: (cm[0].seed, ROWS.index(cm[0].row.name)))
    for i, (cell, metric) in enumerate(chosen, 1):
        if read_cell(cells_dir / f"{cell.key()}.json") is not None:
            continue
        print(f"cell {i}/{len(chosen)}: {cell.row.name} seed {cell.seed}", file=sys.stderr, flush=True)
        record = run_cell(cell, cells_dir, metric=metric, data_root=str(root), quiet=True)
        print(f"   {record['metrics']} {record.get('training', {}).get('train_seconds')}", file=sys.stderr, flush=True)
