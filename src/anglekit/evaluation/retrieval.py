"""The ``retrieval`` suite: caption-to-caption retrieval on Flickr30k test (1000 images x 5 captions).

Protocol:

* the index holds all 5 x 1000 test captions, L2-normalised, in a faiss ``IndexFlatIP`` (exact
  inner product = cosine);
* each image's first caption (``test.1``) is a query: 1000 queries;
* **strict accuracy@5** counts the query caption: the index contains it, and a query succeeds
  when its 5 nearest captions are exactly its image's five captions, i.e. the query itself
  (normally first, cosine 1) plus the image's four other captions. (If another image has a caption
  with the very same text, it ties with the query and can push a correct caption out.)
* **recall@k** and **MRR** leave the query caption out of the ranking (otherwise they would be
  trivially perfect): the relevant items are the image's four other captions; recall@k is the
  share of queries with at least one of them among the k nearest (hit rate, the usual R@k of
  caption retrieval); ``caption_recall@k`` is the share of the four found in the top k; MRR is the
  mean of 1 / rank of the first relevant caption. ``strict_excluding_query@4`` (the four nearest
  other captions are the four relevant ones) is reported too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.data.flickr import load_flickr30k_captions
from anglekit.errors import ConfigError
from anglekit.evaluation.encoders import encode_unique, rows
from anglekit.evaluation.tables import markdown_table

RETRIEVAL_COLUMNS = ("strict@5", "R@1", "R@5", "R@10", "MRR")


def _normalize(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def rank_with_faiss(index_vectors: np.ndarray, query_vectors: np.ndarray, k: int) -> np.ndarray:
    """Ids of the ``k`` nearest rows of ``index_vectors`` (inner product on normalised vectors) per query."""
    import faiss

    base = np.ascontiguousarray(_normalize(index_vectors))
    queries = np.ascontiguousarray(_normalize(query_vectors))
    index = faiss.IndexFlatIP(base.shape[1])
    index.add(base)
    _scores, ids = index.search(queries, k)
    return ids


def retrieval_metrics(ranked: np.ndarray, query_ids: Sequence[int], groups: Sequence[Sequence[int]], ks: Sequence[int] = (1, 5, 10)) -> dict[str, Any]:
    """Metrics from full rankings.

    ``ranked[q]`` lists index ids best first (all of them, or at least enough to find the first
    relevant one; a query whose relevant items are all missing from its row gets reciprocal rank 0);
    ``query_ids[q]`` is the id of the query's own caption in the index; ``groups[q]`` the ids of
    its image's captions (the query's included).
    """
    n = len(query_ids)
    strict = np.zeros(n, dtype=bool)
    strict_ex = np.zeros(n, dtype=bool)
    hits = {k: np.zeros(n, dtype=bool) for k in ks}
    frac = {k: np.zeros(n) for k in ks}
    rr = np.zeros(n)
    for q in range(n):
        row = np.asarray(ranked[q], dtype=np.int64)
        group = np.asarray(groups[q], dtype=np.int64)
        size = len(group)
        strict[q] = set(row[:size].tolist()) == set(group.tolist())
        others = row[row != int(query_ids[q])]
        relevant = group[group != int(query_ids[q])]
        is_rel = np.isin(others, relevant)
        strict_ex[q] = bool(is_rel[: len(relevant)].all()) and len(others) >= len(relevant)
        for k in ks:
            found = int(is_rel[:k].sum())
            hits[k][q] = found > 0
            frac[k][q] = found / len(relevant)
        first = np.flatnonzero(is_rel)
        rr[q] = 1.0 / (first[0] + 1) if len(first) else 0.0
    size = len(groups[0]) if len(groups) else 0
    out: dict[str, Any] = {f"strict@{size}": float(strict.mean() * 100), f"strict_excluding_query@{size - 1}": float(strict_ex.mean() * 100)}
    for k in ks:
        out[f"R@{k}"] = float(hits[k].mean() * 100)
        out[f"caption_recall@{k}"] = float(frac[k].mean() * 100)
    out["MRR"] = float(rr.mean() * 100)
    out["n_queries"] = n
    return out


def evaluate_retrieval(
    encode: Callable[..., np.ndarray], data_root: str | os.PathLike[str], *, split: str = "test", query_caption: int = 1, ks: Sequence[int] = (1, 5, 10)
) -> dict[str, Any]:
    """Run the Flickr30k caption retrieval experiment (see the module doc for the protocol)."""
    if not 1 <= query_caption <= 5:
        raise ConfigError(f"query_caption must be 1..5, got {query_caption}")
    data = load_flickr30k_captions(Path(data_root) / "flickr30k", split)
    flat = [c for caps in data.captions for c in caps]
    per = len(data.captions[0])
    vectors, index = encode_unique(encode, flat, desc="retrieval: encode")
    caption_vectors = rows(vectors, index, flat)
    query_ids = [i * per + (query_caption - 1) for i in range(data.n_images)]
    groups = [list(range(i * per, (i + 1) * per)) for i in range(data.n_images)]
    ranked = rank_with_faiss(caption_vectors, caption_vectors[query_ids], k=len(flat))
    metrics = retrieval_metrics(ranked, query_ids, groups, ks)
    scores = {"strict@5": metrics[f"strict@{per}"], **{f"R@{k}": metrics[f"R@{k}"] for k in ks}, "MRR": metrics["MRR"]}
    return {
        "suite": "retrieval",
        "metric": "percent of queries (MRR x 100); see 'protocol'",
        "protocol": {
            "index": f"all {len(flat)} {split} captions, L2-normalised, faiss IndexFlatIP",
            "queries": f"caption {query_caption} of each of the {data.n_images} images",
            "strict": "strict@5 counts the query caption: top-5 == the image's 5 captions (query included)",
            "recall_mrr": "R@k, caption_recall@k, MRR and strict_excluding_query@4 rank the other captions "
            "(the query caption removed); relevant = the image's 4 other captions; R@k = hit rate",
        },
        "columns": [*scores],
        "scores": scores,
        "details": metrics,
        "sources": list(data.sources),
    }


def retrieval_markdown(result: dict[str, Any], *, title: str = "model") -> str:
    cols = result["columns"]
    d = result["details"]
    return "\n".join(
        [
            "## Flickr30k caption retrieval (%)",
            "",
            markdown_table(["model", *cols], [[title, *[result["scores"][c] for c in cols]]]),
            "",
            f"- {result['protocol']['index']}; queries: {result['protocol']['queries']}.",
            f"- {result['protocol']['strict']}.",
            f"- {result['protocol']['recall_mrr']}.",
            f"- strict (query excluded) @4: {d['strict_excluding_query@4']:.2f}; caption recall@1/5/10: "
            f"{d['caption_recall@1']:.2f} / {d['caption_recall@5']:.2f} / {d['caption_recall@10']:.2f}.",
            "",
        ]
    )
