"""Matryoshka representation learning (Kusupati et al., 2022) over any objective.

For nested dimensions ``d_1 > d_2 > ... > d_m`` with weights ``c_j`` and any objective ``L``::

    L_mrl = sum_j c_j * L(x_{:d_j}, y_{:d_j}, ...)                       (MRL eq. 1)

where ``x_{:d}`` keeps the first d coordinates of every embedding row. The wrapped objective is
unchanged; only its embedding arguments are sliced, so every preset (pairs, sentences, triplets)
composes with it. An argument is an embedding when it is a floating-point tensor of rank 2
(``[B, D]``) or 3 (``[H, n, D]``: the n hard negatives of each row of an n-tuple batch); labels
(rank 1), integer text ids and bool masks pass through as given.

After such training, ``encode(..., truncate_dim=d_j)`` keeps the first d_j coordinates (and
re-normalises when normalising), which is what the nested objective optimised.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from anglekit.errors import ConfigError
from anglekit.losses.combined import ObjectiveOutput

__all__ = ["MatryoshkaConfig", "MatryoshkaObjective", "check_nested_dims", "slice_embeddings"]


def check_nested_dims(dims: Sequence[int], weights: Sequence[float] | None = None, *, dim: int | None = None) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """``(dims, weights)`` validated: dims strictly decreasing integers >= 1 (and <= ``dim`` when
    given), weights finite numbers >= 0 of the same length, not all 0 (default: all 1)."""
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or len(dims) == 0:
        raise ConfigError(f"matryoshka_dims must be a non-empty list of integers, got {dims!r}")
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ConfigError(f"matryoshka_dims must hold integers >= 1, got {d!r} in {list(dims)}")
    if any(a <= b for a, b in zip(dims, dims[1:], strict=False)):
        raise ConfigError(f"matryoshka_dims must be strictly decreasing (e.g. 384 256 128 64), got {list(dims)}")
    if dim is not None and dims[0] > dim:
        raise ConfigError(f"matryoshka_dims {list(dims)}: {dims[0]} is larger than the model's embedding dimension {dim}")
    if weights is None:
        weights = [1.0] * len(dims)
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
        raise ConfigError(f"matryoshka_weights must be a list of numbers, got {weights!r}")
    if len(weights) != len(dims):
        raise ConfigError(f"matryoshka_weights has {len(weights)} value(s) but matryoshka_dims has {len(dims)}; give one weight per dimension")
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise ConfigError(f"matryoshka_weights must hold finite numbers >= 0, got {w!r} in {list(weights)}")
    if not any(w > 0 for w in weights):
        raise ConfigError(f"at least one of matryoshka_weights must be > 0, got {list(weights)}")
    return tuple(int(d) for d in dims), tuple(float(w) for w in weights)


@dataclass(frozen=True)
class MatryoshkaConfig:
    """Nested dimensions (largest first) and their weights (default: 1 each, as sentence-transformers' MatryoshkaLoss)."""

    dims: tuple[int, ...]
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        dims, weights = check_nested_dims(self.dims, self.weights)
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "weights", weights)


def _is_embedding(value: Any, rank: int | tuple[int, ...]) -> bool:
    ranks = (rank,) if isinstance(rank, int) else rank
    return isinstance(value, Tensor) and value.is_floating_point() and value.dim() in ranks


def slice_embeddings(args: Sequence[Any], kwargs: dict[str, Any], dim: int, *, rank: int | tuple[int, ...] = 2) -> tuple[list[Any], dict[str, Any]]:
    """``args`` and ``kwargs`` with every floating tensor of rank ``rank`` (one, or several) cut to its first ``dim`` coordinates."""
    cut = [a[..., :dim] if _is_embedding(a, rank) else a for a in args]
    cut_kw = {k: (v[..., :dim] if _is_embedding(v, rank) else v) for k, v in kwargs.items()}
    return cut, cut_kw


_RANKS = (2, 3)
"""Ranks of the embedding arguments Matryoshka slices: [B, D], and [H, n, D] hard negatives."""


class MatryoshkaObjective(nn.Module):
    """``sum_j c_j * objective(embeddings[:, :d_j], ...)`` (MRL eq. 1) around any objective.

    Takes exactly the arguments of the wrapped objective and returns an
    :class:`~anglekit.losses.combined.ObjectiveOutput` whose components are the wrapped
    objective's, unweighted, named ``"<name>@<d>"`` (e.g. ``ibn@64``).
    """

    def __init__(self, objective: nn.Module, config: MatryoshkaConfig) -> None:
        super().__init__()
        self.objective = objective
        self.config = config

    @property
    def batch_kind(self) -> str:
        """The wrapped objective's batch kind."""
        return self.objective.batch_kind  # type: ignore[no-any-return]

    def forward(self, *args: Any, **kwargs: Any) -> ObjectiveOutput:
        """The weighted sum over the nested dimensions; embeddings narrower than the largest one are an error."""
        widths = {a.shape[-1] for a in [*args, *kwargs.values()] if _is_embedding(a, _RANKS)}
        if not widths:
            raise ValueError("MatryoshkaObjective: no [B, D] embedding among the arguments")
        if self.config.dims[0] > min(widths):
            raise ValueError(f"matryoshka_dims start at {self.config.dims[0]} but the embeddings have {min(widths)} dimensions")
        total: Tensor | None = None
        components: dict[str, Tensor] = {}
        stats: dict[str, Tensor] = {}
        for d, weight in zip(self.config.dims, self.config.weights or (), strict=True):
            if weight == 0:
                continue
            cut, cut_kw = slice_embeddings(args, kwargs, d, rank=_RANKS)
            out = self.objective(*cut, **cut_kw)
            components.update({f"{name}@{d}": value for name, value in out.components.items()})
            stats.update(out.stats)  # a guide's mask is the same at every width
            term = weight * out.loss
            total = term if total is None else total + term
        assert total is not None  # the config has a weight > 0
        return ObjectiveOutput(loss=total, components=components, stats=stats)

    def extra_repr(self) -> str:
        return f"dims={self.config.dims}, weights={self.config.weights}"
