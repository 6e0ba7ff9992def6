"""Matryoshka over any objective: the weighted sum of the objective at each leading slice (a
brute-force loop over the dimensions), components by name, and config errors."""

from __future__ import annotations

import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.losses import (
    AnglEObjective,
    ContrastiveObjective,
    MatryoshkaConfig,
    MatryoshkaObjective,
    ObjectiveConfig,
    check_nested_dims,
)

DIMS = (16, 8, 4, 2)
WEIGHTS = (1.0, 0.5, 2.0, 0.25)


def _pairs(batch: int = 6, dim: int = 16) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(batch, dim, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.randn(batch, dim, generator=g, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    ids1 = torch.arange(batch)
    ids2 = torch.arange(batch, 2 * batch)
    return x, y, labels, ids1, ids2


def test_pair_objective_equals_weighted_sum_over_slices() -> None:
    inner = AnglEObjective(ObjectiveConfig(positive_threshold=1.0))
    wrapped = MatryoshkaObjective(inner, MatryoshkaConfig(DIMS, WEIGHTS))
    x, y, labels, ids1, ids2 = _pairs()
    out = wrapped(x, y, labels, ids1, ids2)
    expected = torch.zeros((), dtype=torch.float64)
    for j in range(len(DIMS)):
        d = DIMS[j]
        xs = torch.stack([x[i, :d] for i in range(x.shape[0])])
        ys = torch.stack([y[i, :d] for i in range(y.shape[0])])
        expected = expected + WEIGHTS[j] * inner(xs, ys, labels, ids1, ids2).loss
    torch.testing.assert_close(out.loss, expected, rtol=1e-12, atol=1e-12)
    assert set(out.components) == {f"{name}@{d}" for name in ("cosine", "ibn", "angle") for d in DIMS}
    (gx,) = torch.autograd.grad(out.loss, x, retain_graph=True)
    (ex,) = torch.autograd.grad(expected, x)
    torch.testing.assert_close(gx, ex)


def test_contrastive_objective_slices_anchors_and_candidates() -> None:
    inner = ContrastiveObjective.from_preset("simace-unsup")
    wrapped = MatryoshkaObjective(inner, MatryoshkaConfig((16, 4)))
    x, y, *_ = _pairs()
    ids = torch.arange(6)
    out = wrapped(x, y, anchor_ids=ids, positive_ids=ids)
    expected = inner(x, y, anchor_ids=ids, positive_ids=ids).loss + inner(x[:, :4], y[:, :4], anchor_ids=ids, positive_ids=ids).loss
    torch.testing.assert_close(out.loss, expected)
    assert wrapped.batch_kind == "sentences"


def test_a_zero_weight_skips_its_dimension() -> None:
    inner = AnglEObjective(ObjectiveConfig(ibn_weight=0.0))
    x, y, labels, *_ = _pairs()
    out = MatryoshkaObjective(inner, MatryoshkaConfig((16, 8), (0.0, 1.0)))(x, y, labels)
    torch.testing.assert_close(out.loss, inner(x[:, :8], y[:, :8], labels).loss)
    assert all(name.endswith("@8") for name in out.components)


@pytest.mark.parametrize(
    ("dims", "weights", "match"),
    [
        ((8, 16), None, "strictly decreasing"),
        ((8, 8), None, "strictly decreasing"),
        ((8, 0), None, ">= 1"),
        ((), None, "non-empty"),
        ((8, 4), (1.0,), "one weight per dimension"),
        ((8, 4), (1.0, -1.0), ">= 0"),
        ((8, 4), (0.0, 0.0), "> 0"),
        ((8.0, 4), None, "integers"),
    ],
)
def test_bad_nested_dims_are_config_errors(dims: tuple, weights: tuple | None, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        MatryoshkaConfig(dims, weights)


def test_dims_larger_than_the_model_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="larger than the model's embedding dimension 32"):
        check_nested_dims((64, 32), dim=32)
    wrapped = MatryoshkaObjective(AnglEObjective(ObjectiveConfig(ibn_weight=0.0)), MatryoshkaConfig((32, 8)))
    x, y, labels, *_ = _pairs()
    with pytest.raises(ValueError, match="16 dimensions"):
        wrapped(x, y, labels)
