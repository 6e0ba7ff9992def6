"""The guide against false negatives (GISTEmbed): the mask against an explicit loop, its place in
the AnglE in-batch term (identical-text targets never masked) and in InfoNCE, and equality with
sentence-transformers' GISTEmbedLoss run on the same embeddings (loss and gradients), for both
margin strategies, with and without hard negatives, with the student as its own guide, and on
GISTEmbedLoss's anchor-anchor and positive-positive blocks."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from anglekit.errors import ConfigError
from anglekit.losses import AnglEObjective, ContrastiveObjective, ObjectiveConfig
from anglekit.losses.configs import ContrastiveConfig
from anglekit.losses.guide import GuideTable, GuideVectors, guide_mask, guide_threshold, masked_share
from anglekit.losses.ibn import in_batch_negative_loss
from anglekit.losses.registry import resolve_objective

B, D, G = 6, 8, 5  # rows, student width, guide width


def _embeddings(seed: int, rows: int = B, width: int = D, dtype: torch.dtype = torch.float64) -> Tensor:
    return torch.randn(rows, width, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _cos(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def _loop_mask(anchors: Tensor, candidates: Tensor, positives: list[int], margin: float, strategy: str, protect: Tensor | None) -> list[list[bool]]:
    a, c = anchors.tolist(), candidates.tolist()
    out = []
    for i, row in enumerate(a):
        positive = _cos(row, c[positives[i]])
        threshold = positive - margin if strategy == "absolute" else positive - abs(positive) * margin
        out.append([
            j != positives[i] and _cos(row, cand) > threshold and not (protect is not None and bool(protect[i, j]))
            for j, cand in enumerate(c)
        ])  # fmt: skip
    return out


@pytest.mark.parametrize(("margin", "strategy"), [(0.0, "absolute"), (0.1, "absolute"), (-0.2, "absolute"), (0.3, "relative"), (0.0, "relative")])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mask_equals_an_explicit_loop(margin: float, strategy: str, seed: int) -> None:
    anchors, candidates = _embeddings(seed, B, G), _embeddings(seed + 10, 2 * B, G)
    positives = torch.tensor([3, 0, 7, 2, 11, 5])
    protect = torch.zeros(B, 2 * B, dtype=torch.bool)
    protect[1, 4] = protect[4, 0] = True
    mask = guide_mask(anchors, candidates, positives, margin=margin, strategy=strategy, protect=protect)
    assert mask.tolist() == _loop_mask(anchors, candidates, positives.tolist(), margin, strategy, protect)
    assert not mask[torch.arange(B), positives].any()


def test_the_mask_is_strict_scale_free_and_never_differentiated() -> None:
    anchors = torch.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    candidates = torch.tensor([[1.0, 0.0], [2.0, 0.0]])  # row 0: candidate 1 ties its positive (cos 1 = 1): kept
    mask = guide_mask(anchors, candidates, torch.tensor([0, 1]))
    assert mask.tolist() == [[False, False], [False, False]]
    assert not mask.requires_grad
    scaled = guide_mask(anchors * 3, candidates * 0.5, torch.tensor([0, 1]), margin=1e-6)
    assert scaled.tolist() == [[False, True], [True, False]]  # a margin below the tie removes it; row 1: cos 0 > 0 - 1e-6


def test_threshold_and_share() -> None:
    scores = torch.tensor([0.5, -0.5])
    assert guide_threshold(scores, 0.1, "absolute").tolist() == pytest.approx([0.4, -0.6])
    assert guide_threshold(scores, 0.1, "relative").tolist() == pytest.approx([0.45, -0.55])
    mask = torch.tensor([[True, False, True], [False, False, True]])
    eligible = torch.tensor([[True, True, False], [True, True, True]])
    assert float(masked_share(mask, eligible)) == pytest.approx(2 / 5)
    assert float(masked_share(mask, torch.zeros_like(mask))) == 0.0


def test_bad_input() -> None:
    a, c = _embeddings(0, 3, G), _embeddings(1, 4, G)
    with pytest.raises(ConfigError, match="guide_margin_strategy"):
        guide_mask(a, c, torch.arange(3), strategy="cosine")
    for margin in (float("nan"), 2.5, True):
        with pytest.raises(ConfigError, match="guide_margin must be a number from -2 to 2"):
            guide_mask(a, c, torch.arange(3), margin=margin)
    with pytest.raises(ValueError, match="expected guide anchors"):
        guide_mask(a, _embeddings(1, 4, G + 1), torch.arange(3))
    with pytest.raises(ValueError, match="positive_columns"):
        guide_mask(a, c, torch.arange(2))
    with pytest.raises(ValueError, match="protect"):
        guide_mask(a, c, torch.arange(3), protect=torch.zeros(3, 3, dtype=torch.bool))
    with pytest.raises(ConfigError, match="guide must be a model name"):
        ObjectiveConfig(guide="  ")


def test_table_lookup_lays_rows_out_as_the_collators_do() -> None:
    vectors = torch.arange(10, dtype=torch.float32).unsqueeze(1)
    cells = torch.tensor([[0, 1, 2, 3], [4, 5, 6, -1], [7, 8, -1, -1]])
    table = GuideTable(vectors, cells)
    assert table.lookup(torch.tensor([2, 0, 1])).squeeze(1).tolist() == [7, 0, 4, 8, 1, 5, 2, 3, 6]
    with pytest.raises(ValueError, match="guide table"):
        GuideTable(vectors, torch.zeros(3, 1, dtype=torch.long))


# ------------------------------------------------------------------ the AnglE in-batch term


def _ibn_loop(x: Tensor, y: Tensor, labels: list[float], ids1: list[int], ids2: list[int], tau: float, left_out: list[list[bool]]) -> float:
    """AnglE eq. 2 with identical-text targets, candidates in ``left_out`` removed (targets never)."""
    xs, ys = x.tolist(), y.tolist()
    total, rows = 0.0, 0
    for i in range(len(xs)):
        if labels[i] < 1.0:
            continue
        targets = [j for j in range(len(ys)) if ids2[j] in (ids2[i], ids1[i])]
        kept = [j for j in range(len(ys)) if j in targets or not left_out[i][j]]
        logits = {j: _cos(xs[i], ys[j]) / tau for j in kept}
        top = max(logits.values())
        log_z = top + math.log(sum(math.exp(v - top) for v in logits.values()))
        total += -sum((logits[j] - log_z) / len(targets) for j in targets)
        rows += 1
    return total / max(rows, 1)


def test_ibn_with_a_guide_equals_the_loop_and_keeps_identical_texts_as_targets() -> None:
    x, y = _embeddings(3), _embeddings(4)
    gx, gy = _embeddings(5, B, G), _embeddings(6, B, G)
    labels = [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    ids1, ids2 = [0, 1, 2, 3, 4, 5], [10, 11, 12, 10, 14, 3]  # y_3 is y_0's text; y_5 is x_3's text
    objective = AnglEObjective(ObjectiveConfig.from_preset("ibn", positive_threshold=1.0, ibn_tau=0.07))
    out = objective(x, y, torch.tensor(labels), torch.tensor(ids1), torch.tensor(ids2), guide=GuideVectors(gx, gy))
    raw = guide_mask(gx, gy, torch.arange(B)).tolist()
    expected = _ibn_loop(x, y, labels, ids1, ids2, 0.07, raw)
    assert float(out.components["ibn"]) == pytest.approx(expected, rel=1e-10)
    targets = {(0, 3), (3, 0), (3, 5)}
    eligible = sum(1 for i in range(B) if labels[i] >= 1 for j in range(B) if j != i and (i, j) not in targets)
    masked = sum(1 for i in range(B) if labels[i] >= 1 for j in range(B) if j != i and (i, j) not in targets and raw[i][j])
    assert 0 < masked < eligible  # the guide did something, not everything
    assert float(out.stats["guide_masked"]) == pytest.approx(masked / eligible)


def test_a_guide_that_would_mask_a_target_does_not() -> None:
    x, y = _embeddings(7, 3), _embeddings(8, 3)
    ids1, ids2, labels = torch.tensor([0, 1, 2]), torch.tensor([5, 5, 6]), torch.ones(3)  # y_0 and y_1 are one text
    everything = torch.ones(3, 3, dtype=torch.bool)
    guided = in_batch_negative_loss(x, y, labels, ids1, ids2, positive_threshold=1.0, negative_mask=everything)
    loop = _ibn_loop(x, y, [1.0] * 3, [0, 1, 2], [5, 5, 6], 0.05, everything.tolist())
    assert torch.isfinite(guided) and float(guided) == pytest.approx(loop, rel=1e-10)
    x.requires_grad_(True)
    in_batch_negative_loss(x, y, labels, ids1, ids2, positive_threshold=1.0, negative_mask=everything).backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


# ------------------------------------------------------------------ sentence-transformers' GISTEmbedLoss


def _st_gist(temperature: float, margin: float, strategy: str, *, anchors_block: bool = False, positives_block: bool = False) -> Any:
    """sentence-transformers' GISTEmbedLoss without its models: its forward runs as written on the
    embeddings ``embed_columns`` is patched to return (the student's first, then the guide's)."""
    from sentence_transformers.sentence_transformer.losses import gist_embed

    loss = gist_embed.GISTEmbedLoss.__new__(gist_embed.GISTEmbedLoss)
    nn.Module.__init__(loss)
    loss.model, loss.guide, loss.must_retokenize = None, None, False
    loss.temperature, loss.similarity_fct = temperature, nn.CosineSimilarity(dim=-1)
    loss.margin_strategy, loss.margin = strategy, margin
    loss.contrast_anchors, loss.contrast_positives, loss.gather_across_devices = anchors_block, positives_block, False
    loss.cross_entropy_loss = nn.CrossEntropyLoss()
    return loss


def _run_st(loss: Any, student: list[Tensor], guide: list[Tensor], monkeypatch: pytest.MonkeyPatch) -> Tensor:
    from sentence_transformers.sentence_transformer.losses import gist_embed

    answers = iter([student, guide])
    monkeypatch.setattr(gist_embed, "embed_columns", lambda model, features: next(answers))
    return loss([{} for _ in student], torch.zeros(student[0].shape[0]))


def _leaves(*tensors: Tensor) -> list[Tensor]:
    return [t.detach().clone().requires_grad_(True) for t in tensors]


SETTINGS = [(0.0, "absolute"), (0.05, "absolute"), (0.1, "relative")]


@pytest.mark.parametrize(("margin", "strategy"), SETTINGS)
@pytest.mark.parametrize("hard_negatives", [False, True])
def test_guided_infonce_equals_gistembedloss(margin: float, strategy: str, hard_negatives: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = 3 if hard_negatives else 2
    student = [_embeddings(20 + k) for k in range(parts)]
    guide = [_embeddings(30 + k, B, G) for k in range(parts)]
    st_student = _leaves(*student)
    st_loss = _run_st(_st_gist(0.05, margin, strategy), st_student, guide, monkeypatch)
    st_loss.backward()
    ours = _leaves(*student)
    config = ContrastiveConfig(tau=0.05, batch_kind="triplets", guide="g", guide_margin=margin, guide_margin_strategy=strategy)
    out = ContrastiveObjective(config)(ours[0], ours[1], ours[2] if hard_negatives else None, guide=GuideVectors(*guide))
    out.loss.backward()
    assert float(out.loss.detach()) == pytest.approx(float(st_loss.detach()), rel=1e-10)
    for a, b in zip(ours, st_student, strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-9, atol=1e-12)
    share = float(out.stats["guide_masked"])
    assert 0 < share < 1  # the guide removed some negatives, not all
    unguided = ContrastiveObjective(ContrastiveConfig(tau=0.05, batch_kind="triplets"))(*student[:1], student[1], student[2] if hard_negatives else None)
    assert float(unguided.loss) != pytest.approx(float(out.loss.detach()))


@pytest.mark.parametrize(("margin", "strategy"), SETTINGS)
def test_guided_ibn_on_positive_pairs_equals_gistembedloss(margin: float, strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The AnglE in-batch term on pairs all labelled positive with distinct texts is InfoNCE: guided, GISTEmbedLoss."""
    student, guide = [_embeddings(40), _embeddings(41)], [_embeddings(42, B, G), _embeddings(43, B, G)]
    st_student = _leaves(*student)
    st_loss = _run_st(_st_gist(0.05, margin, strategy), st_student, guide, monkeypatch)
    st_loss.backward()
    ours = _leaves(*student)
    config = ObjectiveConfig.from_preset("ibn", positive_threshold=1.0, guide="g", guide_margin=margin, guide_margin_strategy=strategy)
    out = AnglEObjective(config)(ours[0], ours[1], torch.ones(B), torch.arange(B), torch.arange(B, 2 * B), guide=GuideVectors(*guide))
    out.loss.backward()
    assert float(out.loss.detach()) == pytest.approx(float(st_loss.detach()), rel=1e-10)
    for a, b in zip(ours, st_student, strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-9, atol=1e-12)


def test_the_student_as_its_own_guide_equals_gistembedloss_with_guide_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """GISTEmbedLoss(model, guide=model) scores under no_grad: the student's detached embeddings (no
    dropout here: one pass). anglekit's self-guide passes exactly those; no gradient flows through the mask."""
    student = [_embeddings(50), _embeddings(51)]
    st_student = _leaves(*student)
    st_loss = _run_st(_st_gist(0.05, 0.0, "absolute"), st_student, [t.detach() for t in st_student], monkeypatch)
    st_loss.backward()
    ours = _leaves(*student)
    config = ContrastiveConfig(tau=0.05, batch_kind="triplets", guide="student")
    out = ContrastiveObjective(config)(ours[0], ours[1], guide=GuideVectors(ours[0].detach(), ours[1].detach()))
    out.loss.backward()
    assert float(out.loss.detach()) == pytest.approx(float(st_loss.detach()), rel=1e-10)
    for a, b in zip(ours, st_student, strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-9, atol=1e-12)


def test_gistembedloss_default_blocks_use_the_anchor_positive_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """GISTEmbedLoss's defaults add, to row i's anchor-positive logits, the anchor-anchor block
    (a_i . a_j) and the positive-positive block (p_i . p_j), each masked where the guide's own score
    of that block exceeds row i's anchor-positive threshold, self-pairs removed. Rebuilt here from
    guide_mask (anchor against [P | A]) and guide_threshold (the positive-positive block), it is
    GISTEmbedLoss's value and gradient; anglekit's objectives have no such blocks."""
    anchors, positives = _embeddings(60), _embeddings(61)
    ga, gp = _embeddings(62, B, G), _embeddings(63, B, G)
    st_student = _leaves(anchors, positives)
    st_loss = _run_st(_st_gist(0.05, 0.1, "relative", anchors_block=True, positives_block=True), st_student, [ga, gp], monkeypatch)
    st_loss.backward()
    a, p = _leaves(anchors, positives)
    rows = torch.arange(B)
    first = guide_mask(ga, torch.cat([gp, ga]), rows, margin=0.1, strategy="relative")  # [B, 2B]: ap, aa
    unit_a, unit_p = ga / ga.norm(dim=1, keepdim=True), gp / gp.norm(dim=1, keepdim=True)
    threshold = guide_threshold((unit_a * unit_p).sum(dim=1), 0.1, "relative")
    pp = (unit_p @ unit_p.T) > threshold.unsqueeze(1)
    mask = torch.cat([first, pp], dim=1)
    mask[rows, B + rows] = True  # no anchor is its own negative
    mask[rows, 2 * B + rows] = True  # nor is a positive
    cos = lambda u, v: (u / u.norm(dim=1, keepdim=True)) @ (v / v.norm(dim=1, keepdim=True)).T  # noqa: E731
    logits = torch.cat([cos(a, p), cos(a, a), cos(p, p)], dim=1).masked_fill(mask, float("-inf")) / 0.05
    loss = torch.nn.functional.cross_entropy(logits, rows)
    loss.backward()
    assert int(first[:, B:].sum()) > 0 and int(pp.sum()) > 0  # both extra blocks lose candidates
    assert float(loss.detach()) == pytest.approx(float(st_loss.detach()), rel=1e-10)
    torch.testing.assert_close(a.grad, st_student[0].grad, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(p.grad, st_student[1].grad, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------ the knobs


def test_guide_flags_need_an_in_batch_term() -> None:
    assert resolve_objective("paper", {"guide": "m"}).config.guide == "m"
    assert resolve_objective("simcse-sup", {"guide": "m", "guide_margin": 0.1}).config.guide_margin == 0.1
    assert resolve_objective("margin-mse", {"guide": "m", "ibn_weight": 1.0}).config.angle_config().guide == "m"
    for name, why in [("cosine", "ibn_weight 0"), ("margin-mse", "ibn_weight 0"), ("simcse-unsup", "dropout view")]:
        with pytest.raises(ConfigError, match=f"--guide m needs the in-batch-negative term, and in the objective '{name}'.*{why}"):
            resolve_objective(name, {"guide": "m"})
    with pytest.raises(ConfigError, match="guide_margin_strategy"):
        resolve_objective("paper", {"guide": "m", "guide_margin_strategy": "both"})


def test_a_margin_without_a_guide_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    resolve_objective("paper", {"guide_margin": 0.2})
    assert "--guide-margin 0.2 does nothing" in caplog.text and "no --guide is given" in caplog.text


def test_guide_vectors_are_left_alone_by_matryoshka() -> None:
    from anglekit.losses import MatryoshkaConfig, MatryoshkaObjective

    x, y = _embeddings(70), _embeddings(71)
    gx, gy = _embeddings(72, B, G), _embeddings(73, B, G)
    inner = AnglEObjective(ObjectiveConfig.from_preset("ibn", positive_threshold=1.0, guide="g"))
    nested = MatryoshkaObjective(inner, MatryoshkaConfig((8, 4)))
    out = nested(x, y, torch.ones(B), torch.arange(B), torch.arange(B, 2 * B), guide=GuideVectors(gx, gy))
    at4 = inner(x[:, :4], y[:, :4], torch.ones(B), torch.arange(B), torch.arange(B, 2 * B), guide=GuideVectors(gx, gy))
    assert float(out.components["ibn@4"]) == pytest.approx(float(at4.loss))
    assert "guide_masked" in out.stats
