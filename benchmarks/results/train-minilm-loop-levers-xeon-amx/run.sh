#!/usr/bin/env bash
# MiniLM training rows with the loop levers (compact embeddings, fast dropout) taken apart,
# 2026-11-26, Intel Xeon with AMX, seeds interleaved row by row, nothing else running
# (benchmarks/README.md, "Issue 27's rows with the loop levers"). docs/results.md's charts read it.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_train.py --new-rows --threads 2 --force --results-dir benchmarks/results/train-minilm-loop-levers-xeon-amx
