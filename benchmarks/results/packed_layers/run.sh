#!/usr/bin/env bash
# The packed-layers swap alone: MiniLM's forward and backward pass on the protocol's first 24
# length-grouped batches, padded and packed alternating, fast dropout on, nothing else running
# (benchmarks/README.md, "Packed tokens").
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_packed_layers.py --batches 24 --rounds 3 --threads 2
