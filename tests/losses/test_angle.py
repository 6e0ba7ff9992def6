"""Tests of anglekit.losses.angle: the paper's motivation. Cosine saturates near cos = +-1, the
angle objective does not (and the reference angle score saturates elsewhere, the phase score not)."""

from __future__ import annotations

import pytest
import torch
from loss_helpers import ALL_LOSSES, _batch, _rotate_45

from anglekit.losses import AngleLoss, CosineLoss

# --------------------------------------------------------------------------------------------
# The paper's motivation: cosine saturates near cos = +-1, the angle objective does not
# --------------------------------------------------------------------------------------------


def _grad_norm(loss_fn, x: torch.Tensor, y: torch.Tensor) -> float:
    x = x.clone().requires_grad_(True)
    y = y.clone().requires_grad_(True)
    loss = loss_fn(x, y, torch.tensor([1.0, 0.0], dtype=torch.float64))
    gx, gy = torch.autograd.grad(loss, (x, y))
    return float(torch.cat([gx.flatten(), gy.flatten()]).norm())


def _near(x: torch.Tensor, target: torch.Tensor, eps: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return target + eps * torch.randn(target.shape, generator=g, dtype=target.dtype)


EPSILONS = (1e-2, 1e-4, 1e-6)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["cos->+1", "cos->-1"])
def test_cosine_gradient_vanishes_near_parallel_but_angle_gradient_does_not(sign: float) -> None:
    # Two pairs with different labels, both nearly (anti-)parallel: the ranking term is active
    # (scores almost equal, so d loss / d score is about 1 / (2 tau)) and any vanishing comes
    # from the score itself. The same tau for every objective keeps the comparison fair.
    x, _ = _batch(n=2, dim=8, seed=12)
    norms: dict[str, list[float]] = {name: [] for name in ALL_LOSSES}
    for eps in EPSILONS:
        y = _near(x, sign * x, eps, seed=13)
        norms["cosine"].append(_grad_norm(CosineLoss(tau=1.0), x, y))
        norms["angle_reference"].append(_grad_norm(AngleLoss("reference", tau=1.0), x, y))
        norms["angle_phase"].append(_grad_norm(AngleLoss("phase", tau=1.0), x, y))
    cos = norms["cosine"]
    assert cos[-1] < 1e-6  # tiny ...
    assert cos[-1] / cos[0] < 1e-3  # ... and vanishing in proportion to the distance to +-1
    for name in ("angle_phase", "angle_reference"):
        assert norms[name][-1] > 1e-2, (name, norms[name])
        assert norms[name][-1] > 0.1 * norms[name][0], (name, norms[name])


def test_reference_angle_gradient_vanishes_where_x_is_parallel_to_rotated_y() -> None:
    # s_ref = sqrt(2) |cos(x, e^{i pi/4} y)|: it saturates like cosine, only at a different
    # place. The phase score does not saturate there.
    _, y = _batch(n=2, dim=8, seed=14)
    ref, phase = [], []
    for eps in EPSILONS:
        x = _near(y, _rotate_45(y), eps, seed=15)
        ref.append(_grad_norm(AngleLoss("reference", tau=1.0), x, y))
        phase.append(_grad_norm(AngleLoss("phase", tau=1.0), x, y))
    assert ref[-1] < 1e-6 and ref[-1] / ref[0] < 1e-3
    assert phase[-1] > 1e-2 and phase[-1] > 0.1 * phase[0]
