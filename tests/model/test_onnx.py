"""The ONNX backend: exported graphs embed like the torch model (every pooling, prompts, decoders),
int8 within its stated tolerance, folders round-trip, bad folders and bad options fail clearly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from anglekit.errors import ConfigError  # noqa: E402
from anglekit.model.embedder import Embedder  # noqa: E402
from anglekit.model.onnx import FP32_TOLERANCE, INT8_MIN_COSINE, ONNX_FILE, OnnxEmbedder, export_onnx, is_onnx_folder  # noqa: E402
from anglekit.model.pooling import POOLING_STRATEGIES  # noqa: E402

from helpers import row_cosines

TEXTS = [
    "a man is playing the guitar .",
    "dog",
    "the old woman walks her small white dog in the park every morning .",
    "two kids ride bikes " * 20,  # longer than max_length: truncated the same way
    "i can not eat bread today !",
]


@pytest.fixture(scope="module")
def exported(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Embedder, Path]]:
    root = tmp_path_factory.mktemp("onnx")
    out = {}
    for pooling in POOLING_STRATEGIES:
        model = Embedder.from_pretrained(tiny_bert_dir, pooling=pooling, max_length=32, device="cpu")
        out[pooling] = (model, export_onnx(model, root / pooling))
    return out


@pytest.mark.parametrize("pooling", POOLING_STRATEGIES)
def test_fp32_onnx_equals_torch_for_every_pooling(exported: dict[str, Any], pooling: str) -> None:
    model, folder = exported[pooling]
    onnx = OnnxEmbedder.from_pretrained(folder)
    for normalize in (False, True):
        np.testing.assert_allclose(onnx.encode(TEXTS, 2, normalize=normalize), model.encode(TEXTS, 2, normalize=normalize), atol=FP32_TOLERANCE)
    assert onnx.encode("dog").shape == (model.dim,) and onnx.encode([]).shape == (0, model.dim)
    assert json.loads((folder / "onnx_config.json").read_text())["check"]["max_abs_difference"] <= FP32_TOLERANCE


@pytest.mark.parametrize("pooling", POOLING_STRATEGIES)
def test_transformer_fusions_keep_the_vectors(exported: dict[str, Any], pooling: str, tmp_path: Path) -> None:
    """O2 fuses each layer's attention (onnxruntime's BERT patterns) and still embeds like torch."""
    model, _ = exported[pooling]
    folder = export_onnx(model, tmp_path / "o2", optimize="O2")
    fused = json.loads((folder / "onnx_config.json").read_text())["fused_operators"]
    assert fused.get("Attention") == model.backbone.config.num_hidden_layers, fused
    np.testing.assert_allclose(OnnxEmbedder.from_pretrained(folder).encode(TEXTS, 2), model.encode(TEXTS, 2), atol=FP32_TOLERANCE)


def test_the_folder_embeds_on_its_own_and_loads_through_the_embedder(exported: dict[str, Any], tmp_path: Path) -> None:
    model, folder = exported["last_avg"]
    assert is_onnx_folder(folder) and not any(folder.glob("*.safetensors"))
    loaded = Embedder.from_pretrained(folder)  # only ONNX weights there: the ONNX backend
    assert isinstance(loaded, OnnxEmbedder)
    np.testing.assert_allclose(loaded.encode(TEXTS), model.encode(TEXTS), atol=FP32_TOLERANCE)
    explicit = Embedder.from_pretrained(folder, backend="onnx", normalize=True, max_length=8)
    assert explicit.config.normalize and explicit.config.max_length == 8
    np.testing.assert_allclose(np.linalg.norm(explicit.encode(TEXTS), axis=1), 1.0, atol=1e-5)
    with pytest.raises(ConfigError, match="backend"):
        Embedder.from_pretrained(folder, backend="tensorflow")
    with pytest.raises(ConfigError, match="ONNX"):
        Embedder.from_pretrained(exported["cls"][0].source, backend="onnx")  # a torch folder, no model.onnx


def test_prompts_and_roles_travel(tiny_bert_dir: Path, tmp_path: Path) -> None:
    model = Embedder.from_pretrained(tiny_bert_dir, query_prompt="query: {text}", document_prompt="passage: {text}", device="cpu")
    onnx = OnnxEmbedder.from_pretrained(export_onnx(model, tmp_path / "m"))
    for role in ("query", "document", None):
        np.testing.assert_allclose(onnx.encode(TEXTS, role=role), model.encode(TEXTS, role=role), atol=FP32_TOLERANCE)
    assert not np.allclose(onnx.encode_query(TEXTS), onnx.encode_document(TEXTS), atol=1e-3)


def test_int8_stays_within_the_stated_cosine(exported: dict[str, Any], tmp_path: Path) -> None:
    model, _ = exported["cls"]
    folder = export_onnx(model, tmp_path / "int8", quantize="int8", optimize="O2")
    info = json.loads((folder / "onnx_config.json").read_text())
    assert info["quantize"] == "int8" and info["optimize"] == "O2" and info["check"]["min_cosine"] >= INT8_MIN_COSINE
    cosine = row_cosines(OnnxEmbedder.from_pretrained(folder).encode(TEXTS), model.encode(TEXTS))
    assert cosine.min() >= INT8_MIN_COSINE


def test_decoder_last_token_pooling_with_left_padding(tiny_llama_dir: Path, tmp_path: Path) -> None:
    model = Embedder.from_pretrained(tiny_llama_dir, padding_side="left", device="cpu")
    assert model.config.pooling == "last_token"
    onnx = OnnxEmbedder.from_pretrained(export_onnx(model, tmp_path / "llama"))
    np.testing.assert_allclose(onnx.encode(TEXTS, 2), model.encode(TEXTS, 2), atol=FP32_TOLERANCE)
    # The BERT fusion patterns do not describe a decoder: O2 fuses nothing there and stays exact.
    folder = export_onnx(model, tmp_path / "llama-o2", optimize="O2")
    assert json.loads((folder / "onnx_config.json").read_text())["fused_operators"] == {}
    np.testing.assert_allclose(OnnxEmbedder.from_pretrained(folder).encode(TEXTS, 2), model.encode(TEXTS, 2), atol=FP32_TOLERANCE)


def test_a_corrupt_onnx_file_is_a_clear_error(exported: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    _, folder = exported["cls"]
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    data = (broken / ONNX_FILE).read_bytes()
    (broken / ONNX_FILE).write_bytes(data[: len(data) // 3])
    with pytest.raises(ConfigError, match="not a valid ONNX model"):
        OnnxEmbedder.from_pretrained(broken)
    (broken / ONNX_FILE).unlink()
    with pytest.raises(ConfigError, match="not an ONNX model folder"):
        OnnxEmbedder.from_pretrained(broken)


def test_what_cannot_be_exported_says_why(tiny_llama_dir: Path, tiny_bert_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    with_lora = Embedder.from_pretrained(tiny_llama_dir, device="cpu").add_lora(rank=2)
    with pytest.raises(ConfigError, match="merge them first"):
        export_onnx(with_lora, tmp_path / "x")
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    for kwargs, match in (({"quantize": "int4"}, "quantize must be"), ({"optimize": "O9"}, "optimize must be")):
        with pytest.raises(ConfigError, match=match):
            export_onnx(model, tmp_path / "y", **kwargs)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_anglekit_export_format_onnx(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import helpers

    out = tmp_path / "onnx"
    code, stdout, err = helpers.run_cli(
        ["export", str(tiny_bert_dir), "--format", "onnx", "--quantize", "int8", "--optimize", "O1", "--output-dir", str(out)], capsys
    )
    assert code == 0, err
    assert "min cosine" in stdout and (out / "README.md").is_file() and "onnx" in (out / "README.md").read_text()
    info = json.loads((out / "onnx_config.json").read_text())
    assert (info["quantize"], info["optimize"]) == ("int8", "O1")
    texts = tmp_path / "t.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    for backend in ("auto", "onnx"):
        code, _, err = helpers.run_cli(["eval", str(out), "--backend", backend, "--data", str(_pairs(tmp_path))], capsys)
        assert code == 0, err
    code, _, err = helpers.run_cli(["eval", str(out), "--backend", "torch", "--data", str(_pairs(tmp_path))], capsys)
    assert code == 2 and "no config.json" in err


def _pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    rows = [{"text1": a, "text2": b, "label": float(i % 5)} for i, (a, b) in enumerate(zip(TEXTS, TEXTS[1:] + TEXTS[:1], strict=False))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_torchscript_exporter_is_tried_first_and_the_attention_setting_restored(exported: dict[str, Any]) -> None:
    model, folder = exported["cls"]
    assert json.loads((folder / "onnx_config.json").read_text())["exporter"] == "torch.onnx (torchscript)"
    assert model.backbone.config._attn_implementation == "sdpa"  # traced with eager attention, then put back


def test_the_dynamo_exporter_takes_over_when_torchscript_fails(tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    real = torch.onnx.export
    calls = []

    def torchscript_broken(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("dynamo"))
        if kwargs.get("dynamo") is False:
            raise RuntimeError("unsupported operator aten::made_up")
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.onnx, "export", torchscript_broken)
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    folder = export_onnx(model, tmp_path / "dyn")
    assert calls == [False, True]
    assert json.loads((folder / "onnx_config.json").read_text())["exporter"] == "torch.onnx (dynamo)"
    np.testing.assert_allclose(OnnxEmbedder.from_pretrained(folder).encode(TEXTS), model.encode(TEXTS), atol=FP32_TOLERANCE)

    def both_broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"cannot trace (dynamo={kwargs.get('dynamo')})")

    monkeypatch.setattr(torch.onnx, "export", both_broken)
    with pytest.raises(ConfigError, match=r"cannot be exported.*torchscript: RuntimeError.*dynamo: RuntimeError"):
        export_onnx(model, tmp_path / "none")
    assert not (tmp_path / "none").exists()


@pytest.mark.slow
def test_minilm_exports_equal_torch_for_every_pooling(tmp_path: Path) -> None:
    """The real all-MiniLM-L6-v2 (the package in the test extras): fp32 ONNX within 1e-4 of torch for
    every pooling, and its int8 and fused int8 exports within the stated cosine."""
    from anglekit.model.offline import minilm_dir

    try:
        directory = minilm_dir()
    except ConfigError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 package not installed: {exc}")
    for pooling in POOLING_STRATEGIES:
        model = Embedder.from_pretrained(directory, pooling=pooling, device="cpu")
        onnx = OnnxEmbedder.from_pretrained(export_onnx(model, tmp_path / pooling))
        np.testing.assert_allclose(onnx.encode(TEXTS, 2), model.encode(TEXTS, 2), atol=FP32_TOLERANCE, err_msg=pooling)
    model = Embedder.from_pretrained(directory, device="cpu")
    for name, kwargs in (("int8", {"quantize": "int8"}), ("int8-o2", {"quantize": "int8", "optimize": "O2"})):
        folder = export_onnx(model, tmp_path / name, **kwargs)
        assert row_cosines(OnnxEmbedder.from_pretrained(folder).encode(TEXTS), model.encode(TEXTS)).min() >= INT8_MIN_COSINE, name
    assert json.loads((tmp_path / "int8-o2" / "onnx_config.json").read_text())["fused_operators"]["Attention"] == 6
