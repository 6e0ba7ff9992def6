#!/usr/bin/env bash
# Measured at commit 2776721; that change was reverted (ebe49f8) for no gain at this scale: check it out to rerun.
# Issue 27's LLM target after fast dropout's masks became uint8 (not bool) and its CPU bits come from numpy's PCG64: the laptop recipe
# (bf16 weights + autocast, fused layers, no checkpointing) and the fp32 reference (the loop before
# issue 27), interleaved twice, 60 steps each, full STS-B test, 2 threads, every row its own process.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/llm-lora-pcg64-masks-dropped
common=(--objective paper --max-steps "${STEPS:-60}" --threads 2 --no-zero-shot --quiet)
bf16=(--model-dtype auto --precision auto)
reference=(--precision fp32 --no-fast-dropout --no-fused-layers)
for i in 1 2; do
  .venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --out $out/run$i-default.json
  .venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${reference[@]}" --out $out/run$i-fp32-reference.json
done
