#!/usr/bin/env bash
# Set up, then run the main job: fine-tune all-MiniLM-L6-v2 on STS-B train with the AnglE paper
# preset, evaluate STS-B test before and after, print the table, save the model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh data
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# The data root (configs/quickstart.yaml reads stsb:train / stsb:test from it): ../shared/data
# unless ANGLEKIT_DATA is set; anglekit itself never looks relative to the current directory.
export ANGLEKIT_DATA="${ANGLEKIT_DATA:-$(cd .. && pwd)/shared/data}"
exec .venv/bin/anglekit train --config configs/quickstart.yaml --overwrite-output-dir "$@"
