#!/usr/bin/env bash
# Matryoshka and ESE against the plain paper preset and angle-emb's ESE, seeds 0 1 2: the per-run
# JSON here, the summary in benchmarks/results/bench_matryoshka.json (benchmarks/README.md, "Nested
# dimensions and large batches": seed 0 ran on 2026-11-22, seeds 1 and 2 on 2026-11-23, finished runs
# kept by --reuse).
set -euo pipefail
cd "$(dirname "$0")/../../.."
bash benchmarks/peers/setup_angle_emb.sh   # once: angle-emb 0.6.1 in .venv-angle-emb
.venv/bin/python benchmarks/bench_matryoshka.py
