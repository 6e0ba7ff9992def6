"""Typed configuration and presets of the distillation objectives, without torch.

:class:`DistillConfig` weighs three distillation terms (:mod:`anglekit.losses.distill`) and, on
the same n-tuple rows, the AnglE terms (cosine, in-batch negatives, angle: their knobs are the
AnglE family's, declared once on :class:`~anglekit.losses.configs.ObjectiveConfig`). The presets
turn one distillation term on; ``--objective margin-mse --ibn-weight 1`` composes it with the
in-batch-negative term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from anglekit.config import setting
from anglekit.config.fields import same_setting
from anglekit.errors import ConfigError
from anglekit.losses._common import ANGLE_VARIANTS, check_guide, check_similarity, check_tau, preset_with_overrides
from anglekit.losses.configs import ObjectiveConfig

__all__ = ["DISTILL_PRESETS", "DISTILL_SIMILARITIES", "DISTILL_TERMS", "DistillConfig"]

DISTILL_SIMILARITIES = ("cosine", "dot")
"""The student's score of (anchor, document): cosine, or the dot product (sentence-transformers'
default for MarginMSELoss and DistillKLDivLoss)."""

DISTILL_TERMS = ("margin_mse", "distill_kl", "embed_distill")
"""The distillation terms, by the name they are logged under (``loss_margin_mse``, ...)."""

_ANGLE_TERMS = ("cosine", "ibn", "angle")


@dataclass(frozen=True)
class DistillConfig:
    """Weights of the distillation terms and of the AnglE terms on the same rows, and their settings.

    The AnglE terms see each n-tuple row as the labelled pairs (anchor, positive, 1) and
    (anchor, negative_k, 0), as the AnglE pair objectives do on n-tuples (docs/objectives.md).
    """

    margin_mse_weight: float = setting(
        0.0, minimum=0, help="Distillation objectives: weight of the margin-MSE term (the student's positive-negative margin against the teacher's)."
    )
    distill_kl_weight: float = setting(
        0.0, minimum=0, help="Distillation objectives: weight of the KL term (teacher's softmax over a row's positive and negatives against the student's)."
    )
    embed_distill_weight: float = setting(
        0.0, minimum=0, help="Distillation objectives: weight of the term matching the student's cosine matrix over the batch to the teacher model's."
    )
    distill_similarity: str = setting(
        "cosine", choices=DISTILL_SIMILARITIES, help="margin-mse, distill-kl: the student's score, cosine (default) or dot (sentence-transformers' default)."
    )
    distill_temperature: float = setting(
        0.05, minimum=0, exclusive_minimum=True, help="distill-kl: the student's temperature (its scores are divided by it; preset 0.05)."
    )
    teacher_temperature: float | None = setting(
        None, minimum=0, exclusive_minimum=True, help="distill-kl: the teacher scores' temperature (default: --distill-temperature)."
    )
    distill_teacher: str | None = setting(
        None,
        metavar="MODEL",
        help="embed-distill: the teacher model (hub id, folder, pypi:NAME) whose cosine matrix over each batch the student learns; any width.",
    )
    cosine_weight: float = same_setting(ObjectiveConfig, "cosine_weight", default=0.0)
    ibn_weight: float = same_setting(ObjectiveConfig, "ibn_weight", default=0.0)
    angle_weight: float = same_setting(ObjectiveConfig, "angle_weight", default=0.0)
    cosine_tau: float = same_setting(ObjectiveConfig, "cosine_tau")
    ibn_tau: float = same_setting(ObjectiveConfig, "ibn_tau")
    angle_tau: float = same_setting(ObjectiveConfig, "angle_tau")
    angle_variant: str = same_setting(ObjectiveConfig, "angle_variant")
    ibn_similarity: str = same_setting(ObjectiveConfig, "ibn_similarity")
    ibn_detect_duplicates: bool = same_setting(ObjectiveConfig, "ibn_detect_duplicates")
    guide: str | None = same_setting(ObjectiveConfig, "guide")
    guide_margin: float = same_setting(ObjectiveConfig, "guide_margin")
    guide_margin_strategy: str = same_setting(ObjectiveConfig, "guide_margin_strategy")

    def __post_init__(self) -> None:
        for name in [f"{t}_weight" for t in (*DISTILL_TERMS, *_ANGLE_TERMS)]:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
            object.__setattr__(self, name, float(value))
        if not any(getattr(self, f"{t}_weight") > 0 for t in (*DISTILL_TERMS, *_ANGLE_TERMS)):
            raise ConfigError("a distillation objective needs a weight > 0: margin_mse_weight, distill_kl_weight, embed_distill_weight (or an AnglE term's)")
        if self.distill_similarity not in DISTILL_SIMILARITIES:
            raise ConfigError(f"unknown distill_similarity {self.distill_similarity!r}; valid values: {', '.join(DISTILL_SIMILARITIES)}")
        object.__setattr__(self, "distill_temperature", check_tau(self.distill_temperature, "distill_temperature"))
        if self.teacher_temperature is not None:
            object.__setattr__(self, "teacher_temperature", check_tau(self.teacher_temperature, "teacher_temperature"))
        if self.distill_teacher is not None and (not isinstance(self.distill_teacher, str) or not self.distill_teacher.strip()):
            raise ConfigError(f"distill_teacher must be a model name or folder, got {self.distill_teacher!r}")
        for name in ("cosine_tau", "ibn_tau", "angle_tau"):
            object.__setattr__(self, name, check_tau(getattr(self, name), name))
        if self.angle_variant not in ANGLE_VARIANTS:
            raise ConfigError(f"unknown angle_variant {self.angle_variant!r}; valid variants: {', '.join(sorted(ANGLE_VARIANTS))}")
        check_similarity(self.ibn_similarity, "ibn_similarity")
        guide = check_guide(self.guide, self.guide_margin, self.guide_margin_strategy)
        for name, value in zip(("guide", "guide_margin", "guide_margin_strategy"), guide, strict=True):
            object.__setattr__(self, name, value)

    @property
    def teacher_tau(self) -> float:
        """The teacher scores' temperature: ``teacher_temperature``, else the student's."""
        return self.teacher_temperature if self.teacher_temperature is not None else self.distill_temperature

    def angle_config(self) -> ObjectiveConfig | None:
        """The AnglE terms' config (n-tuple pairs are labelled 1 and 0: positive_threshold 1), or
        None when every AnglE weight is 0."""
        if not any(getattr(self, f"{t}_weight") > 0 for t in _ANGLE_TERMS):
            return None
        fields = (
            "cosine_weight",
            "ibn_weight",
            "angle_weight",
            "cosine_tau",
            "ibn_tau",
            "angle_tau",
            "angle_variant",
            "ibn_similarity",
            "ibn_detect_duplicates",
            "guide",
            "guide_margin",
            "guide_margin_strategy",
        )
        return ObjectiveConfig(positive_threshold=1.0, **{name: getattr(self, name) for name in fields})

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> DistillConfig:
        """The preset ``name`` from :data:`DISTILL_PRESETS` with some fields replaced."""
        return preset_with_overrides(DISTILL_PRESETS, name, overrides, kind="objective")


DISTILL_PRESETS: dict[str, DistillConfig] = {
    # Hofstaetter et al. 2020: MSE between the student's and the teacher's positive-negative margins.
    "margin-mse": DistillConfig(margin_mse_weight=1.0),
    # KL(teacher || student) over each row's softmax of (positive, negatives), temperature 0.05.
    "distill-kl": DistillConfig(distill_kl_weight=1.0),
    # The student's cosine matrix (anchors x every document of the batch) against a teacher model's.
    "embed-distill": DistillConfig(embed_distill_weight=1.0),
}
