"""Retrieval metrics over a :class:`~anglekit.data.beir.RetrievalSet`: nDCG@10, MRR@10, recall@1/10/100, MAP@100.

Definitions are sentence-transformers' ``InformationRetrievalEvaluator`` (binary relevance),
as fractions in [0, 1] under their usual names (``ndcg@10``):

- ranking: cosine, best first, ties by ascending document id; the top ``max(k)`` of each query;
- ``recall@k``: relevant documents in the top k / relevant documents;
- ``mrr@k``: 1 / rank of the first relevant document in the top k (0 when none);
- ``ndcg@k``: sum over the top k of rel_i / log2(i + 1), over the same for an ideal ranking of
  ``min(k, relevant)`` ones;
- ``map@k``: sum over the relevant documents in the top k of precision at their rank, over
  ``min(k, relevant)``.

Search is exact (anglekit's block scan, :func:`anglekit.index.quantize.top_k`) or ``hnsw``
(a :class:`~anglekit.index.VectorIndex` graph, rescored with the float vectors).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from anglekit.data.beir import RetrievalSet
from anglekit.errors import ConfigError

__all__ = ["IR_METRICS", "SEARCHES", "evaluate_retrieval_set", "ir_metrics", "rank", "score_vectors"]

SEARCHES = ("exact", "hnsw")
IR_METRICS = ("ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100", "map@100")
"""The headline metrics, in table order."""


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def rank(queries: np.ndarray, corpus: np.ndarray, k: int, *, search: str = "exact") -> np.ndarray:
    """Rows of the ``k`` best ``corpus`` vectors for each query (cosine; ties: lower row first); -1 pads."""
    if search not in SEARCHES:
        raise ConfigError(f"retrieval search must be one of {', '.join(SEARCHES)}, got {search!r}")
    q, c = _unit(queries), _unit(corpus)
    k = min(k, len(c))
    if search == "exact":
        from anglekit.index.quantize import block_scorer, top_k

        return top_k(q, len(c), k, block_scorer("none", c, c.shape[1], None))[1]
    from anglekit.index.store import IndexSettings, VectorIndex

    index = VectorIndex({"name": "retrieval-eval", "fingerprint": None, "dim": c.shape[1]}, IndexSettings(kind="hnsw"))
    index.add_vectors([str(i) for i in range(len(c))], c)
    ids, _ = index.search_vectors(q, k)
    out = np.full((len(q), k), -1, np.int64)
    for i, row in enumerate(ids):
        out[i, : len(row)] = [int(r) for r in row]
    return out


def ir_metrics(is_relevant: np.ndarray, n_relevant: np.ndarray, *, ndcg: Sequence[int] = (10,), mrr: Sequence[int] = (10,),
               recall: Sequence[int] = (1, 10, 100), map_at: Sequence[int] = (100,)) -> dict[str, float]:  # fmt: skip
    """The metrics (means over queries) from ``is_relevant[q, i]`` (the i-th ranked document is
    relevant) and ``n_relevant[q]`` (the query's relevant documents, all of them)."""
    hits = np.asarray(is_relevant, dtype=np.float64)
    total = np.asarray(n_relevant, dtype=np.float64)
    ranks = np.arange(1, hits.shape[1] + 1, dtype=np.float64)
    out: dict[str, float] = {}
    for k in ndcg:
        gains = 1.0 / np.log2(ranks[:k] + 1)
        dcg = (hits[:, :k] * gains).sum(axis=1)
        ideal = np.array([gains[: int(min(k, n))].sum() for n in total])
        out[f"ndcg@{k}"] = float(np.mean(dcg / ideal))
    for k in mrr:
        first = np.where(hits[:, :k].any(axis=1), 1.0 / (hits[:, :k].argmax(axis=1) + 1), 0.0)
        out[f"mrr@{k}"] = float(first.mean())
    for k in recall:
        out[f"recall@{k}"] = float(np.mean(hits[:, :k].sum(axis=1) / total))
    for k in map_at:
        precision = np.cumsum(hits[:, :k], axis=1) / ranks[:k]
        out[f"map@{k}"] = float(np.mean((precision * hits[:, :k]).sum(axis=1) / np.minimum(k, total)))
    return out


def score_vectors(data: RetrievalSet, corpus_vectors: np.ndarray, query_vectors: np.ndarray, *, search: str = "exact") -> dict[str, Any]:
    """The metrics of ``data`` from its vectors (``corpus_vectors`` in ``data.corpus`` order, ``query_vectors`` in ``data.queries`` order)."""
    order = sorted(range(len(data.corpus_ids)), key=lambda i: data.corpus_ids[i])  # ties: ascending id, as sentence-transformers
    ids = [data.corpus_ids[i] for i in order]
    depth = 100 + (1 if data.ignore_identical_ids else 0)
    ranked = rank(np.asarray(query_vectors), np.asarray(corpus_vectors)[order], depth, search=search)
    is_relevant = np.zeros((len(data.queries), min(100, len(ids))), bool)
    for q, (query_id, row) in enumerate(zip(data.query_ids, ranked, strict=True)):
        found = [ids[r] for r in row if r >= 0 and not (data.ignore_identical_ids and ids[r] == query_id)][: is_relevant.shape[1]]
        relevant = data.qrels[query_id]
        is_relevant[q, : len(found)] = [doc in relevant for doc in found]
    n_relevant = np.array([len(data.qrels[q]) for q in data.query_ids])
    metrics = ir_metrics(is_relevant, n_relevant)
    return {
        "metrics": metrics,
        "queries": len(data.queries),
        "corpus": len(ids),
        "search": search,
        "skipped": dict(data.skipped),
        "sources": list(data.sources),
    }


def evaluate_retrieval_set(
    encode: Callable[..., Any], data: RetrievalSet, *, search: str = "exact", encode_queries: Callable[..., Any] | None = None
) -> dict[str, Any]:
    """Embed ``data``'s corpus with ``encode`` and its queries with ``encode_queries`` (default: ``encode``)
    and score the ranking (see the module doc). Give the two a model's document and query prompts
    (``Embedder.encode_document`` / ``encode_query``) to score it as it is used."""
    corpus_vectors = np.asarray(encode(list(data.corpus)))
    query_vectors = np.asarray((encode_queries or encode)(list(data.queries)))
    return score_vectors(data, corpus_vectors, query_vectors, search=search)
