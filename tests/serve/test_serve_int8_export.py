"""``anglekit serve`` serves the int8 export a model folder holds of its own weights (issue 31),
and only that: a stale export, another backend named, --no-int8-export or an ESE model keep the
PyTorch weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from anglekit.serve.backends import EncoderBackend, TorchBackend, load_backend  # noqa: E402

from serving import sentences  # noqa: E402


@pytest.fixture(scope="module")
def model_with_export(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from anglekit.model.embedder import Embedder
    from anglekit.model.onnx import export_onnx

    folder = tmp_path_factory.mktemp("int8-export") / "model"
    shutil.copytree(tiny_bert_dir, folder)
    export_onnx(Embedder.from_pretrained(folder, device="cpu"), folder / "onnx-int8", quantize="int8")
    return folder


def _copy(model_with_export: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(model_with_export, folder)
    return folder


def test_the_folder_s_int8_export_is_served_and_announced(model_with_export: Path) -> None:
    from anglekit.model.onnx import OnnxEmbedder

    lines: list[str] = []
    backend = load_backend(None, str(model_with_export), device="cpu", int8_export=True, announce=lines.append)
    assert isinstance(backend, EncoderBackend) and isinstance(backend.embedder, OnnxEmbedder)
    assert len(lines) == 1 and "onnx int8 export" in lines[0] and "onnx-int8" in lines[0] and "min cosine" in lines[0]
    texts = sentences(12, seed=4)
    reference = OnnxEmbedder.from_pretrained(model_with_export / "onnx-int8")
    np.testing.assert_allclose(backend.embed(backend.tokenize(texts, None, truncate=True)), reference.encode(texts, normalize=False), atol=1e-5)


def test_the_pytorch_weights_when_asked_or_when_nothing_fits(model_with_export: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    assert isinstance(load_backend(None, str(model_with_export), device="cpu", int8_export=False), TorchBackend)
    assert isinstance(load_backend("torch", str(model_with_export), device="cpu", int8_export=True, announce=lines.append), TorchBackend)
    # a setting the export fixed, given again: the PyTorch weights, which take it
    assert isinstance(load_backend(None, str(model_with_export), device="cpu", pooling="cls", int8_export=True, announce=lines.append), TorchBackend)
    assert lines == []
    stale = _copy(model_with_export, tmp_path / "stale")
    info = json.loads((stale / "onnx-int8" / "onnx_config.json").read_text())
    (stale / "onnx-int8" / "onnx_config.json").write_text(json.dumps({**info, "source_fingerprint": "0" * 16}))
    assert isinstance(load_backend(None, str(stale), device="cpu", int8_export=True, announce=lines.append), TorchBackend)
    broken = _copy(model_with_export, tmp_path / "broken")
    (broken / "onnx-int8" / "onnx_config.json").write_text("{not json")
    assert isinstance(load_backend(None, str(broken), device="cpu", int8_export=True, announce=lines.append), TorchBackend)
    unquantized = _copy(model_with_export, tmp_path / "fp32")
    (unquantized / "onnx-int8" / "onnx_config.json").write_text(json.dumps({**info, "quantize": None}))
    assert isinstance(load_backend(None, str(unquantized), device="cpu", int8_export=True, announce=lines.append), TorchBackend)
    assert lines == []


def test_an_ese_model_keeps_its_layers(model_with_export: Path, tmp_path: Path) -> None:
    from anglekit.model.embedder import Embedder

    folder = _copy(model_with_export, tmp_path)
    model = Embedder.from_pretrained(folder, device="cpu")
    model.config.early_exit = True  # not in the fingerprint: the export is still of these weights
    model.save_pretrained(folder)
    lines: list[str] = []
    backend = load_backend(None, str(folder), device="cpu", int8_export=True, announce=lines.append)
    assert isinstance(backend, TorchBackend) and len(lines) == 1 and "ESE" in lines[0]


def test_the_flag_is_on_by_default_and_can_be_turned_off() -> None:
    from anglekit.cli import build_parser
    from anglekit.cli.fields import overrides
    from anglekit.serve.settings import ServeSettings

    assert ServeSettings().int8_export is True
    args = build_parser().parse_args(["serve", "m", "--no-int8-export"])
    assert ServeSettings(**overrides(args, args._settings)).int8_export is False
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "m", "--int8-export", "yes"])


def test_exports_record_their_source_and_rank_fastest_first(model_with_export: Path, tmp_path: Path) -> None:
    from anglekit.model.embedder import Embedder
    from anglekit.model.int8_exports import int8_exports

    fingerprint = Embedder.from_pretrained(model_with_export, device="cpu").fingerprint()
    assert json.loads((model_with_export / "onnx-int8" / "onnx_config.json").read_text())["source_fingerprint"] == fingerprint
    root = tmp_path / "ranked"
    kinds = {"a-ov-weights": ("openvino_model.xml", "openvino_config.json", "int8"), "b-onnx": ("model.onnx", "onnx_config.json", "int8"),
             "c-ov-static": ("openvino_model.xml", "openvino_config.json", "int8-static"),
             "d-other-model": ("model.onnx", "onnx_config.json", "int8")}  # fmt: skip
    for name, (model_file, info_file, quantize) in kinds.items():
        (root / name).mkdir(parents=True)
        (root / name / model_file).write_text("x")
        source = "f" * 16 if name == "d-other-model" else fingerprint
        (root / name / info_file).write_text(json.dumps({"quantize": quantize, "source_fingerprint": source, "check": {"min_cosine": 0.99}}))
    (root / "e-not-a-folder.json").write_text("{}")
    found = int8_exports(root, fingerprint)
    assert [(e.path.name, e.backend, e.quantize) for e in found] == [
        ("c-ov-static", "openvino", "int8-static"), ("b-onnx", "onnx", "int8"), ("a-ov-weights", "openvino", "int8")]  # fmt: skip
    assert int8_exports(tmp_path / "missing", fingerprint) == [] and int8_exports(root / "e-not-a-folder.json", fingerprint) == []


def test_the_export_is_found_on_another_thread_count_and_after_re_recording_an_old_fingerprint(model_with_export: Path, tmp_path: Path) -> None:
    """Issue 40: the export written with one thread is served with two (the fingerprint does not
    depend on the machine); one that recorded an older anglekit's fingerprint from another machine
    is passed over until ``anglekit fingerprint MODEL --update EXPORT`` re-records it."""
    import torch

    from anglekit.index.fingerprints import update_fingerprint
    from anglekit.model.embedder import Embedder

    before = torch.get_num_threads()
    try:
        backend = load_backend(None, str(model_with_export), device="cpu", int8_export=True, threads=2)
        assert isinstance(backend, EncoderBackend) and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    folder = _copy(model_with_export, tmp_path)
    info_file = folder / "onnx-int8" / "onnx_config.json"
    info = json.loads(info_file.read_text())
    info_file.write_text(json.dumps({**info, "source_fingerprint": "0123456789abcdef"}))  # legacy scheme, written elsewhere
    assert isinstance(load_backend(None, str(folder), device="cpu", int8_export=True), TorchBackend)
    update_fingerprint(Embedder.from_pretrained(folder, device="cpu"), folder / "onnx-int8")
    assert json.loads(info_file.read_text()) == info
    assert isinstance(load_backend(None, str(folder), device="cpu", int8_export=True), EncoderBackend)
