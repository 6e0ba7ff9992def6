#!/usr/bin/env bash
# benchmarks/gpu_check.sh on one NVIDIA H100, 2026-11-26 (docs/gpu.md, "Results"): summary.json, one
# JSON per step, gpu_check.log, versions.txt. As run on the lent machine, which reaches no registry:
# anglekit from src/, the carried .gpu/ folder. serve_cuda was rerun alone (gpu_check_serve.log); that
# rerun's exact command was not recorded. The subfolders hold their own commands.
set -euo pipefail
cd "$(dirname "$0")/../../.."
GPU_CHECK_ENCODER=.gpu/minilm-fp16 GPU_CHECK_ENCODER_DTYPE=fp32 ANGLEKIT_DATA=.gpu/data \
    PYTHON=python3 STEPS=300 bash benchmarks/gpu_check.sh
