#!/usr/bin/env bash
# GradCache at batch 256 and 1024 and the unsupervised contrastive objective at 1024, 2026-11-23,
# 2 cores, nothing else running (benchmarks/README.md, "Nested dimensions and large batches"): the
# per-row JSON here, the table in benchmarks/results/bench_gradcache.json.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_gradcache.py
