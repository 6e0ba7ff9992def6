"""sentence-transformers 5.x embeds the folders save_pretrained writes exactly like anglekit (issue 28).

5.x cannot share .venv with 6.x, so the test creates (once; idempotent) a second environment
``.venv-st5`` (gitignored) with ``sentence-transformers>=5,<6`` and the same CPU torch wheel as
setup.sh, and runs a small script there that loads each folder and writes its vectors. It skips, with
the reason, when that environment cannot be created (no package index, pip failing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anglekit.model.embedder import Embedder

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-st5"
TORCH = "torch==2.13.0"
ST_RANGE = "sentence-transformers>=5,<6"
TEXTS = ["A man is playing a guitar.", "wow!", "the quick brown fox jumps over the lazy dog " * 6]
CHECK = "import sentence_transformers as s, torch; assert s.__version__.startswith('5.'), s.__version__; print(s.__version__)"
SCRIPT = """
import json, sys
import numpy as np
from sentence_transformers import SentenceTransformer
folder, method, out = sys.argv[1:4]
texts = json.loads(sys.argv[4])
model = SentenceTransformer(folder, device="cpu")
np.save(out, np.asarray(getattr(model, method)(texts, batch_size=2, convert_to_numpy=True), dtype=np.float64))
"""


def _python() -> Path:
    """The 5.x environment's python, created on first use; skips when it cannot be created."""
    python = VENV / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", CHECK], capture_output=True, check=False).returncode == 0:
        return python
    steps = [[sys.executable, "-m", "venv", str(VENV)]] if not python.exists() else []
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    steps += [[*pip, TORCH], [*pip, ST_RANGE]]  # the CPU torch first: no CUDA build is resolved
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=1800, check=False)
        if done.returncode != 0:
            pytest.skip(f"cannot create {VENV.name} ({' '.join(step[-2:])} failed): {done.stderr.strip()[-300:]}")
    done = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"{VENV.name} has no sentence-transformers 5.x: {done.stderr.strip()[-300:]}")
    return python


def _st5(python: Path, folder: Path, method: str, tmp_path: Path) -> np.ndarray:
    out = tmp_path / f"{folder.name}-{method}.npy"
    done = subprocess.run(
        [str(python), "-c", SCRIPT, str(folder), method, str(out), json.dumps(TEXTS)],
        capture_output=True, text=True, timeout=600, check=False, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return np.load(out)


@pytest.mark.parametrize(
    "settings",
    [
        {"pooling": "cls", "normalize": True, "query_prompt": "query: {text}", "max_length": 12},
        {"pooling": "last_avg", "prompt": "any: {text}"},
        {"pooling": "last_max", "max_length": 9},
    ],
)
def test_sentence_transformers_5_embeds_saved_folders_like_anglekit(tiny_bert_dir: Path, tmp_path: Path, settings: dict) -> None:
    python = _python()
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="float32", **settings)
    folder = model.save_pretrained(tmp_path / "saved")
    for method in ("encode", "encode_query", "encode_document"):
        ours = np.asarray(getattr(model, method)(TEXTS, batch_size=2), dtype=np.float64)
        np.testing.assert_allclose(_st5(python, folder, method, tmp_path), ours, atol=1e-5, err_msg=method)


def test_sentence_transformers_5_refuses_what_it_cannot_express(tiny_bert_dir: Path, tmp_path: Path) -> None:
    python = _python()
    folder = Embedder.from_pretrained(tiny_bert_dir, device="cpu", pooling="cls_avg").save_pretrained(tmp_path / "saved")
    done = subprocess.run(
        [str(python), "-c", SCRIPT, str(folder), "encode", str(tmp_path / "x.npy"), json.dumps(TEXTS)],
        capture_output=True, text=True, timeout=600, check=False, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode != 0 and "anglekit_only" in done.stderr
    assert not (tmp_path / "x.npy").exists()
