"""Margin-MSE (Hofstaetter et al. 2020): the student's positive-negative margins against the teacher's.

L = mean over the real negatives (i, k) of ((s_i0 − s_ik) − (t_i0 − t_ik))²: sentence-transformers'
MarginMSELoss on the same scores.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from anglekit.losses.distill_configs import DISTILL_SIMILARITIES
from anglekit.losses.teacher_scores import check_teacher_scores, student_scores

__all__ = ["MarginMSELoss", "margin_mse_loss"]


def margin_mse_loss(student: Tensor, teacher: Tensor, valid: Tensor | None = None) -> Tensor:
    """Mean over the real negatives (i, k) of ((s_i0 − s_ik) − (t_i0 − t_ik))².

    ``student``, ``teacher``: [B, 1 + n] scores, the positive's first; ``valid``: [B, n] bool.
    The teacher is a target (no gradient flows to it). 0 (with a gradient path) without negatives.
    """
    mask = check_teacher_scores(student, teacher, valid)
    teacher = teacher.detach().to(student.dtype)
    student_margin = student[:, :1] - student[:, 1:]
    teacher_margin = torch.where(mask, teacher[:, :1] - teacher[:, 1:], torch.zeros_like(student_margin))
    squared = torch.where(mask, (student_margin - teacher_margin) ** 2, torch.zeros_like(student_margin))
    return squared.sum() / mask.sum().clamp_min(1)


class MarginMSELoss(nn.Module):
    """:func:`margin_mse_loss` of the student's scores (``similarity``: cosine or dot) of n-tuple rows."""

    def __init__(self, similarity: str = "cosine") -> None:
        super().__init__()
        if similarity not in DISTILL_SIMILARITIES:
            raise ValueError(f"unknown similarity {similarity!r}; valid: {', '.join(DISTILL_SIMILARITIES)}")
        self.similarity = similarity

    def forward(self, anchors: Tensor, positives: Tensor, negatives: Tensor, teacher: Tensor, valid: Tensor | None = None) -> Tensor:
        """``anchors``, ``positives`` [B, D], ``negatives`` [B, n, D], the teacher's scores [B, 1 + n]."""
        return margin_mse_loss(student_scores(anchors, positives, negatives, self.similarity), teacher, valid)

    def extra_repr(self) -> str:
        return f"similarity={self.similarity}"
