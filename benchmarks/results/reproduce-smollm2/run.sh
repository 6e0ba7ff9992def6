#!/usr/bin/env bash
# Issue 30, the SmolLM2 start on a reduced budget (30 steps a cell, 5 rows, seeds 0 1 2; benchmarks/README.md,
# "A start that is not STS-tuned"): run_cells.py trains the cells into runs/repro-smollm2/cells
# (resumable); the finished cells' JSON and metrics were then copied here (how was not recorded);
# verdicts.py writes verdicts.json and verdicts.md beside itself.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export ANGLEKIT_DATA="${ANGLEKIT_DATA:-../shared/data}"
.venv/bin/python benchmarks/results/reproduce-smollm2/run_cells.py
.venv/bin/python benchmarks/results/reproduce-smollm2/verdicts.py
