#!/usr/bin/env bash
# Create (idempotently) the isolated venv for the serving peer infinity (PyPI infinity-emb), which
# pins sentence-transformers<4, numpy<2 and its own uvicorn/fastapi ranges and therefore cannot
# share anglekit's main .venv. Extras: server (the `infinity_emb v2` CLI), torch (the torch engine)
# and optimum (the ONNX engine through optimum + onnxruntime). The ONNX extra is optional: when it
# does not install, the torch engine still works and the script says so.
#
# Usage: bash benchmarks/peers/setup_infinity.sh [VENV_DIR]   (default: <repo>/.venv-infinity)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-$REPO_ROOT/.venv-infinity}"
PY="${PYTHON:-python3}"

INFINITY_VERSION="0.0.78"
TORCH_VERSION="2.13.0"   # the CPU wheel, installed FIRST so pip resolves no CUDA build.

if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup_infinity] creating venv $VENV" >&2
    "$PY" -m venv "$VENV"
fi

PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
    echo "[setup_infinity] installing torch==$TORCH_VERSION" >&2
    "${PIP[@]}" install -q "torch==$TORCH_VERSION"
fi

have_infinity() {
    "$VENV/bin/python" - "$INFINITY_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
import infinity_emb, sentence_transformers, uvicorn, fastapi  # noqa: F401  (server + torch engine)
sys.exit(0 if version("infinity-emb") == sys.argv[1] else 1)
PY
}

if ! have_infinity; then
    echo "[setup_infinity] installing infinity-emb[server,torch]==$INFINITY_VERSION" >&2
    # torch is pinned again so the resolver keeps the CPU wheel already installed.
    "${PIP[@]}" install -q "torch==$TORCH_VERSION" "infinity-emb[server,torch]==$INFINITY_VERSION"
fi

if ! "$VENV/bin/python" -c "import optimum.onnxruntime, onnxruntime" 2>/dev/null; then
    echo "[setup_infinity] installing infinity-emb[optimum] (the ONNX engine; optional)" >&2
    "${PIP[@]}" install -q "torch==$TORCH_VERSION" "infinity-emb[server,torch,optimum]==$INFINITY_VERSION" \
        || echo "[setup_infinity] the ONNX engine's dependencies did not install; the torch engine still works" >&2
fi

"$VENV/bin/python" - <<'PY'
from importlib.metadata import PackageNotFoundError, version
for p in ("infinity-emb", "torch", "transformers", "sentence-transformers", "optimum", "onnxruntime", "fastapi", "uvicorn", "numpy"):
    try:
        print(f"[setup_infinity] {p}=={version(p)}")
    except PackageNotFoundError:
        print(f"[setup_infinity] {p}: not installed")
PY
