"""Contrastive objectives: SimCSE's InfoNCE (unsupervised and with hard negatives) and SimACE.

For a batch of B anchors a_i with positives p_i (and optionally hard negatives h_i), row i of the
logits runs over the candidates ``[p_1 .. p_P]`` (and ``[h_1 .. h_H]``)::

    logit(i, p_j) = (s(a_i, p_j) - m * [j is i's positive]) / tau
    logit(i, h_j) =  s(a_i, h_j) / tau + log(w) * [j is i's own hard negative]
    L = mean_i  -log softmax_i(logits)[i's positive]

* ``similarity="cosine"``, m = 0, tau = 0.05: SimCSE (unsupervised with dropout views as
  positives; supervised with NLI entailments as positives and contradictions as hard negatives).
* ``similarity="angle"``: s = pi/2 - arccos(clip(cos)) (:mod:`anglekit.losses.angular`) with an
  angular margin m on the positive only: SimACE (paper: m = 10 degrees, tau 0.05-0.06).

Margin. ``margin_degrees`` is an angle: it is converted to radians and subtracted from the
positive's angle similarity, so the positive must beat every negative by m degrees of angle.
It applies to the angle similarity only: on a cosine a margin in degrees has no meaning (an
additive cosine margin, CosFace/AM-softmax, is a different method that neither paper uses), so a
non-zero margin with ``similarity="cosine"`` is a ConfigError. With m = 0 SimACE is InfoNCE on the
plain angle score. A negative margin is refused too.

Hard-negative weight. SimCSE's ``--hard_negative_weight`` is added to the logit of each row's own
hard negative (only that one, not the other rows' hard negatives) after the division by the
temperature; its code notes "weights are actually logits of weights" and defaults to 0. Here the
argument is the weight itself: ``w`` multiplies that candidate's ``exp(logit)``, i.e. ``log(w)``
is added, so ``w = 1`` (the default) is SimCSE's default 0 and SimCSE's value ``h`` is
``w = exp(h)``. ``w`` must be a finite number > 0.

Multi-process ready. Nothing is written in place; ``positives`` / ``hard_negatives`` may hold more
rows than ``anchors`` (e.g. gathered from all processes): anchor i's positive and own hard
negative are row ``offset + i`` of them. ``negative_mask`` ([B, P] or [B, P + H], True = leave
that candidate out of the softmax) removes false negatives, e.g. a text identical to the anchor's
positive; it may never mask the positive itself.

Several hard negatives per row (n-tuples: anchor, positive, negative_1..negative_n).
``hard_negatives`` may be ``[H, n, D]``: row ``offset + i`` holds anchor i's own n negatives, and
every anchor meets every negative of the batch (all H x n of them, flattened row by row after the
positives). ``hard_negative_weight`` applies to each of a row's own n negatives. Rows with fewer
negatives are padded (any vectors) and ``negative_valid`` ([H, n] bool, False = padding) removes
the padding from every row's softmax, so a padded batch gives the loss of the unpadded candidates.
``[H, D]`` is the one-negative case (n = 1).

The typed configuration and presets (:class:`ContrastiveConfig`, :data:`CONTRASTIVE_PRESETS`) live,
torch-free, in :mod:`anglekit.losses.configs`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from anglekit.losses._common import check_tau
from anglekit.losses.angular import check_similarity, similarity_matrix
from anglekit.losses.combined import ObjectiveOutput
from anglekit.losses.configs import BATCH_KINDS, CONTRASTIVE_PRESETS, ContrastiveConfig, check_margin, check_weight
from anglekit.losses.guide import GuideVectors, guide_mask, masked_share

__all__ = [
    "BATCH_KINDS",
    "CONTRASTIVE_PRESETS",
    "ContrastiveConfig",
    "ContrastiveObjective",
    "InfoNCELoss",
    "duplicate_negative_mask",
    "info_nce_loss",
]


def _check_candidates(anchors: Tensor, positives: Tensor, offset: int) -> None:
    """A ValueError unless ``anchors`` [B, D] and ``positives`` [P, D] fit, with P >= offset + B."""
    if anchors.dim() != 2 or positives.dim() != 2 or anchors.shape[-1] != positives.shape[-1]:
        raise ValueError(f"expected anchors [B, D] and positives [P, D], got {tuple(anchors.shape)} and {tuple(positives.shape)}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be an integer >= 0, got {offset!r}")
    batch, n_pos = anchors.shape[0], positives.shape[0]
    if batch == 0:
        raise ValueError("empty batch: no anchors")
    if n_pos < offset + batch:
        raise ValueError(f"positives has {n_pos} rows; anchors at offset {offset} need at least {offset + batch}")


def _hard_negative_logits(anchors: Tensor, hard_negatives: Tensor, targets: Tensor, n_pos: int, tau: float, similarity: str, weight: float,
                          negative_valid: Tensor | None, offset: int) -> tuple[Tensor, Tensor | None]:  # fmt: skip
    """(logits [B, H * n] of the hard negatives, each row's own weighted by ``weight``; the padding
    mask [B, P + H * n] from ``negative_valid``, or None)."""
    batch, device = anchors.shape[0], anchors.device
    if hard_negatives.dim() not in (2, 3) or hard_negatives.shape[-1] != anchors.shape[-1]:
        raise ValueError(f"expected hard_negatives [H, D] or [H, n, D], got {tuple(hard_negatives.shape)}")
    n_neg = hard_negatives.shape[0]
    per_row = 1 if hard_negatives.dim() == 2 else hard_negatives.shape[1]
    if n_neg < offset + batch:
        raise ValueError(f"hard_negatives has {n_neg} rows; anchors at offset {offset} need at least {offset + batch}")
    if per_row == 0:
        raise ValueError("hard_negatives has 0 negatives per row; pass None for no hard negatives")
    flat = hard_negatives.reshape(n_neg * per_row, hard_negatives.shape[-1])
    negative_logits = similarity_matrix(anchors, flat, similarity) / tau  # [B, H * n], row by row
    if weight != 1.0:
        own_negative = F.one_hot(targets, n_neg).to(anchors.dtype).repeat_interleave(per_row, dim=1)
        negative_logits = negative_logits + own_negative * math.log(weight)
    padding = None
    if negative_valid is not None:
        if negative_valid.dtype != torch.bool or negative_valid.numel() != n_neg * per_row or negative_valid.shape[0] != n_neg:
            raise ValueError(f"negative_valid must be a bool tensor of shape {(n_neg, per_row)}, got {negative_valid.dtype} {tuple(negative_valid.shape)}")
        padding = ~negative_valid.reshape(1, n_neg * per_row).to(device)
        padding = torch.cat([torch.zeros(1, n_pos, dtype=torch.bool, device=device), padding], dim=1).expand(batch, -1)
    return negative_logits, padding


def info_nce_loss(
    anchors: Tensor,
    positives: Tensor,
    hard_negatives: Tensor | None = None,
    *,
    tau: float = 0.05,
    similarity: str = "cosine",
    margin_degrees: float = 0.0,
    hard_negative_weight: float = 1.0,
    offset: int = 0,
    negative_mask: Tensor | None = None,
    negative_valid: Tensor | None = None,
) -> Tensor:
    """InfoNCE over in-batch candidates (SimCSE; SimACE with ``similarity="angle"``).

    Args:
        anchors: ``[B, D]`` embeddings.
        positives: ``[P, D]`` candidates, P >= offset + B; row ``offset + i`` is anchor i's positive.
        hard_negatives: optional ``[H, D]`` or ``[H, n, D]`` extra candidates, H >= offset + B; row
            ``offset + i`` is anchor i's own hard negative(s) (those ``hard_negative_weight`` applies to).
        tau: temperature > 0.
        similarity: ``"cosine"`` or ``"angle"`` (pi/2 - arccos(clip(cos)), radians).
        margin_degrees: angular margin subtracted from the positive (angle similarity only).
        hard_negative_weight: w > 0; ``log(w)`` is added to each row's own hard-negative logit.
        offset: where this batch's rows start inside ``positives`` / ``hard_negatives``.
        negative_mask: optional bool ``[B, P]`` or ``[B, P + H * n]``: True leaves a candidate out.
        negative_valid: optional bool ``[H, n]`` (or ``[H]``): False marks a padding negative, left
            out of every row's softmax.

    Returns:
        A scalar: the mean over anchors of the cross-entropy of the positive.
    """
    tau = check_tau(tau)
    check_similarity(similarity)
    margin = check_margin(margin_degrees, similarity)
    weight = check_weight(hard_negative_weight)
    _check_candidates(anchors, positives, offset)
    batch, n_pos = anchors.shape[0], positives.shape[0]
    device = anchors.device
    targets = torch.arange(offset, offset + batch, device=device)
    own = F.one_hot(targets, n_pos).to(anchors.dtype)  # [B, P], 1 at each anchor's positive
    logits = similarity_matrix(anchors, positives, similarity) / tau
    if margin:
        logits = logits - own * (math.radians(margin) / tau)
    padding: Tensor | None = None
    if hard_negatives is not None:
        negative_logits, padding = _hard_negative_logits(anchors, hard_negatives, targets, n_pos, tau, similarity, weight, negative_valid, offset)
        logits = torch.cat([logits, negative_logits], dim=1)
    elif negative_valid is not None:
        raise ValueError("negative_valid applies to hard_negatives, and none were given")
    if negative_mask is not None:
        if negative_mask.dtype != torch.bool or negative_mask.shape != logits.shape:
            raise ValueError(f"negative_mask must be a bool tensor of shape {tuple(logits.shape)}, got {negative_mask.dtype} {tuple(negative_mask.shape)}")
        negative_mask = negative_mask.to(device)
        if bool(negative_mask.gather(1, targets.unsqueeze(1)).any()):
            raise ValueError("negative_mask masks a positive; it may only remove negatives")
        logits = torch.where(negative_mask, torch.full_like(logits, float("-inf")), logits)
    if padding is not None:
        logits = torch.where(padding, torch.full_like(logits, float("-inf")), logits)
    return F.cross_entropy(logits, targets)


def duplicate_negative_mask(anchor_ids: Tensor, positive_ids: Tensor, negative_ids: Tensor | None = None, *, offset: int = 0) -> Tensor:
    """Candidates that are false negatives: the same text as the anchor or as its positive.

    ``anchor_ids`` [B], ``positive_ids`` [P] and ``negative_ids`` [H] (or [H, n], flattened row by
    row like the negatives) are integer text ids (same text, same id). Returns a bool
    ``[B, P (+ H * n)]`` mask for :func:`info_nce_loss`; the positive itself (column ``offset + i``)
    is never masked.
    """
    batch = anchor_ids.shape[0]
    own_positive = positive_ids[offset : offset + batch]
    keys = torch.stack([anchor_ids, own_positive], dim=1)  # [B, 2]
    columns = [positive_ids] if negative_ids is None else [positive_ids, negative_ids.reshape(-1)]
    candidates = torch.cat(columns)  # [P (+ H)]
    same = (candidates.unsqueeze(0).unsqueeze(-1) == keys.unsqueeze(1)).any(dim=-1)  # [B, P (+ H)]
    targets = torch.arange(offset, offset + batch, device=same.device)
    is_target = F.one_hot(targets, same.shape[1]).bool()
    return same & ~is_target


class InfoNCELoss(nn.Module):
    """Module wrapper of :func:`info_nce_loss` with fixed settings."""

    def __init__(
        self,
        tau: float = 0.05,
        similarity: str = "cosine",
        margin_degrees: float = 0.0,
        hard_negative_weight: float = 1.0,
    ) -> None:
        super().__init__()
        self.tau = check_tau(tau)
        self.similarity = check_similarity(similarity)
        self.margin_degrees = check_margin(margin_degrees, self.similarity)
        self.hard_negative_weight = check_weight(hard_negative_weight)

    def forward(
        self,
        anchors: Tensor,
        positives: Tensor,
        hard_negatives: Tensor | None = None,
        *,
        offset: int = 0,
        negative_mask: Tensor | None = None,
        negative_valid: Tensor | None = None,
    ) -> Tensor:
        """Scalar loss; see :func:`info_nce_loss`."""
        return info_nce_loss(
            anchors,
            positives,
            hard_negatives,
            tau=self.tau,
            similarity=self.similarity,
            margin_degrees=self.margin_degrees,
            hard_negative_weight=self.hard_negative_weight,
            offset=offset,
            negative_mask=negative_mask,
            negative_valid=negative_valid,
        )

    def extra_repr(self) -> str:
        return f"tau={self.tau}, similarity={self.similarity!r}, margin_degrees={self.margin_degrees}, hard_negative_weight={self.hard_negative_weight}"


class ContrastiveObjective(nn.Module):
    """InfoNCE with a typed config; returns :class:`ObjectiveOutput` with one named component.

    ``batch_kind`` tells the trainer what to feed: ``sentences`` (it makes two dropout views of
    each sentence) or ``triplets``.
    """

    batch_kinds: ClassVar[tuple[str, ...]] = BATCH_KINDS

    def __init__(self, config: ContrastiveConfig | None = None) -> None:
        super().__init__()
        self.config = config if config is not None else ContrastiveConfig()

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> ContrastiveObjective:
        return cls(ContrastiveConfig.from_preset(name, **overrides))

    @property
    def batch_kind(self) -> str:
        return self.config.batch_kind

    def forward(
        self,
        anchors: Tensor,
        positives: Tensor,
        hard_negatives: Tensor | None = None,
        *,
        anchor_ids: Tensor | None = None,
        positive_ids: Tensor | None = None,
        negative_ids: Tensor | None = None,
        offset: int = 0,
        negative_valid: Tensor | None = None,
        guide: GuideVectors | None = None,
    ) -> ObjectiveOutput:
        """Loss for anchors [B, D], positives [P, D] (and hard negatives [H, D] or [H, n, D], with
        ``negative_valid`` [H, n] marking padding negatives False).

        With ``mask_duplicates`` and text ids given, candidates identical in text to the anchor
        or its positive are left out of the softmax. ``guide``: a guide's embeddings of the same
        anchors, positives and hard negatives: the candidates it scores above each anchor's
        positive are left out too (GISTEmbed, :mod:`anglekit.losses.guide`).
        """
        cfg = self.config
        stats: dict[str, Tensor] = {}
        mask = None
        if cfg.mask_duplicates and anchor_ids is not None and positive_ids is not None:
            if hard_negatives is not None and negative_ids is None:
                raise ValueError("negative_ids are needed with hard_negatives when anchor/positive ids are given")
            mask = duplicate_negative_mask(
                anchor_ids.to(anchors.device),
                positive_ids.to(anchors.device),
                None if hard_negatives is None else negative_ids.to(anchors.device),  # type: ignore[union-attr]
                offset=offset,
            )
        if guide is not None:
            mask = self._guided(anchors, guide, mask, negative_valid, offset, stats)
        loss = info_nce_loss(
            anchors,
            positives,
            hard_negatives,
            tau=cfg.tau,
            similarity=cfg.similarity,
            margin_degrees=cfg.margin_degrees,
            hard_negative_weight=cfg.hard_negative_weight,
            offset=offset,
            negative_mask=mask,
            negative_valid=negative_valid,
        )
        return ObjectiveOutput(loss=loss, components={cfg.component: loss}, stats=stats)

    def _guided(self, anchors: Tensor, guide: GuideVectors, duplicates: Tensor | None, negative_valid: Tensor | None, offset: int,
                stats: dict[str, Tensor]) -> Tensor:  # fmt: skip
        """The duplicate mask (if any) joined with the guide's, over positives then hard negatives;
        the share of the real negatives the guide removed (beyond the duplicates) in ``stats``."""
        columns = [guide.positives]
        if guide.negatives is not None:
            columns.append(guide.negatives.reshape(-1, guide.negatives.shape[-1]))
        candidates = torch.cat(columns)
        device = anchors.device
        targets = torch.arange(offset, offset + anchors.shape[0], device=device)
        guided = guide_mask(guide.anchors, candidates, targets, margin=self.config.guide_margin, strategy=self.config.guide_margin_strategy).to(device)
        eligible = ~F.one_hot(targets, candidates.shape[0]).bool()
        if duplicates is not None:
            eligible &= ~duplicates
        if negative_valid is not None:
            real = torch.cat([torch.ones(guide.positives.shape[0], dtype=torch.bool, device=device), negative_valid.reshape(-1).to(device)])
            eligible &= real.unsqueeze(0)
        stats["guide_masked"] = masked_share(guided, eligible)
        return guided if duplicates is None else guided | duplicates

    def extra_repr(self) -> str:
        return repr(self.config)
