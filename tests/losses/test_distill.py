"""Distillation objectives: margin-mse, distill-kl and embed-distill against loop references,
float64 gradient checks, sentence-transformers' MarginMSELoss / DistillKLDivLoss, invariances,
composition with the AnglE terms and Matryoshka, and bad input."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from anglekit.errors import ConfigError
from anglekit.losses import (
    AnglEObjective,
    DistillKLLoss,
    MarginMSELoss,
    MatryoshkaConfig,
    MatryoshkaObjective,
    ObjectiveConfig,
    SimilarityDistillLoss,
)
from anglekit.losses.distill import (
    DistillConfig,
    DistillObjective,
    Teacher,
    TeacherTable,
    distill_kl_loss,
    margin_mse_loss,
    similarity_distill_loss,
    student_scores,
)
from anglekit.losses.registry import all_presets, get_objective, resolve_objective

B, N, D = 4, 3, 8


def _batch(seed: int = 0, dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    anchors = torch.randn(B, D, generator=g, dtype=dtype)
    positives = torch.randn(B, D, generator=g, dtype=dtype)
    negatives = torch.randn(B, N, D, generator=g, dtype=dtype)
    teacher = torch.rand(B, 1 + N, generator=g, dtype=dtype)
    valid = torch.ones(B, N, dtype=torch.bool)
    valid[1, 2] = False  # a padded row: two negatives
    valid[3, 1:] = False  # one negative
    return anchors, positives, negatives, teacher, valid


# ----------------------------------------------------------------------------- loop references


def _cos(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def _ref_scores(anchors: Tensor, positives: Tensor, negatives: Tensor, similarity: str) -> list[list[float]]:
    score = _cos if similarity == "cosine" else (lambda a, b: sum(x * y for x, y in zip(a, b, strict=True)))
    out = []
    for i in range(anchors.shape[0]):
        a = anchors[i].tolist()
        out.append([score(a, positives[i].tolist())] + [score(a, negatives[i, k].tolist()) for k in range(negatives.shape[1])])
    return out


def _ref_margin_mse(student: list[list[float]], teacher: list[list[float]], valid: list[list[bool]]) -> float:
    total, count = 0.0, 0
    for s, t, v in zip(student, teacher, valid, strict=True):
        for k in range(1, len(s)):
            if v[k - 1]:
                total += ((s[0] - s[k]) - (t[0] - t[k])) ** 2
                count += 1
    return total / count


def _ref_kl(student: list[list[float]], teacher: list[list[float]], valid: list[list[bool]], tau_s: float, tau_t: float) -> float:
    total = 0.0
    for s, t, v in zip(student, teacher, valid, strict=True):
        keep = [0] + [k for k in range(1, len(s)) if v[k - 1]]
        zs = sum(math.exp(s[k] / tau_s) for k in keep)
        zt = sum(math.exp(t[k] / tau_t) for k in keep)
        for k in keep:
            p_t, p_s = math.exp(t[k] / tau_t) / zt, math.exp(s[k] / tau_s) / zs
            total += p_t * (math.log(p_t) - math.log(p_s))
    return total / len(student)


def _ref_similarity(rows: Tensor, columns: Tensor, teacher_rows: Tensor, teacher_columns: Tensor) -> float:
    total = 0.0
    for i in range(rows.shape[0]):
        for j in range(columns.shape[0]):
            student = _cos(rows[i].tolist(), columns[j].tolist())
            teacher = _cos(teacher_rows[i].tolist(), teacher_columns[j].tolist())
            total += (student - teacher) ** 2
    return total / (rows.shape[0] * columns.shape[0])


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_margin_mse_and_kl_match_loops(similarity: str) -> None:
    anchors, positives, negatives, teacher, valid = _batch()
    scores = student_scores(anchors, positives, negatives, similarity)
    ref = _ref_scores(anchors, positives, negatives, similarity)
    assert scores.reshape(-1).tolist() == pytest.approx([v for row in ref for v in row], abs=1e-12)
    mask = valid.tolist()
    assert margin_mse_loss(scores, teacher, valid).item() == pytest.approx(_ref_margin_mse(ref, teacher.tolist(), mask), rel=1e-12)
    for tau_s, tau_t in [(0.05, None), (0.1, 0.02), (1.0, 2.0)]:
        got = distill_kl_loss(scores, teacher, valid, temperature=tau_s, teacher_temperature=tau_t).item()
        assert got == pytest.approx(_ref_kl(ref, teacher.tolist(), mask, tau_s, tau_t or tau_s), rel=1e-10)


def test_similarity_distill_matches_loop_for_a_teacher_of_another_width() -> None:
    g = torch.Generator().manual_seed(1)
    rows, columns = torch.randn(3, D, generator=g, dtype=torch.float64), torch.randn(5, D, generator=g, dtype=torch.float64)
    teacher_rows, teacher_columns = torch.randn(3, 13, generator=g, dtype=torch.float64), torch.randn(5, 13, generator=g, dtype=torch.float64)
    got = similarity_distill_loss(rows, columns, teacher_rows, teacher_columns).item()
    assert got == pytest.approx(_ref_similarity(rows, columns, teacher_rows, teacher_columns), rel=1e-12)
    assert SimilarityDistillLoss()(rows, columns, teacher_rows, teacher_columns).item() == pytest.approx(got, rel=1e-15)
    keep = torch.tensor([True, False, True, True, False])
    masked = similarity_distill_loss(rows, columns, teacher_rows, teacher_columns, keep).item()
    assert masked == pytest.approx(_ref_similarity(rows, columns[keep], teacher_rows, teacher_columns[keep]), rel=1e-12)
    # the teacher itself (any width) as the student: nothing to learn
    assert similarity_distill_loss(teacher_rows, teacher_columns, teacher_rows, teacher_columns).item() == pytest.approx(0.0, abs=1e-15)


def test_gradients_in_float64() -> None:
    anchors, positives, negatives, teacher, valid = _batch(2)
    for tensor in (anchors, positives, negatives):
        tensor.requires_grad_(True)

    def margin(a: Tensor, p: Tensor, n: Tensor) -> Tensor:
        return margin_mse_loss(student_scores(a, p, n, "cosine"), teacher, valid)

    def kl(a: Tensor, p: Tensor, n: Tensor) -> Tensor:
        return distill_kl_loss(student_scores(a, p, n, "dot"), teacher, valid, temperature=0.5, teacher_temperature=0.1)

    for fn in (margin, kl):
        assert torch.autograd.gradcheck(fn, (anchors, positives, negatives))
    g = torch.Generator().manual_seed(3)
    t_rows, t_cols = torch.randn(B, 5, generator=g, dtype=torch.float64), torch.randn(B + int(valid.sum()), 5, generator=g, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda a, p, n: similarity_distill_loss(a, torch.cat([p, n[valid]]), t_rows, t_cols), (anchors, positives, negatives))


def test_padding_slots_change_nothing() -> None:
    anchors, positives, negatives, teacher, valid = _batch(4)
    scores = student_scores(anchors, positives, negatives)
    garbage_scores, garbage_teacher = scores.clone(), teacher.clone()
    garbage_scores[~torch.cat([torch.ones(B, 1, dtype=torch.bool), valid], 1)] = 1e6
    garbage_teacher[~torch.cat([torch.ones(B, 1, dtype=torch.bool), valid], 1)] = float("nan")  # never read
    assert margin_mse_loss(garbage_scores, garbage_teacher, valid).item() == pytest.approx(margin_mse_loss(scores, teacher, valid).item(), rel=1e-12)
    assert distill_kl_loss(garbage_scores, garbage_teacher, valid).item() == pytest.approx(distill_kl_loss(scores, teacher, valid).item(), rel=1e-12)
    # row 3 alone (one negative) is the loss of that row's unpadded tuple
    alone = distill_kl_loss(scores[3:, :2], teacher[3:, :2]).item()
    rows_kl = [distill_kl_loss(scores[i : i + 1], teacher[i : i + 1], valid[i : i + 1]).item() for i in range(B)]
    assert rows_kl[3] == pytest.approx(alone, rel=1e-12)
    assert distill_kl_loss(scores, teacher, valid).item() == pytest.approx(sum(rows_kl) / B, rel=1e-12)


def test_invariances() -> None:
    anchors, positives, negatives, teacher, valid = _batch(5)
    scores = student_scores(anchors, positives, negatives)
    base_mm, base_kl = margin_mse_loss(scores, teacher, valid).item(), distill_kl_loss(scores, teacher, valid).item()
    # a constant added to a teacher row changes neither its margins nor its softmax
    shifted = teacher + torch.arange(B, dtype=teacher.dtype).unsqueeze(1)
    assert margin_mse_loss(scores, shifted, valid).item() == pytest.approx(base_mm, rel=1e-12)
    assert distill_kl_loss(scores, shifted, valid).item() == pytest.approx(base_kl, rel=1e-9)
    # permuting the rows; scaling the embeddings (cosine)
    order = torch.tensor([2, 0, 3, 1])
    permuted = student_scores(anchors[order] * 3.0, positives[order] * 0.5, negatives[order] * 7.0)
    assert margin_mse_loss(permuted, teacher[order], valid[order]).item() == pytest.approx(base_mm, rel=1e-12)
    assert distill_kl_loss(permuted, teacher[order], valid[order]).item() == pytest.approx(base_kl, rel=1e-12)
    # a student that scores as the teacher does: zero, and zero vectors stay finite
    assert margin_mse_loss(teacher, teacher, valid).item() == 0.0
    assert distill_kl_loss(teacher, teacher, valid).item() == pytest.approx(0.0, abs=1e-12)
    zero = student_scores(torch.zeros(B, D), torch.zeros(B, D), torch.zeros(B, N, D))
    assert torch.isfinite(zero).all() and torch.isfinite(distill_kl_loss(zero, teacher.float(), valid))


# ----------------------------------------------------------------------------- sentence-transformers


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_equal_to_sentence_transformers(similarity: str) -> None:
    losses = pytest.importorskip("sentence_transformers.sentence_transformer.losses")
    from sentence_transformers.util import pairwise_cos_sim, pairwise_dot_score

    fn = pairwise_cos_sim if similarity == "cosine" else pairwise_dot_score
    anchors, positives, negatives, teacher, _ = _batch(6)
    columns = [anchors, positives, *negatives.unbind(1)]
    ours = student_scores(anchors, positives, negatives, similarity)
    theirs_mm = losses.MarginMSELoss(None, similarity_fct=fn).compute_loss_from_embeddings(columns, teacher)
    assert margin_mse_loss(ours, teacher).item() == pytest.approx(theirs_mm.item(), rel=1e-12)
    assert MarginMSELoss(similarity)(anchors, positives, negatives, teacher).item() == pytest.approx(theirs_mm.item(), rel=1e-12)
    # the margins given directly (sentence-transformers' other label layout) are the same loss
    margins = teacher[:, :1] - teacher[:, 1:]
    assert losses.MarginMSELoss(None, similarity_fct=fn).compute_loss_from_embeddings(columns, margins).item() == pytest.approx(theirs_mm.item(), rel=1e-12)
    # one negative: sentence-transformers' triplet case
    theirs_one = losses.MarginMSELoss(None, similarity_fct=fn).compute_loss_from_embeddings(columns[:3], teacher[:, :2])
    assert margin_mse_loss(ours[:, :2], teacher[:, :2]).item() == pytest.approx(theirs_one.item(), rel=1e-12)
    for tau_s, tau_t in [(1.0, 1.0), (0.05, 0.05), (0.1, 0.5)]:
        kl = losses.DistillKLDivLoss(None, similarity_fct=fn, student_temperature=tau_s, teacher_temperature=tau_t)
        with torch.no_grad():
            theirs = kl.compute_loss_from_embeddings(columns, teacher).item()
        # sentence-transformers multiplies the same KL by the student temperature squared
        assert distill_kl_loss(ours, teacher, temperature=tau_s, teacher_temperature=tau_t).item() * tau_s**2 == pytest.approx(theirs, rel=1e-10)
        module = DistillKLLoss(tau_s, tau_t, similarity)
        assert module(anchors, positives, negatives, teacher).item() * tau_s**2 == pytest.approx(theirs, rel=1e-10)


# ----------------------------------------------------------------------------- the objective


def test_objective_composes_with_the_angle_terms() -> None:
    anchors, positives, negatives, teacher, valid = _batch(7)
    negatives = negatives * valid.unsqueeze(-1)  # zeros in padding, as the task gives them
    ids = torch.arange(B * (2 + N)).reshape(B, 2 + N)
    negative_ids = torch.where(valid, ids[:, 2:], torch.full_like(ids[:, 2:], -1))
    config = DistillConfig(margin_mse_weight=2.0, distill_kl_weight=0.5, ibn_weight=1.0, cosine_weight=0.25)
    out = DistillObjective(config)(
        anchors, positives, negatives, teacher=Teacher(teacher), valid=valid, anchor_ids=ids[:, 0], positive_ids=ids[:, 1], negative_ids=negative_ids
    )
    assert set(out.components) == {"margin_mse", "distill_kl", "ibn", "cosine"}
    scores = student_scores(anchors, positives, negatives)
    assert out.components["margin_mse"].item() == pytest.approx(margin_mse_loss(scores, teacher, valid).item(), rel=1e-12)
    # the AnglE terms on the expanded pairs (anchor, positive, 1), (anchor, negative_k, 0) grouped by row
    owners = valid.nonzero(as_tuple=True)[0]
    x, y = torch.cat([anchors, anchors[owners]]), torch.cat([positives, negatives[valid]])
    labels = torch.cat([torch.ones(B), torch.zeros(len(owners))]).double()
    angle = AnglEObjective(ObjectiveConfig(cosine_weight=0.25, ibn_weight=1.0, angle_weight=0.0, positive_threshold=1.0))
    expected = angle(x, y, labels, torch.cat([ids[:, 0], ids[owners, 0]]), torch.cat([ids[:, 1], negative_ids[valid]]), torch.cat([torch.arange(B), owners]))
    assert out.components["ibn"].item() == pytest.approx(expected.components["ibn"].item(), rel=1e-12)
    total = 2.0 * out.components["margin_mse"] + 0.5 * out.components["distill_kl"] + expected.loss
    assert out.loss.item() == pytest.approx(total.item(), rel=1e-12)


def test_embed_distill_looks_the_teacher_up_by_row_and_survives_matryoshka() -> None:
    anchors, positives, negatives, teacher, valid = _batch(8)
    g = torch.Generator().manual_seed(9)
    vectors = torch.randn(30, 5, generator=g, dtype=torch.float64)
    index = torch.randperm(30, generator=g)
    table = TeacherTable(vectors, index[:10], index[10:20], index[:30].reshape(10, N))
    rows = torch.tensor([7, 2, 5, 0])
    objective = DistillObjective(DistillConfig(embed_distill_weight=1.0), table)
    out = objective(anchors, positives, negatives, teacher=Teacher(teacher, rows=rows), valid=valid)
    teacher_negatives = vectors[table.negatives[rows]]
    expected = similarity_distill_loss(
        anchors, torch.cat([positives, negatives[valid]]), vectors[table.anchors[rows]], torch.cat([vectors[table.positives[rows]], teacher_negatives[valid]])
    )
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-12)
    nested = MatryoshkaObjective(objective, MatryoshkaConfig(dims=(8, 4)))
    both = nested(anchors, positives, negatives, teacher=Teacher(teacher, rows=rows), valid=valid)
    small = objective(anchors[:, :4], positives[:, :4], negatives[..., :4], teacher=Teacher(teacher, rows=rows), valid=valid)
    assert set(both.components) == {"embed_distill@8", "embed_distill@4"}
    assert both.loss.item() == pytest.approx(out.loss.item() + small.loss.item(), rel=1e-12)
    with pytest.raises(ValueError, match="needs the teacher's embeddings"):
        DistillObjective(DistillConfig(embed_distill_weight=1.0))(anchors, positives, negatives, teacher=Teacher(teacher), valid=valid)


def test_registry_presets_and_knobs() -> None:
    presets = all_presets()
    assert {presets[name] for name in ("margin-mse", "distill-kl", "embed-distill")} == {"scored"}
    resolved = resolve_objective("margin-mse", {"ibn_weight": 1.0, "distill_similarity": "dot"})
    assert resolved.config.ibn_weight == 1.0 and resolved.config.angle_config() is not None
    assert isinstance(get_objective("distill-kl", distill_temperature=0.1), DistillObjective)
    with pytest.raises(ConfigError, match="--margin-degrees applies to the contrastive objectives"):
        resolve_objective("margin-mse", {"margin_degrees": 10.0})
    with pytest.raises(ConfigError, match="needs a weight > 0"):
        DistillConfig()
    with pytest.raises(ConfigError, match="distill_similarity"):
        DistillConfig(margin_mse_weight=1.0, distill_similarity="angle")
    with pytest.raises(ConfigError, match="teacher_temperature"):
        DistillConfig(distill_kl_weight=1.0, teacher_temperature=0.0)


# ----------------------------------------------------------------------------- bad input


def test_bad_tensors_are_named() -> None:
    anchors, positives, negatives, teacher, valid = _batch(10)
    scores = student_scores(anchors, positives, negatives)
    with pytest.raises(ValueError, match=r"teacher scores \(4, 3\) do not match the student's \(4, 4\)"):
        margin_mse_loss(scores, teacher[:, :3])
    nan = teacher.clone()
    nan[2, 1] = float("nan")
    with pytest.raises(ValueError, match="teacher score of batch row 2, negative 1, is nan"):
        distill_kl_loss(scores, nan, valid)
    with pytest.raises(ValueError, match="n >= 1 negatives"):
        margin_mse_loss(scores[:, :1], teacher[:, :1])
    with pytest.raises(ValueError, match="valid must be a bool tensor of shape"):
        margin_mse_loss(scores, teacher, valid[:, :2])
    with pytest.raises(ValueError, match="unknown similarity 'angle'"):
        MarginMSELoss("angle")
    with pytest.raises(ConfigError, match="temperature must be a finite number > 0"):
        DistillKLLoss(0.0)
    with pytest.raises(ValueError, match="negatives must be"):
        student_scores(anchors, positives, negatives[:, :, :3])
    with pytest.raises(ValueError, match="do not match the student's"):
        similarity_distill_loss(anchors, positives, anchors[:3], positives)
    with pytest.raises(ValueError, match="finite"):
        similarity_distill_loss(anchors, positives, anchors * float("nan"), positives)
