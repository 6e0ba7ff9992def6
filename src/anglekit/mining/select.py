"""Which candidates become hard negatives: sentence-transformers' ``mine_hard_negatives`` rules.

Per query, candidates come best first (cosine; ties: lower corpus row first). In this order:

1. a candidate whose text is the query's own (its anchor) or one of its positives is never a
   negative (nor is padding);
2. a text already seen higher in the list is dropped (a corpus with the same text twice);
3. ``absolute_margin``: dropped when ``score + margin > p``; ``relative_margin``: when
   ``score > p - |p| x margin``; ``p`` is the query's lowest positive score (the safe side when a
   query has several positives);
4. ``max_score`` / ``min_score``: dropped above / below;
5. ``dropped``: candidates a teacher's guard removed (:mod:`anglekit.mining.guard`);
6. of what remains, the first ``range_max`` are the window and the first ``range_min`` of it are
   skipped; ``top`` takes the next ``num_negatives`` in order, ``random`` samples that many of
   the window (seeded), kept best first.

The window and the skip count candidates that passed the filters, as sentence-transformers does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from anglekit.mining.settings import MineSettings

__all__ = ["Selection", "select_negatives"]

FILTERS = ("anchor", "positive", "duplicate_text", "absolute_margin", "relative_margin", "max_score", "min_score", "teacher_guard")


@dataclass
class Selection:
    """``rows[q, j]``: the corpus row of query q's j-th negative (-1: none), ``scores`` its cosine (nan: none)."""

    rows: np.ndarray
    scores: np.ndarray
    skipped: dict[str, int] = field(default_factory=dict)
    """Candidates each filter removed (counted on those still in the list when it applied)."""
    columns: np.ndarray | None = None
    """``columns[q, j]``: the candidate column of negative j (-1: none)."""
    considered: np.ndarray | None = None
    """``[q, w]``: the candidates the choice depended on (those kept by the filters, up to the last
    position ``top`` could take, or the whole window for ``random``): a teacher guard scores these."""


def select_negatives(
    rows: np.ndarray,
    scores: np.ndarray,
    hashes: np.ndarray,
    positive_hashes: np.ndarray,
    positive_mask: np.ndarray,
    lowest_positive: np.ndarray,
    settings: MineSettings,
    max_positives: int,
    rng: np.random.Generator | None = None,
    anchor_hashes: np.ndarray | None = None,
    dropped: np.ndarray | None = None,
    guarded: bool = False,
) -> Selection:
    """Negatives of ``len(rows)`` queries from their candidates (see the module doc).

    ``rows``/``scores``/``hashes``: ``[q, w]`` candidates best first (row -1: no candidate), with
    the hash of each candidate's text; ``positive_hashes``/``positive_mask``: ``[q, p]`` the text
    hashes of each query's positives (mask False: padding); ``lowest_positive``: ``[q]``;
    ``anchor_hashes``: ``[q]`` the hash of each query's own text (None: not checked);
    ``dropped``: ``[q, w]`` candidates a teacher guard removed; ``guarded``: a teacher guard is on
    (the default window widens as for a margin).
    """
    width = rows.shape[1]
    alive = rows >= 0
    skipped: dict[str, int] = {}

    def drop(name: str, mask: np.ndarray) -> None:
        nonlocal alive
        removed = mask & alive
        skipped[name] = skipped.get(name, 0) + int(removed.sum())
        alive = alive & ~mask

    if anchor_hashes is not None:
        drop("anchor", hashes == anchor_hashes[:, None])
    if positive_hashes.shape[1]:
        is_positive = ((hashes[:, :, None] == positive_hashes[:, None, :]) & positive_mask[:, None, :]).any(axis=2)
        drop("positive", is_positive)
    if width > 1:
        order = np.argsort(hashes, axis=1, kind="stable")
        ordered = np.take_along_axis(hashes, order, axis=1)
        repeated = np.zeros_like(alive)
        np.put_along_axis(repeated, order[:, 1:], ordered[:, 1:] == ordered[:, :-1], axis=1)
        drop("duplicate_text", repeated & (rows >= 0))
    low = lowest_positive[:, None]
    if settings.absolute_margin is not None:
        drop("absolute_margin", scores + settings.absolute_margin > low)
    if settings.relative_margin is not None:
        drop("relative_margin", scores > low - np.abs(low) * settings.relative_margin)
    if settings.max_score is not None:
        drop("max_score", scores > settings.max_score)
    if settings.min_score is not None:
        drop("min_score", scores < settings.min_score)
    if dropped is not None:
        drop("teacher_guard", dropped)

    out_rows, out_scores, columns, considered = _pick(rows, scores, alive, settings, settings.window(max_positives, guarded=guarded), rng)
    return Selection(out_rows, out_scores, skipped, columns, considered)


def _pick(rows: np.ndarray, scores: np.ndarray, alive: np.ndarray, settings: MineSettings, window: int,
          rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Rule 6 of the module doc over the candidates still ``alive``: (rows, scores, columns, considered)."""
    n, width = rows.shape
    count = settings.num_negatives
    survivors = np.argsort(~alive, axis=1, kind="stable")  # the kept candidates first, in order
    kept = alive.sum(axis=1)
    available = np.clip(np.minimum(kept, window) - settings.range_min, 0, None)
    start = settings.range_min
    stop = min(width, window)
    span = max(0, stop - start)
    positions = np.full((n, count), -1, dtype=np.int64)
    if span:
        if settings.sampling == "top":
            picked = np.broadcast_to(np.arange(min(count, span)), (n, min(count, span)))
        else:
            rng = rng if rng is not None else np.random.default_rng(settings.seed)
            keys = rng.random((n, span))
            keys[np.arange(span)[None, :] >= available[:, None]] = np.inf
            picked = np.sort(np.argsort(keys, axis=1, kind="stable")[:, :count], axis=1)
        valid = picked < available[:, None]
        positions[:, : picked.shape[1]] = np.where(valid, picked + start, -1)
    found = positions >= 0
    columns = np.take_along_axis(survivors, np.where(found, positions, 0), axis=1)
    out_rows = np.where(found, np.take_along_axis(rows, columns, axis=1), -1)
    out_scores = np.where(found, np.take_along_axis(scores, columns, axis=1), np.nan).astype(np.float32)
    columns = np.where(found, columns, -1)
    if settings.sampling == "random":  # several found, some missing: keep the found ones first (best first)
        order = np.argsort(~found, axis=1, kind="stable")
        out_rows, out_scores = np.take_along_axis(out_rows, order, axis=1), np.take_along_axis(out_scores, order, axis=1)
        columns = np.take_along_axis(columns, order, axis=1)
    rank = np.cumsum(alive, axis=1) - 1
    considered = alive & (rank < (stop if settings.sampling == "random" else min(stop, start + count)))
    return out_rows, out_scores, columns, considered
