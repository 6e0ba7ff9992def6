"""Tests of anglekit.losses.angular: the cosine and angle similarity matrices against a loop
reference, and the arccos clipping that keeps values and gradients finite."""

from __future__ import annotations

import math

import pytest
import torch
from loss_helpers import _emb, _rows, ref_angle, ref_cos

from anglekit.losses import (
    ANGLE_CLIP,
    angle_from_cosine,
    info_nce_loss,
    similarity_matrix,
)

# --------------------------------------------------------------------------------------------
# Similarities and clipping
# --------------------------------------------------------------------------------------------


def test_similarity_matrices_match_loop_reference() -> None:
    a, b = _emb(5, seed=1), _emb(6, seed=2)
    cos = similarity_matrix(a, b, "cosine")
    ang = similarity_matrix(a, b, "angle")
    for i, u in enumerate(_rows(a)):
        for j, v in enumerate(_rows(b)):
            assert cos[i, j].item() == pytest.approx(ref_cos(u, v), abs=1e-12)
            assert ang[i, j].item() == pytest.approx(ref_angle(u, v), abs=1e-12)
    # pi/2 - arccos(c) = arcsin(c): 0 for orthogonal, +-pi/2 (up to the clip) for (anti-)parallel.
    torch.testing.assert_close(ang, torch.arcsin(cos))


def test_angle_similarity_is_linear_in_the_angle() -> None:
    degrees = torch.tensor([0.0, 30.0, 60.0, 90.0, 120.0, 175.0], dtype=torch.float64)
    u = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    v = torch.stack([torch.cos(torch.deg2rad(degrees)), torch.sin(torch.deg2rad(degrees))], dim=1)
    theta = similarity_matrix(u, v, "angle")[0]
    expected = math.pi / 2 - torch.deg2rad(degrees)
    expected[0] = math.pi / 2 - math.acos(1 - ANGLE_CLIP)  # clipped
    torch.testing.assert_close(theta, expected, atol=1e-9, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_arccos_clipping_keeps_gradients_finite_for_identical_and_opposite_vectors(dtype: torch.dtype, sign: float) -> None:
    x = _emb(4, dim=8, seed=3, dtype=dtype).requires_grad_(True)
    y = (sign * x.detach() * 3.0).requires_grad_(True)  # identical (or opposite) directions
    theta = similarity_matrix(x, y, "angle")
    assert torch.isfinite(theta).all()
    assert theta.diagonal().abs().min() > math.pi / 2 - 2e-3  # at the clip, not NaN
    theta.sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(y.grad).all()
    # The whole loss, both similarities, with and without margin.
    for similarity, margin in (("angle", 10.0), ("angle", 0.0), ("cosine", 0.0)):
        a = x.detach().clone().requires_grad_(True)
        p = (sign * a.detach()).clone().requires_grad_(True)
        loss = info_nce_loss(a, p, torch.zeros_like(a), tau=0.05, similarity=similarity, margin_degrees=margin)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(a.grad).all() and torch.isfinite(p.grad).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_clip_bound_is_finite_just_inside(dtype: torch.dtype) -> None:
    """Just inside the bound arccos's derivative is large but finite in both dtypes."""
    c = torch.tensor([1 - 2 * ANGLE_CLIP, -1 + 2 * ANGLE_CLIP, 1.0, -1.0, 1.5], dtype=dtype, requires_grad=True)
    theta = angle_from_cosine(c)
    theta.sum().backward()
    assert torch.isfinite(theta).all() and torch.isfinite(c.grad).all()
    assert c.grad[0] > 100 and c.grad[1] > 100  # ~ 1 / sqrt(4e-6) = 500: the gradient is alive inside
    assert c.grad[2:].abs().max() == 0  # beyond the clip: none
