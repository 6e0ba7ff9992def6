"""Pair-similarity evaluation: Spearman and Pearson (x 100) of cosine similarity against gold."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from anglekit.errors import UndefinedScoreError

logger = logging.getLogger(__name__)

EncodeFn = Callable[[Sequence[str]], np.ndarray]
"""Anything that maps a list of texts to a float array of shape (len(texts), dim)."""


@dataclass(frozen=True)
class PairScores:
    spearman: float
    pearson: float
    n_pairs: int

    def as_dict(self) -> dict[str, float | int]:
        return {"spearman": self.spearman, "pearson": self.pearson, "n_pairs": self.n_pairs}


def paired_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two equally shaped matrices (zero rows give 0, not NaN)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"paired_cosine needs two (n, d) arrays of one shape, got {a.shape} and {b.shape}")
    num = np.einsum("ij,ij->i", a, b)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def check_scorable(gold: np.ndarray | Sequence[float], source: str | None = None) -> None:
    """An :class:`UndefinedScoreError` naming ``source`` (the data's file or spec) when no
    correlation can be computed over ``gold``: fewer than 2 pairs, or labels that are all equal.
    Cheap: call it when the data is read, before any encoding or training."""
    gold = np.asarray(gold, dtype=np.float64)
    where = f"{source}: " if source else ""
    if len(gold) < 2:
        raise UndefinedScoreError(f"{where}a correlation needs at least 2 pairs, got {len(gold)}")
    if np.all(gold == gold[0]):
        raise UndefinedScoreError(f"{where}the correlation is undefined: all {len(gold)} gold labels equal {gold[0]:g}; it needs labels that vary")


def correlation_scores(predicted: np.ndarray, gold: np.ndarray, *, source: str | None = None) -> PairScores:
    """Spearman's and Pearson's correlation x 100 between predicted similarities and gold labels
    (``source`` names the data in the error when they are undefined)."""
    predicted = np.asarray(predicted, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    if predicted.shape != gold.shape or predicted.ndim != 1:
        raise ValueError(f"predicted and gold must be 1-d of one length, got {predicted.shape} and {gold.shape}")
    check_scorable(gold, source)
    if np.all(predicted == predicted[0]):
        # A collapsed model (every pair scored alike) has no defined correlation: NaN, said once.
        logger.warning("all %d predicted similarities are equal (%g): the correlation is undefined (NaN)", len(gold), predicted[0])
        return PairScores(spearman=float("nan"), pearson=float("nan"), n_pairs=int(len(gold)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both inputs vary: scipy has nothing left to warn about
        spearman = float(stats.spearmanr(predicted, gold).statistic) * 100.0
        pearson = float(stats.pearsonr(predicted, gold).statistic) * 100.0
    return PairScores(spearman=spearman, pearson=pearson, n_pairs=int(len(gold)))


def evaluate_pairs(encode: EncodeFn, text1: Sequence[str], text2: Sequence[str], gold: np.ndarray, *, source: str | None = None) -> PairScores:
    """Encode both sides once (unique texts only) and correlate their cosine with ``gold``.

    ``source`` (the data's file or spec) is named in the error when the score is undefined,
    which is found out before anything is encoded."""
    if not (len(text1) == len(text2) == len(gold)):
        raise ValueError(f"text1, text2 and gold differ in length: {len(text1)}, {len(text2)}, {len(gold)}")
    check_scorable(gold, source)
    unique = list(dict.fromkeys([*text1, *text2]))
    index = {text: i for i, text in enumerate(unique)}
    vectors = np.asarray(encode(unique))
    if vectors.shape[0] != len(unique):
        raise ValueError(f"encoder returned {vectors.shape[0]} vectors for {len(unique)} texts")
    a = vectors[[index[t] for t in text1]]
    b = vectors[[index[t] for t in text2]]
    return correlation_scores(paired_cosine(a, b), np.asarray(gold), source=source)
