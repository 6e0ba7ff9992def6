"""Distillation: a student learns a teacher's scores of each row's positive and negatives, or the
teacher's cosine geometry over the batch.

Rows are n-tuples (anchor a_i, positive p_i, negatives n_i1..n_in) with the teacher's scores
t_i = (t_i0, t_i1, .., t_in) of (a_i, p_i) and (a_i, n_ik) (``*_score`` columns, the layout
``anglekit mine`` writes). The student's scores s_i are cos(a_i, ·) or the dot product. ``valid``
[B, n] marks the real negatives of padded rows (``--pad-negatives``); the padding enters no term.

Each term is a small module over a pure tensor function (re-exported here):

* :func:`margin_mse_loss` (Hofstaetter et al. 2020): mean over (i, k) of
  ((s_i0 − s_ik) − (t_i0 − t_ik))²; sentence-transformers' MarginMSELoss on the same scores (:mod:`.margin_mse`).
* :func:`distill_kl_loss`: (1/B) Σ_i KL(softmax(t_i/τ_t) ‖ softmax(s_i/τ_s)); sentence-transformers'
  DistillKLDivLoss is this times τ_s² (Hinton's factor, see docs/objectives.md; :mod:`.distill_kl`).
* :func:`similarity_distill_loss`: mean over (i, j) of (cos(a_i, d_j) − cos(a'_i, d'_j))², d_j
  every positive and real negative of the batch, primes the teacher's embeddings (any width;
  :mod:`.embed_distill`).

:class:`DistillObjective` weighs them and the AnglE terms on the same rows (:class:`DistillConfig`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from anglekit.losses.combined import AnglEObjective, ObjectiveOutput
from anglekit.losses.distill_configs import DistillConfig
from anglekit.losses.distill_kl import distill_kl_loss
from anglekit.losses.embed_distill import similarity_distill_loss
from anglekit.losses.guide import GuideVectors
from anglekit.losses.margin_mse import margin_mse_loss
from anglekit.losses.teacher_scores import student_scores, valid_mask

__all__ = [
    "DistillConfig",
    "DistillObjective",
    "Teacher",
    "TeacherTable",
    "distill_kl_loss",
    "margin_mse_loss",
    "similarity_distill_loss",
    "student_scores",
]


@dataclass(frozen=True)
class Teacher:
    """What a batch knows of the teacher: its ``scores`` [B, 1 + n] of (anchor, positive) then
    (anchor, negative_k), and, for :func:`similarity_distill_loss`, its embeddings of the anchors
    [B, D'], positives [B, D'] and negatives [B, n, D'], given here or looked up in the objective's
    :class:`TeacherTable` by the batch's training ``rows`` [B] (a container, so that Matryoshka's
    slicing of the student's embeddings leaves the teacher's alone)."""

    scores: Tensor
    anchors: Tensor | None = None
    positives: Tensor | None = None
    negatives: Tensor | None = None
    rows: Tensor | None = None


@dataclass(frozen=True)
class TeacherTable:
    """A teacher model's embeddings of the training data, computed once before training: each
    distinct text's ``vectors`` [T, D'] and, per training row, where its anchor [N], positive [N]
    and negatives [N, n] (-1 in padding slots) are among them."""

    vectors: Tensor
    anchors: Tensor
    positives: Tensor
    negatives: Tensor

    def __post_init__(self) -> None:
        rows = self.anchors.shape[0]
        if (
            self.vectors.dim() != 2
            or self.anchors.dim() != 1
            or self.positives.shape != (rows,)
            or self.negatives.dim() != 2
            or self.negatives.shape[0] != rows
        ):
            raise ValueError(f"teacher table: vectors [T, D'], anchors and positives [N], negatives [N, n], got {tuple(self.vectors.shape)}, "
                             f"{tuple(self.anchors.shape)}, {tuple(self.positives.shape)}, {tuple(self.negatives.shape)}")  # fmt: skip

    def lookup(self, scores: Tensor, rows: Tensor, device: torch.device) -> Teacher:
        """The :class:`Teacher` of the batch of training ``rows`` [B] (its ``scores`` kept; zeros
        in the negatives' padding slots)."""
        index = rows.cpu()
        negatives = self.negatives[index]
        dense = self.vectors[negatives.clamp_min(0)] * (negatives >= 0).unsqueeze(-1)
        return Teacher(scores, self.vectors[self.anchors[index]].to(device), self.vectors[self.positives[index]].to(device), dense.to(device), rows)


class DistillObjective(nn.Module):
    """``w_mm·L_margin-mse + w_kl·L_distill-kl + w_ed·L_embed-distill`` plus the AnglE terms on the
    same rows (each expanded into the pairs (anchor, positive, 1), (anchor, negative_k, 0), grouped
    by row); every computed term returned by name, unweighted."""

    batch_kind: ClassVar[str] = "scored"
    """n-tuples with the teacher's scores (:class:`anglekit.training.tasks.distill.DistillTask`)."""

    def __init__(self, config: DistillConfig | None = None, teacher_table: TeacherTable | None = None) -> None:
        super().__init__()
        self.config = config if config is not None else DistillConfig(margin_mse_weight=1.0)
        self.teacher_table = teacher_table
        angle = self.config.angle_config()
        self.angle = AnglEObjective(angle) if angle is not None else None

    def forward(
        self,
        anchors: Tensor,
        positives: Tensor,
        negatives: Tensor,
        *,
        teacher: Teacher,
        valid: Tensor | None = None,
        anchor_ids: Tensor | None = None,
        positive_ids: Tensor | None = None,
        negative_ids: Tensor | None = None,
        guide: GuideVectors | None = None,
    ) -> ObjectiveOutput:
        """The loss of B rows: ``anchors``, ``positives`` [B, D], ``negatives`` [B, n, D] (zeros where
        ``valid`` [B, n] is False), the ``teacher``'s scores (and embeddings for embed-distill);
        text ids (``negative_ids`` [B, n], -1 for padding) for the in-batch-negative term, which
        ``guide`` (a guide's embeddings of the same anchors, positives and negatives) guards."""
        cfg = self.config
        components: dict[str, Tensor] = {}
        stats: dict[str, Tensor] = {}
        mask = None if valid is None else valid_mask(teacher.scores, valid)
        if cfg.margin_mse_weight > 0 or cfg.distill_kl_weight > 0:
            scores = student_scores(anchors, positives, negatives, cfg.distill_similarity)
            if cfg.margin_mse_weight > 0:
                components["margin_mse"] = margin_mse_loss(scores, teacher.scores, valid)
            if cfg.distill_kl_weight > 0:
                components["distill_kl"] = distill_kl_loss(
                    scores, teacher.scores, valid, temperature=cfg.distill_temperature, teacher_temperature=cfg.teacher_tau
                )
        if cfg.embed_distill_weight > 0:
            if teacher.anchors is None and self.teacher_table is not None and teacher.rows is not None:
                teacher = self.teacher_table.lookup(teacher.scores, teacher.rows, anchors.device)
            components["embed_distill"] = self._embed_distill(anchors, positives, negatives, teacher, mask)
        weights = {"margin_mse": cfg.margin_mse_weight, "distill_kl": cfg.distill_kl_weight, "embed_distill": cfg.embed_distill_weight}
        terms = [weights[name] * value for name, value in components.items()]
        if self.angle is not None:
            out = self._angle_terms(anchors, positives, negatives, mask, anchor_ids, positive_ids, negative_ids, guide)
            components.update(out.components)
            stats.update(out.stats)
            terms.append(out.loss)
        loss = terms[0]
        for term in terms[1:]:
            loss = loss + term
        return ObjectiveOutput(loss=loss, components=components, stats=stats)

    @staticmethod
    def _embed_distill(anchors: Tensor, positives: Tensor, negatives: Tensor, teacher: Teacher, mask: Tensor | None) -> Tensor:
        """:func:`similarity_distill_loss` of the anchors against every positive and real negative."""
        if teacher.anchors is None or teacher.positives is None or teacher.negatives is None:
            raise ValueError("the embed-distill term needs the teacher's embeddings (Teacher.anchors, ..., or a TeacherTable and the batch's rows)")
        if mask is None:
            mask = torch.ones(negatives.shape[:2], dtype=torch.bool, device=negatives.device)
        columns = torch.cat([positives, negatives[mask]])
        teacher_columns = torch.cat([teacher.positives, teacher.negatives[mask.to(teacher.negatives.device)]])
        return similarity_distill_loss(anchors, columns, teacher.anchors.to(anchors.device), teacher_columns.to(anchors.device))

    def _angle_terms(
        self, anchors: Tensor, positives: Tensor, negatives: Tensor, mask: Tensor | None,
        anchor_ids: Tensor | None, positive_ids: Tensor | None, negative_ids: Tensor | None, guide: GuideVectors | None = None,
    ) -> ObjectiveOutput:  # fmt: skip
        """The AnglE terms on the rows expanded into labelled pairs, ranked within each row."""
        assert self.angle is not None
        size = anchors.shape[0]
        if mask is None:
            mask = torch.ones(negatives.shape[:2], dtype=torch.bool, device=negatives.device)
        owners = mask.nonzero(as_tuple=True)[0]
        rows = torch.arange(size, device=anchors.device)
        x = torch.cat([anchors, anchors[owners]])
        y = torch.cat([positives, negatives[mask]])
        labels = torch.cat([torch.ones(size), torch.zeros(owners.shape[0])]).to(anchors.device)
        ids1 = ids2 = None
        if anchor_ids is not None and positive_ids is not None and negative_ids is not None:
            ids1 = torch.cat([anchor_ids, anchor_ids[owners]])
            ids2 = torch.cat([positive_ids, negative_ids[mask]])
        guided = None
        if guide is not None:
            assert guide.negatives is not None, "the guide's embeddings need the negatives too"
            guided = GuideVectors(
                torch.cat([guide.anchors, guide.anchors[owners]]), torch.cat([guide.positives, guide.negatives[mask.to(guide.negatives.device)]])
            )
        return self.angle(x, y, labels, ids1, ids2, torch.cat([rows, owners]), guide=guided)

    def extra_repr(self) -> str:
        return repr(self.config)
