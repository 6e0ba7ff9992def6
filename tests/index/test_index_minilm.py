"""Recall@10 of HNSW, int8 and binary against exact search on real embeddings: all-MiniLM-L6-v2
over Flickr30k test captions (slow: a few thousand sentences through a real model)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

DATA = Path(os.environ.get("ANGLEKIT_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (DATA / "flickr30k").is_dir(), reason="../shared/data not present")]


def test_recall_at_10_on_minilm_embeddings() -> None:
    import importlib.util

    from anglekit.index import VectorIndex
    from anglekit.model.embedder import Embedder
    from anglekit.model.offline import minilm_dir

    lines = []
    for j in range(1, 6):
        lines += (DATA / "flickr30k" / "Test" / f"test.{j}").read_text(encoding="utf-8").splitlines()
    docs, queries = lines[:4000], lines[4000:4200]
    model = Embedder.from_pretrained(minilm_dir(), device="cpu")
    doc_vectors = model.encode_document(docs, 128, normalize=True)
    query_vectors = model.encode_query(queries, 128, normalize=True)
    exact = VectorIndex.create(model)
    exact.add_vectors(range(len(docs)), doc_vectors)
    truth, _ = exact.search_vectors(query_vectors, 10)
    cases = [("exact", "int8", None, 0.97), ("exact", "binary", None, 0.95)]
    for backend in ("usearch", "faiss"):
        if importlib.util.find_spec(backend) is not None:
            cases += [("hnsw", "none", backend, 0.95), ("hnsw", "int8", backend, 0.95), ("hnsw", "binary", backend, 0.9)]
    recalls = {}
    for kind, quantize, backend, bound in cases:
        index = VectorIndex.create(model, kind=kind, quantize=quantize, backend=backend)
        index.add_vectors(range(len(docs)), doc_vectors)
        ids, _ = index.search_vectors(query_vectors, 10)
        recalls[(kind, quantize, backend)] = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, truth, strict=False)]))
        assert recalls[(kind, quantize, backend)] >= bound, recalls
    print(recalls)
