"""The typed settings of hard-negative mining (flags of ``anglekit mine`` come from them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from anglekit.config import check_fields, setting
from anglekit.errors import ConfigError

__all__ = ["INDEX_KINDS", "SAMPLING", "TEACHER_KINDS", "MineSettings", "TeacherSettings"]

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

    def window(self, max_positives: int, *, guarded: bool = False) -> int:
        """range_max, or its default for queries with up to ``max_positives`` positives (as
        sentence-transformers; ``guarded``: a teacher's guard is on, which widens it as a margin does)."""
        if self.range_max is not None:
            return self.range_max
        guarded = guarded or self.absolute_margin is not None or self.relative_margin is not None or self.max_score is not None
        return self.range_min + self.num_negatives * (10 if guarded else 1) + max_positives

    def filters(self) -> dict[str, float]:
        """The filters given (name -> value), for the summary."""
        names = ("absolute_margin", "relative_margin", "max_score", "min_score")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


TEACHER_KINDS = ("auto", "bi", "cross")


@dataclass(frozen=True)
class TeacherSettings:
    """How a teacher scores mined rows (``anglekit mine --teacher``; :mod:`anglekit.mining.teacher`)
    and its false-negative guard (:mod:`anglekit.mining.guard`)."""

    teacher_kind: str = setting(
        "auto",
        choices=TEACHER_KINDS,
        help="bi: a bi-encoder (cosine of its embeddings); cross: a cross-encoder (a sequence-classification model with one "
        "label: its raw logit); auto: cross when the folder is one (architectures *ForSequenceClassification or a "
        "sentence-transformers CrossEncoder), else bi",
    )
    teacher_batch_size: int = setting(32, minimum=1, help="(anchor, text) pairs or texts per teacher batch")
    teacher_max_length: int | None = setting(
        None, minimum=1, help="tokens the teacher reads per text (bi) or per pair (cross) (default: the teacher's own max length)"
    )
    teacher_max_ratio: float | None = setting(
        None,
        minimum=0.0,
        maximum=1.0,
        exclusive_minimum=True,
        help="false-negative guard (NV-Retriever's TopK-PercPos): drop a negative whose teacher score is above this share of its "
        "anchor's lowest positive score; on the cosine for a bi-encoder, on sigmoid(logit) for a cross-encoder; a positive "
        "cosine <= 0 guards at the positive's own score",
    )
    teacher_margin: float | None = setting(
        None,
        minimum=0.0,
        help="false-negative guard (TopK-MarginPos): drop a negative whose teacher score is above its anchor's lowest positive "
        "score minus this margin (the teacher's scale: cosine or logit)",
    )

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def guarded(self) -> bool:
        """Whether a false-negative guard is on."""
        return self.teacher_max_ratio is not None or self.teacher_margin is not None

    def given(self) -> dict[str, Any]:
        """The settings that differ from the defaults (they need a teacher)."""
        default = TeacherSettings()
        return {k: v for k, v in asdict(self).items() if v != getattr(default, k)}
