#!/usr/bin/env bash
# Issue 27's LLM rows after the fused layers (RMSNorm, gated MLP, LoRA update in one matmul with
# fast dropout's scale folded in), one machine, one go, 60 steps each, full STS-B test, 2 threads,
# every row its own process. Pass 1: the laptop recipe (bf16 weights + autocast) without
# checkpointing, with and without the fused layers, checkpointing every 4th layer, and the fp32
# reference (the loop before issue 27). Pass 2 (REPEAT=1): the default and the reference again,
# interleaved twice, for the spread of the ratio.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/llm-lora-fused-layers
common=(--objective paper --max-steps "${STEPS:-60}" --threads 2 --no-zero-shot --quiet)
bf16=(--model-dtype auto --precision auto)
reference=(--precision fp32 --no-fast-dropout --no-fused-layers)
if [ "${REPEAT:-0}" = 1 ]; then
  for i in 1 2; do
    .venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --out $out/repeat$i-no-ckpt.json
    .venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${reference[@]}" --out $out/repeat$i-fp32-reference.json
  done
  exit 0
fi
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --out $out/no-ckpt.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --no-fused-layers --out $out/no-ckpt-plain-layers.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --gradient-checkpointing --checkpoint-every 4 --out $out/ckpt-every4.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${reference[@]}" --out $out/fp32-reference.json
