"""Tests of anglekit.losses.ibn: the in-batch-negative term against independent loop references
(cosine and angle similarity), duplicate texts, thresholds, gradients, input checks."""

from __future__ import annotations

import math

import pytest
import torch
from loss_helpers import GC_IDS1, GC_IDS2, GC_LABELS, _batch, _emb, _gc_inputs, _rows, ref_angle, ref_cosine

from anglekit.errors import ConfigError
from anglekit.losses import (
    PRESETS,
    AnglEObjective,
    InBatchNegativeLoss,
    ObjectiveConfig,
    cosine_score,
    in_batch_negative_loss,
)


def ref_ibn(x, y, labels, ids1, ids2, tau: float, threshold: float) -> float:
    xs, ys = _rows(x), _rows(y)
    labels = [float(v) for v in labels]
    ids1 = [int(v) for v in ids1]
    ids2 = [int(v) for v in ids2]
    n = len(xs)
    losses = []
    for i in range(n):
        if labels[i] < threshold:
            continue
        logits = [ref_cosine(xs[i], ys[j]) / tau for j in range(n)]
        top = max(logits)
        lse = top + math.log(sum(math.exp(v - top) for v in logits))
        targets = [1.0 if (ids2[j] == ids2[i] or ids2[j] == ids1[i]) else 0.0 for j in range(n)]
        norm = sum(targets)
        losses.append(-sum(t / norm * (logits[j] - lse) for j, t in enumerate(targets)))
    return sum(losses) / len(losses) if losses else 0.0


# --------------------------------------------------------------------------------------------
# In-batch negatives
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("threshold", [0.5, 2.5])
def test_ibn_matches_loop_reference(seed: int, threshold: float) -> None:
    x, y = _batch(n=8, dim=6, seed=seed)
    labels = torch.tensor([0.0, 1.0, 3.0, 2.6, 2.4, 5.0, 0.7, 4.0], dtype=torch.float64)
    ids1 = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7])
    # y_0, y_2 and y_5 are the same text; y_4 is the same text as x_1; y_7 the same as x_7.
    ids2 = torch.tensor([10, 11, 10, 12, 1, 10, 13, 7])
    got = in_batch_negative_loss(x, y, labels, ids1, ids2, tau=0.05, positive_threshold=threshold)
    want = ref_ibn(x, y, labels, ids1, ids2, tau=0.05, threshold=threshold)
    assert float(got) == pytest.approx(want, rel=1e-10)


def test_ibn_duplicate_text_is_a_co_target_not_a_negative() -> None:
    x, y = _batch(n=3, dim=4, seed=16)
    labels = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    ids1 = torch.tensor([0, 1, 2])
    y_dup = y.clone()
    y_dup[2] = y_dup[0]  # y_2 is the same text as the positive y_0
    distinct = torch.tensor([3, 4, 5])
    dup = torch.tensor([3, 4, 3])

    def row0(ids2: torch.Tensor) -> float:
        return float(in_batch_negative_loss(x, y_dup, labels, ids1, ids2, positive_threshold=1.0))

    logits = torch.stack([cosine_score(x[:1], y_dup[j : j + 1])[0] for j in range(3)]) / 0.05
    log_p = torch.log_softmax(logits, dim=0)
    assert row0(dup) == pytest.approx(float(-(log_p[0] + log_p[2]) / 2), rel=1e-12)
    assert row0(distinct) == pytest.approx(float(-log_p[0]), rel=1e-12)
    # Moving the duplicate's embedding towards x_0 must not be penalised as for a negative.
    y_var = y_dup.clone().requires_grad_(True)
    in_batch_negative_loss(x, y_var, labels, ids1, dup, positive_threshold=1.0).backward()
    toward_x0 = x[0] / x[0].norm()
    assert float(y_var.grad[2] @ toward_x0) <= 0  # descent moves y_2 towards x_0, not away


def test_ibn_text_identical_to_first_text_is_a_target() -> None:
    x, y = _batch(n=3, dim=4, seed=17)
    labels = torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64)
    ids1 = torch.tensor([0, 1, 2])
    ids2 = torch.tensor([3, 0, 5])  # y_1 is the same text as x_0
    got = in_batch_negative_loss(x, y, labels, ids1, ids2, positive_threshold=1.0)
    assert float(got) == pytest.approx(ref_ibn(x, y, labels, ids1, ids2, 0.05, 1.0), rel=1e-12)
    distinct = torch.tensor([3, 4, 5])
    plain = in_batch_negative_loss(x, y, labels, ids1, distinct, positive_threshold=1.0)
    assert float(got) != pytest.approx(float(plain), rel=1e-6)


def test_ibn_rows_below_threshold_are_excluded_from_the_mean() -> None:
    x, y = _batch(n=4, dim=4, seed=18)
    ids1, ids2 = torch.arange(4), torch.arange(4, 8)
    labels = torch.tensor([4.0, 3.9, 0.0, 4.5], dtype=torch.float64)
    full = in_batch_negative_loss(x, y, labels, ids1, ids2, positive_threshold=4.0)
    logits = (x / x.norm(dim=1, keepdim=True)) @ (y / y.norm(dim=1, keepdim=True)).T / 0.05
    rows = -torch.log_softmax(logits, dim=1).diagonal()
    assert float(full) == pytest.approx(float((rows[0] + rows[3]) / 2), rel=1e-12)


def test_ibn_without_positive_rows_is_zero_with_finite_grad() -> None:
    x, y = _gc_inputs()
    loss = in_batch_negative_loss(x, y, torch.zeros(5, dtype=torch.float64), GC_IDS1, GC_IDS2, positive_threshold=1.0)
    assert loss.detach().item() == 0.0 and loss.requires_grad
    loss.backward()
    assert torch.isfinite(x.grad).all() and torch.all(x.grad == 0)


def test_ibn_checks_inputs() -> None:
    x, y = _batch(n=3, dim=4)
    labels = torch.ones(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="ids2"):
        in_batch_negative_loss(x, y, labels, torch.arange(3), torch.arange(2), positive_threshold=1)
    with pytest.raises(ValueError, match="integer"):
        in_batch_negative_loss(x, y, labels, torch.arange(3), labels, positive_threshold=1)
    with pytest.raises(ConfigError, match="positive_threshold"):
        in_batch_negative_loss(x, y, labels, torch.arange(3), torch.arange(3), positive_threshold=float("nan"))
    with pytest.raises(ConfigError, match="tau"):
        InBatchNegativeLoss(positive_threshold=1.0, tau=-1.0)


# --------------------------------------------------------------------------------------------
# Gradient checks (float64)
# --------------------------------------------------------------------------------------------


def test_gradcheck_ibn() -> None:
    def fn(a, b):
        return in_batch_negative_loss(a, b, GC_LABELS, GC_IDS1, GC_IDS2, tau=0.05, positive_threshold=3.0)

    assert torch.autograd.gradcheck(fn, _gc_inputs())


def test_gradcheck_ibn_with_angle_similarity() -> None:
    x = _emb(5, dim=6, seed=20).requires_grad_(True)
    y = _emb(5, dim=6, seed=21).requires_grad_(True)
    labels = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    ids1, ids2 = torch.arange(5), torch.arange(5, 10)

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return in_batch_negative_loss(x, y, labels, ids1, ids2, tau=0.5, positive_threshold=1.0, similarity="angle")

    assert torch.autograd.gradcheck(fn, (x, y), eps=1e-6, atol=1e-6)


# --------------------------------------------------------------------------------------------
# The angle option of AnglE's in-batch-negative term
# --------------------------------------------------------------------------------------------


def ref_ibn_angle(x, y, labels, tau: float, threshold: float) -> float:
    xs, ys = _rows(x), _rows(y)
    losses = []
    for i in range(len(xs)):
        if labels[i] < threshold:
            continue
        logits = [ref_angle(xs[i], ys[j]) / tau for j in range(len(ys))]
        top = max(logits)
        losses.append(top + math.log(sum(math.exp(v - top) for v in logits)) - logits[i])
    return sum(losses) / len(losses)


def test_ibn_angle_similarity_matches_loop_reference_and_cosine_is_unchanged() -> None:
    x, y = _emb(6, seed=22), _emb(6, seed=23)
    labels = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    ids1, ids2 = torch.arange(6), torch.arange(6, 12)
    got = in_batch_negative_loss(x, y, labels, ids1, ids2, tau=0.05, positive_threshold=1.0, similarity="angle")
    assert got.item() == pytest.approx(ref_ibn_angle(x, y, labels.tolist(), 0.05, 1.0), rel=1e-10)
    cos_default = in_batch_negative_loss(x, y, labels, ids1, ids2, tau=0.05, positive_threshold=1.0)
    cos_named = InBatchNegativeLoss(1.0, 0.05, "cosine")(x, y, labels, ids1, ids2)
    torch.testing.assert_close(cos_default, cos_named)
    assert not torch.allclose(cos_default, got)
    # Through the combined objective.
    cfg = ObjectiveConfig.from_preset("ibn", positive_threshold=1.0, ibn_similarity="angle")
    torch.testing.assert_close(AnglEObjective(cfg)(x, y, labels, ids1, ids2).components["ibn"], got)
    assert PRESETS["paper-ibn-angle"].ibn_similarity == "angle" and PRESETS["paper"].ibn_similarity == "cosine"
    with pytest.raises(ConfigError, match="ibn_similarity"):
        ObjectiveConfig(ibn_similarity="euclid")


def _brute_ibn(x, y, labels, ids1, ids2, tau, threshold, detect):
    """Per-row loops: softmax over y_j, soft targets over duplicates (or only j = i)."""
    rows = []
    for i in range(len(x)):
        if labels[i] < threshold:
            continue
        logits = torch.stack([torch.nn.functional.cosine_similarity(x[i], y[j], dim=0) / tau for j in range(len(y))])
        logp = torch.log_softmax(logits, dim=0)
        targets = [j for j in range(len(y)) if j == i or (detect and (ids2[j] == ids2[i] or ids2[j] == ids1[i]))]
        rows.append(-sum(logp[j] for j in targets) / len(targets))
    return torch.stack(rows).mean()


@pytest.mark.parametrize("detect", [True, False])
def test_ibn_duplicate_detection_switch_matches_brute_force(detect):
    torch.manual_seed(3)
    x, y = torch.randn(6, 8), torch.randn(6, 8)
    labels = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    ids1 = torch.tensor([0, 1, 2, 3, 4, 5])
    ids2 = torch.tensor([10, 11, 10, 12, 3, 11])  # 0 and 2, 1 and 5 share a text; y_4 is x_3's text
    got = in_batch_negative_loss(x, y, labels, ids1, ids2, tau=0.05, positive_threshold=1.0, detect_duplicates=detect)
    want = _brute_ibn(x, y, labels, ids1, ids2, 0.05, 1.0, detect)
    assert torch.allclose(got, want, atol=1e-5)


def test_ibn_without_duplicates_the_switch_changes_nothing_and_config_reaches_the_loss():
    torch.manual_seed(4)
    x, y = torch.randn(5, 8), torch.randn(5, 8)
    labels, ids1, ids2 = torch.ones(5), torch.arange(5), torch.arange(5, 10)
    a = in_batch_negative_loss(x, y, labels, ids1, ids2, positive_threshold=1.0, detect_duplicates=True)
    b = in_batch_negative_loss(x, y, labels, ids1, ids2, positive_threshold=1.0, detect_duplicates=False)
    assert torch.allclose(a, b)
    ids2 = torch.tensor([5, 5, 5, 6, 7])
    on = AnglEObjective.from_preset("ibn", positive_threshold=1.0)(x, y, labels, ids1, ids2).loss
    off = AnglEObjective.from_preset("ibn", positive_threshold=1.0, ibn_detect_duplicates=False)(x, y, labels, ids1, ids2).loss
    assert not torch.allclose(on, off)
    with pytest.raises(ConfigError, match="ibn_detect_duplicates"):
        ObjectiveConfig(ibn_detect_duplicates="no")
