"""A new export format is one module plus one registration: this file is the module (``NAME``,
``DESCRIPTION``, ``Options``, ``write``, ``verify``, ``tolerance``) of a tiny format writing the
model's vector of a probe sentence (``vectors.npy``) and a JSON manifest; registered with one entry
in :data:`anglekit.export.FORMATS`, ``anglekit export`` lists it and its own option (a flag generated
from the option's declaration) and writes it."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from anglekit.config import setting
from anglekit.export import FORMATS, export

import helpers

NAME = "probe-vectors"
DESCRIPTION = "the vector of one probe sentence as vectors.npy, and manifest.json"
DEFAULT_SENTENCE = "a man is playing the guitar ."


@dataclass
class Options:
    probe_sentence: str = setting(DEFAULT_SENTENCE, help="the sentence whose vector is written")


def write(model: Any, folder: Path, *, card: Any = None, probe_sentence: str) -> SimpleNamespace:
    vectors = model.encode([probe_sentence])
    np.save(folder / "vectors.npy", vectors)
    (folder / "manifest.json").write_text(json.dumps({"sentence": probe_sentence, "dim": int(vectors.shape[1])}), encoding="utf-8")
    return SimpleNamespace(custom=False, sentence=probe_sentence)


def verify(model: Any, folder: Path, layout: SimpleNamespace) -> tuple[float | None, str]:
    written = np.load(folder / "vectors.npy")
    return float(np.abs(written - model.encode([layout.sentence])).max()), "checked with numpy"


def tolerance(model: Any) -> float:
    return 1e-6


@pytest.fixture
def registered() -> Iterator[None]:
    """The one registration (undone after the test)."""
    FORMATS.register(NAME, sys.modules[__name__])
    yield
    FORMATS.unregister(NAME)


def _vector(tiny_bert_dir: Path, sentence: str) -> np.ndarray:
    from anglekit.model.embedder import Embedder

    return Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode([sentence])


def test_a_registered_format_runs_through_the_cli_with_its_own_option(
    registered: None, tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, usage, _ = helpers.run_cli(["export", "--help"], capsys)
    flat = " ".join(usage.split())
    assert code == 0 and f"{NAME}: {DESCRIPTION}" in flat
    assert f"--probe-sentence STR {NAME}: the sentence whose vector is written (default: {DEFAULT_SENTENCE})" in flat
    out = tmp_path / "probe"
    sentence = "two kids ride their bikes ."
    code, stdout, err = helpers.run_cli(["export", str(tiny_bert_dir), "--format", NAME, "--probe-sentence", sentence, "--output-dir", str(out)], capsys)
    assert code == 0, err
    assert f"({NAME}; checked with numpy: max difference" in stdout
    np.testing.assert_allclose(np.load(out / "vectors.npy"), _vector(tiny_bert_dir, sentence), rtol=0, atol=1e-6)
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8")) == {"sentence": sentence, "dim": 32}


def test_the_options_default_comes_from_its_declaration(registered: None, tiny_bert_dir: Path, tmp_path: Path) -> None:
    result = export(str(tiny_bert_dir), NAME, tmp_path / "default")
    assert result.format == NAME and result.max_difference is not None and result.max_difference <= 1e-6
    assert json.loads((tmp_path / "default" / "manifest.json").read_text(encoding="utf-8"))["sentence"] == DEFAULT_SENTENCE


def test_its_option_is_refused_for_another_format_and_a_bad_value_is_named(
    registered: None, tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = helpers.run_cli(["export", str(tiny_bert_dir), "--format", "onnx", "--probe-sentence", "x", "--output-dir", str(tmp_path / "o")], capsys)
    assert code == 2 and "--probe-sentence: not an option of the onnx format" in err and not (tmp_path / "o").exists()
    from anglekit.errors import ExportError

    with pytest.raises(ExportError, match="probe_sentence must be str"):
        export(str(tiny_bert_dir), NAME, tmp_path / "p", options={"probe_sentence": 3})
    assert not (tmp_path / "p").exists()


def test_without_the_registration_the_format_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = helpers.run_cli(["export", "m", "--format", NAME, "--output-dir", "x"], capsys)
    assert code == 2 and "invalid choice" in err
    code, _, err = helpers.run_cli(["export", "m", "--format", "onnx", "--probe-sentence", "x", "--output-dir", "x"], capsys)
    assert code == 2 and "unrecognized arguments: --probe-sentence" in err


def test_the_declared_choices_are_the_runtimes_own() -> None:
    """The format modules import no torch, so they spell their choices out; they stay the runtimes'."""
    from anglekit.export import format_options
    from anglekit.model import onnx as onnx_runtime
    from anglekit.model import openvino as openvino_runtime

    def choices(fmt: str, name: str) -> tuple[Any, ...] | None:
        import dataclasses

        declared = format_options(fmt)
        assert declared is not None
        return next(f.metadata["choices"] for f in dataclasses.fields(declared) if f.name == name)

    assert choices("onnx", "quantize") == tuple(onnx_runtime.QUANTIZE)
    assert choices("onnx", "optimize") == tuple(onnx_runtime.OPTIMIZE_LEVELS)
    assert choices("openvino", "quantize") == tuple(openvino_runtime.QUANTIZE)
    assert choices("openvino", "precision") == tuple(openvino_runtime.PRECISIONS)
    assert format_options("sentence-transformers") is None


def test_export_help_lists_the_options_of_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, usage, _ = helpers.run_cli(["export", "--help"], capsys)
    flat = " ".join(usage.split())
    assert code == 0
    assert "--quantize {int8,int8-static} onnx: int8 = dynamic int8 (onnxruntime's quantize_dynamic); openvino: int8 = int8 weights" in flat
    for flag in ("--optimize {O1,O2,O3} onnx:", "--calibration TEXTS openvino:", "--calibration-column COLUMN", "--precision {fp32,bf16} openvino:"):
        assert flag in flat, flag
