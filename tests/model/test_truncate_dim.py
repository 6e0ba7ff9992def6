"""Inference with nested dimensions: truncate_dim (cut, then re-normalise), layer truncation
(ESE), their errors, and their round trip through save/load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.model.config import EmbedderConfig
from anglekit.model.embedder import Embedder

TEXTS = ["a man plays a guitar", "dog", "two dogs run in the park", "wow"]


@pytest.fixture(scope="module")
def embedder(tiny_bert_dir: Path) -> Embedder:
    return Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", device="cpu")


@pytest.mark.parametrize("k", [1, 8, 31])
def test_truncated_vectors_are_the_leading_slice_renormalised(embedder: Embedder, k: int) -> None:
    full = embedder.encode(TEXTS, normalize=False)
    cut = embedder.encode(TEXTS, normalize=True, truncate_dim=k)
    assert cut.shape == (len(TEXTS), k)
    expected = full[:, :k] / np.linalg.norm(full[:, :k], axis=1, keepdims=True)
    np.testing.assert_allclose(cut, expected, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(cut, axis=1), 1.0, atol=1e-6)
    raw = embedder.encode(TEXTS, normalize=False, truncate_dim=k)
    np.testing.assert_allclose(raw, full[:, :k], atol=1e-6)
    single = embedder.encode(TEXTS[0], truncate_dim=k, convert_to="torch")
    assert isinstance(single, torch.Tensor) and single.shape == (k,)
    assert embedder.encode([], truncate_dim=k).shape == (0, k)


@pytest.mark.parametrize("k", [0, -1, 33, 1000, True, 2.0, "8"])
def test_truncate_dim_outside_the_model_is_a_config_error(embedder: Embedder, k: object) -> None:
    with pytest.raises(ConfigError, match="truncate_dim"):
        embedder.encode(TEXTS, truncate_dim=k)  # type: ignore[arg-type]


def test_truncate_dim_and_layer_round_trip_through_save_and_load(tiny_bert_dir: Path, tmp_path: Path) -> None:
    model = Embedder.from_pretrained(tiny_bert_dir, pooling="cls", normalize=True, truncate_dim=16, layer=1, device="cpu")
    assert model.output_dim == 16
    vectors = model.encode(TEXTS)
    assert vectors.shape == (len(TEXTS), 16)
    model.save_pretrained(tmp_path / "saved")
    again = Embedder.from_pretrained(tmp_path / "saved", device="cpu")
    assert (again.config.truncate_dim, again.config.layer) == (16, 1)
    np.testing.assert_allclose(again.encode(TEXTS), vectors, atol=1e-6)
    assert again.encode(TEXTS, truncate_dim=32).shape == (len(TEXTS), 32)  # the full width on request
    overridden = Embedder.from_pretrained(tmp_path / "saved", truncate_dim=8, device="cpu")
    assert overridden.encode(TEXTS).shape == (len(TEXTS), 8)


def test_layer_embeds_from_an_earlier_layer(tiny_bert_dir: Path) -> None:
    full = Embedder.from_pretrained(tiny_bert_dir, pooling="first_last_avg", device="cpu").eval()
    first = Embedder.from_pretrained(tiny_bert_dir, pooling="first_last_avg", layer=1, device="cpu").eval()
    batch = full.tokenize(TEXTS)
    with torch.no_grad():
        stack = full(**batch, layers=True)
        assert stack.shape == (2, len(TEXTS), 32)
        torch.testing.assert_close(stack[-1], full(**batch))
        torch.testing.assert_close(first(**batch), stack[0])
        torch.testing.assert_close(first(**batch, layers=True), stack[:1])
    assert not np.allclose(first.encode(TEXTS), full.encode(TEXTS))


def test_bad_layer_and_truncate_dim_settings_are_config_errors(tiny_bert_dir: Path) -> None:
    with pytest.raises(ConfigError, match="layer 3 does not exist; the model has 2 layers"):
        Embedder.from_pretrained(tiny_bert_dir, layer=3, device="cpu")
    with pytest.raises(ConfigError, match="truncate_dim 64 is larger than the model's dimension 32"):
        Embedder.from_pretrained(tiny_bert_dir, truncate_dim=64, device="cpu")
    for key, value in (("truncate_dim", 0), ("layer", 0), ("truncate_dim", True)):
        with pytest.raises(ConfigError, match=key):
            EmbedderConfig(**{key: value})


def test_older_config_files_load_without_the_new_keys(tiny_bert_dir: Path) -> None:
    config = EmbedderConfig.from_dict({"pooling": "cls"})
    assert config.truncate_dim is None and config.layer is None


def test_a_truncated_model_shards_and_indexes_at_its_own_width(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """Corpus shards and indexes record the width encode returns (truncate_dim), not the backbone's."""
    from anglekit.corpus.encode import EncodeRequest, encode_corpus
    from anglekit.corpus.shards import open_shards
    from anglekit.index.build import build_index

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS * 3) + "\n", encoding="utf-8")
    model = Embedder.from_pretrained(tiny_bert_dir, pooling="cls", normalize=True, truncate_dim=8, device="cpu")
    assert model.output_dim == 8
    report = encode_corpus(model, EncodeRequest(corpus, tmp_path / "shards", shard_size=5))
    assert report.dim == 8
    ids, vectors = open_shards(tmp_path / "shards").load()
    np.testing.assert_allclose(vectors, model.encode_document(TEXTS * 3), atol=1e-6)
    index = build_index(model, corpus)
    hits = index.search(TEXTS[2], k=1)
    assert index.dim == 8 and hits[0].score > 0.99


def test_onnx_takes_truncate_dim_per_call_and_bakes_in_the_layer(tiny_bert_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from anglekit.model.onnx import OnnxEmbedder, export_onnx

    model = Embedder.from_pretrained(tiny_bert_dir, pooling="cls", layer=1, device="cpu")
    onnx = OnnxEmbedder.from_pretrained(export_onnx(model, tmp_path / "onnx"))
    np.testing.assert_allclose(onnx.encode(TEXTS), model.encode(TEXTS), atol=1e-4)  # the graph stops at layer 1
    np.testing.assert_allclose(onnx.encode(TEXTS, truncate_dim=8, normalize=True), model.encode(TEXTS, truncate_dim=8, normalize=True), atol=1e-4)
    assert onnx.encode(TEXTS, truncate_dim=8).shape == (len(TEXTS), 8)
