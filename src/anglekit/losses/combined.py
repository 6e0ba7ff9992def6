"""The combined AnglE objective (AnglE eq. 8) with a typed configuration and named presets.

``L = w_cos * L_cos + w_ibn * L_ibn + w_angle * L_angle``: the cosine objective (eq. 1), in-batch
negatives (eq. 2) and the angle objective (eq. 3-7). Only components with a weight > 0 are
computed, and each is returned by name (unweighted) so that it can be logged. Its typed
configuration and presets (:class:`ObjectiveConfig`, :data:`PRESETS`) live, torch-free, in
:mod:`anglekit.losses.configs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from anglekit.errors import ConfigError
from anglekit.losses.angle import angle_score_for
from anglekit.losses.configs import PRESETS, ObjectiveConfig
from anglekit.losses.guide import GuideVectors, guide_mask, masked_share
from anglekit.losses.ibn import ibn_targets, in_batch_negative_loss
from anglekit.losses.ranking import ranking_loss
from anglekit.losses.scores import cosine_score

__all__ = ["PRESETS", "AnglEObjective", "ObjectiveConfig", "ObjectiveOutput"]


@dataclass(frozen=True)
class ObjectiveOutput:
    """The total loss and each computed component, unweighted, by name; ``stats``: what the batch
    measured besides (``guide_masked``: the share of in-batch negatives a guide left out), logged
    but never differentiated."""

    loss: Tensor
    components: dict[str, Tensor]
    stats: dict[str, Tensor] = field(default_factory=dict)


class AnglEObjective(nn.Module):
    """``w_cos * L_cos + w_ibn * L_ibn + w_angle * L_angle`` (AnglE eq. 8)."""

    batch_kind: ClassVar[str] = "pairs"
    """What the trainer feeds it: labelled pairs (contrastive objectives take sentences or triplets)."""

    def __init__(self, config: ObjectiveConfig | None = None) -> None:
        super().__init__()
        self.config = config if config is not None else ObjectiveConfig()
        self._angle_score = angle_score_for(self.config.angle_variant)

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> AnglEObjective:
        """An objective built from ``ObjectiveConfig.from_preset(name, **overrides)``."""
        return cls(ObjectiveConfig.from_preset(name, **overrides))

    def forward(
        self,
        x: Tensor,
        y: Tensor,
        labels: Tensor,
        ids1: Tensor | None = None,
        ids2: Tensor | None = None,
        groups: Tensor | None = None,
        *,
        guide: GuideVectors | None = None,
    ) -> ObjectiveOutput:
        """Loss for pairs ``x``, ``y`` [B, D] with labels [B] and text ids [B] (for ibn).

        ``groups`` [B] (n-tuple rows expanded into pairs: the row of each pair) limits the cosine
        and angle terms' ranking to pairs of one group; the in-batch term sees every ``y`` of the
        batch as a candidate (every positive and every negative) whatever the groups. ``guide``:
        a guide's embeddings of ``x`` (anchors) and ``y`` (positives): the in-batch term leaves out
        the candidates it scores above each pair's own ``y`` (:mod:`anglekit.losses.guide`).
        """
        cfg = self.config
        components: dict[str, Tensor] = {}
        stats: dict[str, Tensor] = {}
        if cfg.cosine_weight > 0:
            components["cosine"] = ranking_loss(cosine_score(x, y), labels, cfg.cosine_tau, groups)
        if cfg.ibn_weight > 0:
            if ids1 is None or ids2 is None:
                raise ValueError(
                    "the in-batch negative term needs ids1 and ids2 (integer text ids from the "
                    "collator) to detect identical sentences; pass them or set ibn_weight=0"
                )
            if cfg.positive_threshold is None:
                raise ConfigError(
                    "positive_threshold must be set when ibn_weight > 0: it decides which "
                    "labels count as positive (e.g. 1 for binary labels, a cut-off for scores)"
                )
            mask = None if guide is None else self._guided(x, labels, ids1, ids2, guide, stats)
            components["ibn"] = in_batch_negative_loss(
                x,
                y,
                labels,
                ids1,
                ids2,
                tau=cfg.ibn_tau,
                positive_threshold=cfg.positive_threshold,
                similarity=cfg.ibn_similarity,
                detect_duplicates=cfg.ibn_detect_duplicates,
                negative_mask=mask,
            )
        if cfg.angle_weight > 0:
            components["angle"] = ranking_loss(self._angle_score(x, y), labels, cfg.angle_tau, groups)
        weights = {"cosine": cfg.cosine_weight, "ibn": cfg.ibn_weight, "angle": cfg.angle_weight}
        terms = [weights[name] * value for name, value in components.items()]
        loss = terms[0]
        for term in terms[1:]:
            loss = loss + term
        return ObjectiveOutput(loss=loss, components=components, stats=stats)

    def _guided(self, x: Tensor, labels: Tensor, ids1: Tensor, ids2: Tensor, guide: GuideVectors, stats: dict[str, Tensor]) -> Tensor:
        """The guide's mask [B, B] for the in-batch term (identical-text targets never masked), its
        share of the negatives the positive rows meet in ``stats``."""
        cfg = self.config
        device = x.device
        targets = ibn_targets(ids1.to(device), ids2.to(device), cfg.ibn_detect_duplicates)
        rows = torch.arange(x.shape[0], device=device)
        mask = guide_mask(guide.anchors, guide.positives, rows, margin=cfg.guide_margin, strategy=cfg.guide_margin_strategy, protect=targets)
        assert cfg.positive_threshold is not None
        counted = (labels.to(device) >= cfg.positive_threshold).unsqueeze(1)
        stats["guide_masked"] = masked_share(mask, counted & ~targets)
        return mask

    def extra_repr(self) -> str:
        return repr(self.config)
