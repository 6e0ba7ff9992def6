#!/usr/bin/env bash
# The per-run JSON of the training table of 2026-11-23 (benchmarks/README.md, "Measured 2026-11-23":
# the 14 rows the script had then, x 3 seeds, nothing else running); its summary is
# benchmarks/results/bench_train.json. The angle-emb rows were run again in that session (git log);
# the command of that re-run was not recorded.
set -euo pipefail
cd "$(dirname "$0")/../../.."
bash benchmarks/peers/setup_angle_emb.sh   # once: the official angle-emb 0.6.1, in .venv-angle-emb
.venv/bin/python benchmarks/bench_train.py
