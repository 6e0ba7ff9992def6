"""On-disk embedding cache keyed by (model fingerprint, max_length, text).

Layout::

    <cache root>/                          default: $ANGLEKIT_CACHE/embeddings or ~/.cache/anglekit/embeddings
      <key>/                               key = sha256 of {"fingerprint", "max_length", "extra"}[:24]
        meta.json                          the key's parts and the vector dimension
        shard-<time>-<pid>-<rand>.npz      "keys": (n, 16) uint8 sha256[:16] of each text (UTF-8),
                                           "vectors": (n, dim) float32

Shards are append-only and each is written atomically (temporary file, fsync, rename), so a crash
never leaves a half-written shard and two processes filling one cache never overwrite each other
(at worst both encode the same text once). :meth:`EmbeddingCache.compact` merges the shards.

Use::

    cached = CachedEncoder(encode, EmbeddingCache(fingerprint=model_fp, max_length=256))
    vectors = cached(texts)        # encodes only the texts not seen before for this key
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError, DataError
from anglekit.io.atomic import atomic_path, atomic_write_json
from anglekit.io.read import read_json, require_object

KEY_BYTES = 16


def default_cache_root() -> Path:
    """``$ANGLEKIT_CACHE/embeddings``, else ``~/.cache/anglekit/embeddings``."""
    base = os.environ.get("ANGLEKIT_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "anglekit") / "embeddings"


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[:KEY_BYTES]


class EmbeddingCache:
    """Vectors of texts for one model state (``fingerprint``) and ``max_length``.

    ``extra`` distinguishes anything else that changes the vectors and is not in the fingerprint
    (e.g. a prompt applied outside the model). A cache without a fingerprint is refused: texts
    from different models must never share vectors.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, *, fingerprint: str, max_length: int | None, extra: str | None = None) -> None:
        if not fingerprint:
            raise ConfigError(
                "an embedding cache needs the model's fingerprint (Embedder.fingerprint(), "
                "or fingerprint_directory(model_dir)); without one nothing can be cached safely"
            )
        self.root = Path(directory) if directory is not None else default_cache_root()
        self.meta = {"fingerprint": str(fingerprint), "max_length": max_length, "extra": extra}
        key = hashlib.sha256(json.dumps(self.meta, sort_keys=True).encode()).hexdigest()[:24]
        self.directory = self.root / key
        self._index: dict[bytes, np.ndarray] | None = None
        self.dim: int | None = None
        self.skipped_shards: list[str] = []

    # -------------------------------------------------------------- reading
    def _load(self) -> dict[bytes, np.ndarray]:
        if self._index is not None:
            return self._index
        index: dict[bytes, np.ndarray] = {}
        meta_path = self.directory / "meta.json"
        if meta_path.exists():
            expected = "the embedding cache's metadata (a JSON object)"
            meta = require_object(read_json(meta_path, expected=expected), source=str(meta_path), expected=expected)
            if {k: meta.get(k) for k in self.meta} != self.meta:
                raise DataError(f"cache metadata {meta} does not match the key {self.meta} (hash collision?)", source=str(meta_path))
            self.dim = meta.get("dim")
        for shard in sorted(self.directory.glob("shard-*.npz")):
            try:
                with np.load(shard) as data:
                    keys, vectors = data["keys"], data["vectors"]
            except Exception as exc:  # noqa: BLE001 - any unreadable shard is reported and skipped
                warnings.warn(f"embedding cache: skipping unreadable shard {shard}: {exc}", stacklevel=2)
                self.skipped_shards.append(str(shard))
                continue
            problem = None
            if keys.ndim != 2 or keys.shape[1] != KEY_BYTES or vectors.ndim != 2 or len(keys) != len(vectors):
                problem = f"of {keys.shape} keys and {vectors.shape} vectors (one {KEY_BYTES}-byte key per vector expected)"
            elif self.dim is not None and vectors.shape[1] != self.dim:
                problem = f"of dim {vectors.shape[1]} (cache dim {self.dim})"
            if problem is not None:  # its texts are encoded again
                warnings.warn(f"embedding cache: skipping shard {shard} {problem}", stacklevel=2)
                self.skipped_shards.append(str(shard))
                continue
            for k, v in zip(keys, vectors, strict=True):
                index[bytes(k)] = v
        self._index = index
        return index

    def __len__(self) -> int:
        return len(self._load())

    def lookup(self, texts: Sequence[str]) -> tuple[dict[int, np.ndarray], list[int]]:
        """Cached vectors by position in ``texts``, and the positions that are missing."""
        index = self._load()
        found: dict[int, np.ndarray] = {}
        missing: list[int] = []
        for i, text in enumerate(texts):
            vec = index.get(text_key(text))
            if vec is None:
                missing.append(i)
            else:
                found[i] = vec
        return found, missing

    # -------------------------------------------------------------- writing
    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store ``vectors`` for ``texts`` as one new shard (atomic)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"need one vector per text: {len(texts)} texts, vectors of shape {vectors.shape}")
        if not len(texts):
            return
        index = self._load()
        if self.dim is None:
            self.dim = int(vectors.shape[1])
        elif vectors.shape[1] != self.dim:
            raise DataError(f"vectors of dim {vectors.shape[1]} cannot join a cache of dim {self.dim}", source=str(self.directory))
        self.directory.mkdir(parents=True, exist_ok=True)
        if not (self.directory / "meta.json").is_file():
            atomic_write_json(self.directory / "meta.json", {**self.meta, "dim": self.dim})
        keys = np.frombuffer(b"".join(text_key(t) for t in texts), dtype=np.uint8).reshape(len(texts), KEY_BYTES)
        self._write_shard(keys, vectors)
        for k, v in zip(keys, vectors, strict=True):
            index[bytes(k)] = v

    def _write_shard(self, keys: np.ndarray, vectors: np.ndarray) -> Path:
        name = f"shard-{time.time_ns()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.npz"
        target = self.directory / name
        with atomic_path(target) as tmp, open(tmp, "wb") as handle:
            np.savez(handle, keys=keys, vectors=vectors)
            handle.flush()
            os.fsync(handle.fileno())
        return target

    def compact(self) -> int:
        """Merge all shards into one (atomic; old shards removed after the new one is in place)."""
        index = self._load()
        old = sorted(self.directory.glob("shard-*.npz"))
        if len(old) <= 1:
            return len(old)
        keys = np.frombuffer(b"".join(index), dtype=np.uint8).reshape(len(index), KEY_BYTES)
        vectors = np.stack(list(index.values())).astype(np.float32)
        new = self._write_shard(keys, vectors)
        for shard in old:
            if shard != new:
                shard.unlink(missing_ok=True)
        return 1


class CachedEncoder:
    """``encode`` with an :class:`EmbeddingCache` in front: only unseen texts reach the model.

    Unseen texts are encoded in chunks of ``flush_every`` and each chunk is stored at once, so an
    interrupted run resumes where it stopped. Carries the wrapped encoder's ``info()`` (if any) plus hit/miss counts.
    """

    def __init__(self, encode: Callable[..., np.ndarray], cache: EmbeddingCache, *, flush_every: int = 4096) -> None:
        if flush_every < 1:
            raise ValueError(f"flush_every must be >= 1, got {flush_every}")
        self.encode = encode
        self.cache = cache
        self.flush_every = flush_every
        self.hits = 0
        self.misses = 0
        self._parent: CachedEncoder | None = None
        self._roles: dict[str, CachedEncoder] = {}

    def for_role(self, role: str) -> CachedEncoder:
        """This encoder with the model's ``role`` prompt (see :meth:`PreparedEncoder.for_role`), behind
        a cache of its own (``extra`` = the prompt name; one model's fingerprint covers every prompt
        but not which one a text was embedded with); itself when the model has no such prompt.
        Its hits and misses count in this encoder's too."""
        method = getattr(self.encode, "for_role", None)
        inner = method(role) if callable(method) else self.encode
        if inner is self.encode:
            return self
        name = str(inner.info().get("role"))
        if name not in self._roles:
            meta = self.cache.meta
            extra = f"{meta['extra']};role={name}" if meta["extra"] else f"role={name}"
            cache = EmbeddingCache(self.cache.root, fingerprint=meta["fingerprint"], max_length=meta["max_length"], extra=extra)
            child = CachedEncoder(inner, cache, flush_every=self.flush_every)
            child._parent = self
            self._roles[name] = child
        return self._roles[name]

    def __call__(self, texts: Sequence[str], *, desc: str = "encode") -> np.ndarray:
        items = list(texts)
        found, missing = self.cache.lookup(items)
        # encode each missing distinct text once
        todo = list(dict.fromkeys(items[i] for i in missing))
        todo.sort(key=len, reverse=True)  # similar lengths together: less padding in every chunk
        new: dict[str, np.ndarray] = {}
        if todo:
            from anglekit.evaluation.encoders import _accepts_keyword

            takes_desc = _accepts_keyword(self.encode, "desc")
            n_chunks = -(-len(todo) // self.flush_every)
            for k in range(n_chunks):
                chunk = todo[k * self.flush_every : (k + 1) * self.flush_every]
                label = desc if n_chunks == 1 else f"{desc} [{k + 1}/{n_chunks}]"
                fresh = self.encode(chunk, desc=label) if takes_desc else self.encode(chunk)
                fresh = np.asarray(fresh, dtype=np.float32)
                if fresh.ndim != 2 or fresh.shape[0] != len(chunk):
                    raise ValueError(f"encoder returned shape {fresh.shape} for {len(chunk)} texts")
                self.cache.add(chunk, fresh)  # written now: an interrupted run keeps what it encoded
                new.update(zip(chunk, fresh, strict=True))
        self.hits += len(found)
        self.misses += len(todo)
        if self._parent is not None:
            self._parent.hits += len(found)
            self._parent.misses += len(todo)
        if not items:
            return np.zeros((0, self.cache.dim or 0), dtype=np.float32)
        dim = self.cache.dim
        out = np.empty((len(items), dim), dtype=np.float32)
        for i, vec in found.items():
            out[i] = vec
        for i in missing:
            out[i] = new[items[i]]
        return out

    def info(self) -> dict[str, Any]:
        base = self.encode.info() if hasattr(self.encode, "info") else {}
        return {**base, "cache": {"directory": str(self.cache.directory), "hits": self.hits, "misses": self.misses}}
