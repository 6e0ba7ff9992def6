"""Pair score functions ``s(x_i, y_i)`` for the ranking core, and a registry of them by name.

Every function takes two ``[B, D]`` tensors and returns ``[B]`` scores, higher = more similar.
All are invariant to scaling either embedding by a positive number and are finite (value and
gradient) for zero, identical, opposite and very large vectors.

Angle scores (AnglE eq. 3-6): each embedding is read as a complex vector, the first half of
the dimensions as real parts and the second half as imaginary parts: ``z = a + bi`` for x and
``w = c + di`` for y. Their quotient is ``z / w = z * conj(w) / |w|^2`` with
``z * conj(w) = (ac + bd) + (bc - ad) i``.

``angle_score_reference`` reproduces the score of the official angle-emb code (``angle_loss``)
and of sentence-transformers (``pairwise_angle_sim``)::

    re = (ac + bd) / sum(c^2 + d^2),  im = (bc - ad) / sum(c^2 + d^2),
    both divided by |x| / |y|,  s = |sum(re) + sum(im)|

which equals ``|cos(x, y) + (<b, c> - <a, d>) / (|x| |y|)|``. Writing ``(c - d, c + d)`` for y
turned by 45 degrees in every complex plane (times sqrt 2), this is also
``sqrt(2) * |cos(x, e^{i pi/4} y)|``: a plain cosine against a rotated y, so it is neither
symmetric nor an angle, it cannot tell y from -y, and its gradient vanishes where that cosine
is +-1 (x parallel to +-e^{i pi/4} y), just as cosine's does where cos(x, y) = +-1.

``angle_score_phase`` is the angle difference the paper describes: per complex dimension k,
``dtheta_k = atan2(b_k c_k - a_k d_k, a_k c_k + b_k d_k)`` in (-pi, pi], and
``s = -mean_k |dtheta_k| / pi`` in [-1, 0]. Its gradient with respect to z_k has magnitude
proportional to 1 / |z_k| whatever the angle, so it does not saturate as the pair becomes
(anti-)parallel. A dimension where z_k or w_k has (numerically) zero modulus has no angle: it
counts as the mid-range difference ``|dtheta_k| = pi/2`` (the expected value for a uniformly
random phase, as cosine gives a zero vector the mid-range score 0) and passes no gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from anglekit.errors import ConfigError
from anglekit.losses._common import check_pair_batch, unit_rows

__all__ = [
    "SCORES",
    "ScoreFn",
    "angle_score_phase",
    "angle_score_reference",
    "cosine_score",
    "get_score",
]

ScoreFn = Callable[[Tensor, Tensor], Tensor]


def _complex_halves(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Validate a pair batch with an even dimension and split it into (a, b, c, d)."""
    check_pair_batch(x, y)
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError(f"angle scores split each embedding into real and imaginary halves, so the embedding dimension must be even; got {dim}")
    a, b = x.chunk(2, dim=-1)
    c, d = y.chunk(2, dim=-1)
    return a, b, c, d


def cosine_score(x: Tensor, y: Tensor) -> Tensor:
    """Row-wise cosine similarity ``cos(x_i, y_i)`` (AnglE eq. 1). Zero rows score 0."""
    check_pair_batch(x, y)
    return (unit_rows(x) * unit_rows(y)).sum(dim=-1)


def angle_score_reference(x: Tensor, y: Tensor) -> Tensor:
    """The official angle-emb / sentence-transformers angle score (AnglE eq. 3-6 as coded).

    ``|sum(re) + sum(im)|`` with re, im the parts of ``z / w`` normalised as in the official
    code; equal to ``|cos(x, y) + (<b, c> - <a, d>) / (|x| |y|)|``. Requires an even dimension.
    """
    # Normalising x and y first is the same as dividing by sum(c^2 + d^2) = |y|^2 and then by
    # |x| / |y|; it keeps intermediate values O(1) for any input scale.
    a, b, c, d = _complex_halves(unit_rows(x), unit_rows(y))
    re = a * c + b * d
    im = b * c - a * d
    return (re.sum(dim=-1) + im.sum(dim=-1)).abs()


def angle_score_phase(x: Tensor, y: Tensor) -> Tensor:
    """Negative mean absolute phase difference of ``z / w`` over complex dimensions, over pi.

    ``s = -mean_k |atan2(b_k c_k - a_k d_k, a_k c_k + b_k d_k)| / pi`` in [-1, 0]
    (AnglE eq. 3-6, the angle difference the paper describes). Requires an even dimension.
    """
    # Scaling x or y by a positive number leaves every atan2 unchanged; normalising first keeps
    # the products in range for any input scale.
    a, b, c, d = _complex_halves(unit_rows(x), unit_rows(y))
    re = a * c + b * d
    im = b * c - a * d
    # |z_k conj(w_k)|^2 = |z_k|^2 |w_k|^2: zero exactly when either number has zero modulus.
    # atan2's gradient is 1 / modulus, so such entries are replaced by the safe argument (1, 0)
    # before atan2 and masked after it: neither the value nor the gradient sees (0, 0).
    modulus_sq = re * re + im * im
    valid = modulus_sq > torch.finfo(modulus_sq.dtype).tiny ** 0.5
    safe_re = torch.where(valid, re, torch.ones_like(re))
    safe_im = torch.where(valid, im, torch.zeros_like(im))
    abs_dtheta = torch.where(valid, torch.atan2(safe_im, safe_re).abs(), torch.full_like(re, torch.pi / 2))
    return -abs_dtheta.mean(dim=-1) / torch.pi


SCORES: dict[str, ScoreFn] = {
    "cosine": cosine_score,
    "angle_reference": angle_score_reference,
    "angle_phase": angle_score_phase,
}


def get_score(name: str) -> ScoreFn:
    """The score function registered as ``name``; ConfigError listing valid names otherwise."""
    try:
        return SCORES[name]
    except (KeyError, TypeError):
        valid = ", ".join(sorted(SCORES))
        raise ConfigError(f"unknown score {name!r}; valid scores: {valid}") from None
