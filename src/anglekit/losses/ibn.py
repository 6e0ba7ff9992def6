"""In-batch negatives (AnglE eq. 2) with explicit positives and identical-sentence detection.

For every pair i whose label is positive (``labels[i] >= positive_threshold``), the row of
logits ``cos(x_i, y_j) / tau`` over all j in the batch is trained with cross-entropy against
a soft target: j is a target when y_j is the same text as y_i (``ids2[j] == ids2[i]``, which
includes j = i) or the same text as x_i itself (``ids2[j] == ids1[i]``); a text identical to
the positive is never used as a negative. The target row is normalised to sum 1. The loss is
the mean over positive rows only; a batch without a positive row gives 0 (with a gradient
path). ``ids1`` / ``ids2`` are integer ids of the texts (same text, same id), made by the
collator, so duplicates are detected exactly rather than from embeddings.

Differences from the official angle-emb code, on purpose:

* What counts as positive. The official code keeps rows with ``int(label) != 0``; on 0-5 STS
  scores that makes every pair labelled 1.0 or more (and truncates e.g. 0.8 to 0) a positive.
  Here the threshold is explicit and must be set from the dataset's label range
  (1 for binary labels; e.g. 4.0 for 0-5 scores).
* Duplicates. Early official versions treat duplicate texts as negatives; later versions drop
  duplicate rows from the batch. Here they stay in the batch and become co-targets.
* Normalisation. The official code averages over every row of the batch (rows without a
  positive contribute 0 but still count); here the mean is over positive rows only.
* Candidates. Early official versions take the softmax over every other embedding of the
  interleaved batch (x's and y's alike); here, as in eq. 2, over the y_j of the batch.

A guide (``negative_mask``, :mod:`anglekit.losses.guide`) removes other candidates from row i's
softmax: those a guide model scores above the row's positive (likely false negatives). The two
rules stay distinct: identical texts are *targets* (pulled toward), guided candidates are left out
(neither pushed nor pulled), and a target is never left out.

``similarity="angle"`` replaces ``cos(x_i, y_j)`` by SimACE's angle similarity
``pi/2 - arccos(clip(cos))`` (radians; :mod:`anglekit.losses.angular`), the "+angle" extension
the SimACE paper suggests for AnglE's in-batch term. The default is the paper's cosine.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from anglekit.errors import ConfigError
from anglekit.losses._common import check_batch_vector, check_pair_batch, check_tau
from anglekit.losses.angular import check_similarity, similarity_matrix

__all__ = ["InBatchNegativeLoss", "in_batch_negative_loss", "ibn_targets"]


def _check_threshold(positive_threshold: float) -> float:
    if isinstance(positive_threshold, bool) or not isinstance(positive_threshold, (int, float)):
        raise ConfigError(f"positive_threshold must be a number, got {positive_threshold!r}")
    value = float(positive_threshold)
    if not math.isfinite(value):
        raise ConfigError(f"positive_threshold must be finite, got {positive_threshold!r}")
    return value


def ibn_targets(ids1: Tensor, ids2: Tensor, detect_duplicates: bool = True) -> Tensor:
    """bool [B, B]: candidate j is a target of row i (j = i, or with identical-sentence detection
    y_j the same text as y_i or as x_i)."""
    if detect_duplicates:
        return (ids2.unsqueeze(0) == ids2.unsqueeze(1)) | (ids2.unsqueeze(0) == ids1.unsqueeze(1))
    return torch.eye(ids2.shape[0], dtype=torch.bool, device=ids2.device)


def in_batch_negative_loss(
    x: Tensor,
    y: Tensor,
    labels: Tensor,
    ids1: Tensor,
    ids2: Tensor,
    *,
    tau: float = 0.05,
    positive_threshold: float,
    similarity: str = "cosine",
    detect_duplicates: bool = True,
    negative_mask: Tensor | None = None,
) -> Tensor:
    """In-batch negative loss (AnglE eq. 2) with soft targets for identical texts.

    Args:
        x, y: ``[B, D]`` embeddings of the first and second texts of each pair.
        labels: ``[B]`` labels; row i is positive when ``labels[i] >= positive_threshold``.
        ids1, ids2: ``[B]`` integer ids of the texts of x and y (same text, same id).
        tau: temperature > 0 for the logits ``cos(x_i, y_j) / tau``.
        positive_threshold: the smallest label that counts as positive.
        similarity: ``"cosine"`` (AnglE eq. 2) or ``"angle"`` (SimACE's angle similarity).
        detect_duplicates: identical-sentence detection (the default). False makes only j = i the
            target, so a text identical to the positive is a negative (the early official code;
            the paper's "without detection" ablation, about 0.18 lower on STS-B).
        negative_mask: optional bool ``[B, B]``: True leaves candidate j out of row i's softmax
            (a guide's false negatives); targets are never left out, whatever it says.

    Returns:
        A scalar: mean cross-entropy over positive rows, 0 when there is none.
    """
    tau = check_tau(tau)
    threshold = _check_threshold(positive_threshold)
    check_similarity(similarity)
    check_pair_batch(x, y)
    batch = x.shape[0]
    check_batch_vector(labels, batch, "labels")
    check_batch_vector(ids1, batch, "ids1")
    check_batch_vector(ids2, batch, "ids2")
    for name, ids in (("ids1", ids1), ("ids2", ids2)):
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise ValueError(f"{name} must be an integer tensor of text ids, got {ids.dtype}")
    device = x.device
    labels, ids1, ids2 = labels.to(device), ids1.to(device), ids2.to(device)

    logits = similarity_matrix(x, y, similarity) / tau  # [B, B]
    is_target = ibn_targets(ids1, ids2, detect_duplicates)
    left_out = None
    if negative_mask is not None:
        if negative_mask.dtype != torch.bool or negative_mask.shape != logits.shape:
            raise ValueError(f"negative_mask must be a bool tensor of shape {tuple(logits.shape)}, got {negative_mask.dtype} {tuple(negative_mask.shape)}")
        left_out = negative_mask.to(device) & ~is_target
        logits = logits.masked_fill(left_out, float("-inf"))
    log_probs = torch.log_softmax(logits, dim=-1)
    if left_out is not None:
        log_probs = log_probs.masked_fill(left_out, 0.0)  # never a target: 0 * -inf would be NaN
    target = is_target.to(log_probs.dtype)
    target = target / target.sum(dim=-1, keepdim=True)  # row i always contains j = i
    row_loss = -(target * log_probs).sum(dim=-1)  # [B]

    positive = (labels >= threshold).to(row_loss.dtype)
    return (row_loss * positive).sum() / positive.sum().clamp_min(1.0)


class InBatchNegativeLoss(nn.Module):
    """Module wrapper of :func:`in_batch_negative_loss`; paper tau = 0.05."""

    def __init__(self, positive_threshold: float, tau: float = 0.05, similarity: str = "cosine", detect_duplicates: bool = True) -> None:
        super().__init__()
        self.positive_threshold = _check_threshold(positive_threshold)
        self.tau = check_tau(tau)
        self.similarity = check_similarity(similarity)
        self.detect_duplicates = bool(detect_duplicates)

    def forward(self, x: Tensor, y: Tensor, labels: Tensor, ids1: Tensor, ids2: Tensor) -> Tensor:
        """Scalar loss; see :func:`in_batch_negative_loss`."""
        return in_batch_negative_loss(
            x,
            y,
            labels,
            ids1,
            ids2,
            tau=self.tau,
            positive_threshold=self.positive_threshold,
            similarity=self.similarity,
            detect_duplicates=self.detect_duplicates,
        )

    def extra_repr(self) -> str:
        return f"positive_threshold={self.positive_threshold}, tau={self.tau}, similarity={self.similarity!r}, detect_duplicates={self.detect_duplicates}"
