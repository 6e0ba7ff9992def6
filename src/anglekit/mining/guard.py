"""The teacher's false-negative guard: which negatives score too close to their positive.

NV-Retriever's positive-aware mining drops a negative the teacher scores near its positive, as
likely an unlabelled positive. Two rules, each optional (:class:`~anglekit.mining.settings.TeacherSettings`),
against ``p``, the lowest teacher score among the anchor's positives (the safe side when an anchor
has several):

- ``teacher_max_ratio`` r (TopK-PercPos): dropped when ``s > r x p``. A ratio needs scores above
  zero: a cross-encoder's logits are compared as ``sigmoid(logit)`` (the probability
  ``CrossEncoder.predict`` reports by default, in 0..1); a bi-encoder's cosines as they are, and
  where ``p <= 0`` (no share of it is meaningful) a negative is dropped when ``s > p``.
- ``teacher_margin`` m (TopK-MarginPos): dropped when ``s > p - m``, on the teacher's own scale
  (cosine or logit), whatever the signs.
"""

from __future__ import annotations

import numpy as np

from anglekit.mining.settings import TeacherSettings

__all__ = ["GUARDS", "guard_masks"]

GUARDS = ("teacher_max_ratio", "teacher_margin")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # stable for large |x|


def guard_masks(positive: np.ndarray, negative: np.ndarray, kind: str, settings: TeacherSettings) -> dict[str, np.ndarray]:
    """For each rule given, the ``[q, k]`` mask of negatives it drops; ``positive``: ``[q]`` the
    anchor's lowest positive score, ``negative``: ``[q, k]`` teacher scores (nan: none, never dropped);
    ``kind``: ``bi`` (cosines) or ``cross`` (logits)."""
    out: dict[str, np.ndarray] = {}
    p = np.asarray(positive, np.float64)[:, None]
    s = np.asarray(negative, np.float64)
    if settings.teacher_max_ratio is not None:
        if kind == "cross":
            p_scaled, s_scaled = _sigmoid(p), _sigmoid(s)
        else:
            p_scaled, s_scaled = p, s
        limit = np.where(p_scaled > 0, settings.teacher_max_ratio * p_scaled, p_scaled)
        out["teacher_max_ratio"] = s_scaled > limit
    if settings.teacher_margin is not None:
        out["teacher_margin"] = s > p - settings.teacher_margin
    return out
