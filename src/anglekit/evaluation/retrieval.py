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
* the same ranking scored as a retrieval set (:func:`anglekit.data.beir.flickr30k_retrieval`) with
  the usual IR metrics (:mod:`anglekit.metrics.ir`: ``ndcg@10``, ``mrr@10``, ``recall@1/10/100``,
  ``map@100``, fractions) under ``sets``.

With ``data`` (``anglekit eval --suite retrieval --data DIR|NAME``) the suite scores those sets
instead: BEIR folders or hub names (:func:`anglekit.data.beir.read_beir`), or ``flickr30k``;
``search="hnsw"`` ranks through an HNSW graph instead of the exact scan.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.data.beir import RetrievalSet, flickr30k_retrieval, load_retrieval_set
from anglekit.data.flickr import load_flickr30k_captions
from anglekit.errors import ConfigError
from anglekit.evaluation.encoders import encode_unique, for_role, role_of, rows
from anglekit.evaluation.tables import markdown_table
from anglekit.metrics.ir import IR_METRICS, SEARCHES, evaluate_retrieval_set, score_vectors

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


def retrieval_set(spec: str, data_root: str | os.PathLike[str] | None, *, split: str = "test", query_caption: int = 1) -> RetrievalSet:
    """The retrieval set a ``--data`` spec names (:func:`anglekit.data.beir.load_retrieval_set`)."""
    return load_retrieval_set(spec, data_root, split=split, query_caption=query_caption)


def evaluate_sets(encode: Callable[..., np.ndarray], sets: Sequence[RetrievalSet], *, search: str = "exact") -> dict[str, Any]:
    """The retrieval suite over given sets: per set its metrics; ``scores``: the mean over the sets."""
    queries, documents = for_role(encode, "query"), for_role(encode, "document")
    results = {data.name: evaluate_retrieval_set(documents, data, search=search, encode_queries=queries) for data in sets}
    scores = {m: float(np.mean([r["metrics"][m] for r in results.values()])) for m in IR_METRICS}
    return {
        "suite": "retrieval",
        "metric": "fractions in [0, 1] (sentence-transformers' InformationRetrievalEvaluator, binary relevance)",
        "protocol": {
            "search": f"{search} cosine search, ties by ascending document id",
            "sets": list(results),
            "prompts": {"queries": role_of(queries), "documents": role_of(documents)},
        },
        "columns": list(IR_METRICS),
        "scores": scores,
        "sets": {name: r["metrics"] for name, r in results.items()},
        "details": results,
        "sources": [s for r in results.values() for s in r["sources"]],
    }


def evaluate_retrieval(
    encode: Callable[..., np.ndarray],
    data_root: str | os.PathLike[str],
    *,
    split: str = "test",
    query_caption: int = 1,
    ks: Sequence[int] = (1, 5, 10),
    data: Sequence[str] = (),
    search: str = "exact",
) -> dict[str, Any]:
    """Run the Flickr30k caption retrieval experiment (see the module doc for the protocol), or,
    with ``data``, score those retrieval sets."""
    if not 1 <= query_caption <= 5:
        raise ConfigError(f"query_caption must be 1..5, got {query_caption}")
    if search not in SEARCHES:
        raise ConfigError(f"retrieval.search must be one of {', '.join(SEARCHES)}, got {search!r}")
    if data:
        return evaluate_sets(encode, [retrieval_set(spec, data_root, split=split, query_caption=query_caption) for spec in data], search=search)
    captions = load_flickr30k_captions(Path(data_root) / "flickr30k", split)
    flat = [c for caps in captions.captions for c in caps]
    per = len(captions.captions[0])
    vectors, index = encode_unique(encode, flat, desc="retrieval: encode")
    caption_vectors = rows(vectors, index, flat)
    query_ids = [i * per + (query_caption - 1) for i in range(captions.n_images)]
    groups = [list(range(i * per, (i + 1) * per)) for i in range(captions.n_images)]
    ranked = rank_with_faiss(caption_vectors, caption_vectors[query_ids], k=len(flat))
    metrics = retrieval_metrics(ranked, query_ids, groups, ks)
    as_set = flickr30k_retrieval(Path(data_root) / "flickr30k", split, query_caption=query_caption)
    ir = score_vectors(as_set, caption_vectors, caption_vectors[query_ids], search=search)
    scores = {"strict@5": metrics[f"strict@{per}"], **{f"R@{k}": metrics[f"R@{k}"] for k in ks}, "MRR": metrics["MRR"]}
    return {
        "suite": "retrieval",
        "metric": "percent of queries (MRR x 100); see 'protocol'",
        "protocol": {
            "index": f"all {len(flat)} {split} captions, L2-normalised, faiss IndexFlatIP",
            "queries": f"caption {query_caption} of each of the {captions.n_images} images",
            "strict": "strict@5 counts the query caption: top-5 == the image's 5 captions (query included)",
            "recall_mrr": "R@k, caption_recall@k, MRR and strict_excluding_query@4 rank the other captions "
            "(the query caption removed); relevant = the image's 4 other captions; R@k = hit rate",
        },
        "columns": [*scores],
        "scores": scores,
        "details": metrics,
        "sets": {as_set.name: ir["metrics"]},
        "sources": list(captions.sources),
    }


def _sets_table(result: dict[str, Any]) -> str:
    rows_ = [[name, *(100 * metrics[m] for m in IR_METRICS)] for name, metrics in result["sets"].items()]
    return markdown_table(["set", *IR_METRICS], rows_)


def retrieval_markdown(result: dict[str, Any], *, title: str = "model") -> str:
    if "strict@5" not in result["scores"]:
        return "\n".join([f"## Retrieval ({title}; metrics x 100)", "", _sets_table(result), "", f"- {result['protocol']['search']}.", ""])
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
            *(
                ["As a retrieval set (caption 1 queries the 4 other captions of its image among all captions; x 100):", "", _sets_table(result), ""]
                if result.get("sets")
                else []
            ),
        ]
    )
