#!/usr/bin/env bash
# Issue 31's throughput target on an Intel Xeon with AMX: three bench_serve runs back to back, the
# issue's protocol (1024 sentences a cell, 30 s at most, 2 threads a server, base64, every server
# with OMP_WAIT_POLICY=PASSIVE), anglekit's int8 and bf16 rows against infinity's four engines;
# then the cell-by-cell summary (summary.json).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/serve-vs-infinity-bf16-xeon-amx
for run in 1 2 3; do
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_serve.py \
        --peers anglekit-int8 anglekit-bf16 infinity-torch infinity-torch-bf16 infinity-onnx infinity-onnx-int8 \
        --sentences 1024 --max-seconds 30 --out $out/bench_serve_run$run.json > $out/bench_serve_run$run.log 2>&1
done
.venv/bin/python benchmarks/results/serve-vs-infinity-int8/summarise.py $out
