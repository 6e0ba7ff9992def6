"""Training objectives of AnglE: tensor-level cores (pure functions) and thin nn.Module wrappers.

Ranking core (eq. 1/7) with pluggable pair scores (cosine; angle, eq. 3-6, two variants),
in-batch negatives (eq. 2) and the combined objective (eq. 8); contrastive objectives (SimCSE's
InfoNCE, SimACE's angle similarity with a margin). :func:`get_objective` builds any preset;
:class:`MatryoshkaObjective` (nested dimensions) and :class:`ESEObjective` (Espresso: layers and a
compressed prefix) wrap any of them.
"""

from __future__ import annotations

from anglekit.losses.angle import ANGLE_VARIANTS, AngleLoss, angle_score_for
from anglekit.losses.angular import ANGLE_CLIP, SIMILARITIES, angle_from_cosine, similarity_matrix
from anglekit.losses.combined import PRESETS, AnglEObjective, ObjectiveConfig, ObjectiveOutput
from anglekit.losses.contrastive import (
    CONTRASTIVE_PRESETS,
    ContrastiveConfig,
    ContrastiveObjective,
    InfoNCELoss,
    duplicate_negative_mask,
    info_nce_loss,
)
from anglekit.losses.cosine import CosineLoss
from anglekit.losses.ese import ESEConfig, ESEObjective, compression_loss, pca_targets
from anglekit.losses.ibn import InBatchNegativeLoss, in_batch_negative_loss
from anglekit.losses.matryoshka import MatryoshkaConfig, MatryoshkaObjective, check_nested_dims
from anglekit.losses.ranking import ranking_loss
from anglekit.losses.registry import all_presets, get_objective, objective_config, preset_batch_kind
from anglekit.losses.scores import (
    SCORES,
    ScoreFn,
    angle_score_phase,
    angle_score_reference,
    cosine_score,
    get_score,
)

__all__ = [
    "ANGLE_CLIP",
    "ANGLE_VARIANTS",
    "CONTRASTIVE_PRESETS",
    "PRESETS",
    "SCORES",
    "SIMILARITIES",
    "AnglEObjective",
    "AngleLoss",
    "ContrastiveConfig",
    "ContrastiveObjective",
    "CosineLoss",
    "ESEConfig",
    "ESEObjective",
    "InBatchNegativeLoss",
    "InfoNCELoss",
    "MatryoshkaConfig",
    "MatryoshkaObjective",
    "ObjectiveConfig",
    "ObjectiveOutput",
    "ScoreFn",
    "all_presets",
    "angle_from_cosine",
    "angle_score_for",
    "angle_score_phase",
    "angle_score_reference",
    "check_nested_dims",
    "compression_loss",
    "cosine_score",
    "duplicate_negative_mask",
    "get_objective",
    "get_score",
    "in_batch_negative_loss",
    "info_nce_loss",
    "objective_config",
    "pca_targets",
    "preset_batch_kind",
    "ranking_loss",
    "similarity_matrix",
]
