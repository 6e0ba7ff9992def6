"""A guide against false negatives in in-batch negatives (GISTEmbed, Solatorio 2024).

In-batch negatives treat every other row's positive as a negative of row i. When the batch holds
a text that answers row i's anchor as well as its own positive does (a false negative), the loss
pushes the anchor away from a correct answer. A *guide* (a second, frozen embedding model, or the
student's own embeddings, detached) scores the anchor against every candidate; the candidates it
scores above the row's positive are left out of that row's softmax (neither pushed nor pulled)::

    s_ij = cos(guide(anchor_i), guide(candidate_j))      threshold_i = s_i,pos(i) - margin          (absolute)
                                                         threshold_i = s_i,pos(i) - |s_i,pos(i)| * margin  (relative)
    masked_ij = s_ij > threshold_i,  never the row's own positive (nor a column ``protect`` marks)

This is sentence-transformers' ``GISTEmbedLoss`` mask (its ``margin_strategy`` and ``margin``, the
strict ``>``, the row's positive protected) on the blocks anglekit's objectives have: anchor against
the batch's positives and hard negatives. GISTEmbedLoss by default also adds the anchor-anchor and
positive-positive blocks as further negatives (``contrast_anchors``, ``contrast_positives``; each
masked with the same threshold); anglekit's objectives do not contrast anchors with anchors, so the
guided objective equals GISTEmbedLoss with both switched off (tests/test_guide.py checks the value
and the gradients, and the mask on all three blocks).

The AnglE in-batch term already has its own rule for identical texts: a candidate with the same
text as the positive (or the anchor) is a *target* (pulled toward, DESIGN.md). The guide only
removes *negatives*: a target is never masked (``protect``), so the two stay distinct.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from anglekit.losses._common import GUIDE_MARGIN_STRATEGIES, check_guide_margin

__all__ = [
    "GUIDE_MARGIN_STRATEGIES",
    "GuideTable",
    "GuideVectors",
    "check_guide_margin",
    "guide_mask",
    "guide_threshold",
    "masked_share",
]


def guide_threshold(positive_scores: Tensor, margin: float = 0.0, strategy: str = "absolute") -> Tensor:
    """Each row's threshold [B] from the guide's score of its positive [B]."""
    margin, strategy = check_guide_margin(margin, strategy)
    if strategy == "absolute":
        return positive_scores - margin
    return positive_scores - positive_scores.abs() * margin


def _cosines(a: Tensor, b: Tensor) -> Tensor:
    return F.normalize(a.float(), dim=-1) @ F.normalize(b.float(), dim=-1).T


def guide_mask(
    guide_anchors: Tensor,
    guide_candidates: Tensor,
    positive_columns: Tensor,
    *,
    margin: float = 0.0,
    strategy: str = "absolute",
    protect: Tensor | None = None,
) -> Tensor:
    """The candidates the guide removes: bool [B, C], True = leave out of row i's softmax.

    Args:
        guide_anchors: ``[B, D']`` the guide's embeddings of the anchors.
        guide_candidates: ``[C, D']`` the guide's embeddings of the candidates (positives, then
            hard negatives, in the objective's column order).
        positive_columns: ``[B]`` the column of each row's own positive (its threshold; never masked).
        margin, strategy: see :func:`guide_threshold`.
        protect: optional bool ``[B, C]``: columns never masked (the AnglE term's identical-text targets).
    """
    if guide_anchors.dim() != 2 or guide_candidates.dim() != 2 or guide_anchors.shape[-1] != guide_candidates.shape[-1]:
        raise ValueError(f"expected guide anchors [B, D'] and candidates [C, D'], got {tuple(guide_anchors.shape)} and {tuple(guide_candidates.shape)}")
    batch, columns = guide_anchors.shape[0], guide_candidates.shape[0]
    if positive_columns.shape != (batch,):
        raise ValueError(f"positive_columns must be [{batch}], got {tuple(positive_columns.shape)}")
    with torch.no_grad():
        scores = _cosines(guide_anchors.detach(), guide_candidates.detach())  # [B, C]
        positives = positive_columns.to(scores.device).long()
        threshold = guide_threshold(scores.gather(1, positives.unsqueeze(1)).squeeze(1), margin, strategy)
        mask = scores > threshold.unsqueeze(1)
        mask &= ~F.one_hot(positives, columns).bool()
        if protect is not None:
            if protect.shape != mask.shape or protect.dtype != torch.bool:
                raise ValueError(f"protect must be a bool tensor of shape {tuple(mask.shape)}, got {protect.dtype} {tuple(protect.shape)}")
            mask &= ~protect.to(mask.device)
    return mask


def masked_share(mask: Tensor, eligible: Tensor) -> Tensor:
    """The share of ``eligible`` candidates (bool, same shape: the negatives the rows that count
    would meet) that ``mask`` removes; 0 when none is eligible."""
    eligible = eligible.to(mask.device)
    total = eligible.sum()
    return (mask & eligible).sum().float() / total.clamp_min(1).float()


@dataclass(frozen=True)
class GuideVectors:
    """The guide's embeddings of one batch, laid out as the student's: ``anchors`` [B, D'],
    ``positives`` [P, D'] and, where the batch has them, ``negatives`` ([H, D'] or [H, n, D']).

    Not a tensor on purpose: Matryoshka cuts the student's embeddings to each width and must leave
    the guide's (another model, another width) as they are."""

    anchors: Tensor
    positives: Tensor
    negatives: Tensor | None = None


@dataclass(frozen=True)
class GuideTable:
    """A guide model's embeddings of the training data, computed once before training: the
    distinct texts' ``vectors`` [T, D'] and, per training row, where each of its cells is among
    them (``cells`` [N, k]: column 0 the anchor or first text, 1 the positive or second text, then
    the negatives; -1 in empty padding slots)."""

    vectors: Tensor
    cells: Tensor

    def __post_init__(self) -> None:
        if self.vectors.dim() != 2 or self.cells.dim() != 2 or self.cells.shape[1] < 2:
            raise ValueError(f"guide table: vectors [T, D'] and cells [N, k >= 2], got {tuple(self.vectors.shape)} and {tuple(self.cells.shape)}")

    def lookup(self, rows: Tensor) -> Tensor:
        """The guide's vectors of training ``rows`` [B] laid out as a batch's texts are embedded:
        every row's first cell, every row's second, then the filled cells of the other columns row
        by row (the pair, triplet and n-tuple collators' order)."""
        cells = self.cells[rows.cpu().long()]
        rest = cells[:, 2:]
        index = torch.cat([cells[:, 0], cells[:, 1], rest[rest >= 0]])
        return self.vectors[index]
