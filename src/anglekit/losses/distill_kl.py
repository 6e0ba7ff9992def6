"""Listwise distillation: KL divergence between the teacher's and the student's softmax over each
row's positive and negatives.

L = (1/B) Σ_i KL(softmax(t_i/τ_t) ‖ softmax(s_i/τ_s)); sentence-transformers' DistillKLDivLoss is
this times τ_s² (see docs/objectives.md for why anglekit leaves the factor out).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from anglekit.losses._common import check_tau
from anglekit.losses.distill_configs import DISTILL_SIMILARITIES
from anglekit.losses.teacher_scores import check_teacher_scores, student_scores

__all__ = ["DistillKLLoss", "distill_kl_loss"]


def distill_kl_loss(
    student: Tensor, teacher: Tensor, valid: Tensor | None = None, *, temperature: float = 0.05, teacher_temperature: float | None = None
) -> Tensor:
    """(1/B) Σ_i KL(softmax(t_i/τ_t) ‖ softmax(s_i/τ_s)) over each row's positive and real negatives.

    ``temperature`` τ_s divides the student's scores, ``teacher_temperature`` τ_t (default τ_s) the
    teacher's. Its gradient in s_ik is (p_ik − q_ik)/τ_s (p the student's softmax, q the teacher's),
    the scale of the in-batch-negative term's, so it composes with the AnglE terms at weight 1;
    sentence-transformers' DistillKLDivLoss multiplies the same KL by τ_s².
    """
    tau_s = check_tau(temperature, "temperature")
    tau_t = tau_s if teacher_temperature is None else check_tau(teacher_temperature, "teacher_temperature")
    mask = check_teacher_scores(student, teacher, valid)
    used = torch.cat([torch.ones_like(mask[:, :1]), mask], dim=1)
    teacher = teacher.detach().to(student.dtype)
    low = torch.finfo(student.dtype).min
    student_log = torch.log_softmax(torch.where(used, student / tau_s, torch.full_like(student, low)), dim=1)
    teacher_log = torch.log_softmax(torch.where(used, teacher / tau_t, torch.full_like(teacher, low)), dim=1)
    teacher_prob = torch.where(used, teacher_log.exp(), torch.zeros_like(teacher_log))
    terms = teacher_prob * (torch.where(used, teacher_log, torch.zeros_like(teacher_log)) - torch.where(used, student_log, torch.zeros_like(student_log)))
    return terms.sum() / student.shape[0]


class DistillKLLoss(nn.Module):
    """:func:`distill_kl_loss` of the student's scores (``similarity``: cosine or dot) of n-tuple rows."""

    def __init__(self, temperature: float = 0.05, teacher_temperature: float | None = None, similarity: str = "cosine") -> None:
        super().__init__()
        if similarity not in DISTILL_SIMILARITIES:
            raise ValueError(f"unknown similarity {similarity!r}; valid: {', '.join(DISTILL_SIMILARITIES)}")
        self.temperature = check_tau(temperature, "temperature")
        self.teacher_temperature = None if teacher_temperature is None else check_tau(teacher_temperature, "teacher_temperature")
        self.similarity = similarity

    def forward(self, anchors: Tensor, positives: Tensor, negatives: Tensor, teacher: Tensor, valid: Tensor | None = None) -> Tensor:
        """``anchors``, ``positives`` [B, D], ``negatives`` [B, n, D], the teacher's scores [B, 1 + n]."""
        scores = student_scores(anchors, positives, negatives, self.similarity)
        return distill_kl_loss(scores, teacher, valid, temperature=self.temperature, teacher_temperature=self.teacher_temperature)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, teacher_temperature={self.teacher_temperature}, similarity={self.similarity}"
