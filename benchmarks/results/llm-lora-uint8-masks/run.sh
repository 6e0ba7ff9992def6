#!/usr/bin/env bash
# Issue 27's LLM target after fast dropout's masks became uint8 (not bool): the laptop recipe
# (bf16 weights + autocast, fused layers, no checkpointing) and the fp32 reference (the loop before
# issue 27), interleaved twice (PASSES="3": a third pass), 60 steps each, full STS-B test, 2 threads, every row its own process.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/llm-lora-uint8-masks
common=(--objective paper --max-steps "${STEPS:-60}" --threads 2 --no-zero-shot --quiet)
bf16=(--model-dtype auto --precision auto)
reference=(--precision fp32 --no-fast-dropout --no-fused-layers)
for i in ${PASSES:-1 2}; do
  .venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --out $out/run$i-default.json
  .venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${reference[@]}" --out $out/run$i-fp32-reference.json
done
