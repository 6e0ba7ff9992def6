#!/usr/bin/env bash
# The second GPU check (docs/gpu.md, "Unpadding and 4-bit LoRA"), as it ran on the project's lent
# H100, which reaches no package registry: anglekit from src/, and in the carried .gpu/ folder the
# serve/data wheels, bitsandbytes 0.50.2 unzipped from its PyPI wheel (its CUDA 13.0 library only,
# for torch 2.11+cu130 there), all-MiniLM-L6-v2 stored in fp16, STS-B, and SmolLM2-135M's config and
# tokenizer (its 98 MB GGUF does not fit: the LoRA steps train a random model of its architecture).
# Results go to $OUT (the device tool's folder), or benchmarks/results/gpu/varlen-4bit by default.
set -uo pipefail
out="${OUT:-benchmarks/results/gpu/varlen-4bit}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/versions.txt"
python3 -m pip install -q --no-index --find-links .gpu/whl .gpu/whl/*.whl 2>&1 | tail -2 \
  || python3 -m pip install -q --break-system-packages --no-index --find-links .gpu/whl .gpu/whl/*.whl 2>&1 | tail -2
export PYTHONPATH="$PWD/src:$PWD/.gpu/site"
python3 -c "import sys, torch, transformers, peft, bitsandbytes as bnb; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'peft', peft.__version__, 'bitsandbytes', bnb.__version__)" >> "$out/versions.txt" 2>&1
cat "$out/versions.txt"
GPU_CHECK_OUT="$out" GPU_CHECK_ENCODER=.gpu/minilm-fp16 GPU_CHECK_ENCODER_DTYPE=fp32 ANGLEKIT_DATA=.gpu/data \
  GPU_CHECK_LLM_RANDOM=.gpu/smollm2-config PYTHON=python3 STEPS="${STEPS:-300}" \
  ONLY="${ONLY:-train_bf16,train_bf16_unpad,lora_bf16,lora_bf16_unpad,lora_4bit}" \
  bash benchmarks/gpu_check.sh 2>&1 | tee "$out/gpu_check.log"
