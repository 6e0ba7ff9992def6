"""Flickr30k retrieval: faiss metrics against a brute-force numpy computation; reader errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from anglekit.data.flickr import load_flickr30k_captions
from anglekit.errors import DataError
from anglekit.evaluation.baselines import HashingEncoder
from anglekit.evaluation.retrieval import evaluate_retrieval, rank_with_faiss, retrieval_metrics

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def brute_force(vectors: np.ndarray, n_images: int, per: int, query_caption: int = 0) -> dict[str, float]:
    """Independent reference: explicit loops over a dense cosine matrix."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    strict = strict_ex = 0
    hits = {1: 0, 5: 0, 10: 0}
    rr = 0.0
    for img in range(n_images):
        q = img * per + query_caption
        sims = unit @ unit[q]
        order = sorted(range(len(sims)), key=lambda i: -sims[i])
        own = set(range(img * per, (img + 1) * per))
        if set(order[:per]) == own:
            strict += 1
        others = [i for i in order if i != q]
        relevant = own - {q}
        if set(others[: per - 1]) == relevant:
            strict_ex += 1
        for k in hits:
            if any(i in relevant for i in others[:k]):
                hits[k] += 1
        for rank, i in enumerate(others, start=1):
            if i in relevant:
                rr += 1.0 / rank
                break
    n = n_images
    return {
        "strict@5": 100 * strict / n,
        "strict_excluding_query@4": 100 * strict_ex / n,
        "R@1": 100 * hits[1] / n,
        "R@5": 100 * hits[5] / n,
        "R@10": 100 * hits[10] / n,
        "MRR": 100 * rr / n,
    }


def toy_vectors(n_images: int = 30, per: int = 5, dim: int = 8, spread: float = 0.6, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_images, dim))
    return np.concatenate([c + spread * rng.normal(size=(per, dim)) for c in centres]).astype(np.float32)


@pytest.mark.parametrize("spread", [0.2, 0.6, 1.2])
def test_metrics_match_brute_force(spread: float) -> None:
    n, per = 30, 5
    vectors = toy_vectors(n, per, spread=spread)
    query_ids = [i * per for i in range(n)]
    groups = [list(range(i * per, (i + 1) * per)) for i in range(n)]
    ranked = rank_with_faiss(vectors, vectors[query_ids], k=len(vectors))
    got = retrieval_metrics(ranked, query_ids, groups)
    want = brute_force(vectors, n, per)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-9), key
    assert got["n_queries"] == n


def test_faiss_ranking_equals_numpy_argsort() -> None:
    vectors = toy_vectors(20, 5, spread=0.8, seed=3)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    ranked = rank_with_faiss(vectors, vectors[:7], k=len(vectors))
    np.testing.assert_array_equal(ranked, np.argsort(-(unit[:7] @ unit.T), axis=1, kind="stable"))


def test_caption_recall_is_fraction_of_four() -> None:
    # query 0 of image 0 retrieves, after itself, two of its captions then others
    ranked = np.array([[0, 1, 2, 5, 6, 3, 4, 7, 8, 9]])
    out = retrieval_metrics(ranked, [0], [[0, 1, 2, 3, 4]], ks=(1, 5))
    assert out["R@1"] == 100.0
    assert out["caption_recall@1"] == 25.0
    assert out["caption_recall@5"] == 75.0  # others[:5] = 1, 2, 5, 6, 3
    assert out["strict@5"] == 0.0
    assert out["MRR"] == 100.0


def write_flickr(root: Path, n: int = 12) -> Path:
    d = root / "flickr30k" / "Test"
    d.mkdir(parents=True)
    topics = [
        "dog grass running",
        "man guitar playing",
        "woman bike riding",
        "child ball kicking",
        "cat sofa sleeping",
        "boat lake sailing",
        "bird tree singing",
        "car street driving",
        "girl book reading",
        "chef kitchen cooking",
        "horse field galloping",
        "couple beach walking",
    ]
    for j in range(1, 6):
        lines = [f"a photo {topics[i % len(topics)]} view {j}" for i in range(n)]
        (d / f"test.{j}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_suite_on_a_toy_flickr(tmp_path: Path) -> None:
    root = write_flickr(tmp_path)
    result = evaluate_retrieval(HashingEncoder(512), root)
    assert result["columns"] == ["strict@5", "R@1", "R@5", "R@10", "MRR"]
    assert result["scores"]["R@1"] == 100.0  # each image's captions share its three topic words
    assert result["details"]["n_queries"] == 12


def test_misaligned_caption_files(tmp_path: Path) -> None:
    root = write_flickr(tmp_path)
    (root / "flickr30k" / "Test" / "test.3").write_text("one line\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.3: has 1 lines but .*test\.1 has 12; expected line-aligned"):
        load_flickr30k_captions(root / "flickr30k", "test")


def test_empty_caption_and_missing_file(tmp_path: Path) -> None:
    root = write_flickr(tmp_path)
    (root / "flickr30k" / "Test" / "test.2").write_text("x\n" * 5 + "\n" + "y\n" * 6, encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.2, row 6: empty caption"):
        load_flickr30k_captions(root / "flickr30k", "test")
    (root / "flickr30k" / "Test" / "test.5").unlink()
    with pytest.raises(DataError, match=r"test\.5: file not found"):
        load_flickr30k_captions(root / "flickr30k", "test")


@pytest.mark.skipif(not (DATA / "flickr30k").is_dir(), reason="../shared/data not present")
def test_real_flickr_test_split() -> None:
    data = load_flickr30k_captions(DATA / "flickr30k", "test")
    assert data.n_images == 1000
    assert all(len(c) == 5 for c in data.captions)
    assert data.image_ids[0].endswith(".jpg")
