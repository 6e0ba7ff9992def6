#!/usr/bin/env bash
# Saturation measured where it happens: the full objective from each start (MiniLM, SmolLM2), seed
# 0, 100 steps, probes every 5 steps (benchmarks/README.md, "Saturation, measured where it happens";
# the arguments are the defaults, as bench_saturation.json's "args" records them).
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_saturation.py
