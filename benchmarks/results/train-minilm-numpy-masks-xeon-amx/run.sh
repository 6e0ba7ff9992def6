#!/usr/bin/env bash
# The MiniLM rows after fast dropout's CPU masks came from numpy's PCG64, 2026-11-27, Intel Xeon with
# AMX, 3 seeds; also runs the two lever rows (benchmarks/README.md, "Mask bits from numpy's PCG64").
# The training claims of docs/results.md read its bench_train.json.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_train.py --only anglekit:paper:grouped:auto --only sentence-transformers:cosent:grouped:bf16 \
    --only anglekit:paper:grouped --seeds 0 1 2 --threads 2 --force --results-dir benchmarks/results/train-minilm-numpy-masks-xeon-amx
