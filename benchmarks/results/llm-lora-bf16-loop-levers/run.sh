#!/usr/bin/env bash
# Issue 27's LLM rows after the bf16 loop's levers (fp32 attention on CPUs, no LoRA input casts,
# fast dropout's one-byte mask, checkpointing every n-th layer), one machine, one go, 60 steps each,
# full STS-B test, 2 threads, every row its own process:
#   laptop recipe (bf16 weights + autocast) checkpointing every layer, every 2nd, every 3rd; none;
#   none with attention left in bf16 (fp32 attention's share); the fp32 reference (the loop before
#   issue 27: fp32, torch's dropout).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/llm-lora-bf16-loop-levers
common=(--objective paper --max-steps "${STEPS:-60}" --threads 2 --no-zero-shot --quiet)
bf16=(--model-dtype auto --precision auto)
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --gradient-checkpointing --out $out/ckpt-every1.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --gradient-checkpointing --checkpoint-every 2 --out $out/ckpt-every2.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --gradient-checkpointing --checkpoint-every 3 --out $out/ckpt-every3.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --out $out/no-ckpt.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" "${bf16[@]}" --no-fp32-attention --out $out/no-ckpt-bf16attention.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" --precision fp32 --no-fast-dropout --out $out/fp32-reference.json
