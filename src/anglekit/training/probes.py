"""Training-dynamics probes from the SimACE analysis, logged while training.

* Angles (SimACE Fig. 4): the mean angle, in degrees, between an anchor and its positive and
  between an anchor and the in-batch negatives (every other row's positive). SimACE's claim is
  that its angular margin keeps the positive angle small while pushing negatives towards 90°.
* Alignment and uniformity (Wang & Isola 2020; SimCSE Fig. 2, SimACE Fig. 3), on L2-normalised
  embeddings: ``alignment = mean ||f(x) - f(x+)||^2`` over positive pairs (lower is better) and
  ``uniformity = log mean_{i<j} exp(-2 ||f(x_i) - f(x_j)||^2)`` over distinct texts (lower is
  better).

Two sources:

* :func:`batch_probes`: on the training batch itself (training mode, so dropout is on), from the
  embeddings the loss used, at no extra forward cost. :class:`ProbeAccumulator` averages them
  over the steps between two probe records. Logged as ``probe_angle_pos``, ``probe_angle_neg``
  (and ``probe_angle_hard_neg`` with hard negatives), ``probe_alignment``, ``probe_uniformity``,
  ``probe_saturated`` (the share of the batch's pairs with |cos| > 0.99, where AnglE says the
  cosine saturates) and ``probe_anisotropy`` (the mean cosine between the batch's texts).
  Pair objectives also log ``probe_grad_<component>`` (:func:`gradient_norms`): the norm of each
  objective term's gradient with respect to the pooled embeddings (``probe_grad_cosine``,
  ``probe_grad_angle``, ``probe_grad_ibn``).
* :func:`dataset_probes`: on a fixed set of labelled pairs (``probe_data``, e.g. ``stsb:dev``),
  encoded in eval mode, as the papers' figures are measured: positives are the pairs with
  label >= a threshold (STS-B: 4.0), negatives each first text against the other pairs' second
  texts. Logged with the prefix ``probe_dev_``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "SATURATION",
    "ProbeAccumulator",
    "alignment",
    "anisotropy",
    "batch_probes",
    "dataset_probes",
    "gradient_norms",
    "saturated_share",
    "uniformity",
]


def _unit(x: Tensor) -> Tensor:
    return torch.nn.functional.normalize(x.detach().double(), p=2, dim=-1)


def _degrees(cos: Tensor) -> Tensor:
    return torch.rad2deg(torch.arccos(cos.clamp(-1.0, 1.0)))


def alignment(x: Tensor, y: Tensor) -> float:
    """``mean_i ||x̂_i - ŷ_i||^2`` over aligned rows (alpha = 2)."""
    return float((_unit(x) - _unit(y)).pow(2).sum(dim=-1).mean())


def uniformity(x: Tensor, t: float = 2.0) -> float:
    """``log mean_{i<j} exp(-t ||x̂_i - x̂_j||^2)``; NaN for fewer than two rows."""
    if x.shape[0] < 2:
        return float("nan")
    u = _unit(x)
    sq = torch.cdist(u, u).pow(2)
    iu = torch.triu_indices(u.shape[0], u.shape[0], offset=1)
    values = -t * sq[iu[0], iu[1]]
    return float(torch.logsumexp(values, dim=0) - math.log(values.numel()))


SATURATION = 0.99
"""|cos| above which a pair counts as saturated (AnglE section 3: the cosine's gradient vanishes there)."""


def saturated_share(x: Tensor, y: Tensor, threshold: float = SATURATION) -> float:
    """The share of aligned rows whose |cos(x_i, y_i)| exceeds ``threshold`` (AnglE's saturation zone)."""
    cos = (_unit(x) * _unit(y)).sum(dim=-1)
    return float((cos.abs() > threshold).double().mean()) if cos.numel() else float("nan")


def anisotropy(x: Tensor) -> float:
    """The mean cosine between distinct rows (0 for isotropic embeddings, near 1 when every vector
    points the same way, as raw decoder LLM embeddings do); NaN for fewer than two rows."""
    if x.shape[0] < 2:
        return float("nan")
    u = _unit(x)
    return _mean_offdiagonal(u @ u.T)


def _mean_offdiagonal(m: Tensor) -> float:
    n = m.shape[0]
    if n < 2:
        return float("nan")
    mask = ~torch.eye(n, m.shape[1], dtype=torch.bool, device=m.device)
    return float(m[mask].mean())


def batch_probes(anchors: Tensor, positives: Tensor, hard_negatives: Tensor | None = None) -> dict[str, float]:
    """Angles (degrees), alignment and uniformity of one training batch (no gradients)."""
    with torch.no_grad():
        a, p = _unit(anchors), _unit(positives)
        angles = _degrees(a @ p.T)
        out = {
            "angle_pos": float(angles.diagonal().mean()),
            "angle_neg": _mean_offdiagonal(angles),
            "alignment": alignment(anchors, positives),
            "uniformity": uniformity(anchors),
            "saturated": saturated_share(anchors, positives),
            "anisotropy": anisotropy(torch.cat([anchors, positives])),
        }
        if hard_negatives is not None:
            out["angle_hard_neg"] = float(_degrees((a * _unit(hard_negatives)).sum(-1)).mean())
    return out


def gradient_norms(components: dict[str, Tensor], wrt: Tensor) -> dict[str, float]:
    """``||d L_k / d wrt||_F`` for each objective component ``L_k`` (unweighted), as ``grad_<k>``.

    Measured against the pooled embeddings the loss read (AnglE section 3: the cosine term's
    gradient vanishes for saturated pairs while the angle term's does not). The graph is kept for
    the step's own backward; a component that does not depend on ``wrt`` gets 0.
    """
    names = [name for name, value in components.items() if value.requires_grad]
    if not names or not wrt.requires_grad:
        return {}
    out = {}
    for name in names:
        (grad,) = torch.autograd.grad(components[name], wrt, retain_graph=True, allow_unused=True)
        out[f"grad_{name}"] = 0.0 if grad is None else float(grad.detach().double().norm())
    return out


class ProbeAccumulator:
    """Running means of :func:`batch_probes` between two probe records (NaNs are left out)."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, values: dict[str, float]) -> None:
        for key, value in values.items():
            if math.isfinite(value):
                self.sums[key] = self.sums.get(key, 0.0) + value
                self.counts[key] = self.counts.get(key, 0) + 1

    def flush(self) -> dict[str, float]:
        means = {key: self.sums[key] / self.counts[key] for key in self.sums}
        self.sums.clear()
        self.counts.clear()
        return means


def dataset_probes(
    encode: Callable[[list[str]], Any],
    text1: Sequence[str],
    text2: Sequence[str],
    labels: np.ndarray,
    positive_threshold: float,
    *,
    max_texts: int = 2000,
) -> dict[str, float]:
    """Angles, alignment and uniformity on labelled pairs, encoded with ``encode`` (eval mode).

    Uniformity is over the distinct texts (the first ``max_texts`` of them, a fixed subset, to
    bound the cost); the angles and alignment over the positive pairs.
    """
    distinct = list(dict.fromkeys([*text1, *text2]))
    vectors = torch.as_tensor(np.asarray(encode(distinct)), dtype=torch.float64)
    index = {text: i for i, text in enumerate(distinct)}
    positive = np.flatnonzero(np.asarray(labels, dtype=np.float64) >= positive_threshold)
    out: dict[str, float] = {"uniformity": uniformity(vectors[:max_texts])}
    if positive.size:
        x = vectors[[index[text1[i]] for i in positive]]
        y = vectors[[index[text2[i]] for i in positive]]
        angles = _degrees(_unit(x) @ _unit(y).T)
        out.update(
            {
                "angle_pos": float(angles.diagonal().mean()),
                "angle_neg": _mean_offdiagonal(angles),
                "alignment": alignment(x, y),
            }
        )
    return out
