#!/usr/bin/env bash
# Packed tokens (encoder layers over the real tokens only) against the same loop unpacked and
# sentence-transformers grouped fp32, 2026-11-29, the AMD EPYC with AVX2 only, seeds interleaved row by
# row, nothing else running (benchmarks/README.md, "Packed tokens").
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_train.py --only anglekit:paper:grouped:auto --only anglekit:paper:grouped:auto:levers-unpacked \
    --only sentence-transformers:cosent:grouped --seeds 0 1 2 --threads 2 --force --results-dir benchmarks/results/train-minilm-packed-tokens-epyc-avx2
