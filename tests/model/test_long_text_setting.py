"""Long-text embedding as a setting of the model (``long_text``: truncate | chunk-mean | chunk-max):
saved and restored, applied by every encode path (torch, ONNX, the command line, the server), and
equal to the explicit chunk pooling of :func:`anglekit.model.long_text.embed_long`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError
from anglekit.model.config import EmbedderConfig
from anglekit.model.embedder import Embedder
from anglekit.model.long_text import embed_long

import helpers
from helpers import words

TEXTS = [words(300), words(6, 2), words(250, 7), words(40, 3)]


@pytest.fixture(scope="module")
def chunked(tiny_bert_dir: Path) -> Embedder:
    return Embedder.from_pretrained(tiny_bert_dir, long_text="chunk-mean", long_text_window=32, long_text_stride=15, device="cpu")


def test_the_setting_equals_explicit_chunk_pooling_and_short_texts_equal_truncation(chunked: Embedder, tiny_bert_dir: Path) -> None:
    plain = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    for normalize in (False, True):
        np.testing.assert_allclose(
            chunked.encode(TEXTS, 2, normalize=normalize), embed_long(plain, TEXTS, window=32, stride=15, normalize=normalize), atol=1e-5
        )
    short = [words(6, 2), words(12, 1)]
    np.testing.assert_allclose(chunked.encode(short), plain.encode(short), atol=1e-5)  # one window: the same tokens
    assert not np.allclose(chunked.encode(TEXTS[:1]), plain.encode(TEXTS[:1]), atol=1e-3)
    maxed = chunked.encode(TEXTS, long_text="chunk-max")  # per call
    np.testing.assert_allclose(maxed, embed_long(plain, TEXTS, window=32, stride=15, pooling="max"), atol=1e-5)
    np.testing.assert_allclose(chunked.encode(TEXTS, long_text="truncate"), plain.encode(TEXTS), atol=1e-5)
    cut = chunked.encode(TEXTS, truncate_dim=8, normalize=True)
    assert cut.shape == (len(TEXTS), 8)
    np.testing.assert_allclose(np.linalg.norm(cut, axis=1), 1.0, atol=1e-5)


def test_saved_with_the_model_and_validated(chunked: Embedder, tmp_path: Path, tiny_bert_dir: Path) -> None:
    chunked.save_pretrained(tmp_path / "m")
    again = Embedder.from_pretrained(tmp_path / "m", device="cpu")
    assert (again.config.long_text, again.config.long_text_window, again.config.long_text_stride) == ("chunk-mean", 32, 15)
    np.testing.assert_allclose(again.encode(TEXTS), chunked.encode(TEXTS), atol=1e-6)
    assert EmbedderConfig.from_dict({"pooling": "cls"}).long_text == "truncate"  # older files: truncation
    with pytest.raises(ConfigError, match="long_text must be one of"):
        EmbedderConfig(long_text="chunk-median")
    with pytest.raises(ConfigError, match="long_text_window must be an integer"):
        EmbedderConfig(long_text_window=0)
    with pytest.raises(ConfigError, match="exceeds the model's limit of 128"):
        Embedder.from_pretrained(tiny_bert_dir, long_text="chunk-mean", long_text_window=4096, device="cpu").encode(TEXTS)
    with pytest.raises(ConfigError, match="long_text must be one of"):
        chunked.encode(TEXTS, long_text="recurrent")


def test_exported_backends_apply_the_setting(chunked: Embedder, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from anglekit.model.onnx import OnnxEmbedder, export_onnx

    folder = export_onnx(chunked, tmp_path / "onnx")
    onnx = Embedder.from_pretrained(folder)
    assert isinstance(onnx, OnnxEmbedder) and onnx.config.long_text == "chunk-mean"  # travels in the folder
    np.testing.assert_allclose(onnx.encode(TEXTS), chunked.encode(TEXTS), atol=1e-4)
    as_max = Embedder.from_pretrained(folder, long_text="chunk-max")
    np.testing.assert_allclose(as_max.encode(TEXTS), chunked.encode(TEXTS, long_text="chunk-max"), atol=1e-4)


def test_the_command_line_and_the_server_use_it(chunked: Embedder, tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.serve.backends import load_backend

    texts = tmp_path / "t.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "v.npy"
    argv = ["encode", str(tiny_bert_dir), "--input", str(texts), "--output", str(out), "--device", "cpu", "--quiet",
            "--long-text", "chunk-mean", "--long-text-window", "32", "--long-text-stride", "15"]  # fmt: skip
    code, _, err = helpers.run_cli(argv, capsys)
    assert code == 0, err
    np.testing.assert_allclose(np.load(out), chunked.encode(TEXTS), atol=1e-5)
    backend: Any = load_backend("torch", str(tiny_bert_dir), device="cpu", long_text="chunk-mean", long_text_window=32, long_text_stride=15)
    assert backend.chunks_long_texts
    for truncate in (True, False):  # no text is too long: none is cut, none is refused
        ids = backend.tokenize(TEXTS, None, truncate=truncate)
        assert max(len(seq) for seq in ids) > 128
        np.testing.assert_allclose(backend.embed(ids), chunked.encode(TEXTS, normalize=False), atol=1e-5)


def test_the_batcher_accepts_long_texts_without_auto_truncate(tiny_bert_dir: Path) -> None:
    import asyncio

    from anglekit.serve.backends import load_backend
    from anglekit.serve.batcher import Batcher

    backend = load_backend("torch", str(tiny_bert_dir), device="cpu", long_text="chunk-max", long_text_window=32)
    batcher = Batcher(backend, max_batch_tokens=4096, max_batch_size=8, max_queue=100)
    batcher.start()
    try:
        result = asyncio.run(batcher.embed(TEXTS, truncate=False))
    finally:
        batcher.close()
    model = Embedder.from_pretrained(tiny_bert_dir, long_text="chunk-max", long_text_window=32, device="cpu")
    np.testing.assert_allclose(result.vectors, model.encode(TEXTS, normalize=False), atol=1e-5)
