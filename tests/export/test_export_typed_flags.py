"""Export options given to the wrong format are refused in flags, naming the format that takes them,
and a folder holding both an ONNX and an OpenVINO export is the registry's ambiguity error
(issue 40)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anglekit.errors import AmbiguousBackendError, ExportError
from anglekit.export import export
from anglekit.model.backends import detect_backend

import helpers


def test_static_int8_for_onnx_names_the_flags_and_openvino(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calibration = tmp_path / "calibration.txt"
    calibration.write_text("A man plays a guitar.\nA dog runs.\n")
    out = tmp_path / "o"
    argv = ["export", str(tmp_path / "no-such-model"), "--format", "onnx", "--quantize", "int8-static", "--calibration", str(calibration)]
    code, _, err = helpers.run_cli([*argv, "--output-dir", str(out)], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "--quantize int8-static --calibration: not options of the onnx format (its --quantize takes int8)" in err
    assert "that is the openvino format's: --format openvino" in err and "int8 weights and activations with --quantize int8-static" in err
    assert "calibration_texts" not in err and "no-such-model" not in err  # refused before the model is looked at
    assert not out.exists()


@pytest.mark.parametrize(
    ("format", "options", "message"),
    [
        ("onnx", {"quantize": "int8-static"}, "--quantize int8-static: not an option of the onnx format (its --quantize takes int8); that is the openvino"),
        ("openvino", {"optimize": "O3"}, "--optimize O3: not an option of the openvino format; that is the onnx format's: --format onnx"),
        ("onnx", {"quantize": "int4"}, "--quantize int4: not an option of the onnx format (its --quantize takes int8)"),
        ("sentence-transformers", {"quantize": "int8", "optimize": "O1"}, "--quantize int8 --optimize O1: not options of the sentence-transformers"),
    ],
)
def test_a_misfit_option_is_named_by_its_flag(tmp_path: Path, format: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(ExportError) as info:
        export(str(tmp_path / "no-such-model"), format, tmp_path / "o", options=options)
    assert str(info.value).startswith(message), str(info.value)
    assert not (tmp_path / "o").exists()


def test_options_that_fit_are_not_refused_by_the_check(tmp_path: Path) -> None:
    from anglekit.export import _check_options_fit

    _check_options_fit("onnx", {"quantize": "int8", "optimize": "O2"})
    _check_options_fit("openvino", {"quantize": "int8-static", "calibration_texts": ("a text",), "precision": "bf16"})
    _check_options_fit("sentence-transformers", {})


def _fake_export_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "anglekit_config.json").write_text(json.dumps({"pooling": "cls"}))
    (folder / "model.onnx").write_bytes(b"onnx")
    (folder / "onnx_config.json").write_text("{}")
    (folder / "openvino_model.xml").write_text("<net/>")
    (folder / "openvino_model.bin").write_bytes(b"\0")
    (folder / "openvino_config.json").write_text("{}")
    return folder


def test_a_folder_with_onnx_and_openvino_exports_is_ambiguous(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    both = _fake_export_folder(tmp_path / "both")
    with pytest.raises(AmbiguousBackendError) as info:
        detect_backend(both)
    assert info.value.backends == ("onnx", "openvino") and "choose one with backend= (--backend)" in str(info.value)
    (tmp_path / "t.txt").write_text("A man plays a guitar.\n")
    code, _, err = helpers.run_cli(["encode", str(both), "--input", str(tmp_path / "t.txt"), "--output", str(tmp_path / "v.npy")], capsys)
    assert code == 2 and "holds the files of several backends (onnx, openvino)" in err and err.count("\n") == 1, err
    (both / "openvino_model.xml").unlink()
    assert detect_backend(both).name == "onnx"  # type: ignore[union-attr]
    (both / "openvino_model.xml").write_text("<net/>")
    (both / "model.onnx").unlink()
    assert detect_backend(both).name == "openvino"  # type: ignore[union-attr]
