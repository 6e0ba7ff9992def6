"""The consistency (round-trip) filter of InPars-v2 and Promptagator: a generated query is kept only
when its own document ranks within the top k for it among all the corpus's documents under a filter
model.

The filter model is loaded with anglekit's :class:`~anglekit.model.Embedder`; queries are embedded
with its query prompt and documents with its document prompt (its general prompt where it has none),
scores are cosines, and the search is exact. A query's rank is 1 + the number of documents that
score strictly above its own document (so documents of equal score, e.g. equal texts, tie in its
favour).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from anglekit.errors import ConfigError

_BLOCK = 1024
"""Queries scored against the whole corpus at a time, at most (memory: block x documents floats)."""
_BLOCK_FLOATS = 1 << 25
"""At most this many scores (128 MiB of float32) at a time: fewer queries per block for a large corpus."""


def own_ranks(queries: np.ndarray, documents: np.ndarray, own: np.ndarray) -> np.ndarray:
    """The 1-based rank of document ``own[i]`` for query ``i`` by cosine, exact: 1 + the number of
    documents scoring strictly above it. ``queries`` (Q x d) and ``documents`` (D x d) need not be
    normalised."""
    queries = np.asarray(queries, dtype=np.float32)
    documents = np.asarray(documents, dtype=np.float32)
    own = np.asarray(own, dtype=np.int64)
    if queries.ndim != 2 or documents.ndim != 2 or queries.shape[1] != documents.shape[1]:
        raise ConfigError(f"query vectors {queries.shape} and document vectors {documents.shape} must be matrices of one width")
    if own.shape != (len(queries),) or (len(own) and (own.min() < 0 or own.max() >= len(documents))):
        raise ConfigError(f"own documents must be {len(queries)} indexes below {len(documents)}")
    queries = _unit(queries)
    documents = _unit(documents)
    ranks = np.empty(len(queries), dtype=np.int64)
    block = max(1, min(_BLOCK, _BLOCK_FLOATS // max(len(documents), 1)))
    for start in range(0, len(queries), block):
        stop = min(start + block, len(queries))
        scores = queries[start:stop] @ documents.T
        mine = scores[np.arange(stop - start), own[start:stop]]
        ranks[start:stop] = 1 + (scores > mine[:, None]).sum(axis=1)
    return ranks


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


@dataclass(frozen=True)
class ConsistencyResult:
    """The ranks of the queries' own documents, the model, k, and the seconds it took."""

    model: str
    top_k: int
    ranks: np.ndarray
    seconds: float

    @property
    def keep(self) -> np.ndarray:
        return self.ranks <= self.top_k

    def summary(self) -> dict[str, Any]:
        kept = int(self.keep.sum())
        ranks = self.ranks
        return {
            "model": self.model,
            "top_k": self.top_k,
            "checked": len(ranks),
            "kept": kept,
            "dropped": len(ranks) - kept,
            "rank_1": int((ranks == 1).sum()),
            "best_rank": int(ranks.min()) if len(ranks) else None,
            "median_rank": float(np.median(ranks)) if len(ranks) else None,
            "seconds": round(self.seconds, 3),
        }


def load_filter_model(model: str, device: str | None = None) -> Any:
    """The filter model as an :class:`~anglekit.model.Embedder` (loaded before any request is sent,
    so that a bad name fails first)."""
    from anglekit.model import Embedder

    options: dict[str, Any] = {} if device is None else {"device": device}
    return Embedder.from_pretrained(model, **options)


def consistency_filter(embedder: Any, model: str, top_k: int, queries: list[str], own: list[int], documents: list[str], *,
                       batch_size: int = 64) -> ConsistencyResult:  # fmt: skip
    """Embed ``queries`` and ``documents`` with ``embedder`` (the filter model, named ``model``) and
    rank each query's own document (``documents[own[i]]``) among all of them."""
    started = time.monotonic()
    document_vectors = embedder.encode_document(documents, batch_size, normalize=True)
    query_vectors = embedder.encode_query(queries, batch_size, normalize=True)
    ranks = own_ranks(query_vectors, document_vectors, np.asarray(own, dtype=np.int64))
    return ConsistencyResult(model, top_k, ranks, time.monotonic() - started)


__all__ = ["ConsistencyResult", "consistency_filter", "load_filter_model", "own_ranks"]
