"""Shared by the tests of anglekit.losses: independent references (plain Python floats, explicit
loops, the math module) and small batch builders.

The test files of tests/losses import it as ``loss_helpers``: pytest puts a test file's folder on
sys.path (no __init__.py, rootdir-relative "prepend" import mode).
"""

from __future__ import annotations

import math

import torch

from anglekit.losses import AngleLoss, CosineLoss

ALL_LOSSES = {
    "cosine": lambda: CosineLoss(tau=0.05),
    "angle_reference": lambda: AngleLoss("reference", tau=1.0),
    "angle_phase": lambda: AngleLoss("phase", tau=1.0),
}


# --------------------------------------------------------------------------------------------
# Independent references: plain Python floats, explicit loops, the math module.
# --------------------------------------------------------------------------------------------


def _rows(t: torch.Tensor) -> list[list[float]]:
    return [[float(v) for v in row] for row in t.detach().cpu().to(torch.float64)]


def ref_cosine(u: list[float], v: list[float]) -> float:
    dot = sum(p * q for p, q in zip(u, v, strict=False))
    return dot / (math.sqrt(sum(p * p for p in u)) * math.sqrt(sum(q * q for q in v)))


# The contrastive tests' name for the same reference.
ref_cos = ref_cosine


def ref_angle(u: list[float], v: list[float]) -> float:
    c = min(max(ref_cos(u, v), -1.0 + 1e-6), 1.0 - 1e-6)
    return math.pi / 2 - math.acos(c)


def ref_angle_reference(u: list[float], v: list[float]) -> float:
    """The official formula, literally: divide by sum(c^2 + d^2), then by |x| / |y|."""
    h = len(u) // 2
    a, b, c, d = u[:h], u[h:], v[:h], v[h:]
    z = sum(c[k] ** 2 + d[k] ** 2 for k in range(h))
    dz = math.sqrt(sum(a[k] ** 2 + b[k] ** 2 for k in range(h)))
    dw = math.sqrt(z)
    total = 0.0
    for k in range(h):
        re = (a[k] * c[k] + b[k] * d[k]) / z / (dz / dw)
        im = (b[k] * c[k] - a[k] * d[k]) / z / (dz / dw)
        total += re + im
    return abs(total)


def ref_angle_phase(u: list[float], v: list[float]) -> float:
    h = len(u) // 2
    total = 0.0
    for k in range(h):
        # z / w computed with Python complex numbers, an independent route to the phase.
        q = complex(u[k], u[h + k]) / complex(v[k], v[h + k])
        total += abs(math.atan2(q.imag, q.real))
    return -(total / h) / math.pi


REF_SCORES = {
    "cosine": ref_cosine,
    "angle_reference": ref_angle_reference,
    "angle_phase": ref_angle_phase,
}


# --------------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------------


def _batch(n: int = 7, dim: int = 8, dtype=torch.float64, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g, dtype=dtype)
    y = torch.randn(n, dim, generator=g, dtype=dtype)
    return x, y


def _emb(n: int, dim: int = 8, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g, dtype=dtype)


def _rotate_45(y: torch.Tensor) -> torch.Tensor:
    """y multiplied by e^{i pi/4} in every complex plane."""
    c, d = y.chunk(2, dim=-1)
    return torch.cat([(c - d), (c + d)], dim=-1) / math.sqrt(2.0)


def _degenerate_batch(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(8)
    base = torch.randn(8, 6, generator=g).to(dtype)
    x = base.clone()
    y = torch.randn(8, 6, generator=g).to(dtype)
    x[0] = 0.0  # zero x
    y[1] = 0.0  # zero y
    x[2] = 0.0  # both zero
    y[2] = 0.0
    y[3] = x[3]  # identical
    y[4] = -x[4]  # opposite
    x[5] = x[5] * 1e6  # very large
    y[5] = y[5] * 1e6
    x[6] = x[6] * 1e6  # very large and identical
    y[6] = x[6]
    x[7, [0, 3]] = 0.0  # complex dimension 0 of x has zero modulus
    x[7, 1] = 1e-20  # complex dimension 1 has a modulus whose square underflows in float32
    x[7, 4] = 0.0
    labels = torch.tensor([0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5, 4.0], dtype=dtype)
    return x, y, labels


# --------------------------------------------------------------------------------------------
# Gradient checks (float64)
# --------------------------------------------------------------------------------------------

GC_LABELS = torch.tensor([0.0, 1.2, 3.4, 3.4, 5.0], dtype=torch.float64)
GC_IDS1 = torch.tensor([0, 1, 2, 3, 4])
GC_IDS2 = torch.tensor([5, 6, 5, 2, 7])  # a repeated second text and one equal to a first text


def _gc_inputs(seed: int = 9):
    x, y = _batch(n=5, dim=6, seed=seed)
    return x.requires_grad_(True), y.requires_grad_(True)
