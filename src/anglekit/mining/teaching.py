"""A teacher's scores in a mine: the positives', the candidates' (with the guard as a filter), and
what the summary says of them.

With a guard on, the guard is one more filter of :func:`~anglekit.mining.select.select_negatives`
(before the window and ``range_min``, as the margins), applied on the teacher's scores. Scoring
every candidate would cost a teacher pass over the whole window; instead the selection runs, the
teacher scores the candidates it depended on (``Selection.considered``) that it has not scored yet,
the guard drops some, and the selection runs again, until nothing new needs a score: the result is
the one the filter over every candidate gives, for a fraction of the pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anglekit.errors import DataError
from anglekit.mining.guard import GUARDS, guard_masks
from anglekit.mining.select import Selection
from anglekit.mining.settings import TeacherSettings
from anglekit.mining.teacher import Teacher

__all__ = ["GuardedChoice", "check_finite", "guarded_selection", "score_stats", "teacher_section", "teacher_text"]


def check_finite(scores: np.ndarray, what: Callable[[int], tuple[str, int | None, str | None, str]], teacher: Teacher) -> None:
    """A DataError for the first score that is not finite; ``what(i)`` gives (source, row, field, text) of score i."""
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        source, row, field_name, text = what(int(bad[0]))
        raise DataError(
            f"the teacher {teacher.spec.name} scored {scores[bad[0]]} for the anchor and {text[:60]!r} ({len(bad)} such score(s) in this "
            "batch); a teacher must give finite scores: check its weights and dtype",
            source=source,
            row=row,
            field=field_name,
        )


@dataclass
class GuardedChoice:
    """The final selection, the teacher's score of each negative ``[q, N]`` (nan: none), and what the guard dropped."""

    selection: Selection
    scores: np.ndarray
    dropped: dict[str, int] = field(default_factory=dict)
    rounds: int = 0


def guarded_selection(
    teacher: Teacher,
    settings: TeacherSettings,
    select: Callable[[np.ndarray | None], Selection],
    rows: np.ndarray,
    anchors: list[str],
    lowest_positive: np.ndarray,
    texts_of: Callable[[np.ndarray], dict[int, str]],
    where: Callable[[int], tuple[str, int | None]],
    say: Callable[[str], None] | None = None,
) -> GuardedChoice:
    """Negatives chosen with the teacher's guard as a filter (module doc) and their teacher scores.

    ``select(dropped)`` runs the selection with the candidates ``dropped`` (``[q, w]``) removed;
    ``rows``: ``[q, w]`` the candidates' pool rows; ``lowest_positive``: ``[q]`` the teacher's
    lowest positive score per anchor; ``texts_of(rows)``: pool texts; ``where(q)``: (source, row)
    to name in an error about anchor q; ``say``: a line per round (pairs scored, dropped)."""
    scored = np.full(rows.shape, np.nan, np.float32)
    dropped = np.zeros(rows.shape, bool)
    counts = {name: 0 for name in GUARDS if getattr(settings, name) is not None}
    rounds = 0
    while True:
        selection = select(dropped if settings.guarded else None)
        assert selection.columns is not None and selection.considered is not None
        chosen = np.zeros(rows.shape, bool)
        q_chosen, j_chosen = np.nonzero(selection.columns >= 0)
        chosen[q_chosen, selection.columns[q_chosen, j_chosen]] = True
        need = (selection.considered if settings.guarded else chosen) & np.isnan(scored)
        if not need.any():
            break
        rounds += 1
        q_idx, c_idx = np.nonzero(need)
        pool_rows = rows[q_idx, c_idx]
        texts = texts_of(pool_rows)
        candidate_texts = [texts[int(r)] for r in pool_rows]
        s = teacher.score([anchors[int(q)] for q in q_idx], candidate_texts)
        check_finite(s, lambda i, q=q_idx, t=candidate_texts: (*where(int(q[i])), None, t[i]), teacher)
        scored[q_idx, c_idx] = s
        masks = guard_masks(lowest_positive[q_idx], s[:, None], teacher.spec.kind, settings)
        for name, mask in masks.items():
            counts[name] += int(mask.sum())
            dropped[q_idx, c_idx] |= mask[:, 0]
        if say is not None:
            say(f"teacher round {rounds}: scored {len(q_idx)} (anchor, candidate) pairs; the guard has dropped {int(dropped.sum())} so far")
    columns = selection.columns
    negatives = np.where(columns >= 0, np.take_along_axis(scored, np.clip(columns, 0, None), axis=1), np.nan)
    return GuardedChoice(selection, negatives.astype(np.float32), {**counts, "total": int(dropped.sum())} if counts else {}, rounds)


def score_stats(values: np.ndarray) -> dict[str, float]:
    """count, mean, std, min, quartiles and max of the finite ``values``."""
    values = np.asarray(values, np.float64)
    values = values[np.isfinite(values)]
    if not len(values):
        return {"count": 0}
    q25, q50, q75 = np.quantile(values, [0.25, 0.5, 0.75])
    return {"count": int(len(values)), "mean": float(values.mean()), "std": float(values.std()), "min": float(values.min()),
            "25%": float(q25), "50%": float(q50), "75%": float(q75), "max": float(values.max())}  # fmt: skip


def teacher_section(teacher: Teacher, settings: TeacherSettings, positive: np.ndarray, negative: np.ndarray, dropped: dict[str, int]) -> dict[str, Any]:
    """The summary's ``teacher`` section: the teacher, its guard and what it dropped, and its score
    statistics over the written rows (``positive``: ``[rows]``, ``negative``: ``[rows, N]``)."""
    guard = {name: getattr(settings, name) for name in GUARDS if getattr(settings, name) is not None}
    difference = positive[:, None] - negative
    return {
        **teacher.describe(),
        "guard": guard,
        "guard_dropped": dropped,
        "scores": {"positive": score_stats(positive), "negative": score_stats(negative.reshape(-1)), "difference": score_stats(difference.reshape(-1))},
    }


def teacher_text(section: dict[str, Any]) -> str:
    """Two lines on the teacher for a command's report."""
    rate = f"{section['pairs_per_second']:.0f} pairs/s" if section["pairs_per_second"] else "no pairs"
    kind = "cross-encoder, raw logits" if section["kind"] == "cross" else "bi-encoder, cosine"
    dropped = section["guard_dropped"]
    guard = (
        f"; guard {section['guard']} dropped {dropped['total']} negative(s) (" + ", ".join(f"{k}: {v}" for k, v in dropped.items() if k != "total") + ")"
        if dropped
        else "; no guard"
    )
    scores = section["scores"]
    student = section.get("mining_model_max_length")
    length = f"{section['max_length']}" + (f", the mining model's {student}" if student is not None and student != section["max_length"] else "")
    return (
        f"teacher {section['name']} ({kind}, max length {length}): {section['pairs_scored']} pairs in {section['seconds']:.1f} s ({rate})"
        f"{guard}\nteacher scores: positive mean {scores['positive'].get('mean', float('nan')):.4f}, "
        f"negative mean {scores['negative'].get('mean', float('nan')):.4f}"
    )
