#!/usr/bin/env bash
# Issue 27's LLM rows on one machine in one go (60 steps each, full STS-B test, 2 threads):
# the laptop recipe with fast dropout (the default) and with torch's dropout, bf16 without
# checkpointing, and the fp32 reference with torch's dropout (the loop before issue 27).
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=benchmarks/results/llm-lora-fast-dropout
common=(--objective paper --max-steps "${STEPS:-60}" --threads 2 --no-zero-shot --quiet)
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" --gradient-checkpointing --model-dtype auto --precision auto --out $out/laptop-fastdropout.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" --gradient-checkpointing --model-dtype auto --precision auto --no-fast-dropout --out $out/laptop-torchdropout.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" --model-dtype auto --precision auto --out $out/bf16-fastdropout.json
.venv/bin/python benchmarks/bench_llm.py "${common[@]}" --precision fp32 --no-fast-dropout --out $out/fp32-torchdropout.json
