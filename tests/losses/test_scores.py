"""Tests of anglekit.losses.scores: the cosine and the two angle scores against independent loop
references, identities, ranges, invariances, degenerate inputs, the score registry."""

from __future__ import annotations

import math

import pytest
import torch
from loss_helpers import REF_SCORES, _batch, _degenerate_batch, _rotate_45, _rows

from anglekit.errors import ConfigError
from anglekit.losses import (
    SCORES,
    AngleLoss,
    angle_score_phase,
    angle_score_reference,
    cosine_score,
    get_score,
)

SCORE_FNS = [cosine_score, angle_score_reference, angle_score_phase]


@pytest.mark.parametrize("score_fn", SCORE_FNS, ids=lambda f: f.__name__)
def test_scores_match_loop_reference(score_fn) -> None:
    x, y = _batch(n=9, dim=10, seed=3)
    name = {v: k for k, v in SCORES.items()}[score_fn]
    got = score_fn(x, y).tolist()
    want = [REF_SCORES[name](u, v) for u, v in zip(_rows(x), _rows(y), strict=False)]
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


# --------------------------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------------------------


def test_reference_angle_score_identity() -> None:
    x, y = _batch(n=64, dim=16, seed=4)
    a, b = x.chunk(2, dim=1)
    c, d = y.chunk(2, dim=1)
    norms = x.norm(dim=1) * y.norm(dim=1)
    cos = (x * y).sum(1) / norms
    want = (cos + ((b * c).sum(1) - (a * d).sum(1)) / norms).abs()
    torch.testing.assert_close(angle_score_reference(x, y), want, rtol=1e-13, atol=1e-14)


def test_reference_angle_score_is_a_scaled_cosine_against_rotated_y() -> None:
    x, y = _batch(n=32, dim=12, seed=5)
    torch.testing.assert_close(angle_score_reference(x, y), math.sqrt(2.0) * cosine_score(x, _rotate_45(y)).abs())


def test_score_ranges() -> None:
    x, y = _batch(n=200, dim=8, seed=6)
    assert torch.all(cosine_score(x, y).abs() <= 1 + 1e-12)
    ref = angle_score_reference(x, y)
    assert torch.all((ref >= 0) & (ref <= math.sqrt(2.0) + 1e-12))
    phase = angle_score_phase(x, y)
    assert torch.all((phase >= -1) & (phase <= 0))
    assert torch.allclose(angle_score_phase(x, x), torch.zeros(200, dtype=torch.float64))
    assert torch.allclose(angle_score_phase(x, -x), -torch.ones(200, dtype=torch.float64))


@pytest.mark.parametrize("score_fn", SCORE_FNS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("scale", [1e-3, 0.5, 7.0, 1e5])
def test_scores_invariant_to_positive_scaling(score_fn, scale: float) -> None:
    x, y = _batch(n=10, dim=8, seed=7)
    base = score_fn(x, y)
    torch.testing.assert_close(score_fn(x * scale, y), base, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(score_fn(x, y * scale), base, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("score_fn", [angle_score_reference, angle_score_phase])
def test_angle_scores_need_even_dimension(score_fn) -> None:
    x = torch.randn(3, 7)
    with pytest.raises(ValueError, match="must be even; got 7"):
        score_fn(x, x)
    with pytest.raises(ValueError, match="must be even"):
        AngleLoss("phase")(x, x, torch.tensor([0.0, 1.0, 2.0]))


@pytest.mark.parametrize("score_fn", SCORE_FNS, ids=lambda f: f.__name__)
def test_scores_check_shapes(score_fn) -> None:
    with pytest.raises(ValueError, match="same shape"):
        score_fn(torch.randn(3, 4), torch.randn(2, 4))
    with pytest.raises(ValueError, match=r"\[B, D\]"):
        score_fn(torch.randn(4), torch.randn(4))


def test_score_registry() -> None:
    assert set(SCORES) == {"cosine", "angle_reference", "angle_phase"}
    assert get_score("angle_phase") is angle_score_phase
    with pytest.raises(ConfigError, match="angle_phase, angle_reference, cosine"):
        get_score("euclid")


def test_zero_modulus_dimension_counts_as_mid_range_phase() -> None:
    x = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)  # z = (1, 0)
    y = torch.tensor([[1.0, 1.0, 0.0, 0.0]], dtype=torch.float64)  # w = (1, 1)
    # dim 0: no difference; dim 1: |z_1| = 0, counted as pi/2. mean = pi/4, score -1/4.
    assert float(angle_score_phase(x, y)) == pytest.approx(-0.25, abs=1e-15)
    zero = torch.zeros(1, 4, dtype=torch.float64)
    assert float(angle_score_phase(zero, y)) == pytest.approx(-0.5, abs=1e-15)
    assert float(cosine_score(zero, y)) == 0.0


# --------------------------------------------------------------------------------------------
# Degenerate inputs: finite values and gradients
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("score_fn", SCORE_FNS, ids=lambda f: f.__name__)
def test_scores_finite_on_degenerate_inputs(score_fn, dtype: torch.dtype) -> None:
    x, y, _ = _degenerate_batch(dtype)
    x.requires_grad_(True)
    y.requires_grad_(True)
    s = score_fn(x, y)
    assert s.dtype == dtype
    assert torch.isfinite(s).all()
    s.sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(y.grad).all()


def test_phase_gradient_finite_at_exact_zero_modulus() -> None:
    # Every complex dimension of x has zero modulus except one; gradients stay finite and the
    # zero-modulus dimensions receive no gradient through the angle.
    x = torch.tensor([[0.0, 2.0, 0.0, 1.0]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([[1.0, 1.0, 1.0, -1.0]], dtype=torch.float64, requires_grad=True)
    angle_score_phase(x, y).sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(y.grad).all()
