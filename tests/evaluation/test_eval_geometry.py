"""Geometry suite: alignment and uniformity against loop references, saturation, the figure."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from anglekit.errors import ConfigError
from anglekit.evaluation.baselines import HashingEncoder
from anglekit.evaluation.geometry import alignment, bucket_of, evaluate_geometry, saturation_shares, uniformity


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def loop_alignment(x: np.ndarray, y: np.ndarray) -> float:
    total = 0.0
    for a, b in zip(x, y, strict=False):
        d = _unit(a) - _unit(b)
        total += float(sum(t * t for t in d))
    return total / len(x)


def loop_uniformity(x: np.ndarray, t: float = 2.0) -> float:
    values = []
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            d = _unit(x[i]) - _unit(x[j])
            values.append(math.exp(-t * float(d @ d)))
    return math.log(sum(values) / len(values))


def test_alignment_matches_loop() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 6)), rng.normal(size=(40, 6))
    assert alignment(x, y) == pytest.approx(loop_alignment(x, y), rel=1e-10)
    assert alignment(x, 3.0 * x) == pytest.approx(0.0, abs=1e-12)  # scale-invariant: normalised first


@pytest.mark.parametrize("block", [7, 2048])
def test_uniformity_matches_loop(block: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(33, 5))
    assert uniformity(x, block=block) == pytest.approx(loop_uniformity(x), rel=1e-10)
    assert uniformity(x, t=0.5, block=block) == pytest.approx(loop_uniformity(x, 0.5), rel=1e-10)


def test_uniformity_of_identical_vectors_is_zero() -> None:
    assert uniformity(np.ones((5, 3))) == pytest.approx(0.0, abs=1e-12)


def test_saturation_and_buckets() -> None:
    cos = np.array([0.95, -0.92, 0.5, 0.91, 0.0])
    out = saturation_shares(cos, 0.9)
    assert out == {"abs_above": 60.0, "above": 40.0, "below_negative": 20.0, "n_pairs": 5}
    assert bucket_of(np.array([0.0, 0.99, 1.0, 3.5, 4.0, 5.0])).tolist() == [0, 0, 1, 3, 4, 4]


def write_stsb(root: Path) -> Path:
    rng = np.random.default_rng(2)
    words = ["a", "man", "woman", "dog", "plays", "guitar", "runs", "in", "the", "park", "red", "car"]
    d = root / "senteval" / "STS" / "STSBenchmark"
    d.mkdir(parents=True)
    for split, n in (("train", 40), ("test", 30)):
        rows = []
        for i in range(n):
            a = " ".join(rng.choice(words, size=5))
            b = a if i % 3 == 0 else " ".join(rng.choice(words, size=5))
            score = 5.0 if a == b else rng.uniform(0, 3.9)
            rows.append(f"g\tf\ty\t{i}\t{score:.2f}\t{a}\t{b}")
        (d / f"sts-{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


def test_geometry_suite_writes_png(tmp_path: Path) -> None:
    root = write_stsb(tmp_path / "data")
    out = tmp_path / "out"
    result = evaluate_geometry(HashingEncoder(64), root, out_dir=out, title="hashing")
    png = out / "geometry.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["figure"] == str(png)
    assert result["scores"]["alignment"] == pytest.approx(0.0, abs=1e-9)  # positives are identical texts here
    assert result["scores"]["uniformity"] < 0
    sat = result["details"]["saturation"]
    assert sat["train"]["n_pairs"] == 40 and sat["test"]["n_pairs"] == 30
    assert sat["train"]["abs_above"] >= 100 * 14 / 40 - 1e-9  # the identical pairs have cos 1
    assert sum(b["n_pairs"] for b in result["details"]["cosine_by_gold_bucket"].values()) == 30
    assert not list(out.glob("*.tmp"))


def test_geometry_rejects_bad_threshold(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="saturation_threshold"):
        evaluate_geometry(HashingEncoder(8), write_stsb(tmp_path), saturation_threshold=1.5)
