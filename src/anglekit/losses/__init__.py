"""Training objectives of AnglE: tensor-level cores (pure functions) and thin nn.Module wrappers.

Ranking core (eq. 1/7) with pluggable pair scores (cosine; angle, eq. 3-6, two variants),
in-batch negatives (eq. 2) and the combined objective (eq. 8); contrastive objectives (SimCSE's
InfoNCE, SimACE's angle similarity with a margin); distillation from a teacher's scores or
embeddings (margin-mse, distill-kl, embed-distill). :mod:`~anglekit.losses.registry` holds every
objective family (typed config, presets, knobs, builder): :func:`get_objective` builds any preset,
:func:`register_objective_family` adds a family; :class:`MatryoshkaObjective` (nested dimensions)
and :class:`ESEObjective` (Espresso: layers and a compressed prefix) wrap any of them.

Lazy: ``import anglekit.losses`` imports no torch; each name is imported on first use (the typed
configs and the registry need no torch at all).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from anglekit.losses.angle import ANGLE_VARIANTS, AngleLoss, angle_score_for
    from anglekit.losses.angular import ANGLE_CLIP, SIMILARITIES, angle_from_cosine, similarity_matrix
    from anglekit.losses.combined import AnglEObjective, ObjectiveOutput
    from anglekit.losses.configs import CONTRASTIVE_PRESETS, PRESETS, ContrastiveConfig, ObjectiveConfig
    from anglekit.losses.contrastive import ContrastiveObjective, InfoNCELoss, duplicate_negative_mask, info_nce_loss
    from anglekit.losses.cosine import CosineLoss
    from anglekit.losses.distill import DistillObjective, Teacher, TeacherTable
    from anglekit.losses.distill_configs import DISTILL_PRESETS, DistillConfig
    from anglekit.losses.distill_kl import DistillKLLoss, distill_kl_loss
    from anglekit.losses.embed_distill import SimilarityDistillLoss, similarity_distill_loss
    from anglekit.losses.ese import ESEConfig, ESEObjective, compression_loss, pca_targets
    from anglekit.losses.ibn import InBatchNegativeLoss, in_batch_negative_loss
    from anglekit.losses.margin_mse import MarginMSELoss, margin_mse_loss
    from anglekit.losses.matryoshka import MatryoshkaConfig, MatryoshkaObjective, check_nested_dims
    from anglekit.losses.ranking import ranking_loss
    from anglekit.losses.registry import (
        ObjectiveFamily,
        all_presets,
        build_objective,
        get_objective,
        objective_config,
        preset_batch_kind,
        register_objective_family,
    )
    from anglekit.losses.scores import SCORES, ScoreFn, angle_score_phase, angle_score_reference, cosine_score, get_score
    from anglekit.losses.teacher_scores import student_scores

_LAZY: dict[str, str] = {
    **dict.fromkeys(["ANGLE_VARIANTS", "AngleLoss", "angle_score_for"], "anglekit.losses.angle"),
    **dict.fromkeys(["ANGLE_CLIP", "SIMILARITIES", "angle_from_cosine", "similarity_matrix"], "anglekit.losses.angular"),
    **dict.fromkeys(["AnglEObjective", "ObjectiveOutput"], "anglekit.losses.combined"),
    **dict.fromkeys(["CONTRASTIVE_PRESETS", "PRESETS", "ContrastiveConfig", "ObjectiveConfig"], "anglekit.losses.configs"),
    **dict.fromkeys(["ContrastiveObjective", "InfoNCELoss", "duplicate_negative_mask", "info_nce_loss"], "anglekit.losses.contrastive"),
    **dict.fromkeys(["CosineLoss"], "anglekit.losses.cosine"),
    **dict.fromkeys(["DistillObjective", "Teacher", "TeacherTable"], "anglekit.losses.distill"),
    **dict.fromkeys(["DistillKLLoss", "distill_kl_loss"], "anglekit.losses.distill_kl"),
    **dict.fromkeys(["SimilarityDistillLoss", "similarity_distill_loss"], "anglekit.losses.embed_distill"),
    **dict.fromkeys(["MarginMSELoss", "margin_mse_loss"], "anglekit.losses.margin_mse"),
    **dict.fromkeys(["student_scores"], "anglekit.losses.teacher_scores"),
    **dict.fromkeys(["DISTILL_PRESETS", "DistillConfig"], "anglekit.losses.distill_configs"),
    **dict.fromkeys(["ESEConfig", "ESEObjective", "compression_loss", "pca_targets"], "anglekit.losses.ese"),
    **dict.fromkeys(["InBatchNegativeLoss", "in_batch_negative_loss"], "anglekit.losses.ibn"),
    **dict.fromkeys(["MatryoshkaConfig", "MatryoshkaObjective", "check_nested_dims"], "anglekit.losses.matryoshka"),
    **dict.fromkeys(["ranking_loss"], "anglekit.losses.ranking"),
    **dict.fromkeys(
        ["ObjectiveFamily", "all_presets", "build_objective", "get_objective", "objective_config", "preset_batch_kind", "register_objective_family"],
        "anglekit.losses.registry",
    ),
    **dict.fromkeys(["SCORES", "ScoreFn", "angle_score_phase", "angle_score_reference", "cosine_score", "get_score"], "anglekit.losses.scores"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'anglekit.losses' has no attribute {name!r}")


__all__ = [
    "ANGLE_CLIP",
    "ANGLE_VARIANTS",
    "CONTRASTIVE_PRESETS",
    "DISTILL_PRESETS",
    "PRESETS",
    "SCORES",
    "SIMILARITIES",
    "AnglEObjective",
    "AngleLoss",
    "ContrastiveConfig",
    "ContrastiveObjective",
    "CosineLoss",
    "DistillConfig",
    "DistillKLLoss",
    "DistillObjective",
    "ESEConfig",
    "ESEObjective",
    "InBatchNegativeLoss",
    "InfoNCELoss",
    "MarginMSELoss",
    "MatryoshkaConfig",
    "MatryoshkaObjective",
    "ObjectiveConfig",
    "ObjectiveFamily",
    "ObjectiveOutput",
    "ScoreFn",
    "SimilarityDistillLoss",
    "Teacher",
    "TeacherTable",
    "all_presets",
    "angle_from_cosine",
    "angle_score_for",
    "angle_score_phase",
    "angle_score_reference",
    "build_objective",
    "check_nested_dims",
    "compression_loss",
    "cosine_score",
    "distill_kl_loss",
    "duplicate_negative_mask",
    "get_objective",
    "get_score",
    "in_batch_negative_loss",
    "info_nce_loss",
    "margin_mse_loss",
    "objective_config",
    "pca_targets",
    "preset_batch_kind",
    "ranking_loss",
    "register_objective_family",
    "similarity_distill_loss",
    "similarity_matrix",
    "student_scores",
]
