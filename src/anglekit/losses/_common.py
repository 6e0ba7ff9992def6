"""Shared helpers for the loss modules: input checks, the names configs accept, and numerically
safe normalisation. Imports no torch at import time: the typed objective configs
(:mod:`anglekit.losses.configs`) use it, and the command line lists their settings without torch."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from anglekit.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from torch import Tensor

_Config = TypeVar("_Config")

# Norms below this are treated as zero when normalising, so a zero vector maps to zero
# (finite value and finite gradient) instead of NaN.
NORM_EPS = 1e-12

SIMILARITIES = ("cosine", "angle")
"""Similarity names accepted by the contrastive objectives and the in-batch-negative term."""

ANGLE_VARIANTS: dict[str, str] = {"reference": "angle_reference", "phase": "angle_phase"}
"""Angle variant name -> score name in :data:`anglekit.losses.scores.SCORES`."""


def check_tau(tau: float, name: str = "tau") -> float:
    """Return ``tau`` as a float, raising ConfigError unless it is a finite number > 0."""
    if isinstance(tau, bool) or not isinstance(tau, (int, float)):
        raise ConfigError(f"{name} must be a number > 0, got {tau!r}")
    tau = float(tau)
    if not math.isfinite(tau) or tau <= 0.0:
        raise ConfigError(f"{name} must be a finite number > 0, got {tau!r}")
    return tau


def check_similarity(name: str, setting: str = "similarity") -> str:
    """Return ``name`` when it is one of :data:`SIMILARITIES`; ConfigError otherwise."""
    if name not in SIMILARITIES:
        raise ConfigError(f"unknown {setting} {name!r}; valid values: {', '.join(SIMILARITIES)}")
    return name


def check_pair_batch(x: Tensor, y: Tensor) -> None:
    """Raise ValueError unless x and y are two [B, D] tensors of the same shape."""
    if x.dim() != 2 or y.dim() != 2:
        raise ValueError(f"expected embeddings of shape [B, D], got x {tuple(x.shape)} and y {tuple(y.shape)}")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")


def check_batch_vector(t: Tensor, batch: int, name: str) -> None:
    """Raise ValueError unless ``t`` is a 1-D tensor of length ``batch``."""
    if t.dim() != 1 or t.shape[0] != batch:
        raise ValueError(f"{name} must have shape [{batch}], got {tuple(t.shape)}")


def unit_rows(x: Tensor, eps: float = NORM_EPS) -> Tensor:
    """Each row of ``x`` divided by its Euclidean norm (clamped below at ``eps``).

    A zero row stays zero; value and gradient are finite everywhere.
    """
    import torch

    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x / norm.clamp_min(eps)


def preset_with_overrides(presets: Mapping[str, _Config], name: str, overrides: Mapping[str, Any], *, kind: str) -> _Config:
    """``presets[name]`` (a dataclass) with some fields replaced; ConfigError naming what is wrong."""
    if name not in presets:
        raise ConfigError(f"unknown {kind} preset {name!r}; valid presets: {', '.join(sorted(presets))}")
    base = presets[name]
    fields = {f.name for f in dataclasses.fields(base)}  # type: ignore[arg-type]
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ConfigError(f"unknown objective setting(s) {', '.join(unknown)} for {name!r}; valid settings: {', '.join(sorted(fields))}")
    return dataclasses.replace(base, **overrides)  # type: ignore[type-var]


GUIDE_MARGIN_STRATEGIES = ("absolute", "relative")
"""How a guide's margin lowers its threshold (:mod:`anglekit.losses.guide`): ``absolute`` (positive -
margin) or ``relative`` (positive - |positive| * margin), as sentence-transformers' GISTEmbedLoss."""


def check_guide_margin(margin: float, strategy: str) -> tuple[float, str]:
    """(margin, strategy), checked: a number from -2 to 2 and one of :data:`GUIDE_MARGIN_STRATEGIES`."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin) or not -2 <= margin <= 2:
        raise ConfigError(f"guide_margin must be a number from -2 to 2 (a cosine spans 2), got {margin!r}")
    if strategy not in GUIDE_MARGIN_STRATEGIES:
        raise ConfigError(f"unknown guide_margin_strategy {strategy!r}; valid values: {', '.join(GUIDE_MARGIN_STRATEGIES)}")
    return float(margin), strategy


def check_guide(guide: str | None, margin: float, strategy: str) -> tuple[str | None, float, str]:
    """(guide, margin, strategy) of an objective config, checked: the guide a non-empty name or None."""
    if guide is not None and (not isinstance(guide, str) or not guide.strip()):
        raise ConfigError(f"guide must be a model name or folder, got {guide!r}")
    return (None if guide is None else guide.strip()), *check_guide_margin(margin, strategy)
