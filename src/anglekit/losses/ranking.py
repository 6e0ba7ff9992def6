"""The ranking core shared by the cosine and angle objectives (CoSENT; AnglE eq. 1 and eq. 7).

For a batch of pair scores s and labels l::

    L = log(1 + sum_{l_i > l_j} exp((s_j - s_i) / tau))

computed stably as a logsumexp over ``[0]`` and the ordered pairs. Every pair whose label is
higher must score higher; the loss is the smooth maximum of the violations. Labels are used as
given (a float 2.6 is ranked above 2.4; nothing is cast to int), and pairs with equal labels
contribute nothing. A batch with no ordered pair (all labels equal, or B < 2) gives exactly 0
and still has a gradient path to the scores.

``groups`` restricts the ordered pairs to pairs of the same group (``groups[i] == groups[j]``):
n-tuple training expands each row (anchor, positive, negative_1..n) into the labelled pairs
(anchor, positive, 1) and (anchor, negative_k, 0) of one group, so each positive is ranked above
its own anchor's negatives only (scores of different anchors are not compared; docs/objectives.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

from anglekit.losses._common import check_batch_vector, check_tau

__all__ = ["ranking_loss"]


def ranking_loss(scores: Tensor, labels: Tensor, tau: float, groups: Tensor | None = None) -> Tensor:
    """CoSENT ranking loss over a batch (AnglE eq. 1 / eq. 7).

    Args:
        scores: ``[B]`` pair scores, higher = more similar.
        labels: ``[B]`` gold labels (any real dtype; compared as given, never rounded).
        tau: temperature > 0 (the official code's ``scale`` is ``1 / tau``).
        groups: optional ``[B]`` integer group of each pair; only pairs of one group are ordered.

    Returns:
        A scalar tensor ``log(1 + sum_{l_i > l_j} exp((s_j - s_i) / tau))``.
    """
    tau = check_tau(tau)
    if scores.dim() != 1:
        raise ValueError(f"scores must have shape [B], got {tuple(scores.shape)}")
    check_batch_vector(labels, scores.shape[0], "labels")
    labels = labels.to(scores.device)
    # diff[i, j] = (s_j - s_i) / tau; kept only where l_i > l_j.
    diff = (scores.unsqueeze(0) - scores.unsqueeze(1)) / tau
    ordered = labels.unsqueeze(1) > labels.unsqueeze(0)
    if groups is not None:
        check_batch_vector(groups, scores.shape[0], "groups")
        if groups.dtype.is_floating_point or groups.dtype.is_complex or groups.dtype == torch.bool:
            raise ValueError(f"groups must be an integer tensor, got {groups.dtype}")
        groups = groups.to(scores.device)
        ordered = ordered & (groups.unsqueeze(1) == groups.unsqueeze(0))
    masked = torch.where(ordered, diff, torch.full_like(diff, float("-inf")))
    terms = torch.cat([scores.new_zeros(1), masked.reshape(-1)])
    return torch.logsumexp(terms, dim=0)
