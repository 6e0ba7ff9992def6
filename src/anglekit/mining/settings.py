"""The typed settings of hard-negative mining (flags of ``anglekit mine`` come from them)."""

from __future__ import annotations

from dataclasses import dataclass

from anglekit.config import check_fields, setting
from anglekit.errors import ConfigError

__all__ = ["INDEX_KINDS", "SAMPLING", "MineSettings"]

SAMPLING = ("top", "random")
INDEX_KINDS = ("exact", "hnsw", "int8")


@dataclass(frozen=True)
class MineSettings:
    """How candidates are searched and which of them become negatives (sentence-transformers'
    ``mine_hard_negatives`` rules: see :mod:`anglekit.mining.select`)."""

    num_negatives: int = setting(3, minimum=1, help="Negatives per (anchor, positive) row; rows that get fewer are left out and counted.")
    range_min: int = setting(0, minimum=0, help="Skip the first N remaining candidates of each query (the closest ones).")
    range_max: int | None = setting(
        None,
        minimum=1,
        help="Consider only the first N remaining candidates (default: range_min + num_negatives + positives, x10 negatives with a margin or max_score).",
    )
    max_score: float | None = setting(None, minimum=-1.0, maximum=1.0, help="Drop candidates scoring above this (cosine, -1..1).")
    min_score: float | None = setting(None, minimum=-1.0, maximum=1.0, help="Drop candidates scoring below this (cosine, -1..1).")
    absolute_margin: float | None = setting(
        None, minimum=0.0, help="False-negative guard: drop candidates with score + margin > the query's lowest positive score."
    )
    relative_margin: float | None = setting(
        None, minimum=0.0, help="False-negative guard: drop candidates scoring above positive - |positive| x margin (0.05: 5% below)."
    )
    sampling: str = setting("top", choices=SAMPLING, help="top: the best remaining candidates in order; random: sampled among them (--seed).")
    seed: int = setting(12345, minimum=0, help="Random seed of --sampling random.")
    index: str = setting(
        "exact", choices=INDEX_KINDS, help="Candidate search: exact (brute force, streamed over the shards), hnsw, or int8 (exact over int8 codes, rescored)."
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.range_max is not None and self.range_min >= self.range_max:
            raise ConfigError(f"range_min ({self.range_min}) must be below range_max ({self.range_max})")
        if self.range_max is not None and self.num_negatives > self.range_max - self.range_min:
            raise ConfigError(
                f"cannot take {self.num_negatives} negatives from ranks {self.range_min}..{self.range_max}: only {self.range_max - self.range_min} "
                "candidates there; lower num_negatives or range_min, or raise range_max"
            )
        if self.max_score is not None and self.min_score is not None and self.min_score > self.max_score:
            raise ConfigError(f"min_score ({self.min_score}) is above max_score ({self.max_score}): no candidate can pass")

    def window(self, max_positives: int) -> int:
        """range_max, or its default for queries with up to ``max_positives`` positives (as sentence-transformers)."""
        if self.range_max is not None:
            return self.range_max
        guarded = self.absolute_margin is not None or self.relative_margin is not None or self.max_score is not None
        return self.range_min + self.num_negatives * (10 if guarded else 1) + max_positives

    def filters(self) -> dict[str, float]:
        """The filters given (name -> value), for the summary."""
        names = ("absolute_margin", "relative_margin", "max_score", "min_score")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}
