"""Tests of anglekit.losses.ranking: the ranking core and the two ranking objectives built on it
(CosineLoss, AngleLoss) against an independent loop reference, gradients."""

from __future__ import annotations

import math

import pytest
import torch
from loss_helpers import ALL_LOSSES, GC_LABELS, REF_SCORES, _batch, _gc_inputs, _rows

from anglekit.errors import ConfigError
from anglekit.losses import ranking_loss


def ref_ranking(scores: list[float], labels: list[float], tau: float) -> float:
    exps = [0.0]
    for i in range(len(scores)):
        for j in range(len(scores)):
            if labels[i] > labels[j]:
                exps.append((scores[j] - scores[i]) / tau)
    top = max(exps)
    return top + math.log(sum(math.exp(e - top) for e in exps))


# --------------------------------------------------------------------------------------------
# Ranking core and the two ranking objectives
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_LOSSES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranking_objectives_match_loop_reference(name: str, seed: int) -> None:
    x, y = _batch(seed=seed)
    # ties (1.0, 1.0 and 3.0, 3.0), close floats that an int cast would merge (2.4, 2.6)
    labels = torch.tensor([1.0, 2.4, 2.6, 1.0, 3.0, 0.0, 3.0], dtype=torch.float64)
    loss_fn = ALL_LOSSES[name]()
    got = float(loss_fn(x, y, labels))
    ref_scores = [REF_SCORES[name](u, v) for u, v in zip(_rows(x), _rows(y), strict=False)]
    want = ref_ranking(ref_scores, labels.tolist(), loss_fn.tau)
    assert got == pytest.approx(want, rel=1e-10, abs=1e-12)


def test_ranking_loss_uses_float_labels_as_given() -> None:
    scores = torch.tensor([0.0, 1.0], dtype=torch.float64)
    # 2.6 > 2.4 and s_1 > s_0: one ordered pair, loss log(1 + exp(-1 / tau)) > 0.
    got = ranking_loss(scores, torch.tensor([2.4, 2.6], dtype=torch.float64), tau=0.5)
    assert float(got) == pytest.approx(math.log1p(math.exp(-2.0)), rel=1e-12)
    # Swap the labels: now the pair is mis-ordered.
    got = ranking_loss(scores, torch.tensor([2.6, 2.4], dtype=torch.float64), tau=0.5)
    assert float(got) == pytest.approx(math.log1p(math.exp(2.0)), rel=1e-12)


def test_ranking_loss_equal_labels_contribute_nothing() -> None:
    scores = torch.tensor([0.3, -0.2, 0.9, 0.1], dtype=torch.float64)
    labels = torch.tensor([1.0, 1.0, 2.0, 0.0], dtype=torch.float64)
    pairs = [(2, 0), (2, 1), (2, 3), (0, 3), (1, 3)]  # (i, j) with l_i > l_j only
    want = math.log(1 + sum(math.exp((scores[j] - scores[i]) / 0.1) for i, j in pairs))
    assert float(ranking_loss(scores, labels, 0.1)) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("labels", [[1.0, 1.0, 1.0], [2.5], []])
def test_ranking_loss_without_ordered_pairs_is_zero_with_grad(labels: list[float]) -> None:
    scores = torch.randn(len(labels), dtype=torch.float64, requires_grad=True)
    loss = ranking_loss(scores, torch.tensor(labels, dtype=torch.float64), tau=0.05)
    assert loss.detach().item() == 0.0
    assert loss.requires_grad
    loss.backward()
    assert scores.grad is not None and torch.all(scores.grad == 0)


def test_ranking_loss_accepts_integer_labels_and_checks_shapes() -> None:
    scores = torch.tensor([0.0, 1.0])
    assert float(ranking_loss(scores, torch.tensor([0, 1]), 1.0)) == pytest.approx(math.log1p(math.exp(-1.0)), rel=1e-6)
    with pytest.raises(ValueError, match="labels"):
        ranking_loss(scores, torch.tensor([0.0, 1.0, 2.0]), 1.0)
    with pytest.raises(ValueError, match="scores"):
        ranking_loss(scores.reshape(2, 1), torch.tensor([0.0, 1.0]), 1.0)
    with pytest.raises(ConfigError, match="tau"):
        ranking_loss(scores, torch.tensor([0.0, 1.0]), 0.0)


# --------------------------------------------------------------------------------------------
# Gradient checks (float64)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_LOSSES))
def test_gradcheck_ranking_objectives(name: str) -> None:
    loss_fn = ALL_LOSSES[name]()
    assert torch.autograd.gradcheck(lambda a, b: loss_fn(a, b, GC_LABELS), _gc_inputs())


def test_gradcheck_ranking_core() -> None:
    scores = torch.randn(6, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0.0, 1.0, 1.0, 2.5, 2.6, 4.0], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda s: ranking_loss(s, labels, 0.3), (scores,))
