#!/usr/bin/env bash
# Issue 31 after padding OpenVINO batches to a multiple of 8 and warming shapes up at start:
# the padding bench (every row its own process, 2 interleaved repeats), then three bench_serve
# runs back to back with the issue's protocol (1024 sentences a cell, 30 s at most, 2 threads a
# server, base64, OMP_WAIT_POLICY=PASSIVE for every server), then the cell-by-cell summary.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/serve-vs-infinity-ov-pad8
HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_ov_padding.py --out $out/bench_ov_padding.json > $out/bench_ov_padding.log 2>&1
for run in 1 2 3; do
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_serve.py \
        --peers anglekit-int8 anglekit-bf16 infinity-torch infinity-torch-bf16 infinity-onnx infinity-onnx-int8 \
        --sentences 1024 --max-seconds 30 --out $out/bench_serve_run$run.json > $out/bench_serve_run$run.log 2>&1
done
.venv/bin/python benchmarks/results/serve-vs-infinity-int8/summarise.py $out
