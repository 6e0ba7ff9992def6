"""An export info with a wrongly typed field (issue 40): ``quantize: [...]``, a numeric
``source_fingerprint`` or a ``check`` that is not an object is passed over with a warning naming the
file, the field and the value, and ``serve`` starts on the PyTorch weights instead of crashing."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from anglekit.model.int8_exports import int8_exports

FINGERPRINT = "ab" * 8


def _export(root: Path, name: str, info: Any, *, model_file: str = "model.onnx", info_file: str = "onnx_config.json") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / model_file).write_text("x")
    (folder / info_file).write_text(json.dumps(info))
    return folder


GOOD = {"quantize": "int8", "source_fingerprint": FINGERPRINT, "check": {"min_cosine": 0.99}}
WRONG = [
    ("quantize", ["int8"], 'list ["int8"]'),
    ("quantize", 8, "int 8"),
    ("source_fingerprint", 12345, "int 12345"),
    ("source_fingerprint", {"sha": FINGERPRINT}, "dict"),
    ("check", [0.99], "list [0.99]"),
    ("check", "passed", 'str "passed"'),
    ("check", {"min_cosine": "0.99"}, 'str "0.99"'),
    ("check", {"min_cosine": True}, "bool true"),
]


@pytest.mark.parametrize(("field", "value", "shown"), WRONG)
def test_a_wrongly_typed_field_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture, field: str, value: Any, shown: str) -> None:
    _export(tmp_path, "good", GOOD, model_file="openvino_model.xml", info_file="openvino_config.json")
    bad = _export(tmp_path, "bad", {**GOOD, field: value})
    with caplog.at_level(logging.WARNING, logger="anglekit.model.int8_exports"):
        found = int8_exports(tmp_path, FINGERPRINT)
    assert [(e.path.name, e.backend) for e in found] == [("good", "openvino")]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(bad / "onnx_config.json") in warnings[0], warnings
    named = "check.min_cosine" if field == "check" and isinstance(value, dict) else field
    assert f"field {named!r} is {shown}" in warnings[0] and "not served" in warnings[0], warnings


def test_an_info_that_is_not_an_object_or_an_unknown_quantize_is_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _export(tmp_path, "list", [GOOD])
    _export(tmp_path, "int4", {**GOOD, "quantize": "int4"})
    _export(tmp_path, "fp32", {**GOOD, "quantize": None})  # an fp32 export: legal, not an int8 one, no warning
    with caplog.at_level(logging.WARNING, logger="anglekit.model.int8_exports"):
        assert int8_exports(tmp_path, FINGERPRINT) == []
    warnings = sorted(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert len(warnings) == 2, warnings
    assert "int4" in warnings[0] and "quantize 'int4' is not one anglekit serves for onnx (int8)" in warnings[0]
    assert "list" in warnings[1] and "holds list" in warnings[1] and "expected a JSON object" in warnings[1]


def test_a_missing_check_still_serves_without_a_figure(tmp_path: Path) -> None:
    _export(tmp_path, "old", {"quantize": "int8", "source_fingerprint": FINGERPRINT})
    (found,) = int8_exports(tmp_path, FINGERPRINT)
    assert found.min_cosine is None and "min cosine" not in found.describe()


@pytest.mark.parametrize(("field", "value"), [("quantize", ["int8"]), ("source_fingerprint", 7), ("check", [1])])
def test_serve_starts_on_the_pytorch_weights(tiny_bert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, field: str, value: Any) -> None:
    from anglekit.model.embedder import Embedder
    from anglekit.serve.backends import TorchBackend, load_backend

    folder = tmp_path / "model"
    shutil.copytree(tiny_bert_dir, folder)
    fingerprint = Embedder.from_pretrained(folder, device="cpu").fingerprint()
    _export(folder, "onnx-int8", {"quantize": "int8", "source_fingerprint": fingerprint, "check": {"min_cosine": 0.99}, field: value})
    lines: list[str] = []
    with caplog.at_level(logging.WARNING, logger="anglekit.model.int8_exports"):
        backend = load_backend(None, str(folder), device="cpu", int8_export=True, announce=lines.append)
    assert isinstance(backend, TorchBackend) and lines == []
    assert any(str(folder / "onnx-int8" / "onnx_config.json") in r.getMessage() and repr(field) in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("info", "message"),
    [([1], "expected a JSON object (the export's record), got list"), ({"hidden_size": "32"}, 'hidden_size must be a positive integer, got str "32"')],
)
def test_loading_an_export_checks_its_info(tiny_bert_dir: Path, tmp_path: Path, info: Any, message: str) -> None:
    from anglekit.errors import ConfigError
    from anglekit.model.config import EmbedderConfig
    from anglekit.model.onnx import load_exported_parts

    folder = tmp_path / "export"
    shutil.copytree(tiny_bert_dir, folder)
    EmbedderConfig().save(folder)
    (folder / "onnx_config.json").write_text(json.dumps(info))
    with pytest.raises(ConfigError) as caught:
        load_exported_parts(folder, "onnx_config.json")
    assert str(caught.value) == f"{folder / 'onnx_config.json'}: {message}"
