"""Embedding distillation from a teacher of any width: the student's cosine matrix over the batch
against the teacher's.

L = mean over (i, j) of (cos(x_i, y_j) − cos(x'_i, y'_j))², x the batch's anchors, y its
documents, primes the teacher's embeddings of the same texts (docs/objectives.md says why this
and not an MSE through a learnt projection).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from anglekit.losses._common import unit_rows

__all__ = ["SimilarityDistillLoss", "similarity_distill_loss"]


def similarity_distill_loss(
    student_rows: Tensor, student_columns: Tensor, teacher_rows: Tensor, teacher_columns: Tensor, column_valid: Tensor | None = None
) -> Tensor:
    """Mean over (i, j) of (cos(x_i, y_j) − cos(x'_i, y'_j))²: the student's cosine matrix of rows
    [B, D] against columns [C, D] matched to the teacher's of rows [B, D'] and columns [C, D'] (D'
    any width: only cosines are compared). ``column_valid`` [C] bool leaves columns out."""
    if student_rows.dim() != 2 or student_columns.dim() != 2 or student_rows.shape[1] != student_columns.shape[1]:
        raise ValueError(f"student rows and columns must be [B, D] and [C, D], got {tuple(student_rows.shape)} and {tuple(student_columns.shape)}")
    if teacher_rows.dim() != 2 or teacher_columns.dim() != 2 or teacher_rows.shape[1] != teacher_columns.shape[1]:
        raise ValueError(f"teacher rows and columns must be [B, D'] and [C, D'], got {tuple(teacher_rows.shape)} and {tuple(teacher_columns.shape)}")
    if teacher_rows.shape[0] != student_rows.shape[0] or teacher_columns.shape[0] != student_columns.shape[0]:
        raise ValueError(
            f"the teacher's rows and columns ({teacher_rows.shape[0]}, {teacher_columns.shape[0]}) do not match the student's "
            f"({student_rows.shape[0]}, {student_columns.shape[0]})"
        )
    if not bool(torch.isfinite(teacher_rows).all() and torch.isfinite(teacher_columns).all()):
        raise ValueError("teacher embeddings must be finite")
    student_cos = unit_rows(student_rows) @ unit_rows(student_columns).T
    teacher_cos = (unit_rows(teacher_rows.detach()) @ unit_rows(teacher_columns.detach()).T).to(student_cos.dtype)
    squared = (student_cos - teacher_cos) ** 2
    if column_valid is None:
        return squared.mean()
    if column_valid.shape != (student_columns.shape[0],) or column_valid.dtype != torch.bool:
        raise ValueError(f"column_valid must be a bool tensor of shape [{student_columns.shape[0]}], got {column_valid.dtype} {tuple(column_valid.shape)}")
    keep = column_valid.to(squared.device).unsqueeze(0).expand_as(squared)
    return torch.where(keep, squared, torch.zeros_like(squared)).sum() / keep.sum().clamp_min(1)


class SimilarityDistillLoss(nn.Module):
    """:func:`similarity_distill_loss` as a module."""

    def forward(self, rows: Tensor, columns: Tensor, teacher_rows: Tensor, teacher_columns: Tensor, column_valid: Tensor | None = None) -> Tensor:
        """Student rows [B, D] and columns [C, D]; the teacher's [B, D'] and [C, D']."""
        return similarity_distill_loss(rows, columns, teacher_rows, teacher_columns, column_valid)
