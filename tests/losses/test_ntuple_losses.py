"""n-tuple objectives (anchor, positive, negative_1..negative_n) as pure tensor functions, against
brute-force references written with explicit loops over candidate lists (plain Python floats):
InfoNCE with several hard negatives per row and padding masks, the ranking core within groups,
the AnglE objective on expanded rows, and Matryoshka over [H, n, D] negatives."""

from __future__ import annotations

import math

import pytest
import torch
from loss_helpers import _rows, ref_angle_reference, ref_cosine

from anglekit.losses import AnglEObjective, ContrastiveObjective, MatryoshkaObjective, info_nce_loss, ranking_loss
from anglekit.losses.matryoshka import MatryoshkaConfig


def _emb(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def ref_ntuple_info_nce(anchors, positives, negatives, counts, *, tau, weight=1.0, margin=0.0, similarity="cosine"):
    """Row i's softmax over every positive and every real negative of the batch (explicit lists)."""
    a, p = _rows(anchors), _rows(positives)
    negs = [_rows(negatives[h])[: counts[h]] for h in range(len(counts))]

    def sim(u, v):
        c = ref_cosine(u, v)
        if similarity == "angle":
            return math.pi / 2 - math.acos(min(max(c, -1 + 1e-6), 1 - 1e-6))
        return c

    total = 0.0
    for i, anchor in enumerate(a):
        logits = []
        for j, cand in enumerate(p):
            logits.append((sim(anchor, cand) - (math.radians(margin) if i == j else 0.0)) / tau)
        for h, row in enumerate(negs):
            for cand in row:
                logits.append(sim(anchor, cand) / tau + (math.log(weight) if h == i else 0.0))
        top = max(logits)
        lse = top + math.log(sum(math.exp(v - top) for v in logits))
        total += lse - logits[i]
    return total / len(a)


COUNTS = [3, 1, 2, 3]


@pytest.mark.parametrize("similarity,margin,weight", [("cosine", 0.0, 1.0), ("cosine", 0.0, 2.5), ("angle", 10.0, 1.0)])
def test_info_nce_with_n_negatives_sees_every_negative_of_the_batch(similarity: str, margin: float, weight: float) -> None:
    anchors, positives = _emb(4, 6, seed=1), _emb(4, 6, seed=2)
    negatives = _emb(4, 3, 6, seed=3)
    valid = torch.tensor([[k < c for k in range(3)] for c in COUNTS])
    got = info_nce_loss(
        anchors, positives, negatives, tau=0.05, similarity=similarity, margin_degrees=margin, hard_negative_weight=weight, negative_valid=valid
    )
    want = ref_ntuple_info_nce(anchors, positives, negatives, COUNTS, tau=0.05, weight=weight, margin=margin, similarity=similarity)
    assert float(got) == pytest.approx(want, rel=1e-9)


def test_padding_negatives_give_the_loss_of_the_unpadded_candidates() -> None:
    """Whatever the padding slots hold, they never change the loss (nor get a gradient)."""
    anchors, positives = _emb(4, 6, seed=1), _emb(4, 6, seed=2)
    negatives = _emb(4, 3, 6, seed=3)
    valid = torch.tensor([[k < c for k in range(3)] for c in COUNTS])
    garbage = negatives.clone()
    garbage[~valid] = 1e3 * _emb(int((~valid).sum()), 6, seed=9)
    garbage.requires_grad_(True)
    a = info_nce_loss(anchors, positives, negatives, negative_valid=valid)
    b = info_nce_loss(anchors, positives, garbage, negative_valid=valid)
    assert float(a) == pytest.approx(float(b.detach()), rel=1e-12)
    b.backward()
    assert torch.all(garbage.grad[~valid] == 0)
    # the unpadded computation: the 9 real negatives as one flat candidate list [M, D] (weight 1)
    flat = negatives[valid]
    assert float(info_nce_loss(anchors, positives, flat)) == pytest.approx(float(a), rel=1e-12)


def test_one_negative_as_n_equal_1_is_the_triplet_loss() -> None:
    anchors, positives, negatives = _emb(5, 8, seed=4), _emb(5, 8, seed=5), _emb(5, 8, seed=6)
    for weight in (1.0, 3.0):
        flat = info_nce_loss(anchors, positives, negatives, hard_negative_weight=weight)
        stacked = info_nce_loss(anchors, positives, negatives.unsqueeze(1), hard_negative_weight=weight)
        assert float(flat) == pytest.approx(float(stacked), rel=1e-12)


def test_info_nce_n_negatives_checks_shapes() -> None:
    anchors, positives = _emb(2, 4), _emb(2, 4)
    with pytest.raises(ValueError, match="negative_valid must be a bool tensor of shape"):
        info_nce_loss(anchors, positives, _emb(2, 3, 4), negative_valid=torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="negative_valid must be a bool"):
        info_nce_loss(anchors, positives, _emb(2, 3, 4), negative_valid=torch.ones(2, 3))
    with pytest.raises(ValueError, match="applies to hard_negatives"):
        info_nce_loss(anchors, positives, None, negative_valid=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\[H, D\] or \[H, n, D\]"):
        info_nce_loss(anchors, positives, _emb(2, 3, 2, 4))
    with pytest.raises(ValueError, match="0 negatives per row"):
        info_nce_loss(anchors, positives, _emb(2, 0, 4))


def test_duplicate_mask_flattens_n_negative_ids_row_by_row() -> None:
    """A negative whose text is the anchor's positive is masked, for n-tuples like for triplets."""
    anchors, positives, negatives = _emb(2, 4, seed=1), _emb(2, 4, seed=2), _emb(2, 2, 4, seed=3)
    objective = ContrastiveObjective.from_preset("simcse-sup")
    ids = {"anchor_ids": torch.tensor([0, 1]), "positive_ids": torch.tensor([2, 3])}
    # row 1's second negative is the text of row 0's positive (id 2): a false negative for anchor 0
    negatives[1, 1] = positives[0]
    out = objective(anchors, positives, negatives, **ids, negative_ids=torch.tensor([[4, 5], [6, 2]]))
    valid = torch.tensor([[True, True], [True, False]])
    # anchor 1 keeps it as a negative, anchor 0 does not: compute both rows by hand
    keep = {0: valid, 1: torch.ones(2, 2, dtype=torch.bool)}
    rows = [info_nce_loss(anchors[i : i + 1], positives, negatives, offset=i, negative_valid=keep[i]) for i in range(2)]
    assert float(out.loss) == pytest.approx(float(sum(rows) / 2), rel=1e-12)


def test_gradcheck_info_nce_with_padded_negatives() -> None:
    anchors = _emb(3, 4, seed=1).requires_grad_(True)
    positives = _emb(3, 4, seed=2).requires_grad_(True)
    negatives = _emb(3, 2, 4, seed=3).requires_grad_(True)
    valid = torch.tensor([[True, True], [True, False], [False, False]])
    assert torch.autograd.gradcheck(
        lambda a, p, n: info_nce_loss(a, p, n, similarity="angle", margin_degrees=10.0, hard_negative_weight=2.0, negative_valid=valid),
        (anchors, positives, negatives),
    )


# ------------------------------------------------------------------ ranking within rows


def ref_grouped_ranking(scores, labels, groups, tau):
    terms = [0.0]
    for i in range(len(scores)):
        for j in range(len(scores)):
            if groups[i] == groups[j] and labels[i] > labels[j]:
                terms.append((scores[j] - scores[i]) / tau)
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms))


def test_ranking_within_groups_matches_the_loop_reference() -> None:
    scores = _emb(9, seed=7)
    labels = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    got = ranking_loss(scores, labels, 0.05, groups)
    assert float(got) == pytest.approx(ref_grouped_ranking(scores.tolist(), labels.tolist(), groups.tolist(), 0.05), rel=1e-12)
    # without groups the positive of row 0 would also be ranked against row 1's negatives: differs
    assert float(ranking_loss(scores, labels, 0.05)) != pytest.approx(float(got))
    assert torch.autograd.gradcheck(lambda s: ranking_loss(s, labels, 0.05, groups), (scores.clone().requires_grad_(True),))


def test_ranking_groups_are_checked() -> None:
    with pytest.raises(ValueError, match="groups must have shape"):
        ranking_loss(torch.zeros(3), torch.zeros(3), 1.0, torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="groups must be an integer tensor"):
        ranking_loss(torch.zeros(3), torch.zeros(3), 1.0, torch.zeros(3))


def test_angle_objective_on_expanded_rows() -> None:
    """Row (a, p, n_1, n_2) -> pairs (a, p, 1), (a, n_k, 0): cosine and angle terms rank within the
    row, the in-batch term's softmax runs over every positive and negative of the batch."""
    anchors, positives, negatives = _emb(2, 6, seed=1), _emb(2, 6, seed=2), _emb(2, 2, 6, seed=3)
    x = torch.cat([anchors, anchors.repeat_interleave(2, dim=0)])
    y = torch.cat([positives, negatives.reshape(4, 6)])
    labels = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    groups = torch.tensor([0, 1, 0, 0, 1, 1])
    ids1 = torch.tensor([0, 1, 0, 0, 1, 1])
    ids2 = torch.tensor([2, 3, 4, 5, 6, 7])
    objective = AnglEObjective.from_preset("paper", positive_threshold=1.0)
    out = objective(x, y, labels, ids1, ids2, groups)
    a, p, n = _rows(anchors), _rows(positives), [_rows(negatives[i]) for i in range(2)]

    def ranked(score, tau):
        terms = [0.0] + [(score(a[i], n[i][k]) - score(a[i], p[i])) / tau for i in range(2) for k in range(2)]
        return math.log(sum(math.exp(t) for t in terms))

    assert float(out.components["cosine"]) == pytest.approx(ranked(ref_cosine, 0.05), rel=1e-9)
    assert float(out.components["angle"]) == pytest.approx(ranked(ref_angle_reference, 1.0), rel=1e-9)
    candidates = p + n[0] + n[1]
    ibn = 0.0
    for i in range(2):
        logits = [ref_cosine(a[i], c) / 0.05 for c in candidates]
        ibn += math.log(sum(math.exp(v) for v in logits)) - logits[i]
    assert float(out.components["ibn"]) == pytest.approx(ibn / 2, rel=1e-9)


def test_matryoshka_slices_n_negative_stacks() -> None:
    anchors, positives, negatives = _emb(3, 8, seed=1), _emb(3, 8, seed=2), _emb(3, 2, 8, seed=3)
    valid = torch.tensor([[True, True], [True, False], [True, True]])
    inner = ContrastiveObjective.from_preset("simcse-sup")
    wrapped = MatryoshkaObjective(inner, MatryoshkaConfig((8, 4), (1.0, 0.5)))
    out = wrapped(anchors, positives, negatives, negative_valid=valid)
    want = (
        inner(anchors, positives, negatives, negative_valid=valid).loss
        + 0.5 * inner(anchors[:, :4], positives[:, :4], negatives[..., :4], negative_valid=valid).loss
    )
    assert float(out.loss) == pytest.approx(float(want), rel=1e-12)
    assert set(out.components) == {"simcse@8", "simcse@4"}
