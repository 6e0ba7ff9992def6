"""Chunk pooling over texts longer than the model's window, on the tiny BERT."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError
from anglekit.model.long_text import chunk_token_ids, embed_long, model_max_length

from helpers import words


@pytest.fixture(scope="module")
def bert(tiny_bert_dir: Any) -> Any:
    from anglekit.model.embedder import Embedder

    return Embedder.from_pretrained(tiny_bert_dir, device="cpu")


def test_model_max_length(bert: Any) -> None:
    assert model_max_length(bert) == 128


def test_short_text_equals_plain_encode(bert: Any) -> None:
    texts = [words(5), words(30, 3)]
    np.testing.assert_allclose(embed_long(bert, texts, window=64), bert.encode(texts), atol=1e-5)


def test_long_texts_differ_from_truncation_and_order_is_kept(bert: Any) -> None:
    long_a, long_b, short = words(300), words(250, 7), words(6, 2)
    texts = [long_a, short, long_b]
    pooled = embed_long(bert, texts, window=32, stride=15)
    assert pooled.shape == (3, bert.dim) and pooled.dtype == np.float32
    truncated = bert.encode(texts)
    assert not np.allclose(pooled[0], truncated[0], atol=1e-4)
    assert not np.allclose(pooled[2], truncated[2], atol=1e-4)
    # order kept: each row equals the text embedded alone
    for i, text in enumerate(texts):
        np.testing.assert_allclose(pooled[i], embed_long(bert, [text], window=32, stride=15)[0], atol=1e-5)
    single = embed_long(bert, long_a, window=32, stride=15)
    assert single.shape == (bert.dim,)
    maxed = embed_long(bert, texts, window=32, pooling="max")
    assert not np.allclose(maxed[0], pooled[0])


def test_chunks_keep_special_tokens_and_cover_the_text(bert: Any) -> None:
    tok = bert.tokenizer
    content = tok(words(100), add_special_tokens=False)["input_ids"]
    chunks = chunk_token_ids(content, tok, window=20, stride=9)
    assert all(c[0] == tok.cls_token_id and c[-1] == tok.sep_token_id and len(c) <= 20 for c in chunks)
    inner = [c[1:-1] for c in chunks]
    assert inner[0] == content[:18] and inner[-1] == content[-18:]
    covered = set()
    for start, piece in zip(list(range(0, len(content) - 18 + 1, 9)) + [len(content) - 18], inner, strict=False):
        assert piece == content[start : start + 18]
        covered.update(range(start, start + 18))
    assert covered == set(range(len(content)))


def test_mean_is_length_weighted(bert: Any) -> None:
    tok = bert.tokenizer
    text = words(40)
    content = tok(text, add_special_tokens=False)["input_ids"]
    chunks = chunk_token_ids(content, tok, window=32, stride=30)
    assert len(chunks) == 2
    import torch

    was_training = bert.training
    bert.eval()  # no dropout, as in embed_long
    with torch.inference_mode():
        vectors = bert(**bert.pad(chunks)).numpy()
    bert.train(was_training)
    weights = np.array([len(c) - 2 for c in chunks], dtype=np.float64)
    expected = (vectors * weights[:, None]).sum(0) / weights.sum()
    np.testing.assert_allclose(embed_long(bert, [text], window=32, stride=30, normalize=False)[0], expected, atol=1e-5)


def test_no_length_warning_and_limits(bert: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        embed_long(bert, [words(400)], window=128)
    with pytest.raises(ConfigError, match="limit"):
        embed_long(bert, ["x"], window=512)
    with pytest.raises(ConfigError, match="stride"):
        embed_long(bert, ["x"], window=16, stride=15)
    with pytest.raises(ConfigError):
        embed_long(bert, ["x"], pooling="median")  # type: ignore[arg-type]
    assert embed_long(bert, [], window=16).shape == (0, bert.dim)


def test_normalize_follows_flag(load_bert: Callable[..., Any]) -> None:
    bert = load_bert()
    out = embed_long(bert, [words(200)], window=32, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_max_chunks_spreads_windows_over_the_text(bert: Any) -> None:
    tok = bert.tokenizer
    content = tok(words(100), add_special_tokens=False)["input_ids"]
    capped = chunk_token_ids(content, tok, window=20, stride=9, max_chunks=3)
    inner = [c[1:-1] for c in capped]
    assert len(capped) == 3 and inner[0] == content[:18] and inner[-1] == content[-18:]
    assert len(chunk_token_ids(content[:10], tok, window=20, stride=9, max_chunks=3)) == 1
    with pytest.raises(ConfigError):
        chunk_token_ids(content, tok, window=20, stride=9, max_chunks=0)
    out = embed_long(bert, [words(100)], window=20, stride=9, max_chunks=3)
    assert out.shape == (1, bert.dim)
