#!/usr/bin/env bash
# anglekit serve against infinity at its best, int8 graphs on both sides (issue 31), 2026-11-25, three
# runs back to back on an idle machine, 2 threads, 1024 sentences or 30 s a cell
# (benchmarks/README.md, "Against infinity at its best"), then the once-run other environment
# (--peer-env OMP_WAIT_POLICY=ACTIVE) and the summary. Each log says which --out its run wrote.
# bench_serve_4peers_run1.json is an earlier run 1 without infinity-onnx-int8 (its log lists the
# peers anglekit, anglekit-int8, infinity-torch, infinity-onnx; it wrote bench_serve_run1.json and was
# renamed when the five-peer run replaced it); its exact command was not recorded.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/serve-vs-infinity-int8
peers=(anglekit anglekit-int8 infinity-torch infinity-onnx infinity-onnx-int8)
for run in 1 2 3; do
    .venv/bin/python benchmarks/bench_serve.py --peers "${peers[@]}" --sentences 1024 --max-seconds 30 --threads 2 \
        --out $out/bench_serve_run$run.json > $out/bench_serve_run$run.log 2>&1
done
.venv/bin/python benchmarks/bench_serve.py --peers "${peers[@]}" --sentences 1024 --max-seconds 30 --threads 2 \
    --peer-env OMP_WAIT_POLICY=ACTIVE --out $out/bench_serve_active.json > $out/bench_serve_active.log 2>&1
.venv/bin/python benchmarks/results/serve-vs-infinity-int8/summarise.py $out
