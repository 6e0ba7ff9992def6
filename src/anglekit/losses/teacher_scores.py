"""The scores distillation compares: the student's of each n-tuple row, and checks of the teacher's.

A row is (anchor a_i, positive p_i, negatives n_i1..n_in); its scores are [B, 1 + n], the
positive's first. ``valid`` [B, n] marks the real negatives of padded rows.
"""

from __future__ import annotations

import torch
from torch import Tensor

from anglekit.losses._common import unit_rows
from anglekit.losses.distill_configs import DISTILL_SIMILARITIES

__all__ = ["check_teacher_scores", "student_scores", "valid_mask"]


def valid_mask(scores: Tensor, valid: Tensor | None) -> Tensor:
    """[B, n] bool of the real negatives (all of them when ``valid`` is None)."""
    rows, width = scores.shape[0], scores.shape[1] - 1
    if valid is None:
        return torch.ones(rows, width, dtype=torch.bool, device=scores.device)
    if valid.shape != (rows, width) or valid.dtype != torch.bool:
        raise ValueError(f"valid must be a bool tensor of shape [{rows}, {width}], got {valid.dtype} {tuple(valid.shape)}")
    return valid.to(scores.device)


def check_teacher_scores(student: Tensor, teacher: Tensor, valid: Tensor | None) -> Tensor:
    """The [B, n] mask of real negatives; a ValueError for shapes that do not match or a teacher
    score that is not finite where it is used (naming the batch row and column)."""
    if student.dim() != 2 or student.shape[1] < 2:
        raise ValueError(f"student scores must have shape [B, 1 + n] with n >= 1 negatives, got {tuple(student.shape)}")
    if teacher.shape != student.shape:
        raise ValueError(f"teacher scores {tuple(teacher.shape)} do not match the student's {tuple(student.shape)} ([B, 1 + n])")
    mask = valid_mask(student, valid)
    used = torch.cat([torch.ones_like(mask[:, :1]), mask], dim=1)
    bad = (~torch.isfinite(teacher)) & used
    if bool(bad.any()):
        row, column = (int(v) for v in bad.nonzero()[0])
        what = "the positive" if column == 0 else f"negative {column}"
        raise ValueError(f"teacher score of batch row {row}, {what}, is {float(teacher[row, column])}: teacher scores must be finite")
    return mask


def student_scores(anchors: Tensor, positives: Tensor, negatives: Tensor, similarity: str = "cosine") -> Tensor:
    """[B, 1 + n]: the student's score of (a_i, p_i), then of (a_i, n_ik); ``anchors``, ``positives``
    [B, D], ``negatives`` [B, n, D]; ``similarity`` cosine or dot."""
    if similarity not in DISTILL_SIMILARITIES:
        raise ValueError(f"unknown similarity {similarity!r}; valid: {', '.join(DISTILL_SIMILARITIES)}")
    if anchors.dim() != 2 or positives.shape != anchors.shape:
        raise ValueError(f"anchors and positives must both be [B, D], got {tuple(anchors.shape)} and {tuple(positives.shape)}")
    if negatives.dim() != 3 or negatives.shape[0] != anchors.shape[0] or negatives.shape[2] != anchors.shape[1]:
        raise ValueError(f"negatives must be [B, n, D] = [{anchors.shape[0]}, n, {anchors.shape[1]}], got {tuple(negatives.shape)}")
    if similarity == "cosine":
        anchors, positives, negatives = unit_rows(anchors), unit_rows(positives), unit_rows(negatives)
    positive = (anchors * positives).sum(-1, keepdim=True)
    negative = torch.einsum("bd,bnd->bn", anchors, negatives)
    return torch.cat([positive, negative], dim=1)
