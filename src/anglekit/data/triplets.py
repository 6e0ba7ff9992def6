"""Triplets (anchor, positive, optional hard negative) for supervised contrastive training.

A :class:`~anglekit.data.records.TripletDataset` holds three aligned text columns; ``negative`` is
``None`` when the data has no hard negatives (query/positive records). This module reads them.

:func:`read_triplets` reads the same sources as :func:`~anglekit.data.readers.read_pairs`
(CSV, TSV, JSON Lines, JSON, Parquet, a saved or hub Hugging Face dataset, Python data) with the
same validation and error messages (source, row, field) and the same ``lenient`` mode. Columns:

==============  =====================================================================
canonical       also accepted (only when the canonical name is absent)
==============  =====================================================================
``anchor``      ``query``, ``sent0`` (SimCSE's nli_for_simcse.csv)
``positive``    ``pos``, ``sent1``
``negative``    ``hard_negative``, ``hard_neg``, ``neg``; optional: without it, no negatives
==============  =====================================================================

n-tuples. Instead of ``negative``, numbered columns ``negative_1``, ``negative_2``, ...
``negative_n`` (what ``anglekit mine`` writes) give each row n hard negatives; columns ending in
``_score`` (the miner's or a teacher's scores) are read only with ``scores=True`` (distillation:
``positive_score`` and ``negative_k_score`` for every numbered negative, each a finite number; a
missing or NaN score of a real negative is an error naming the row and column; without all those
columns the dataset's ``scores`` is None), and other columns are not read. A row whose negatives are
fewer than the columns (an empty cell, a null, a JSON object without the key) is an error naming
the file, row and field, unless ``pad_negatives`` is set: then its negatives are the cells given
(they must come first: ``negative_1`` before ``negative_2``) and training pads the row and masks
the padding out of every loss. A record with more negatives than the first record named is an
error in both modes.

A source with ``premise``, ``hypothesis`` and ``label`` columns (SNLI, MultiNLI,
sentence-transformers/all-nli ``pair-class``) is an NLI set: it is turned into triplets by
:func:`anglekit.data.nli.nli_to_triplets` (entailment positive, contradiction hard negative). Two
of those columns without the third (and without an anchor column) is a DataError naming the missing
one; ``columns`` (``anchor=premise,positive=hypothesis``) reads premise/hypothesis rows as pairs.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from anglekit.data.nli import nli_to_triplets
from anglekit.data.records import TripletDataset, TripletRecord
from anglekit.data.sources import (
    Sink,
    check_columns,
    check_format,
    infer_format,
    is_hf_dataset,
    is_hf_dataset_dict,
    is_hub_id,
    load_from_disk,
    load_hub_dataset,
    looks_like_path,
    missing_column,
    misspelt_column,
    pick_split,
    scan_columns,
    scan_file,
    scan_hf_dataset,
    scan_sequence,
    short_repr,
    text_problem,
)
from anglekit.errors import ConfigError, DataError, InputPathError

# TripletDataset and TripletRecord are re-exported from anglekit.data.records.
__all__ = [
    "TRIPLET_ALIASES",
    "TRIPLET_FIELDS",
    "TripletDataset",
    "TripletRecord",
    "negative_columns",
    "read_triplets",
    "score_columns",
    "triplets_from_records",
]

TRIPLET_FIELDS = ("anchor", "positive", "negative")
TRIPLET_ALIASES: dict[str, tuple[str, ...]] = {
    "anchor": ("query", "sent0"),
    "positive": ("pos", "sent1"),
    "negative": ("hard_negative", "hard_neg", "neg"),
}
NLI_COLUMNS = ("premise", "hypothesis", "label")
_NUMBERED = re.compile(r"negative_([1-9][0-9]*)")


def negative_columns(available: Sequence[str], source: str) -> list[str]:
    """The numbered negative columns ``negative_1..negative_n`` among ``available`` ([] if none);
    a DataError when the numbers have a gap."""
    numbers = sorted(int(m.group(1)) for name in available if (m := _NUMBERED.fullmatch(name)))
    if numbers and numbers != list(range(1, len(numbers) + 1)):
        missing = next(k for k in range(1, numbers[-1] + 1) if k not in numbers)
        raise DataError(f"numbered negative columns must run from negative_1 without gaps; negative_{missing} is missing", source=source)
    return [f"negative_{k}" for k in numbers]


def score_columns(negatives: int) -> list[str]:
    """The teacher-score columns of an n-tuple with ``negatives`` negatives: ``positive_score``,
    ``negative_1_score`` .. ``negative_<n>_score`` (what ``anglekit mine`` writes)."""
    return ["positive_score", *(f"negative_{k}_score" for k in range(1, negatives + 1))]


def _score(value: Any) -> float | str:
    """A teacher score cell as a float, or why it is not one."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return "is missing"
    if isinstance(value, bool):
        return f"{value!r} is not a number"
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return f"{value!r} is not a number"
    if not isinstance(value, (int, float)):
        return f"{short_repr(value)} is not a number"
    return float(value) if math.isfinite(value) else f"is {value}: not a finite number"


# --------------------------------------------------------------------------------------------
# Sink: the readers' machinery (strict / lenient, row and field in every error)
# --------------------------------------------------------------------------------------------


class _TripletSink(Sink):
    """Collects triplets, or premise/hypothesis/label rows handed to :func:`nli_to_triplets`."""

    fields = TRIPLET_FIELDS

    def __init__(self, source: str, lenient: bool, columns: Mapping[str, str] | None, pad_negatives: bool = False, scores: bool = False) -> None:
        super().__init__(source, lenient)
        self.want_scores = scores
        self.has_scores = False  # every score column of the first record is there
        self.scores: list[tuple[float, ...]] = []
        self.columns = check_columns(columns, TRIPLET_FIELDS)
        self.anchor: list[str] = self.new_column("anchor")
        self.positive: list[str] = self.new_column("positive")
        self.negative: list[str] = self.new_column("negative")
        self.with_negative = False
        self.nli = False
        self.rows: list[int] = []  # NLI mode: the row of each record, for error messages
        self.pad_negatives = pad_negatives
        self.numbered: list[str] = []  # n-tuples: the negative_1..negative_n columns
        self.negatives: list[tuple[str, ...]] = self.new_column("negatives", "texts")

    def resolve(self, available: Sequence[str]) -> list[str]:
        present = set(available)
        if not self.columns and not ({"anchor", "query", "sent0"} & present) and set(NLI_COLUMNS) <= present:
            self.nli = True  # premise / hypothesis / label: converted by anglekit.data.nli
            if self.spooled:
                raise ConfigError(
                    f"{self.source}: premise/hypothesis/label (NLI) rows are paired into triplets in memory and cannot be "
                    "streamed; give anchor/positive/negative columns, or train without stream_data"
                )
            return list(NLI_COLUMNS)
        if not self.columns and not ({"anchor", "query", "sent0"} & present):
            self.check_partial_nli(present, available)
        chosen = []
        numbered = [] if "negative" in self.columns else negative_columns(available, self.source)
        for canonical in TRIPLET_FIELDS:
            tried = (self.columns[canonical],) if canonical in self.columns else (canonical, *TRIPLET_ALIASES[canonical])
            name = next((n for n in tried if n in present), None)
            if canonical == "negative" and numbered:
                if name is not None:
                    raise DataError(f"both a {name!r} column and numbered negatives ({', '.join(numbered)}): keep one of them", source=self.source)
                break
            if name is None:
                if canonical == "negative" and canonical not in self.columns:
                    typo = misspelt_column([c for c in available if c not in chosen and c not in NLI_COLUMNS], tried)
                    if typo is not None:  # not optional then: it would silently train as pairs
                        raise DataError(
                            f"column {typo[0]!r} looks like a misspelling of {typo[1]!r}: rename it, or map it with "
                            f"columns negative={typo[0]} (without a negative column the rows train as (anchor, positive) pairs)",
                            source=self.source,
                            field=typo[0],
                        )
                    break  # optional
                known = [n for field in TRIPLET_FIELDS for n in (field, *TRIPLET_ALIASES[field], *self.columns.values())]
                raise missing_column(self.source, tried[0], tried, available, taken=known)
            chosen.append(name)
        if numbered:
            self.numbered = numbered
            self.optional = frozenset(numbered)
            scored = score_columns(len(numbered))
            self.has_scores = self.want_scores and set(scored) <= present
            if self.has_scores:
                self.optional = frozenset(numbered + scored)
                return chosen + numbered + scored
            return chosen + numbered
        self.with_negative = len(chosen) == 3
        return chosen

    def check_partial_nli(self, present: set[str], available: Sequence[str]) -> None:
        """A DataError naming the missing NLI column(s) when ``premise`` or ``hypothesis`` is there with
        another NLI column but not all three: such rows are an NLI set, not anchor/positive rows."""
        nli = [c for c in NLI_COLUMNS if c in present]
        if len(nli) < 2 or not ({"premise", "hypothesis"} & present):
            return
        missing = [c for c in NLI_COLUMNS if c not in present]
        names = ", ".join(repr(a) for a in available)
        mapped = "; as (anchor, positive) rows: columns anchor=premise,positive=hypothesis" if {"premise", "hypothesis"} <= present else ""
        raise DataError(
            f"{' and '.join(map(repr, nli))} columns make an NLI set, which also needs {' and '.join(map(repr, missing))} "
            f"to pair its rows into triplets (label: entailment, neutral, contradiction or 0, 1, 2){mapped}; available columns: {names}",
            source=self.source,
            field=missing[0],
        )

    def record_values(self, row: int, record: Mapping[str, Any], chosen: Sequence[str]) -> list[Any] | None:
        if not self.numbered:
            return super().record_values(row, record, chosen)
        numbered = negative_columns([str(key) for key in record], self.source)
        if len(numbered) > len(self.numbered):
            if not self.pad_negatives:
                self.rows_seen += 1
                self.fail(
                    "differing number of negatives",
                    f"row has {len(numbered)} negative columns where the first row has {len(self.numbered)} "
                    f"({self.numbered[0]}..{self.numbered[-1]}); pass --pad-negatives (pad_negatives: true) to pad shorter rows",
                    row,
                    numbered[len(self.numbered)],
                )
                return None
            self.numbered = numbered  # padding: the earlier, shorter rows are padded to the longest
            self.optional = frozenset(numbered)
        scored = score_columns(len(self.numbered)) if self.has_scores else []
        return [record.get(name) for name in chosen[:2]] + [record.get(name) for name in [*self.numbered, *scored]]

    def add_ntuple(self, row: int, values: Sequence[Any], names: Sequence[str]) -> None:
        """An n-tuple row: anchor, positive and the cells of the numbered negative columns."""
        self.rows_seen += 1
        for value, name in zip(values[:2], names[:2], strict=False):
            problem = text_problem(value)
            if problem is not None:
                self.fail(problem[0], problem[1], row, name)
                return
        names = [*names[:2], *self.numbered]
        negatives: list[str] = []
        gap: str | None = None
        for value, name in zip(values[2:], names[2:], strict=False):
            if value is None or (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and not value.strip()):
                gap = gap or name
                continue
            problem = text_problem(value)
            if problem is not None:
                self.fail(problem[0], problem[1], row, name)
                return
            if gap is not None:
                self.fail("gap in negatives", f"{gap} is empty but {name} is given: a row's negatives come first, without gaps", row, gap)
                return
            negatives.append(value)
        expected = len(names) - 2
        row_scores = self.row_scores(row, values[2 + expected :], len(negatives)) if self.has_scores else ()
        if row_scores is None:
            return
        if len(negatives) != expected and not self.pad_negatives:
            self.fail(
                "differing number of negatives",
                f"row has {len(negatives)} negative(s) where the columns hold {expected} ({names[2]}..{names[-1]}); "
                "pass --pad-negatives (pad_negatives: true) to pad shorter rows",
                row,
                gap,
            )
            return
        self.anchor.append(values[0])
        self.positive.append(values[1])
        self.negatives.append(tuple(negatives))
        if self.has_scores:
            self.scores.append(row_scores)

    def row_scores(self, row: int, cells: Sequence[Any], negatives: int) -> tuple[float, ...] | None:
        """The teacher's scores of a row's positive and its ``negatives`` real negatives (a padding
        slot's cell is not read), or None after failing the row."""
        out = []
        for name, cell in zip(score_columns(negatives), cells, strict=False):
            value = _score(cell)
            if isinstance(value, str):
                self.fail("bad teacher score", f"teacher score {value}", row, name)
                return None
            out.append(value)
        return tuple(out)

    def add(self, row: int, values: Sequence[Any], names: Sequence[str]) -> None:
        if self.numbered:
            self.add_ntuple(row, values, names)
            return
        self.rows_seen += 1
        if self.nli:
            self.anchor.append(values[0])  # premise, hypothesis, label: validated by the NLI conversion
            self.positive.append(values[1])
            self.negative.append(values[2])
            self.rows.append(row)
            return
        for value, name in zip(values, names, strict=False):
            problem = text_problem(value)
            if problem is not None:
                self.fail(problem[0], problem[1], row, name)
                return
        self.anchor.append(values[0])
        self.positive.append(values[1])
        if self.with_negative:
            self.negative.append(values[2])

    def count(self) -> int:
        return len(self.anchor)

    def scan_tuples(self, items: Sequence[Any]) -> None:
        """A list of (anchor, positive), (anchor, positive, negative) or (anchor, positive,
        negative_1, ..., negative_n) tuples, all of one length (shorter n-tuples with ``pad_negatives``)."""
        if self.columns:
            raise ConfigError("columns= applies to named columns; a list of tuples has none")
        width = None
        for i, item in enumerate(items):
            if isinstance(item, (str, bytes, Mapping)) or not isinstance(item, Sequence):
                self.rows_seen += 1
                self.fail("wrong record type", f"expected an (anchor, positive[, negative...]) tuple, got {type(item).__name__} {short_repr(item)}", i + 1)
                continue
            if width is None:
                if len(item) < 2:
                    raise DataError(f"expected (anchor, positive[, negative...]) tuples, got {len(item)} field(s)", source=self.source, row=i + 1)
                width = len(item)
                self.with_negative = width == 3 and not self.pad_negatives
                if width > 3 or (width == 3 and self.pad_negatives):
                    self.numbered = [f"negative_{k}" for k in range(1, width - 1)]
            if self.numbered:
                if len(item) > width or (len(item) < width and not self.pad_negatives) or len(item) < 2:
                    self.rows_seen += 1
                    self.fail("wrong number of fields", f"wrong number of fields: expected {width} like the first row, got {len(item)}", i + 1)
                    continue
                names = ["anchor", "positive", *self.numbered]
                self.add_ntuple(i + 1, list(item) + [None] * (width - len(item)), names)
                continue
            if len(item) != width:
                self.rows_seen += 1
                self.fail("wrong number of fields", f"wrong number of fields: expected {width} like the first row, got {len(item)}", i + 1)
                continue
            self.add(i + 1, list(item), TRIPLET_FIELDS[:width])

    def build(self, name: str, empty_message: str, **nli_options: Any) -> TripletDataset:
        if self.nli:
            if self.rows_seen == 0:
                raise DataError(empty_message, source=self.source)
            return nli_to_triplets(
                self.anchor,
                self.positive,
                self.negative,
                name=name,
                source=self.source,
                lenient=self.lenient,
                rows=self.rows,
                skipped=dict(self.skipped),
                **nli_options,
            )
        if self.spooled:
            return self.finish_spool("triplets", name, empty_message)  # type: ignore[no-any-return]
        self.check_done(empty_message)
        return TripletDataset(
            self.anchor,
            self.positive,
            self.negative if self.with_negative else None,
            name=name,
            source=self.source,
            skipped=dict(self.skipped),
            negatives=self.negatives if self.numbered else None,
            scores=self.scores if self.has_scores else None,
        )


def read_triplets(
    source: Any,
    *,
    columns: dict[str, str] | None = None,
    format: str | None = None,  # noqa: A002 - the natural name for users
    split: str | None = None,
    config: str | None = None,
    lenient: bool = False,
    name: str | None = None,
    nli_pairing: str = "zip",
    pad_negatives: bool = False,
    scores: bool = False,
) -> TripletDataset:
    """Read triplets (or n-tuples) from a file, a saved or hub Hugging Face dataset, or Python data.

    ``source`` is what :func:`~anglekit.data.readers.read_pairs` accepts (a hub id needs ``split``;
    ``config`` names a hub configuration, e.g. ``("sentence-transformers/all-nli", config="triplet")``),
    or a list of ``(anchor, positive[, negative])`` tuples or of dicts. ``columns`` maps
    ``anchor``/``positive``/``negative`` to the source's column names. NLI sources (premise,
    hypothesis, label) are converted with ``nli_pairing`` (see :mod:`anglekit.data.nli`).
    ``pad_negatives``: n-tuple rows may hold fewer negatives than the columns (see the module doc).
    ``scores``: also read the n-tuples' teacher scores (``*_score`` columns; see the module doc).
    """
    fmt = check_format(format)
    check_columns(columns, TRIPLET_FIELDS)
    if isinstance(source, (str, os.PathLike)):
        return _triplets_from_path(os.fspath(source), fmt, columns, split, config, lenient, name, nli_pairing, pad_negatives, scores)
    if fmt is not None or config is not None:
        raise ConfigError("format= and config= apply to paths and hub ids")
    return _triplets_from_data(source, columns, split, lenient, name, nli_pairing, pad_negatives, scores)


def _triplets_from_path(text: str, fmt: str | None, columns: dict[str, str] | None, split: str | None, config: str | None, lenient: bool,
                        name: str | None, nli_pairing: str, pad_negatives: bool = False, scores: bool = False) -> TripletDataset:  # fmt: skip
    """:func:`read_triplets` of a file, a saved dataset folder or a hub id."""
    path = Path(text).expanduser()
    if fmt == "hub" or (fmt is None and not path.exists() and is_hub_id(text) and not looks_like_path(text)):
        label = f"hf:{text}" + (f"/{config}" if config else "")
        if not split:
            raise ConfigError(f"reading {label} from the Hugging Face hub needs split= (e.g. 'train')")
        sink = _TripletSink(label, lenient, columns, pad_negatives, scores)
        ds = load_hub_dataset(text, config=config, split=split)
        scan_hf_dataset(ds, sink)
        return sink.build(name or f"{text}:{split}", "dataset has no rows", pairing=nli_pairing)
    if config is not None:
        raise ConfigError("config= applies to hub datasets only")
    if path.is_dir():
        if fmt not in (None, "hf"):
            raise ConfigError(f"{text} is a directory; format {fmt!r} applies to a file")
        ds = pick_split(load_from_disk(path, text), split, text)
        sink = _TripletSink(text, lenient, columns, pad_negatives, scores)
        scan_hf_dataset(ds, sink)
        return sink.build(name or path.name + (f":{split}" if split else ""), "dataset has no rows", pairing=nli_pairing)
    if not path.is_file():
        raise InputPathError("no such file or directory", source=text)
    if split is not None:
        raise ConfigError(f"split={split!r} does not apply to a single file ({text}); a file holds one split")
    sink = _TripletSink(text, lenient, columns, pad_negatives, scores)
    file_format = fmt or infer_format(path)
    scan_file(path, file_format, sink)
    header_only = " (header only)" if file_format in ("csv", "tsv") else ""
    return sink.build(name or path.stem, f"file has no data rows{header_only}", pairing=nli_pairing)


def _triplets_from_data(source: Any, columns: dict[str, str] | None, split: str | None, lenient: bool, name: str | None,
                        nli_pairing: str, pad_negatives: bool = False, scores: bool = False) -> TripletDataset:  # fmt: skip
    """:func:`read_triplets` of Python data: a datasets.Dataset, a dict of lists, a DataFrame, a list."""
    if is_hf_dataset(source) or is_hf_dataset_dict(source):
        ds = pick_split(source, split, "<datasets.Dataset>")
        sink = _TripletSink("<datasets.Dataset>", lenient, columns, pad_negatives, scores)
        scan_hf_dataset(ds, sink)
        return sink.build(name or "triplets", "dataset has no rows", pairing=nli_pairing)
    if split is not None:
        raise ConfigError("split= applies to dataset directories, DatasetDicts and hub ids only")
    if isinstance(source, Mapping):
        sink = _TripletSink("<dict of lists>", lenient, columns, pad_negatives, scores)
        if not source or all(len(v) == 0 for v in source.values()):
            raise DataError("no rows", source=sink.source)
        scan_columns([str(k) for k in source], lambda k: source[k], sink)
        return sink.build(name or "triplets", "no rows", pairing=nli_pairing)
    if hasattr(source, "columns") and hasattr(source, "iloc"):  # pandas DataFrame
        sink = _TripletSink("<DataFrame>", lenient, columns, pad_negatives, scores)
        if len(source) == 0:
            raise DataError("no rows", source=sink.source)
        scan_columns([str(c) for c in source.columns], lambda k: source[k].tolist(), sink)
        return sink.build(name or "triplets", "no rows", pairing=nli_pairing)
    if isinstance(source, (list, tuple)):
        if not source:
            raise DataError("no rows (empty list)", source="<list>")
        sink = _TripletSink("<list of dicts>" if isinstance(source[0], Mapping) else "<list of tuples>", lenient, columns, pad_negatives, scores)
        scan_sequence(source, sink)
        return sink.build(name or "triplets", "no rows", pairing=nli_pairing)
    raise ConfigError(
        f"cannot read triplets from a {type(source).__name__}; give a path, a hub id, a list of dicts or "
        "tuples, a dict of lists, a datasets.Dataset or a pandas DataFrame"
    )


def triplets_from_records(records: Iterable[Sequence[Any]], *, name: str = "", source: str = "", pad_negatives: bool = False) -> TripletDataset:
    """From ``(anchor, positive)``, ``(anchor, positive, negative)`` or ``(anchor, positive,
    negative_1, ..., negative_n)`` tuples (all of one length, unless ``pad_negatives``)."""
    dataset = read_triplets(list(records), name=name or "triplets", pad_negatives=pad_negatives)
    if source:
        dataset.source = source
    return dataset
