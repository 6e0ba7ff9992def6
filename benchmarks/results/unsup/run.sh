#!/usr/bin/env bash
# SimCSE against SimACE from all-MiniLM-L6-v2, 200 steps, seeds 0 1 2 (benchmarks/README.md,
# "Unsupervised: SimCSE vs SimACE"): the per-seed JSON and metrics here, the summary in
# benchmarks/results/bench_unsup.json (and bench_unsup.md). dynamics-seed0.png is `anglekit
# plot-dynamics` of seed 0's metrics; that command's arguments were not recorded.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_unsup.py --max-steps 200 --eval-steps 100 --probe-steps 100 --keep-metrics
