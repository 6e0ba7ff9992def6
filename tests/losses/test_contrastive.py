"""Tests of anglekit.losses.contrastive: the contrastive objectives (SimCSE InfoNCE, SimACE)
against an independent loop reference, float64 gradient checks, invariances, configs."""

from __future__ import annotations

import math

import pytest
import torch
from loss_helpers import _emb, _rows, ref_angle, ref_cos

from anglekit.errors import ConfigError
from anglekit.losses import (
    CONTRASTIVE_PRESETS,
    ContrastiveConfig,
    ContrastiveObjective,
    InfoNCELoss,
    all_presets,
    duplicate_negative_mask,
    info_nce_loss,
    preset_batch_kind,
    similarity_matrix,
)

# --------------------------------------------------------------------------------------------
# Independent references: Python floats, explicit loops, the math module.
# --------------------------------------------------------------------------------------------


def ref_info_nce(anchors, positives, negatives=None, *, tau, similarity, margin_degrees=0.0, weight=1.0, offset=0, masked=None):
    a, p = _rows(anchors), _rows(positives)
    h = _rows(negatives) if negatives is not None else []
    sim = ref_angle if similarity == "angle" else ref_cos
    margin = math.radians(margin_degrees)
    total = 0.0
    for i in range(len(a)):
        target = offset + i
        logits = []
        for j in range(len(p)):
            s = sim(a[i], p[j])
            if j == target:
                s -= margin
            logits.append(s / tau)
        for j in range(len(h)):
            logit = sim(a[i], h[j]) / tau
            if j == target:
                logit += math.log(weight)
            logits.append(logit)
        kept = [v for k, v in enumerate(logits) if not (masked and (i, k) in masked)]
        top = max(kept)
        lse = top + math.log(sum(math.exp(v - top) for v in kept))
        total += lse - logits[target]
    return total / len(a)


# --------------------------------------------------------------------------------------------
# InfoNCE against the loop reference
# --------------------------------------------------------------------------------------------


CASES = [
    {"similarity": "cosine", "tau": 0.05},
    {"similarity": "cosine", "tau": 0.1, "hard": True},
    {"similarity": "cosine", "tau": 0.05, "hard": True, "weight": 2.5},
    {"similarity": "angle", "tau": 0.05, "margin_degrees": 10.0},
    {"similarity": "angle", "tau": 0.06, "margin_degrees": 0.0},
    {"similarity": "angle", "tau": 0.05, "margin_degrees": 10.0, "hard": True, "weight": 0.5},
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("seed", [0, 1])
def test_info_nce_matches_loop_reference(case: dict, seed: int) -> None:
    a, p = _emb(6, seed=seed), _emb(6, seed=seed + 10)
    p = a + 0.7 * p  # positives correlated with anchors, as in training
    h = _emb(6, seed=seed + 20) if case.get("hard") else None
    got = info_nce_loss(
        a,
        p,
        h,
        tau=case["tau"],
        similarity=case["similarity"],
        margin_degrees=case.get("margin_degrees", 0.0),
        hard_negative_weight=case.get("weight", 1.0),
    )
    want = ref_info_nce(
        a,
        p,
        h,
        tau=case["tau"],
        similarity=case["similarity"],
        margin_degrees=case.get("margin_degrees", 0.0),
        weight=case.get("weight", 1.0),
    )
    assert got.item() == pytest.approx(want, rel=1e-10, abs=1e-10)


def test_info_nce_with_offset_and_more_candidates_than_anchors() -> None:
    """Gathered candidates: the anchors are rows 3..5 of a batch of 9 (as on process 1 of 3)."""
    everything = _emb(9, seed=4)
    positives = everything + 0.5 * _emb(9, seed=5)
    negatives = _emb(9, seed=6)
    anchors = everything[3:6]
    for sim, margin in (("cosine", 0.0), ("angle", 10.0)):
        got = info_nce_loss(anchors, positives, negatives, tau=0.05, similarity=sim, margin_degrees=margin, hard_negative_weight=3.0, offset=3)
        want = ref_info_nce(anchors, positives, negatives, tau=0.05, similarity=sim, margin_degrees=margin, weight=3.0, offset=3)
        assert got.item() == pytest.approx(want, rel=1e-10)
    # offset 0 over the full batch equals the loop reference too, and the per-process means average to it.
    full = info_nce_loss(everything, positives, negatives, tau=0.05)
    parts = [info_nce_loss(everything[k : k + 3], positives, negatives, tau=0.05, offset=k) for k in (0, 3, 6)]
    torch.testing.assert_close(full, sum(parts) / 3)


def test_margin_zero_reduces_simace_to_info_nce_on_the_plain_angle_score() -> None:
    a, p = _emb(7, seed=7), _emb(7, seed=8)
    simace = ContrastiveObjective(ContrastiveConfig(similarity="angle", margin_degrees=0.0, tau=0.05))(a, p).loss
    # InfoNCE written out on theta = pi/2 - arccos(cos): cross-entropy of logits theta / tau.
    theta = math.pi / 2 - torch.arccos(similarity_matrix(a, p, "cosine").clamp(-1 + 1e-6, 1 - 1e-6))
    plain = torch.nn.functional.cross_entropy(theta / 0.05, torch.arange(7))
    torch.testing.assert_close(simace, plain)
    # And a margin makes the loss strictly larger (the positive logit only goes down).
    with_margin = ContrastiveObjective.from_preset("simace-unsup")(a, p).loss
    assert with_margin > simace


def test_hard_negative_weight_is_the_log_offset_of_simcse() -> None:
    """SimCSE adds h to the own hard negative's logit: our w = exp(h); w = 1 is SimCSE's default h = 0."""
    a, p, h = _emb(5, seed=9), _emb(5, seed=10), _emb(5, seed=11)
    simcse_h = 0.7
    logits = torch.cat([similarity_matrix(a, p) / 0.05, similarity_matrix(a, h) / 0.05], dim=1)
    weights = torch.zeros_like(logits)
    for i in range(5):
        weights[i, 5 + i] = simcse_h  # SimCSE: only the row's own hard negative
    simcse = torch.nn.functional.cross_entropy(logits + weights, torch.arange(5))
    ours = info_nce_loss(a, p, h, tau=0.05, hard_negative_weight=math.exp(simcse_h))
    torch.testing.assert_close(ours, simcse)
    assert info_nce_loss(a, p, h, tau=0.05, hard_negative_weight=1.0) == pytest.approx(torch.nn.functional.cross_entropy(logits, torch.arange(5)).item())


def test_negative_mask_and_duplicate_mask() -> None:
    a = _emb(4, seed=12)
    p = a + 0.3 * _emb(4, seed=13)
    ids = torch.tensor([10, 11, 10, 12])  # rows 0 and 2 hold the same text
    mask = duplicate_negative_mask(ids, ids)
    expected = torch.zeros(4, 4, dtype=torch.bool)
    expected[0, 2] = expected[2, 0] = True
    assert torch.equal(mask, expected)
    got = info_nce_loss(a, p, tau=0.05, negative_mask=mask)
    want = ref_info_nce(a, p, tau=0.05, similarity="cosine", masked={(0, 2), (2, 0)})
    assert got.item() == pytest.approx(want, rel=1e-10)
    # The objective builds the same mask from text ids; without ids (or mask_duplicates off) none.
    obj = ContrastiveObjective.from_preset("simcse-unsup")
    torch.testing.assert_close(obj(a, p, anchor_ids=ids, positive_ids=ids).loss, got)
    torch.testing.assert_close(obj(a, p).loss, info_nce_loss(a, p, tau=0.05))
    off = ContrastiveObjective.from_preset("simcse-unsup", mask_duplicates=False)
    torch.testing.assert_close(off(a, p, anchor_ids=ids, positive_ids=ids).loss, info_nce_loss(a, p, tau=0.05))
    # Triplets: a hard negative identical to another row's positive text is masked for that row.
    neg_ids = torch.tensor([21, 11, 22, 23])
    mask3 = duplicate_negative_mask(torch.tensor([0, 1, 2, 3]), torch.tensor([10, 11, 12, 13]), neg_ids)
    assert mask3.shape == (4, 8) and mask3.sum() == 1 and bool(mask3[1, 4 + 1])
    with pytest.raises(ValueError, match="masks a positive"):
        info_nce_loss(a, p, tau=0.05, negative_mask=torch.eye(4, dtype=torch.bool))


def test_info_nce_is_permutation_and_scale_invariant() -> None:
    a, p, h = _emb(6, seed=14), _emb(6, seed=15), _emb(6, seed=16)
    perm = torch.randperm(6, generator=torch.Generator().manual_seed(0))
    for sim, margin in (("cosine", 0.0), ("angle", 10.0)):
        base = info_nce_loss(a, p, h, tau=0.05, similarity=sim, margin_degrees=margin, hard_negative_weight=2.0)
        permuted = info_nce_loss(a[perm], p[perm], h[perm], tau=0.05, similarity=sim, margin_degrees=margin, hard_negative_weight=2.0)
        scaled = info_nce_loss(3.0 * a, 0.2 * p, 7.0 * h, tau=0.05, similarity=sim, margin_degrees=margin, hard_negative_weight=2.0)
        torch.testing.assert_close(base, permuted)
        torch.testing.assert_close(base, scaled)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zero_vectors_give_finite_values(dtype: torch.dtype) -> None:
    a = torch.zeros(3, 8, dtype=dtype, requires_grad=True)
    p = _emb(3, dtype=dtype).requires_grad_(True)
    for sim, margin in (("cosine", 0.0), ("angle", 10.0)):
        loss = info_nce_loss(a, p, torch.zeros(3, 8, dtype=dtype), tau=0.05, similarity=sim, margin_degrees=margin)
        grads = torch.autograd.grad(loss, [a, p])
        assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads)


# --------------------------------------------------------------------------------------------
# Gradient checks (float64)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("similarity", "margin", "hard", "weight"),
    [("cosine", 0.0, False, 1.0), ("cosine", 0.0, True, 2.0), ("angle", 10.0, False, 1.0), ("angle", 10.0, True, 0.5), ("angle", 0.0, True, 1.0)],
)
def test_gradcheck_info_nce(similarity: str, margin: float, hard: bool, weight: float) -> None:
    a = _emb(4, dim=6, seed=17).requires_grad_(True)
    p = (a.detach() + 0.8 * _emb(4, dim=6, seed=18)).requires_grad_(True)
    inputs = [a, p]
    if hard:
        inputs.append(_emb(4, dim=6, seed=19).requires_grad_(True))

    def fn(*tensors: torch.Tensor) -> torch.Tensor:
        h = tensors[2] if hard else None
        # tau 0.5 keeps the softmax away from saturation, so the finite differences are informative.
        return info_nce_loss(tensors[0], tensors[1], h, tau=0.5, similarity=similarity, margin_degrees=margin, hard_negative_weight=weight)

    assert torch.autograd.gradcheck(fn, tuple(inputs), eps=1e-6, atol=1e-6)


# --------------------------------------------------------------------------------------------
# Configs, presets
# --------------------------------------------------------------------------------------------


def test_contrastive_presets() -> None:
    def values(name):
        c = CONTRASTIVE_PRESETS[name]
        return c.similarity, c.tau, c.margin_degrees, c.hard_negative_weight, c.batch_kind, c.component

    assert values("simcse-unsup") == ("cosine", 0.05, 0.0, 1.0, "sentences", "simcse")
    assert values("simcse-sup") == ("cosine", 0.05, 0.0, 1.0, "triplets", "simcse")
    assert values("simace-unsup") == ("angle", 0.05, 10.0, 1.0, "sentences", "simace")
    presets = all_presets()
    assert presets["paper"] == "pairs" and presets["simace-unsup"] == "sentences" and presets["simcse-sup"] == "triplets"
    assert preset_batch_kind("simcse-unsup") == "sentences"
    with pytest.raises(ConfigError, match="simace-unsup"):
        preset_batch_kind("simace")


def test_contrastive_config_errors() -> None:
    with pytest.raises(ConfigError, match="similarity='angle'"):
        ContrastiveConfig(similarity="cosine", margin_degrees=5.0)
    with pytest.raises(ConfigError, match="margin_degrees"):
        ContrastiveConfig(similarity="angle", margin_degrees=-1.0)
    with pytest.raises(ConfigError, match="hard_negative_weight"):
        ContrastiveConfig(hard_negative_weight=0.0)
    with pytest.raises(ConfigError, match="tau"):
        ContrastiveConfig(tau=0.0)
    with pytest.raises(ConfigError, match="similarity"):
        ContrastiveConfig(similarity="dot")
    with pytest.raises(ConfigError, match="batch_kind"):
        ContrastiveConfig(batch_kind="pairs")
    with pytest.raises(ConfigError, match="similarity='angle'"):
        InfoNCELoss(margin_degrees=3.0)
    with pytest.raises(ValueError, match="at least"):
        info_nce_loss(_emb(4), _emb(3), tau=0.05)
    assert CONTRASTIVE_PRESETS["simace-unsup"].margin_degrees == 10.0  # overrides never touch presets
    ContrastiveConfig.from_preset("simace-unsup", margin_degrees=5.0)
    assert CONTRASTIVE_PRESETS["simace-unsup"].margin_degrees == 10.0


def test_module_wrapper_equals_function_and_runs_in_float32() -> None:
    a = _emb(5, dtype=torch.float32, seed=27).requires_grad_(True)
    p = _emb(5, dtype=torch.float32, seed=28)
    loss = InfoNCELoss(tau=0.05, similarity="angle", margin_degrees=10.0)(a, p)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, info_nce_loss(a, p, tau=0.05, similarity="angle", margin_degrees=10.0))
    loss.backward()
    assert torch.isfinite(a.grad).all()
