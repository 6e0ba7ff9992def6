#!/usr/bin/env bash
# Issue 42, the angle term's worth: every table of docs/reproduce.md "The angle term's worth", from
# MiniLM first (minutes a cell on 2 cores), then from SmolLM2 at 200 steps a cell (LoRA; 16-20
# minutes a training on 2 idle AVX2-only cores in fp32 plus about 5 of scoring, measured; 45
# trainings, about 17 hours in all there). From SmolLM2, ese runs before objectives, whose 24 trainings take longest.
# Resumable: finished cells are reused, so run it again after an interruption, on this machine or
# another (set DEVICE=cuda on a GPU). ONLY=minilm or ONLY=smollm2 runs one start.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# fp32 on every CPU: the committed CPU cells trained in fp32 on AVX2-only cores, and on a CPU with
# native bf16 `precision: auto` would train in bf16, which the cells' keys (auto) do not tell apart.
export ANGLEKIT_AUTO_BF16="${ANGLEKIT_AUTO_BF16:-0}"
out=benchmarks/results/angle-term-worth
data="${ANGLEKIT_DATA:-$(cd .. && pwd)/shared/data}"
device=(); [ -n "${DEVICE:-}" ] && device=(--device "$DEVICE")
anglekit=(.venv/bin/python -m anglekit)
if [ "${ONLY:-minilm}" != smollm2 ]; then
    "${anglekit[@]}" reproduce angle-weight ese --start minilm --seeds 0 1 2 --output-dir "$out/minilm" --data-root "$data" --quiet "${device[@]}"
fi
if [ "${ONLY:-smollm2}" != minilm ]; then
    "${anglekit[@]}" reproduce angle-weight ese objectives --start smollm2 --max-steps 200 --seeds 0 1 2 --output-dir "$out/smollm2" --data-root "$data" --quiet "${device[@]}"
fi
