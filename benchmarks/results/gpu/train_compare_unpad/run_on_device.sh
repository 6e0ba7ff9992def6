#!/usr/bin/env bash
# Training speed on a GPU with unpadding (torch_varlen), against sentence-transformers, the training
# benchmark's protocol (benchmarks/anglekit_train.py, benchmarks/peers/st_train.py: STS-B train, one
# epoch of 32 pairs a step, max length 64), every row its own process, rows interleaved by seed.
# As run on the project's lent H100 (no registry): anglekit from src/, the carried .gpu/ folder
# (wheels, STS-B, all-MiniLM-L6-v2 stored in fp16, widened here to fp32 once for every row).
set -uo pipefail
out="${OUT:-benchmarks/results/gpu/train_compare_unpad}"
mkdir -p "$out"
python3 -m pip install -q --no-index --find-links .gpu/whl .gpu/whl/*.whl 2>&1 | tail -2
export PYTHONPATH="$PWD/src" ANGLEKIT_CACHE_DIR=/tmp/akcache ANGLEKIT_STSB_DIR="$PWD/.gpu/data/stsb"
python3 - <<'PY'
import shutil
from pathlib import Path
from safetensors.torch import load_file, save_file
target = Path("/tmp/akcache/all-minilm-l6-v2")
if not target.is_dir():
    shutil.copytree(".gpu/minilm-fp16", target)
    save_file({k: v.float() for k, v in load_file(target / "model.safetensors").items()}, target / "model.safetensors", metadata={"format": "pt"})
PY
for seed in ${SEEDS:-0 1}; do
  python3 benchmarks/anglekit_train.py --objective paper --seed "$seed" --device cuda --precision fp32 --no-compact-embeddings --out "$out/ak-fp32-s$seed.json"
  python3 benchmarks/anglekit_train.py --objective paper --seed "$seed" --device cuda --precision bf16 --no-compact-embeddings --unpad --out "$out/ak-bf16-unpad-s$seed.json"
  python3 benchmarks/anglekit_train.py --objective paper --seed "$seed" --device cuda --precision fp32 --no-compact-embeddings --unpad --out "$out/ak-fp32-unpad-s$seed.json"
  python3 benchmarks/peers/st_train.py --loss cosent --seed "$seed" --device cuda --out "$out/st-default-s$seed.json"
done
python3 - "$out" <<'PY'
import json, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob("*.json")):
    r = json.loads(f.read_text())
    print(f"{f.stem:<22} {r['train_pairs_per_s']:8.1f} pairs/s  Spearman {r['spearman']:.2f}  {r.get('precision')}  gpu peak {r.get('peak_gpu_memory_mb')}")
PY
