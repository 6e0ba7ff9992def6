#!/usr/bin/env bash
# The GPU path, checked on a CUDA machine (docs/gpu.md says what each step does).
#
#   bash benchmarks/gpu_check.sh                 # all steps, default sizes
#   STEPS=300 bash benchmarks/gpu_check.sh       # training steps per run (default 300)
#   ONLY=train_bf16,encode bash benchmarks/gpu_check.sh
#
# Each step prints PASS, FAIL or SKIP (a missing optional part: a variable-length attention kernel,
# bitsandbytes, onnxruntime-gpu) with its figures and writes benchmarks/results/gpu/<step>.json
# ($GPU_CHECK_OUT for another folder); summary.json lists them all. Exits 0 when no step failed,
# 1 when one did, 2 without a CUDA GPU. $GPU_CHECK_ENCODER, $GPU_CHECK_LLM, $GPU_CHECK_LLM_RANDOM:
# other models (docs/gpu.md).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
python="${PYTHON:-$repo/.venv/bin/python}"
[ -x "$python" ] || python="$(command -v python3)"

if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu_check: no CUDA GPU here (torch.cuda.is_available() is False with $python); nothing was run." >&2
  echo "gpu_check: run it on a machine with an NVIDIA GPU and a CUDA build of torch (docs/gpu.md)." >&2
  exit 2
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$python" "$here/gpu_check.py" "$@"
