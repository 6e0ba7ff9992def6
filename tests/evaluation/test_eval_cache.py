"""Embedding cache: a second run encodes nothing; keys separate models and max lengths; atomic shards."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from anglekit.errors import ConfigError
from anglekit.evaluation.baselines import HashingEncoder
from anglekit.evaluation.cache import CachedEncoder, EmbeddingCache
from anglekit.evaluation.suites import make_encoder, run_suite

TEXTS = ["a dog runs", "a cat sleeps", "a dog runs", "the man plays guitar", ""]


def test_second_call_encodes_nothing(tmp_path: Path) -> None:
    inner = HashingEncoder(16)
    cached = CachedEncoder(inner, EmbeddingCache(tmp_path, fingerprint=inner.fingerprint(), max_length=128))
    first = cached(TEXTS)
    assert inner.n_encoded == 4  # distinct texts only
    np.testing.assert_array_equal(first, inner(TEXTS))
    inner.n_encoded = 0
    # a fresh cache object on the same folder (a new process) finds everything on disk
    again = CachedEncoder(inner, EmbeddingCache(tmp_path, fingerprint=inner.fingerprint(), max_length=128))
    np.testing.assert_array_equal(again(TEXTS), first)
    assert inner.n_encoded == 0
    assert (again.hits, again.misses) == (5, 0)


def test_only_new_texts_are_encoded(tmp_path: Path) -> None:
    inner = HashingEncoder(16)
    cached = CachedEncoder(inner, EmbeddingCache(tmp_path, fingerprint="fp", max_length=None))
    cached(TEXTS[:2])
    inner.n_encoded = 0
    out = cached(["a cat sleeps", "something new", "a dog runs"])
    assert inner.n_encoded == 1
    np.testing.assert_array_equal(out, HashingEncoder(16)(["a cat sleeps", "something new", "a dog runs"]))


def test_keys_separate_fingerprint_and_max_length(tmp_path: Path) -> None:
    a = EmbeddingCache(tmp_path, fingerprint="model-a", max_length=128)
    b = EmbeddingCache(tmp_path, fingerprint="model-a", max_length=256)
    c = EmbeddingCache(tmp_path, fingerprint="model-b", max_length=128)
    assert len({a.directory, b.directory, c.directory}) == 3
    a.add(["x"], np.ones((1, 3)))
    assert len(EmbeddingCache(tmp_path, fingerprint="model-a", max_length=128)) == 1
    assert len(EmbeddingCache(tmp_path, fingerprint="model-a", max_length=256)) == 0


def test_shards_are_written_atomically_and_compact(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, fingerprint="fp", max_length=8)
    cache.add(["a"], np.ones((1, 2)))
    cache.add(["b"], np.zeros((1, 2)))
    assert len(list(cache.directory.glob("shard-*.npz"))) == 2
    assert not list(cache.directory.glob(".*tmp"))
    cache.compact()
    assert len(list(cache.directory.glob("shard-*.npz"))) == 1
    fresh = EmbeddingCache(tmp_path, fingerprint="fp", max_length=8)
    found, missing = fresh.lookup(["a", "b", "c"])
    assert missing == [2]
    np.testing.assert_array_equal(found[0], [1, 1])


def test_dimension_mismatch_is_refused(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, fingerprint="fp", max_length=8)
    cache.add(["a"], np.ones((1, 2)))
    with pytest.raises(Exception, match="dim 3 cannot join a cache of dim 2"):
        cache.add(["b"], np.ones((1, 3)))


@pytest.mark.parametrize(
    ("keys", "vectors", "expected"),
    [
        (np.zeros((3, 16), np.uint8), np.ones((2, 2), np.float32), "of (3, 16) keys and (2, 2) vectors"),
        (np.zeros((2, 8), np.uint8), np.ones((2, 2), np.float32), "of (2, 8) keys"),
        (np.zeros((2, 16), np.uint8), np.ones(2, np.float32), "of (2, 16) keys and (2,) vectors"),
        (np.zeros((2, 16), np.uint8), np.ones((2, 5), np.float32), "of dim 5 (cache dim 2)"),
    ],
)
def test_a_malformed_shard_is_skipped_with_a_warning_and_its_texts_encoded_again(tmp_path: Path, keys: np.ndarray, vectors: np.ndarray, expected: str) -> None:
    inner = HashingEncoder(2)
    cache = EmbeddingCache(tmp_path, fingerprint="fp", max_length=8)
    cache.add(["a"], inner(["a"]))
    bad = cache.directory / "shard-0-bad.npz"
    np.savez(bad, keys=keys, vectors=vectors)
    fresh = EmbeddingCache(tmp_path, fingerprint="fp", max_length=8)
    with pytest.warns(UserWarning, match=re.escape(f"skipping shard {bad} {expected}")):
        found, missing = fresh.lookup(["a", "b"])
    assert missing == [1] and fresh.skipped_shards == [str(bad)]
    np.testing.assert_array_equal(found[0], inner(["a"])[0])


def test_cache_needs_a_fingerprint(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="fingerprint"):
        EmbeddingCache(tmp_path, fingerprint="", max_length=8)
    with pytest.raises(ConfigError, match="fingerprint"):
        make_encoder(lambda texts: np.zeros((len(texts), 2)), cache=tmp_path)


def test_second_suite_run_encodes_nothing(tmp_path: Path) -> None:
    from test_eval_sts import write_sts_root  # the tiny STS tree of the STS tests

    root = write_sts_root(tmp_path / "data")
    inner = HashingEncoder(32)
    opts = dict(
        data_root=root, batch_size=4, cache=tmp_path / "cache", fingerprint=inner.fingerprint(), progress=False, tasks=["STS12", "STS-B"], check_counts=False
    )
    first = run_suite("sts", inner, out_dir=tmp_path / "run1", **opts)
    assert inner.n_encoded > 0
    assert first["model"]["cache"]["misses"] > 0
    inner.n_encoded = 0
    second = run_suite("sts", inner, out_dir=tmp_path / "run2", **opts)
    assert inner.n_encoded == 0
    assert second["model"]["cache"]["misses"] == 0
    assert second["scores"] == pytest.approx(first["scores"])


def test_chunks_are_flushed_as_they_are_encoded(tmp_path: Path) -> None:
    inner = HashingEncoder(8)
    cache = EmbeddingCache(tmp_path, fingerprint="fp", max_length=None)
    texts = [f"text number {i}" for i in range(10)]

    def failing(chunk: list[str]) -> np.ndarray:
        if failing.calls == 2:
            raise RuntimeError("interrupted")
        failing.calls += 1
        return inner(chunk)

    failing.calls = 0
    with pytest.raises(RuntimeError):
        CachedEncoder(failing, cache, flush_every=4)(texts)
    assert len(EmbeddingCache(tmp_path, fingerprint="fp", max_length=None)) == 8  # two chunks kept
    inner.n_encoded = 0
    out = CachedEncoder(inner, EmbeddingCache(tmp_path, fingerprint="fp", max_length=None), flush_every=4)(texts)
    assert inner.n_encoded == 2
    np.testing.assert_array_equal(out, HashingEncoder(8)(texts))
