"""Similarity matrices for contrastive objectives: cosine, and SimACE's angle similarity.

SimACE replaces the cosine inside InfoNCE with an angle::

    theta(u, v) = pi/2 - arccos(clip(cos(u, v)))          in [-pi/2, pi/2] radians

which is ``arcsin(cos)``: 0 for orthogonal vectors, +pi/2 for parallel, -pi/2 for opposite ones.
Unlike the cosine, it is linear in the angle between u and v, so the loss keeps pushing on pairs
that are already close (the cosine flattens out near +-1).

Clipping. ``arccos`` has the derivative ``-1 / sqrt(1 - c^2)``, infinite at ``c = +-1`` (identical
or opposite vectors, which unsupervised dropout views come close to). The cosine is clamped to
``[-1 + ANGLE_CLIP, 1 - ANGLE_CLIP]`` with ``ANGLE_CLIP = 1e-6``: inside the bound the largest
derivative is ``1 / sqrt(1 - (1 - 1e-6)^2) ~ 707``; at or beyond it the clamp passes no gradient.
The bound must be representable away from 1 in float32 (its spacing just below 1 is 6e-8, so
``1 - 1e-8`` would round to 1.0 and give an infinite gradient); 1e-6 is 16 spacings, so the same
bound gives finite values and gradients in float32 and float64 alike, and the same numbers in both.
The clip costs at most ``arccos(1 - 1e-6) ~ 1.4e-3`` rad (0.08 degrees) of resolution at the ends.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from anglekit.losses._common import SIMILARITIES, check_similarity, unit_rows

__all__ = [
    "ANGLE_CLIP",
    "SIMILARITIES",
    "angle_from_cosine",
    "check_similarity",
    "cosine_matrix",
    "similarity_matrix",
]

ANGLE_CLIP = 1e-6
"""The cosine is clamped to [-1 + ANGLE_CLIP, 1 - ANGLE_CLIP] before arccos (see the module doc)."""


def cosine_matrix(a: Tensor, b: Tensor) -> Tensor:
    """``cos(a_i, b_j)`` for every row pair: ``[N, D] x [M, D] -> [N, M]``. Zero rows score 0."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"expected [N, D] and [M, D] embeddings, got {tuple(a.shape)} and {tuple(b.shape)}")
    return unit_rows(a) @ unit_rows(b).transpose(0, 1)


def angle_from_cosine(cos: Tensor, clip: float = ANGLE_CLIP) -> Tensor:
    """``pi/2 - arccos(clamp(cos, -1 + clip, 1 - clip))`` in radians, elementwise."""
    if not 0.0 < clip < 1.0:
        raise ValueError(f"clip must be in (0, 1), got {clip}")
    return (math.pi / 2) - torch.arccos(cos.clamp(-1.0 + clip, 1.0 - clip))


def similarity_matrix(a: Tensor, b: Tensor, similarity: str = "cosine") -> Tensor:
    """``s(a_i, b_j)`` for every row pair: the cosine, or the angle similarity (radians)."""
    cos = cosine_matrix(a, b)
    if similarity == "cosine":
        return cos
    if similarity == "angle":
        return angle_from_cosine(cos)
    check_similarity(similarity)
    raise AssertionError("unreachable")  # pragma: no cover
