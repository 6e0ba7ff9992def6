"""The angle objective (AnglE eq. 3-7): the ranking core on an angle score of each pair.

Two scores, selected by ``variant`` (see ``anglekit.losses.scores``):
``"reference"`` reproduces the official angle-emb / sentence-transformers score and
``"phase"`` is the per-dimension phase difference the paper describes.
"""

from __future__ import annotations

from torch import Tensor, nn

from anglekit.errors import ConfigError
from anglekit.losses._common import ANGLE_VARIANTS, check_tau
from anglekit.losses.ranking import ranking_loss
from anglekit.losses.scores import ScoreFn, get_score

__all__ = ["ANGLE_VARIANTS", "AngleLoss", "angle_score_for"]


def angle_score_for(variant: str) -> ScoreFn:
    """The score function of an angle variant; ConfigError listing the valid variants."""
    try:
        return get_score(ANGLE_VARIANTS[variant])
    except (KeyError, TypeError):
        valid = ", ".join(sorted(ANGLE_VARIANTS))
        raise ConfigError(f"unknown angle variant {variant!r}; valid variants: {valid}") from None


class AngleLoss(nn.Module):
    """``ranking_loss(angle_score(x_i, y_i), labels, tau)``; paper tau = 1.0 (AnglE eq. 7)."""

    def __init__(self, variant: str = "reference", tau: float = 1.0) -> None:
        super().__init__()
        self.score = angle_score_for(variant)
        self.variant = variant
        self.tau = check_tau(tau)

    def forward(self, x: Tensor, y: Tensor, labels: Tensor) -> Tensor:
        """Scalar loss for a batch of pairs ``x``, ``y`` of shape [B, D] (D even), labels [B]."""
        return ranking_loss(self.score(x, y), labels, self.tau)

    def extra_repr(self) -> str:
        return f"variant={self.variant!r}, tau={self.tau}"
