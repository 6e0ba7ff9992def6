#!/usr/bin/env bash
# The MiniLM rows re-checked after the bf16 loop's LLM levers (fp32 attention on CPUs, no LoRA
# input casts, the one-byte dropout mask), 2026-11-26, the same Intel Xeon with AMX; also runs the two
# lever rows (benchmarks/README.md, "Re-check after the bf16 loop's LLM levers").
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_train.py --only anglekit:paper:grouped:auto --only sentence-transformers:cosent:grouped:bf16 \
    --only anglekit:paper:grouped --seeds 0 1 2 --threads 2 --force --results-dir benchmarks/results/train-minilm-loop-levers-recheck-xeon-amx
