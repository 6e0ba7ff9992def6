#!/usr/bin/env python
"""Search at scale: queries/s and recall@10 of anglekit's indexes against faiss and sentence-transformers.

Documents: the vectors of ``bench_encode_scale.py`` (``--shards DIR``: all-MiniLM-L6-v2, document
role, checked against the model's fingerprint), or ``--n`` sentences of its corpus embedded here.
Queries: the distinct first sentences of STS-B test (not in the corpus), ``--queries`` of them.
Ground truth: a brute-force float32 scan written here (torch matmul + topk, independent of the
index code). Every method searches all queries in one batch; queries/s excludes building.

recall@10 counts a returned document as a hit when its true cosine reaches the 10th best true
cosine (the corpus repeats sentences under distinct ids, so exact ties are common); ``id_recall``
is the plain overlap of ids. Methods: anglekit exact / int8 / binary (scan; codes rescored with
the float vectors), anglekit HNSW (usearch) float / int8 / binary; peers: faiss IndexFlatIP,
sentence-transformers ``semantic_search`` (torch), ``quantize_embeddings`` + ``semantic_search_faiss``
(ubinary, exact, rescored) and + ``semantic_search_usearch`` (int8, exact, rescored).

    .venv/bin/python benchmarks/bench_search.py --shards runs/bench_encode_scale/shards   # the real run (lead), after bench_encode_scale
    .venv/bin/python benchmarks/bench_search.py --n 5000 --queries 200                    # smoke

Results: a table, and benchmarks/results/bench_search.json.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))
import common  # noqa: E402

METHODS = ("exact", "exact-int8", "exact-binary", "hnsw", "hnsw-int8", "hnsw-binary", "faiss-flat", "st-semantic-search",
           "st-faiss-ubinary", "st-usearch-int8")  # fmt: skip


def brute_force(docs: np.ndarray, queries: np.ndarray, k: int, block: int = 100_000) -> tuple[np.ndarray, np.ndarray]:
    """(scores, rows) of the exact top k, float32 matmul in blocks (the reference)."""
    import torch

    q = torch.from_numpy(queries)
    best_s = torch.full((len(queries), 0), -2.0)
    best_r = torch.zeros((len(queries), 0), dtype=torch.int64)
    for start in range(0, len(docs), block):
        s = q @ torch.from_numpy(np.ascontiguousarray(docs[start : start + block])).T
        top_s, top_i = torch.topk(s, min(k, s.shape[1]), dim=1)
        best_s, keep = torch.topk(torch.cat([best_s, top_s], 1), min(k, best_s.shape[1] + top_s.shape[1]), dim=1)
        best_r = torch.gather(torch.cat([best_r, top_i + start], 1), 1, keep)
    return best_s.numpy(), best_r.numpy()


def recalls(rows: list[list[int]], truth_rows: np.ndarray, truth_scores: np.ndarray, docs: np.ndarray, queries: np.ndarray, k: int) -> tuple[float, float]:
    """(tie-aware recall@k, id recall@k) of result rows against the exact top k."""
    tie, ids = [], []
    for q, got in enumerate(rows):
        got = [int(r) for r in got[:k] if int(r) >= 0]
        true = docs[got] @ queries[q] if got else np.zeros(0)
        tie.append(min(k, int((true >= truth_scores[q, k - 1] - 1e-5).sum())) / k)
        ids.append(len(set(got) & set(truth_rows[q].tolist())) / k)
    return float(np.mean(tie)), float(np.mean(ids))


def _vectors(args: argparse.Namespace, model: Any) -> np.ndarray:
    if args.shards:
        from anglekit.corpus import open_shards

        shards = open_shards(args.shards)
        if shards.manifest["model_fingerprint"] != model.fingerprint():
            raise SystemExit(f"{args.shards}: encoded by another model than {args.model}")
        _, docs = shards.load()
        return docs[: args.n] if args.n else docs
    from bench_encode_scale import distinct_sentences

    sentences = distinct_sentences()
    texts = [sentences[i % len(sentences)] for i in range(args.n)]
    print(f"embedding {len(texts)} documents here (use --shards to reuse bench_encode_scale's)", file=sys.stderr)
    return np.asarray(model.encode(texts, 128, normalize=True, role="document"), dtype=np.float32)


def _anglekit(model: Any, docs: np.ndarray, **settings: Any) -> tuple[Callable[[np.ndarray, int], list[list[int]]], float]:
    from anglekit.index import IndexSettings, VectorIndex
    from anglekit.index.store import model_record

    record = getattr(_anglekit, "record", None) or model_record(model)  # the fingerprint once, not in each build
    _anglekit.record = record  # type: ignore[attr-defined]
    started = time.perf_counter()
    index = VectorIndex(record, IndexSettings(store_texts=False, **settings), model)
    index.add_vectors(np.arange(len(docs)), docs)
    index.search_vectors(docs[:1], 1)  # codes and graph are built on first need: part of the build
    built = time.perf_counter() - started

    def search(queries: np.ndarray, k: int) -> list[list[int]]:
        ids, _ = index.search_vectors(queries, k)
        return [[int(i) for i in row] for row in ids]

    return search, built


def _faiss_flat(docs: np.ndarray) -> tuple[Callable[[np.ndarray, int], list[list[int]]], float]:
    import faiss

    started = time.perf_counter()
    index = faiss.IndexFlatIP(docs.shape[1])
    index.add(np.ascontiguousarray(docs))
    built = time.perf_counter() - started
    return (lambda queries, k: index.search(queries, k)[1].tolist()), built


def _st_semantic_search(docs: np.ndarray) -> tuple[Callable[[np.ndarray, int], list[list[int]]], float]:
    import torch
    from sentence_transformers import util

    corpus = torch.from_numpy(docs)

    def search(queries: np.ndarray, k: int) -> list[list[int]]:
        hits = util.semantic_search(torch.from_numpy(queries), corpus, top_k=k)
        return [[h["corpus_id"] for h in row] for row in hits]

    return search, 0.0


def _st_quantized(docs: np.ndarray, precision: str, multiplier: int) -> tuple[Callable[[np.ndarray, int], list[list[int]]], float]:
    from sentence_transformers.util.quantization import quantize_embeddings, semantic_search_faiss, semantic_search_usearch

    started = time.perf_counter()
    if precision == "ubinary":
        codes = quantize_embeddings(docs, "ubinary")
        run = semantic_search_faiss
        extra: dict[str, Any] = {"corpus_precision": "ubinary"}
    else:
        ranges = np.vstack([docs.min(axis=0), docs.max(axis=0)])
        codes = quantize_embeddings(docs, "int8", ranges=ranges)
        run = semantic_search_usearch
        extra = {"corpus_precision": "int8", "ranges": ranges}
    _, _, index = run(docs[:1], corpus_embeddings=codes, top_k=1, output_index=True, exact=True, **extra)
    built = time.perf_counter() - started

    def search(queries: np.ndarray, k: int) -> list[list[int]]:
        hits, _ = run(queries, corpus_index=index, top_k=k, rescore=True, rescore_multiplier=multiplier, exact=True, **extra)[:2]
        return [[h["corpus_id"] for h in row] for row in hits]

    return search, built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=Path, default=None, help="documents: a folder written by bench_encode_scale.py / anglekit encode --output-dir")
    parser.add_argument("--n", type=int, default=0, help="documents: embed this many here (or keep the first N of --shards)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--rescore-multiplier", type=int, default=4)
    parser.add_argument("--expansion-search", type=int, default=128, help="HNSW efSearch")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated subset of {', '.join(METHODS)}")
    parser.add_argument("--model", default="pypi:all-minilm-l6-v2")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "bench_search.json")
    args = parser.parse_args(argv)
    if not args.shards and not args.n:
        parser.error("give --shards DIR (from bench_encode_scale.py) or --n N")
    import torch

    from anglekit.model.embedder import Embedder

    model = Embedder.from_pretrained(args.model, device="cpu")
    docs = _vectors(args, model)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    s1, _, _ = common.read_stsb("test")
    query_texts = list(dict.fromkeys(s1))[: args.queries]
    queries = np.asarray(model.encode(query_texts, 128, normalize=True, role="query"), dtype=np.float32)
    started = time.perf_counter()
    truth_scores, truth_rows = brute_force(docs, queries, args.k)
    print(f"{len(docs):,} documents x {docs.shape[1]} dims, {len(queries)} queries, k={args.k}, {torch.get_num_threads()} threads; "
          f"reference scan {time.perf_counter() - started:.1f} s")  # fmt: skip

    builders: dict[str, Callable[[], tuple[Callable[[np.ndarray, int], list[list[int]]], float]]] = {
        "exact": lambda: _anglekit(model, docs),
        "exact-int8": lambda: _anglekit(model, docs, quantize="int8", rescore_multiplier=args.rescore_multiplier),
        "exact-binary": lambda: _anglekit(model, docs, quantize="binary", rescore_multiplier=args.rescore_multiplier),
        "hnsw": lambda: _anglekit(model, docs, kind="hnsw", expansion_search=args.expansion_search),
        "hnsw-int8": lambda: _anglekit(model, docs, kind="hnsw", quantize="int8", rescore_multiplier=args.rescore_multiplier, expansion_search=args.expansion_search),
        "hnsw-binary": lambda: _anglekit(model, docs, kind="hnsw", quantize="binary", rescore_multiplier=args.rescore_multiplier, expansion_search=args.expansion_search),
        "faiss-flat": lambda: _faiss_flat(docs),
        "st-semantic-search": lambda: _st_semantic_search(docs),
        "st-faiss-ubinary": lambda: _st_quantized(docs, "ubinary", args.rescore_multiplier),
        "st-usearch-int8": lambda: _st_quantized(docs, "int8", args.rescore_multiplier),
    }  # fmt: skip
    rows: dict[str, dict[str, float]] = {}
    print(f"{'method':<22} {'build s':>9} {'search s':>9} {'queries/s':>10} {'recall@10':>10} {'id recall':>10}")
    for name in [m.strip() for m in args.methods.split(",") if m.strip()]:
        if name not in builders:
            parser.error(f"unknown method {name!r}; known: {', '.join(METHODS)}")
        try:
            search, built = builders[name]()
        except ImportError as exc:
            print(f"{name:<22} skipped: {exc}")
            continue
        search(queries[:2], args.k)  # warm-up
        started = time.perf_counter()
        result = search(queries, args.k)
        seconds = time.perf_counter() - started
        tie, plain = recalls(result, truth_rows, truth_scores, docs, queries, args.k)
        rows[name] = {"build_seconds": built, "search_seconds": seconds, "queries_per_s": len(queries) / seconds, "recall_at_10": tie, "id_recall_at_10": plain}
        print(f"{name:<22} {built:>9.1f} {seconds:>9.2f} {len(queries) / seconds:>10.1f} {tie:>10.4f} {plain:>10.4f}", flush=True)
        del search
        gc.collect()
    result = {"documents": len(docs), "dim": int(docs.shape[1]), "queries": len(queries), "k": args.k, "threads": torch.get_num_threads(),
              "rescore_multiplier": args.rescore_multiplier, "expansion_search": args.expansion_search, "model": args.model,
              "source": str(args.shards) if args.shards else f"{args.n} embedded here", "peak_rss_mb": common.peak_rss_mb(), "rows": rows,
              "versions": common.versions("anglekit", "torch", "faiss-cpu", "usearch", "sentence-transformers")}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"date": datetime.date.today().isoformat(), "command": common.invocation(), **result}, indent=2) + "\n")
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
