"""anglekit's sentence-transformers interop raises none of sentence-transformers' deprecation warnings.

sentence-transformers 5.4 moved its modules (``sentence_transformers.models`` and others now warn
on import) and 6.x deprecates more; pyproject's pytest settings ignore DeprecationWarning, so this
test looks for them itself, in a fresh interpreter (an old import path warns once per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

st = pytest.importorskip("sentence_transformers")

SRC = Path(__file__).resolve().parents[2] / "src"

# Imports every module of anglekit that touches sentence-transformers, then writes a model folder,
# loads it in sentence-transformers and reads it back through anglekit's own reader of such folders.
SCRIPT = """
import json, sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    {planted}
    import anglekit.evaluation.encoders, anglekit.export.custom_modules, anglekit.export.sentence_transformers
    import anglekit.model.card
    from anglekit.model import Embedder
    from anglekit.model.sentence_transformers import read_sentence_transformers_settings
    from sentence_transformers import SentenceTransformer

    model = Embedder.from_pretrained(sys.argv[1], device="cpu", dtype="float32", pooling="cls", normalize=True)
    folder = model.save_pretrained(sys.argv[2])
    SentenceTransformer(str(folder), device="cpu").encode(["a test"])
    read_sentence_transformers_settings(folder)
    Embedder.from_pretrained(folder, device="cpu").encode(["a test"])
found = [
    f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})"
    for w in caught
    if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning))
    and ("sentence_transformers" in str(w.message) or "sentence_transformers" in w.filename)
]
print(json.dumps(found))
"""


def _deprecations(tiny_bert_dir: Path, tmp_path: Path, planted: str = "pass") -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    code = SCRIPT.replace("{planted}", planted)
    done = subprocess.run([sys.executable, "-c", code, str(tiny_bert_dir), str(tmp_path / "folder")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_interop_raises_no_sentence_transformers_deprecation(tiny_bert_dir: Path, tmp_path: Path) -> None:
    assert _deprecations(tiny_bert_dir, tmp_path) == []


def test_the_check_sees_a_deprecated_import(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """The harness is not blind: an import of the pre-5.4 path is reported."""
    found = _deprecations(tiny_bert_dir, tmp_path, planted="import sentence_transformers.models")
    assert any("sentence_transformers.models" in line and line.startswith("DeprecationWarning") for line in found), found
