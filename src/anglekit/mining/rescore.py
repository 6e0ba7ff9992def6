"""``rescore_mined``: a teacher's scores for a mined file, without mining again.

The input is what ``anglekit mine`` writes (.jsonl or .parquet): ``anchor``, ``positive`` and
``negative_1`` .. ``negative_N`` (or one ``negative`` column, written as ``negative_1``); other
columns are kept as they are. The output has the same rows and columns, with ``positive_score``
and ``negative_1_score`` .. ``negative_N_score`` holding the teacher's scores (replaced where the
input had them, the miner's scores being in the input's summary). A row's later negatives may be
empty (null or absent, as ``--pad-negatives`` reads them); their scores are null.

The guard (:mod:`anglekit.mining.guard`) cannot replace what it drops here (the candidates are not
in the file): a dropped negative leaves its row, the row's later negatives move up and its last
cells become null (train such a file with ``--pad-negatives``); a row left without negatives is
left out. Both are counted in the summary. Everything is read and scored before anything is
written; the output, its summary and histogram are written atomically, the summary last.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError, DataError
from anglekit.io.atomic import atomic_write_json, same_file
from anglekit.mining.checks import OUTPUT_FORMATS
from anglekit.mining.guard import guard_masks
from anglekit.mining.mine import histogram, write_output
from anglekit.mining.settings import TeacherSettings
from anglekit.mining.teacher import Teacher, check_teacher, load_teacher
from anglekit.mining.teaching import check_finite, teacher_section, teacher_text

__all__ = ["RescoreReport", "rescore_mined"]


@dataclass(frozen=True)
class RescoreReport:
    """What :func:`rescore_mined` wrote, and the summary beside it."""

    output: Path
    summary_path: Path
    histogram_path: Path
    rows: int
    summary: dict[str, Any]

    def text(self) -> str:
        s = self.summary
        short = f"; {s['rows_shortened']} row(s) lost negatives to the guard (train with --pad-negatives)" if s["rows_shortened"] else ""
        gone = f"; {s['rows_left_out']} row(s) left without negatives were left out" if s["rows_left_out"] else ""
        return (
            f"{self.rows} of {s['rows_read']} rows rescored -> {self.output}{short}{gone}\n{teacher_text(s['teacher'])}\n"
            f"summary {self.summary_path}, histogram {self.histogram_path} ({s['seconds']['total']:.1f} s)"
        )


@dataclass
class _Mined:
    """A mined file's rows (dicts, all columns) and its anchor/positive/negative column names."""

    source: str
    rows: list[dict[str, Any]]
    names: list[str]
    anchor: str
    positive: str
    negatives: list[str]


def _paths(mined: str | os.PathLike[str], output: str | os.PathLike[str]) -> tuple[Path, Path, Path, Path]:
    source = Path(os.fspath(mined)).expanduser()
    if source.suffix.lower() not in OUTPUT_FORMATS:
        raise ConfigError(f"--rescore {source}: must be a .jsonl or .parquet file that anglekit mine wrote (or of its layout)")
    if not source.is_file():
        raise DataError("--rescore: no such file", source=str(source))
    out = Path(os.fspath(output)).expanduser()
    if out.suffix.lower() not in OUTPUT_FORMATS:
        raise ConfigError(f"--output {out}: must end in {' or '.join(OUTPUT_FORMATS)}")
    stem = out.with_suffix("")
    summary, plot = stem.with_name(stem.name + ".summary.json"), stem.with_name(stem.name + ".scores.png")
    for shown, target in ((f"--output {out}", out), (f"{summary} (the summary beside --output)", summary), (f"{plot} (the histogram beside --output)", plot)):
        if same_file(target, source):
            raise ConfigError(f"{shown} is the --rescore file {source}; anglekit never writes over its input: choose another --output")
    return source, out, summary, plot


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            return list(pq.read_table(path).to_pylist())
        except (OSError, ValueError) as exc:
            raise DataError(f"not a readable Parquet file ({exc})", source=str(path)) from None
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise DataError(f"not a JSON line ({exc})", source=str(path), row=number) from None
            if not isinstance(row, dict):
                raise DataError(f"expected a JSON object, got {type(row).__name__}", source=str(path), row=number)
            rows.append(row)
    return rows


def _read_mined(path: Path, columns: dict[str, str] | None) -> _Mined:
    """The rows of a mined file, its columns checked (DataErrors naming the file, row and column)."""
    from anglekit.data.triplets import negative_columns

    rows = _read_rows(path)
    if not rows:
        raise DataError("the file has no rows", source=str(path))
    names = list(dict.fromkeys(name for row in rows for name in row))
    mapping = {"anchor": "anchor", "positive": "positive", **(columns or {})}
    unknown = set(mapping) - {"anchor", "positive"}
    if unknown:
        raise ConfigError(f"--columns: --rescore reads anchor=COL,positive=COL; got {', '.join(sorted(unknown))}")
    negatives = negative_columns(names, str(path)) or (["negative"] if "negative" in names else [])
    for role in ("anchor", "positive"):
        if mapping[role] not in names:
            raise DataError(f"no {role} column {mapping[role]!r} (columns: {', '.join(names)}); name it with --columns {role}=COL", source=str(path))
    if not negatives:
        raise DataError(
            f"no negative column (negative_1 .. negative_N, or negative; columns: {', '.join(names)}): nothing to score against the positive", source=str(path)
        )
    for number, row in enumerate(rows, start=1):
        for name in (mapping["anchor"], mapping["positive"]):
            value = row.get(name)
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"expected a non-empty text, got {value!r}", source=str(path), row=number, field=name)
        given = [isinstance(row.get(n), str) and bool(row[n].strip()) for n in negatives]
        for n, ok in zip(negatives, given, strict=True):
            if not ok and row.get(n) not in (None, ""):
                raise DataError(f"expected a text or null, got {row[n]!r}", source=str(path), row=number, field=n)
        if not any(given):
            raise DataError("the row has no negative", source=str(path), row=number, field=negatives[0])
        if given != sorted(given, reverse=True):
            raise DataError(f"{negatives[given.index(False)]} is empty before a later negative; negatives must come first", source=str(path), row=number)
    return _Mined(str(path), rows, names, mapping["anchor"], mapping["positive"], negatives)


def _score(teacher: Teacher, data: _Mined) -> tuple[np.ndarray, np.ndarray]:
    """The teacher's score of each row's positive ``[r]`` and negatives ``[r, N]`` (nan: an empty cell)."""
    anchors = [row[data.anchor] for row in data.rows]
    positive = teacher.score(anchors, [row[data.positive] for row in data.rows])
    check_finite(positive, lambda i: (data.source, i + 1, data.positive, data.rows[i][data.positive]), teacher)
    at = [(r, j) for r, row in enumerate(data.rows) for j, n in enumerate(data.negatives) if isinstance(row.get(n), str) and row[n].strip()]
    texts = [data.rows[r][data.negatives[j]] for r, j in at]
    scores = teacher.score([anchors[r] for r, _ in at], texts)
    check_finite(scores, lambda i: (data.source, at[i][0] + 1, data.negatives[at[i][1]], texts[i]), teacher)
    negative = np.full((len(data.rows), len(data.negatives)), np.nan, np.float32)
    if at:
        index = np.asarray(at)
        negative[index[:, 0], index[:, 1]] = scores
    return positive, negative


def _guard(data: _Mined, positive: np.ndarray, negative: np.ndarray, kind: str, settings: TeacherSettings) -> tuple[np.ndarray, dict[str, int]]:
    """The ``[r, N]`` mask of negatives the guard drops (against the anchor's lowest positive), and the counts."""
    groups: dict[str, int] = {}
    anchor_of = np.fromiter((groups.setdefault(row[data.anchor], len(groups)) for row in data.rows), np.int64, len(data.rows))
    lowest = np.full(len(groups), np.inf)
    np.minimum.at(lowest, anchor_of, positive.astype(np.float64))
    masks = guard_masks(lowest[anchor_of], negative, kind, settings)
    dropped = np.zeros(negative.shape, bool)
    counts: dict[str, int] = {}
    for name, mask in masks.items():
        counts[name] = int(mask.sum())
        dropped |= mask
    if counts:
        counts["total"] = int(dropped.sum())
    return dropped, counts


def _table(data: _Mined, positive: np.ndarray, negative: np.ndarray, dropped: np.ndarray) -> tuple[dict[str, list[Any]], np.ndarray, np.ndarray]:
    """The output columns (negatives moved up over the dropped ones), and the kept rows' positive and negative scores."""
    width = len(data.negatives)
    negatives = [f"negative_{j + 1}" for j in range(width)]
    scores = ["positive_score", *[f"{n}_score" for n in negatives]]
    names = [n if n != "negative" else "negative_1" for n in data.names]
    names += [n for n in [*negatives, *scores] if n not in names]
    table: dict[str, list[Any]] = {name: [] for name in names}
    kept_pos, kept_neg = [], []
    for r, row in enumerate(data.rows):
        keep = [j for j in range(width) if not np.isnan(negative[r, j]) and not dropped[r, j]]
        if not keep:
            continue
        cells = {**{("negative_1" if k == "negative" else k): v for k, v in row.items()}, "positive_score": float(positive[r])}
        for j in range(width):
            cells[negatives[j]] = row[data.negatives[keep[j]]] if j < len(keep) else None
            cells[f"{negatives[j]}_score"] = float(negative[r, keep[j]]) if j < len(keep) else None
        for name in names:
            table[name].append(cells.get(name))
        kept_pos.append(positive[r])
        kept_neg.append([negative[r, keep[j]] if j < len(keep) else np.nan for j in range(width)])
    return table, np.asarray(kept_pos, np.float32), np.asarray(kept_neg, np.float32).reshape(-1, width)


def rescore_mined(
    mined: str | os.PathLike[str],
    output: str | os.PathLike[str],
    teacher: str | os.PathLike[str] | Teacher,
    *,
    settings: TeacherSettings | None = None,
    columns: dict[str, str] | None = None,
    device: str | None = None,
    revision: str | None = None,
) -> RescoreReport:
    """Write ``output`` (.jsonl or .parquet): the ``mined`` file with its ``*_score`` columns the
    ``teacher``'s scores and ``settings``' guard applied (see the module doc), with a summary and a
    histogram beside it. ``columns`` names the anchor/positive columns. Bad input is refused before
    anything is written."""
    started = time.perf_counter()
    settings = settings or TeacherSettings()
    source, out, summary_path, plot = _paths(mined, output)
    spec = teacher if isinstance(teacher, Teacher) else check_teacher(os.fspath(teacher), settings, revision)
    data = _read_mined(source, columns)
    loaded = spec if isinstance(spec, Teacher) else load_teacher(spec, settings, device, revision)
    positive, negative = _score(loaded, data)
    dropped, counts = _guard(data, positive, negative, loaded.spec.kind, settings)
    table, kept_pos, kept_neg = _table(data, positive, negative, dropped)
    if not len(kept_pos):
        raise DataError(
            f"the guard {counts} dropped every negative of every row; nothing to write: loosen --teacher-max-ratio / --teacher-margin", source=data.source
        )
    lost = dropped.any(axis=1)
    left_out = int(len(data.rows) - len(kept_pos))
    summary = {
        "input": str(source), "output": str(out), "format": OUTPUT_FORMATS[out.suffix.lower()], "rows_read": len(data.rows), "rows_written": int(len(kept_pos)),
        "rows_shortened": int(lost.sum()) - left_out, "rows_left_out": left_out, "negative_columns": len(data.negatives),
        "score_columns": f"the teacher's {loaded.scale}s", "teacher": teacher_section(loaded, settings, kept_pos, kept_neg, counts),
        "seconds": {"total": round(time.perf_counter() - started, 3)},
    }  # fmt: skip
    histogram(plot, kept_pos, kept_neg[np.isfinite(kept_neg)], f"{out.name}: {len(kept_pos)} rows rescored", f"teacher {loaded.scale} ({loaded.spec.name})")
    write_output(out, table)
    atomic_write_json(summary_path, summary)  # last: a summary means the output beside it is complete
    return RescoreReport(out, summary_path, plot, int(len(kept_pos)), summary)
