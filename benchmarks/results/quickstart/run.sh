#!/usr/bin/env bash
# The README's quick start, timed with the machine's load, on a quiet 2-core AMD EPYC with native
# bf16 (avx512_bf16), 2026-12-07: quickstart.json is the quick start as it runs by default
# (precision auto: bf16 on this CPU); quickstart-fp32.json the same with bf16 autocast off.
# quickstart-loaded-2026-11-28.json is the earlier run, on an AVX2 EPYC in fp32 at a load of 12
# (history: benchmarks/README.md), recorded by the same script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/bench_quickstart.py
ANGLEKIT_AUTO_BF16=0 .venv/bin/python benchmarks/bench_quickstart.py --out benchmarks/results/quickstart/quickstart-fp32.json
