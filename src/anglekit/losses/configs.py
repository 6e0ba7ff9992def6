"""Typed configurations and presets of the built-in objective families, without torch.

:class:`ObjectiveConfig` (the AnglE pair objectives, :mod:`anglekit.losses.combined`) and
:class:`ContrastiveConfig` (SimCSE, SimACE: :mod:`anglekit.losses.contrastive`). A field declared
with :func:`anglekit.config.setting` is a *knob* of its family: a flag and a YAML key of
``anglekit train`` (its key, e.g. ``contrastive_tau``, may differ from the field's name); the
other fields are set from Python only. The registry (:mod:`anglekit.losses.registry`) lists the
knobs when the command line is built, which is why nothing here imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from anglekit.config import setting
from anglekit.config.fields import same_setting
from anglekit.errors import ConfigError
from anglekit.losses._common import ANGLE_VARIANTS, GUIDE_MARGIN_STRATEGIES, check_guide, check_similarity, check_tau, preset_with_overrides

__all__ = ["BATCH_KINDS", "COMPONENTS", "CONTRASTIVE_PRESETS", "PRESETS", "ContrastiveConfig", "ObjectiveConfig", "check_margin", "check_weight"]

COMPONENTS = ("cosine", "ibn", "angle")
"""The terms of the combined AnglE objective (eq. 8), in order."""

BATCH_KINDS = ("sentences", "triplets")
"""What a contrastive objective consumes: ``sentences`` (unsupervised: the positive of each
sentence is a second dropout view of it) or ``triplets`` (anchor, positive[, hard negative])."""


@dataclass(frozen=True)
class ObjectiveConfig:
    """Weights, temperatures and choices of the combined objective (defaults: the paper's).

    ``positive_threshold`` is the smallest label counted as a positive by the in-batch
    negative term (e.g. 1 for binary labels); it has no safe default and must be set, from the
    dataset's label range, whenever ``ibn_weight > 0``. ``ibn_similarity`` is ``cosine`` (the
    paper's eq. 2) or ``angle`` (SimACE's pi/2 - arccos(cos) inside the in-batch term);
    ``ibn_detect_duplicates=False`` turns identical-sentence detection off (Table 4's ablation).
    """

    cosine_weight: float = setting(1.0, minimum=0, help="Override the preset's weight w1 of the cosine term (paper eq. 8).")
    ibn_weight: float = setting(1.0, minimum=0, help="Override the preset's weight w2 of the in-batch-negative term.")
    angle_weight: float = setting(1.0, minimum=0, help="Override the preset's weight w3 of the angle term.")
    cosine_tau: float = setting(0.05, minimum=0, exclusive_minimum=True, help="Override the cosine term's temperature (0.05 = scale 20).")
    ibn_tau: float = setting(0.05, minimum=0, exclusive_minimum=True, help="Override the in-batch-negative temperature.")
    angle_tau: float = setting(1.0, minimum=0, exclusive_minimum=True, help="Override the angle term's temperature (paper: 1.0).")
    angle_variant: str = setting("reference", help="reference (the official code's score) or phase (the paper's angle difference).")
    positive_threshold: float | None = None
    ibn_similarity: str = setting(
        "cosine",
        help="AnglE objectives: cosine (the paper) or angle (SimACE's pi/2 - arccos(cos)) inside the in-batch-negative term.",
    )
    ibn_detect_duplicates: bool = setting(
        True,
        help="AnglE objectives: identical-sentence detection in the in-batch-negative term (default on); "
        "--no-ibn-detect-duplicates makes a text identical to the positive a negative (the paper's ablation).",
    )
    guide: str | None = setting(
        None,
        metavar="MODEL",
        help="In-batch negatives: a guide model (hub id, folder, pypi:NAME) whose scores leave out the in-batch candidates it ranks "
        "above a row's positive (GISTEmbed's false-negative guard); the student's own name guides with its current embeddings, detached.",
    )
    guide_margin: float = setting(
        0.0,
        minimum=-2,
        maximum=2,
        help="--guide: lower each row's threshold by this margin (0: leave out only candidates the guide scores above the positive; "
        "negative: only those well above it; -2..2, the span of a cosine).",
    )
    guide_margin_strategy: str = setting(
        "absolute", choices=GUIDE_MARGIN_STRATEGIES, help="--guide: the margin is absolute (positive - margin) or relative (positive - |positive| * margin)."
    )

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
        guide = check_guide(self.guide, self.guide_margin, self.guide_margin_strategy)
        for name, value in zip(("guide", "guide_margin", "guide_margin_strategy"), guide, strict=True):
            object.__setattr__(self, name, value)
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


def check_margin(margin_degrees: float, similarity: str) -> float:
    """The angular margin in degrees, in [0, 180) and only with the angle similarity; ConfigError otherwise."""
    if isinstance(margin_degrees, bool) or not isinstance(margin_degrees, (int, float)):
        raise ConfigError(f"margin_degrees must be a number of degrees >= 0, got {margin_degrees!r}")
    margin = float(margin_degrees)
    if not math.isfinite(margin) or margin < 0 or margin >= 180:
        raise ConfigError(f"margin_degrees must be in [0, 180), got {margin_degrees!r}")
    if margin != 0 and similarity != "angle":
        raise ConfigError(
            f"margin_degrees={margin:g} needs similarity='angle': the margin is an angle (SimACE) and has no meaning on a {similarity} similarity"
        )
    return margin


def check_weight(weight: float) -> float:
    """The hard-negative weight as a float: a finite number > 0; ConfigError otherwise."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise ConfigError(f"hard_negative_weight must be a number > 0, got {weight!r}")
    value = float(weight)
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"hard_negative_weight must be a finite number > 0, got {weight!r}")
    return value


@dataclass(frozen=True)
class ContrastiveConfig:
    """Settings of a contrastive objective (defaults: unsupervised SimCSE).

    ``batch_kind``: ``sentences`` (positives are dropout views) or ``triplets`` (anchor, positive,
    optional hard negative). ``mask_duplicates``: leave candidates whose text equals the anchor's
    or its positive's out of the softmax (SimCSE's code keeps them as negatives; with real corpora
    it rarely matters, with small ones it does).
    """

    similarity: str = setting("cosine", help="Contrastive objectives: override the similarity, cosine (SimCSE) or angle (SimACE).")
    tau: float = setting(
        0.05, key="contrastive_tau", minimum=0, exclusive_minimum=True, help="Contrastive objectives: override the InfoNCE temperature (presets: 0.05)."
    )
    margin_degrees: float = setting(
        0.0,
        minimum=0,
        maximum=90,
        exclusive_maximum=True,
        help="SimACE: override the angular margin on the positive, in degrees (preset: 10; angle similarity only).",
    )
    hard_negative_weight: float = setting(
        1.0,
        minimum=0,
        help="Supervised contrastive objectives: weight w of each row's own hard negative (SimCSE's value h is w = exp(h); preset 1).",
    )
    batch_kind: str = "sentences"
    mask_duplicates: bool = True
    guide: str | None = same_setting(ObjectiveConfig, "guide")
    guide_margin: float = same_setting(ObjectiveConfig, "guide_margin")
    guide_margin_strategy: str = same_setting(ObjectiveConfig, "guide_margin_strategy")

    def __post_init__(self) -> None:
        check_similarity(self.similarity)
        object.__setattr__(self, "tau", check_tau(self.tau))
        object.__setattr__(self, "margin_degrees", check_margin(self.margin_degrees, self.similarity))
        object.__setattr__(self, "hard_negative_weight", check_weight(self.hard_negative_weight))
        if self.batch_kind not in BATCH_KINDS:
            raise ConfigError(f"unknown batch_kind {self.batch_kind!r}; valid values: {', '.join(BATCH_KINDS)}")
        if not isinstance(self.mask_duplicates, bool):
            raise ConfigError(f"mask_duplicates must be true or false, got {self.mask_duplicates!r}")
        guide = check_guide(self.guide, self.guide_margin, self.guide_margin_strategy)
        for name, value in zip(("guide", "guide_margin", "guide_margin_strategy"), guide, strict=True):
            object.__setattr__(self, name, value)

    @property
    def component(self) -> str:
        """The name the loss is logged under: ``simace`` (angle similarity) or ``simcse`` (cosine)."""
        return "simace" if self.similarity == "angle" else "simcse"

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> ContrastiveConfig:
        """The preset ``name`` from :data:`CONTRASTIVE_PRESETS` with some fields replaced."""
        return preset_with_overrides(CONTRASTIVE_PRESETS, name, overrides, kind="contrastive")


CONTRASTIVE_PRESETS: dict[str, ContrastiveConfig] = {
    # SimCSE (Gao et al. 2021): cosine, tau 0.05; unsupervised with dropout views.
    "simcse-unsup": ContrastiveConfig(similarity="cosine", tau=0.05, batch_kind="sentences"),
    # Supervised SimCSE: NLI triplets (entailment positive, contradiction hard negative), weight 1.
    "simcse-sup": ContrastiveConfig(similarity="cosine", tau=0.05, hard_negative_weight=1.0, batch_kind="triplets"),
    # SimACE: angle similarity, margin 10 degrees, tau 0.05, dropout views.
    "simace-unsup": ContrastiveConfig(similarity="angle", tau=0.05, margin_degrees=10.0, batch_kind="sentences"),
    # Not in the paper: SimACE's loss on supervised triplets (an extension, for comparison).
    "simace-sup": ContrastiveConfig(similarity="angle", tau=0.05, margin_degrees=10.0, batch_kind="triplets"),
}
