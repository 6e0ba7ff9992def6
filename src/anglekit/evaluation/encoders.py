"""Turn "a model" into the encode callable the suites use, with batching, progress and identity.

The suites work on an :data:`~anglekit.metrics.similarity.EncodeFn`: any callable mapping a list
of texts to a float array ``(len(texts), dim)``. :func:`prepare_encoder` accepts

* an anglekit :class:`~anglekit.model.embedder.Embedder` (anything with ``encode(texts, batch_size=...)``,
  ``config.max_length`` and ``fingerprint()``),
* a ``sentence_transformers.SentenceTransformer`` (its ``max_seq_length`` is set to ``max_length``),
* or a plain callable ``encode(texts) -> array``; if it takes a ``max_length`` keyword, the
  requested ``max_length`` is passed to it, otherwise asking for a ``max_length`` is an error
  (the callable would silently ignore it),

and returns a :class:`PreparedEncoder`: a callable that sorts texts by length (less padding),
encodes them in chunks with a tqdm progress bar, returns the rows in input order, and knows the
model's name, fingerprint (for the cache) and the settings used (for the JSON results).
"""

from __future__ import annotations

import hashlib
import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError
from anglekit.metrics.similarity import EncodeFn
from anglekit.model import DEFAULT_BATCH_SIZE

PROGRESS_CHUNK_BATCHES = 8
"""A model object is called with ``batch_size * PROGRESS_CHUNK_BATCHES`` texts at a time (progress granularity)."""


@dataclass
class PreparedEncoder:
    """An encode callable with batching, progress, and the identity of the model behind it."""

    encode_chunk: Callable[[list[str]], np.ndarray]
    chunk_size: int
    name: str = "encoder"
    fingerprint: str | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    max_length: int | None = None
    progress: bool = True
    details: dict[str, Any] = field(default_factory=dict)
    n_encoded: int = 0
    """How many texts this encoder has passed to the model so far (the cache's test counts on it)."""
    role_model: Any = field(default=None, repr=False)
    """The Embedder behind a role-less encoder, from which :meth:`for_role` makes its role encoders."""
    _roles: dict[str, PreparedEncoder] = field(default_factory=dict, repr=False)

    def for_role(self, role: str) -> PreparedEncoder:
        """This encoder with the model's ``role`` prompt (``query``; ``document``: else ``passage`` or
        ``corpus``), or this encoder itself when the model has no such prompt (as ``encode_query``)."""
        config = getattr(self.role_model, "config", None)
        present = getattr(config, "role_if_present", None)
        name = present(role) if callable(present) else None
        if name is None:
            return self
        if name not in self._roles:
            self._roles[name] = _embedder_encoder(self.role_model, self.batch_size, None, self.name, self.fingerprint, self.progress, name)
        return self._roles[name]

    def __call__(self, texts: Sequence[str], *, desc: str = "encode") -> np.ndarray:
        items = list(texts)
        if not items:
            return np.zeros((0, 0), dtype=np.float32)
        order = np.argsort([-len(t) for t in items], kind="stable")
        out: np.ndarray | None = None
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(items), desc=desc, unit="text", leave=False)
        try:
            for start in range(0, len(items), self.chunk_size):
                index = order[start : start + self.chunk_size]
                vectors = np.asarray(self.encode_chunk([items[i] for i in index]))
                if vectors.ndim != 2 or vectors.shape[0] != len(index):
                    raise ValueError(f"{self.name}: encoder returned shape {vectors.shape} for {len(index)} texts; expected (n_texts, dim)")
                if out is None:
                    out = np.empty((len(items), vectors.shape[1]), dtype=np.float32)
                out[index] = vectors
                self.n_encoded += len(index)
                if bar is not None:
                    bar.update(len(index))
        finally:
            if bar is not None:
                bar.close()
        assert out is not None
        return out

    def info(self) -> dict[str, Any]:
        """What the JSON results record about the model."""
        return {
            "name": self.name,
            "fingerprint": self.fingerprint,
            "batch_size": self.batch_size,
            "max_length": self.max_length,
            **self.details,
        }


def _accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _is_sentence_transformer(model: Any) -> bool:
    return type(model).__name__ == "SentenceTransformer" and hasattr(model, "max_seq_length")


def _is_embedder(model: Any) -> bool:
    return hasattr(model, "encode") and hasattr(model, "fingerprint") and hasattr(getattr(model, "config", None), "max_length")


def fingerprint_directory(path: str | os.PathLike[str]) -> str:
    """A content hash of every file in a model directory (names, sizes and bytes), 16 hex digits."""
    root = Path(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(root)).encode())
        digest.update(str(file.stat().st_size).encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def prepare_encoder(
    model: Any,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_length: int | None = None,
    name: str | None = None,
    fingerprint: str | None = None,
    progress: bool = True,
    role: str | None = None,
) -> PreparedEncoder:
    """Wrap ``model`` (Embedder, SentenceTransformer, plain callable, or a PreparedEncoder) for the suites.

    ``max_length`` is the maximum number of tokens per text. For an Embedder it must equal the
    model's own ``config.max_length`` when given (load the model with ``max_length=``); a
    SentenceTransformer gets its ``max_seq_length`` set; a plain callable receives it as a keyword
    (or, when it takes no such keyword, a ConfigError is raised rather than ignoring it).
    ``role`` (``"query"`` / ``"document"``) is passed to an Embedder's ``encode(role=...)`` (its
    query/document prompt); other models refuse it.
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    if max_length is not None and (not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1):
        raise ConfigError(f"max_length must be a positive integer or None, got {max_length!r}")
    if isinstance(model, PreparedEncoder):
        if max_length is not None and model.max_length is not None and max_length != model.max_length:
            raise ConfigError(f"encoder was prepared with max_length={model.max_length}, asked for {max_length}")
        return model

    if role is not None and not _is_embedder(model):
        raise ConfigError(f"role={role!r} needs an anglekit Embedder (its query/document prompts)")
    if _is_embedder(model):
        return _embedder_encoder(model, batch_size, max_length, name, fingerprint, progress, role)
    if _is_sentence_transformer(model):
        if max_length is not None:
            model.max_seq_length = max_length

        def encode_st(texts: list[str]) -> np.ndarray:
            return np.asarray(model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False))

        return PreparedEncoder(
            encode_st, batch_size * PROGRESS_CHUNK_BATCHES, name=name or "sentence-transformers", fingerprint=fingerprint,
            batch_size=batch_size, max_length=int(model.max_seq_length), progress=progress,
            details={"kind": "sentence_transformers.SentenceTransformer"},
        )  # fmt: skip
    return _callable_encoder(model, batch_size, max_length, name, fingerprint, progress)


def _embedder_encoder(model: Any, batch_size: int, max_length: int | None, name: str | None, fingerprint: str | None, progress: bool,
                      role: str | None) -> PreparedEncoder:  # fmt: skip
    """:func:`prepare_encoder` of an anglekit Embedder (its own max length; ``role`` picks its prompt)."""
    config = model.config
    if max_length is not None and max_length != config.max_length:
        raise ConfigError(
            f"the model was loaded with max_length={config.max_length} but max_length={max_length} was "
            "asked for; load it with Embedder.from_pretrained(..., max_length=...)"
        )
    details = {
        "kind": "anglekit.Embedder",
        "pooling": getattr(config, "pooling", None),
        "prompt": getattr(config, "prompt", None),
        "normalize": getattr(config, "normalize", None),
    }
    extra: dict[str, Any] = {}
    if role is not None:
        if not _accepts_keyword(model.encode, "role"):
            raise ConfigError(f"role={role!r} was asked for but this model's encode() takes no role")
        extra["role"] = role
        details["role"] = role

    def encode_chunk(texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(texts, batch_size=batch_size, convert_to="numpy", **extra))

    return PreparedEncoder(
        encode_chunk, batch_size * PROGRESS_CHUNK_BATCHES, name=name or str(getattr(model, "source", "") or "embedder"),
        fingerprint=fingerprint or model.fingerprint(), batch_size=batch_size, max_length=config.max_length, progress=progress,
        details=details, role_model=model if role is None else None,
    )  # fmt: skip


def for_role(encode: Callable[..., Any], role: str) -> Callable[..., Any]:
    """``encode`` with the model's ``role`` prompt where it can take one (an Embedder's encoder, cached
    or not, whose model has that prompt), else ``encode`` itself: what the suites use to embed
    queries and documents as the model was trained to."""
    method = getattr(encode, "for_role", None)
    return method(role) if callable(method) else encode


def role_of(encode: Callable[..., Any]) -> str | None:
    """The prompt name ``encode`` embeds with (None: the model's general prompt)."""
    info = encode.info() if callable(getattr(encode, "info", None)) else {}
    role = info.get("role") if isinstance(info, dict) else None
    return role if isinstance(role, str) else None


def _callable_encoder(model: Any, batch_size: int, max_length: int | None, name: str | None, fingerprint: str | None,
                      progress: bool) -> PreparedEncoder:  # fmt: skip
    """:func:`prepare_encoder` of a plain callable ``texts -> array`` (given ``max_length`` as a keyword)."""
    if not callable(model):
        raise ConfigError(f"cannot encode with a {type(model).__name__}: pass an Embedder, a SentenceTransformer or a callable texts -> array")
    fn: EncodeFn = model
    if max_length is not None:
        if not _accepts_keyword(fn, "max_length"):
            raise ConfigError(
                f"max_length={max_length} was asked for but the encode callable {getattr(fn, '__name__', fn)!r} "
                "takes no max_length keyword; configure the model yourself and pass max_length=None"
            )

        def encode_chunk(texts: list[str]) -> np.ndarray:
            return np.asarray(fn(texts, max_length=max_length))  # type: ignore[call-arg]
    else:

        def encode_chunk(texts: list[str]) -> np.ndarray:
            return np.asarray(fn(texts))

    return PreparedEncoder(
        encode_chunk, batch_size, name=name or getattr(fn, "__name__", "encoder"), fingerprint=fingerprint, batch_size=batch_size,
        max_length=max_length, progress=progress, details={"kind": "callable"},
    )  # fmt: skip


def load_sentence_transformer(
    path: str | os.PathLike[str], *, device: str = "cpu", max_length: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE, progress: bool = True
) -> PreparedEncoder:
    """A sentence-transformers model directory as a PreparedEncoder (fingerprint = hash of its files)."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(os.fspath(path), device=device)
    return prepare_encoder(st, batch_size=batch_size, max_length=max_length, name=os.fspath(path), fingerprint=fingerprint_directory(path), progress=progress)


def encode_unique(encode: Callable[..., np.ndarray], *groups: Sequence[str], desc: str = "encode") -> tuple[np.ndarray, dict[str, int]]:
    """Encode the distinct texts of ``groups`` once; return the matrix and text -> row index."""
    unique = list(dict.fromkeys(t for g in groups for t in g))
    vectors = np.asarray(encode(unique, desc=desc) if _accepts_keyword(encode, "desc") else encode(unique))
    if vectors.shape[0] != len(unique):
        raise ValueError(f"encoder returned {vectors.shape[0]} vectors for {len(unique)} texts")
    return vectors, {t: i for i, t in enumerate(unique)}


def rows(vectors: np.ndarray, index: dict[str, int], texts: Sequence[str]) -> np.ndarray:
    """The rows of ``vectors`` for ``texts`` (via ``index`` from :func:`encode_unique`)."""
    return vectors[[index[t] for t in texts]]


def progress_enabled(encode: Any) -> bool:
    """Whether ``encode`` (a PreparedEncoder, possibly behind a cache) wants progress bars."""
    inner = getattr(encode, "encode", None)
    if hasattr(encode, "progress"):
        return bool(encode.progress)
    if inner is not None and hasattr(inner, "progress"):
        return bool(inner.progress)
    return True
