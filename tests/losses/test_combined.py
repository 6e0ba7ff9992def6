"""Tests of anglekit.losses.combined: the AnglE objective's composition (weighted named
components), its configuration and presets, degenerate inputs, gradients, permutation invariance."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from loss_helpers import GC_IDS1, GC_IDS2, GC_LABELS, _batch, _degenerate_batch, _gc_inputs

from anglekit.errors import ConfigError
from anglekit.losses import (
    PRESETS,
    AngleLoss,
    AnglEObjective,
    CosineLoss,
    InBatchNegativeLoss,
    ObjectiveConfig,
    ObjectiveOutput,
    in_batch_negative_loss,
)

# --------------------------------------------------------------------------------------------
# Combined objective, configuration and presets
# --------------------------------------------------------------------------------------------


def test_presets_have_the_documented_values() -> None:
    def values(name):
        c = PRESETS[name]
        return (
            (c.cosine_weight, c.ibn_weight, c.angle_weight),
            (c.cosine_tau, c.ibn_tau, c.angle_tau),
            c.angle_variant,
        )

    assert values("paper") == ((1, 1, 1), (0.05, 0.05, 1.0), "reference")
    assert values("paper-phase") == ((1, 1, 1), (0.05, 0.05, 1.0), "phase")
    assert values("official-defaults") == ((0, 1, 0.02), (0.05, 0.05, 0.05), "reference")
    assert values("cosine")[0] == (1, 0, 0) and values("cosine")[1][0] == 0.05
    assert values("angle") == ((0, 0, 1), (0.05, 0.05, 1.0), "reference")
    assert values("angle-phase") == ((0, 0, 1), (0.05, 0.05, 1.0), "phase")
    assert values("ibn")[0] == (0, 1, 0)
    assert all(c.positive_threshold is None for c in PRESETS.values())


def test_combined_is_weighted_sum_of_named_unweighted_components() -> None:
    x, y = _batch(n=6, dim=8, seed=19)
    labels = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64)
    ids1, ids2 = torch.arange(6), torch.arange(6, 12)
    cfg = ObjectiveConfig.from_preset("paper-phase", cosine_weight=0.5, ibn_weight=2.0, angle_weight=3.0, positive_threshold=3.0)
    out = AnglEObjective(cfg)(x, y, labels, ids1, ids2)
    assert isinstance(out, ObjectiveOutput)
    assert list(out.components) == ["cosine", "ibn", "angle"]
    cos = CosineLoss(0.05)(x, y, labels)
    ibn = in_batch_negative_loss(x, y, labels, ids1, ids2, tau=0.05, positive_threshold=3.0)
    ang = AngleLoss("phase", 1.0)(x, y, labels)
    torch.testing.assert_close(out.components["cosine"], cos)
    torch.testing.assert_close(out.components["ibn"], ibn)
    torch.testing.assert_close(out.components["angle"], ang)
    torch.testing.assert_close(out.loss, 0.5 * cos + 2.0 * ibn + 3.0 * ang)


def test_zero_weight_components_are_not_computed() -> None:
    x, y = _batch(n=4, dim=7, seed=20)  # odd dimension: the angle term would raise
    labels = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64)
    # No ids and no threshold: the ibn term would raise if it were computed.
    out = AnglEObjective.from_preset("cosine")(x, y, labels)
    assert list(out.components) == ["cosine"]
    torch.testing.assert_close(out.loss, CosineLoss(0.05)(x, y, labels))
    with pytest.raises(ValueError, match="even"):
        AnglEObjective.from_preset("angle")(x, y, labels)
    out = AnglEObjective.from_preset("angle-phase")(*_batch(n=4, dim=8), labels)
    assert list(out.components) == ["angle"]


def test_ibn_term_requires_ids_and_threshold() -> None:
    x, y = _batch(n=4, dim=8)
    labels = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64)
    with pytest.raises(ValueError, match="ids1 and ids2"):
        AnglEObjective.from_preset("paper", positive_threshold=1.0)(x, y, labels)
    with pytest.raises(ValueError, match="positive_threshold"):
        AnglEObjective.from_preset("paper")(x, y, labels, torch.arange(4), torch.arange(4, 8))


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown objective preset 'nope'.*paper"):
        ObjectiveConfig.from_preset("nope")
    with pytest.raises(ConfigError, match="cosine_wieght"):
        ObjectiveConfig.from_preset("paper", cosine_wieght=1.0)
    with pytest.raises(ConfigError, match="angle_variant 'polar'.*phase, reference"):
        ObjectiveConfig.from_preset("paper", angle_variant="polar")
    with pytest.raises(ConfigError, match="unknown angle variant"):
        AngleLoss("polar")
    with pytest.raises(ConfigError, match="ibn_weight"):
        ObjectiveConfig(ibn_weight=-1.0)
    with pytest.raises(ConfigError, match="angle_tau"):
        ObjectiveConfig(angle_tau=0.0)
    with pytest.raises(ConfigError, match="at least one"):
        ObjectiveConfig(cosine_weight=0, ibn_weight=0, angle_weight=0)
    with pytest.raises(ConfigError, match="cosine_weight"):
        ObjectiveConfig(cosine_weight="1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="positive_threshold"):
        ObjectiveConfig(positive_threshold=float("inf"))
    with pytest.raises(ConfigError, match="tau"):
        CosineLoss(tau=-0.05)


def test_config_is_frozen_and_presets_unchanged_by_overrides() -> None:
    cfg = ObjectiveConfig.from_preset("paper", positive_threshold=4, angle_tau=2)
    assert cfg.positive_threshold == 4.0 and isinstance(cfg.positive_threshold, float)
    assert PRESETS["paper"].positive_threshold is None and PRESETS["paper"].angle_tau == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.cosine_weight = 2.0  # type: ignore[misc]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_objective_runs_in_both_dtypes(dtype: torch.dtype) -> None:
    x, y = _batch(n=6, dim=8, dtype=dtype, seed=21)
    x.requires_grad_(True)
    labels = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], dtype=dtype)
    out = AnglEObjective.from_preset("paper", positive_threshold=3.0)(x, y, labels, torch.arange(6), torch.arange(6, 12))
    assert out.loss.dtype == dtype
    out.loss.backward()
    assert x.grad is not None and x.grad.dtype == dtype


# --------------------------------------------------------------------------------------------
# Degenerate inputs: finite values and gradients
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("preset", ["paper", "paper-phase", "official-defaults"])
def test_objective_finite_on_degenerate_inputs(preset: str, dtype: torch.dtype) -> None:
    x, y, labels = _degenerate_batch(dtype)
    x.requires_grad_(True)
    y.requires_grad_(True)
    ids1 = torch.arange(8)
    ids2 = torch.arange(8, 16)
    ids2[3] = ids1[3]  # identical texts
    out = AnglEObjective.from_preset(preset, positive_threshold=1.0)(x, y, labels, ids1, ids2)
    assert out.loss.dtype == dtype
    assert torch.isfinite(out.loss)
    assert all(torch.isfinite(v) for v in out.components.values())
    out.loss.backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(y.grad).all()


# --------------------------------------------------------------------------------------------
# Gradient checks (float64)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["paper", "paper-phase", "official-defaults"])
def test_gradcheck_combined(preset: str) -> None:
    objective = AnglEObjective.from_preset(preset, positive_threshold=1.0)

    def fn(a, b):
        return objective(a, b, GC_LABELS, GC_IDS1, GC_IDS2).loss

    assert torch.autograd.gradcheck(fn, _gc_inputs(seed=10))


# --------------------------------------------------------------------------------------------
# Permutation invariance (every objective: the ranking ones, ibn and the presets)
# --------------------------------------------------------------------------------------------


def _all_objectives():
    yield "cosine", lambda x, y, lab, i1, i2: CosineLoss()(x, y, lab)
    yield "angle_reference", lambda x, y, lab, i1, i2: AngleLoss("reference")(x, y, lab)
    yield "angle_phase", lambda x, y, lab, i1, i2: AngleLoss("phase")(x, y, lab)
    yield "ibn", lambda x, y, lab, i1, i2: InBatchNegativeLoss(positive_threshold=2.0)(x, y, lab, i1, i2)
    for preset in ("paper", "paper-phase", "official-defaults"):
        objective = AnglEObjective.from_preset(preset, positive_threshold=2.0)
        yield preset, lambda x, y, lab, i1, i2, o=objective: o(x, y, lab, i1, i2).loss


@pytest.mark.parametrize("name,fn", list(_all_objectives()), ids=[n for n, _ in _all_objectives()])
def test_losses_invariant_to_batch_permutation(name: str, fn) -> None:
    x, y = _batch(n=8, dim=8, seed=11)
    labels = torch.tensor([0.0, 2.4, 2.6, 2.6, 5.0, 1.0, 3.0, 4.2], dtype=torch.float64)
    ids1 = torch.arange(8)
    ids2 = torch.tensor([8, 9, 8, 3, 10, 11, 12, 0])
    base = fn(x, y, labels, ids1, ids2)
    for seed in range(3):
        perm = torch.randperm(8, generator=torch.Generator().manual_seed(seed))
        got = fn(x[perm], y[perm], labels[perm], ids1[perm], ids2[perm])
        torch.testing.assert_close(got, base, rtol=1e-12, atol=1e-12)
