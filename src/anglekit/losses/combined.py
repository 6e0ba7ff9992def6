"""The combined AnglE objective (AnglE eq. 8) with a typed configuration and named presets.

``L = w_cos * L_cos + w_ibn * L_ibn + w_angle * L_angle``: the cosine objective (eq. 1), in-batch
negatives (eq. 2) and the angle objective (eq. 3-7). Only components with a weight > 0 are
computed, and each is returned by name (unweighted) so that it can be logged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from torch import Tensor, nn

from anglekit.errors import ConfigError
from anglekit.losses._common import check_tau, preset_with_overrides
from anglekit.losses.angle import ANGLE_VARIANTS, angle_score_for
from anglekit.losses.angular import check_similarity
from anglekit.losses.ibn import in_batch_negative_loss
from anglekit.losses.ranking import ranking_loss
from anglekit.losses.scores import cosine_score

__all__ = ["PRESETS", "AnglEObjective", "ObjectiveConfig", "ObjectiveOutput"]

COMPONENTS = ("cosine", "ibn", "angle")


@dataclass(frozen=True)
class ObjectiveConfig:
    """Weights, temperatures and choices of the combined objective (defaults: the paper's).

    ``positive_threshold`` is the smallest label counted as a positive by the in-batch
    negative term (e.g. 1 for binary labels); it has no safe default and must be set, from the
    dataset's label range, whenever ``ibn_weight > 0``. ``ibn_similarity`` is ``cosine`` (the
    paper's eq. 2) or ``angle`` (SimACE's pi/2 - arccos(cos) inside the in-batch term);
    ``ibn_detect_duplicates=False`` turns identical-sentence detection off (Table 4's ablation).
    """

    cosine_weight: float = 1.0
    ibn_weight: float = 1.0
    angle_weight: float = 1.0
    cosine_tau: float = 0.05
    ibn_tau: float = 0.05
    angle_tau: float = 1.0
    angle_variant: str = "reference"
    positive_threshold: float | None = None
    ibn_similarity: str = "cosine"
    ibn_detect_duplicates: bool = True

    def __post_init__(self) -> None:
        for name in ("cosine_weight", "ibn_weight", "angle_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{name} must be a number >= 0, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        for name in ("cosine_tau", "ibn_tau", "angle_tau"):
            object.__setattr__(self, name, check_tau(getattr(self, name), name))
        if not any(getattr(self, f"{c}_weight") > 0 for c in COMPONENTS):
            raise ConfigError("at least one of cosine_weight, ibn_weight, angle_weight must be > 0")
        if self.angle_variant not in ANGLE_VARIANTS:
            valid = ", ".join(sorted(ANGLE_VARIANTS))
            raise ConfigError(f"unknown angle_variant {self.angle_variant!r}; valid variants: {valid}")
        check_similarity(self.ibn_similarity, "ibn_similarity")
        if not isinstance(self.ibn_detect_duplicates, bool):
            raise ConfigError(f"ibn_detect_duplicates must be true or false, got {self.ibn_detect_duplicates!r}")
        threshold = self.positive_threshold
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
                raise ConfigError(f"positive_threshold must be a number, got {threshold!r}")
            if not math.isfinite(threshold):
                raise ConfigError(f"positive_threshold must be finite, got {threshold!r}")
            object.__setattr__(self, "positive_threshold", float(threshold))

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> ObjectiveConfig:
        """The preset ``name`` from :data:`PRESETS` with some fields replaced.

        Raises ConfigError for an unknown preset, an unknown field or an invalid value.
        """
        return preset_with_overrides(PRESETS, name, overrides, kind="objective")


PRESETS: dict[str, ObjectiveConfig] = {
    # AnglE eq. 8 as in the paper: w = (1, 1, 1), tau = (0.05, 0.05, 1.0).
    "paper": ObjectiveConfig(),
    "paper-phase": ObjectiveConfig(angle_variant="phase"),
    # angle-emb's default training arguments: cosine_w=0, ibn_w=1, angle_w=0.02, every scale 20.
    "official-defaults": ObjectiveConfig(
        cosine_weight=0.0,
        ibn_weight=1.0,
        angle_weight=0.02,
        cosine_tau=0.05,
        ibn_tau=0.05,
        angle_tau=0.05,
    ),
    "cosine": ObjectiveConfig(cosine_weight=1.0, ibn_weight=0.0, angle_weight=0.0),
    "angle": ObjectiveConfig(cosine_weight=0.0, ibn_weight=0.0, angle_weight=1.0),
    "angle-phase": ObjectiveConfig(cosine_weight=0.0, ibn_weight=0.0, angle_weight=1.0, angle_variant="phase"),
    "ibn": ObjectiveConfig(cosine_weight=0.0, ibn_weight=1.0, angle_weight=0.0),
    # The paper preset with SimACE's angle similarity inside the in-batch-negative term (the
    # "+angle" extension the SimACE paper suggests); not a preset of either paper.
    "paper-ibn-angle": ObjectiveConfig(ibn_similarity="angle"),
}


@dataclass(frozen=True)
class ObjectiveOutput:
    """The total loss and each computed component, unweighted, by name."""

    loss: Tensor
    components: dict[str, Tensor]


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
    ) -> ObjectiveOutput:
        """Loss for pairs ``x``, ``y`` [B, D] with labels [B] and text ids [B] (for ibn)."""
        cfg = self.config
        components: dict[str, Tensor] = {}
        if cfg.cosine_weight > 0:
            components["cosine"] = ranking_loss(cosine_score(x, y), labels, cfg.cosine_tau)
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
            )
        if cfg.angle_weight > 0:
            components["angle"] = ranking_loss(self._angle_score(x, y), labels, cfg.angle_tau)
        weights = {"cosine": cfg.cosine_weight, "ibn": cfg.ibn_weight, "angle": cfg.angle_weight}
        terms = [weights[name] * value for name, value in components.items()]
        loss = terms[0]
        for term in terms[1:]:
            loss = loss + term
        return ObjectiveOutput(loss=loss, components=components)

    def extra_repr(self) -> str:
        return repr(self.config)
