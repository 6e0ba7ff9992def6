"""Pair readers: files, saved Hugging Face datasets, hub names and Python data -> a PairDataset.

Every reader validates as it reads and reports the first problem as a :class:`DataError` naming the
source, the row (1-based, header excluded; the line number for JSON Lines and plain text) and the
field. With ``lenient=True`` bad rows are skipped instead and counted by reason in
``PairDataset.skipped`` (and logged); problems with the source as a whole (missing column, empty
file, a file that is not UTF-8 at all) still raise. Nothing is dropped silently.

Text is kept exactly as read (no stripping, no case change); only the header's column names are
stripped of surrounding blanks. CSV/TSV are parsed with the :mod:`csv` module, never with a type
guesser, so ``"NA"``, ``"null"`` or ``"123"`` stay texts and labels are parsed by one explicit rule
(:func:`parse_label`). ``.csv`` uses standard CSV quoting; ``.tsv`` uses no quoting at all
(``csv.QUOTE_NONE``), since real TSV corpora (STS-B, SICK, MRPC) contain unbalanced quote marks.

The machinery shared with the sentence and triplet readers (formats, decoding, sinks, hub and
saved datasets) is :mod:`anglekit.data.sources`; this module adds the pair sink, the label rule
and :func:`read_texts`.
"""

from __future__ import annotations

import csv
import math
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.data.records import PairDataset, check_label_range
from anglekit.data.sources import (
    FORMATS,
    Sink,
    check_columns,
    check_format,
    collect_texts,
    infer_format,
    is_hf_dataset,
    is_hf_dataset_dict,
    is_hub_id,
    load_from_disk,
    load_hub_dataset,
    looks_like_path,
    missing_column,
    pick_split,
    scan_columns,
    scan_delimited,
    scan_file,
    scan_hf_dataset,
    scan_sequence,
    short_repr,
    text_problem,
)
from anglekit.errors import ConfigError, DataError, InputPathError

__all__ = [
    "FORMATS",
    "PAIR_ALIASES",
    "PAIR_FIELDS",
    "infer_format",
    "parse_label",
    "read_delimited",
    "read_hub_pairs",
    "read_pairs",
    "read_texts",
]


PAIR_FIELDS = ("text1", "text2", "label")
"""Canonical column names of a pair dataset."""

PAIR_ALIASES: dict[str, tuple[str, ...]] = {
    "text1": ("sentence1",),
    "text2": ("sentence2",),
    "label": ("score",),
}
"""Column names accepted automatically, only when the canonical name is absent."""

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


# --------------------------------------------------------------------------------------------
# Labels and the pair sink
# --------------------------------------------------------------------------------------------


def parse_label(value: Any) -> float:
    """Parse one label by the reader's rule; raise ``ValueError`` with a readable reason.

    Accepted: real numbers (int, float, numpy scalars, Decimal; not bool) and strings holding a
    plain decimal number (``"2.4"``, ``" 3 "``, ``"1e-3"``). The result must be finite. Nothing
    is rounded: ``"2.4"`` gives 2.4.
    """
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"label must be a number, got bool {value!r} (use 0/1)")
    if isinstance(value, (numbers.Real, Decimal)):
        number = float(value)
    elif isinstance(value, str):
        stripped = value.strip()
        if not stripped:
            raise ValueError("label is empty")
        if not _NUMBER.match(stripped):
            if stripped.lower().lstrip("+-") in {"nan", "inf", "infinity"}:
                raise ValueError(f"label {value!r} is not finite")
            raise ValueError(f"label {short_repr(value)} is not a number")
        number = float(stripped)
    elif value is None:
        raise ValueError("label is missing (null)")
    else:
        raise ValueError(f"label must be a number, got {type(value).__name__} {short_repr(value)}")
    if not math.isfinite(number):
        raise ValueError(f"label {value!r} is not finite")
    return number


class _PairSink(Sink):
    """Collects validated ``(text1, text2, label)`` rows; builds the :class:`PairDataset`."""

    fields = PAIR_FIELDS

    def __init__(
        self,
        source: str,
        lenient: bool,
        columns: Mapping[str, str] | None,
        label_range: tuple[float, float] | None,
    ) -> None:
        super().__init__(source, lenient)
        self.columns = check_columns(columns, PAIR_FIELDS)
        self.label_range = check_label_range(label_range)
        self.text1: list[str] = self.new_column("text1")
        self.text2: list[str] = self.new_column("text2")
        self.labels: list[float] = self.new_column("label", "float")

    def resolve(self, available: Sequence[str]) -> list[str]:
        present = set(available)
        chosen = []
        for canonical in PAIR_FIELDS:
            if canonical in self.columns:
                tried: tuple[str, ...] = (self.columns[canonical],)
            else:
                tried = (canonical, *PAIR_ALIASES[canonical])
            for name in tried:
                if name in present:
                    chosen.append(name)
                    break
            else:
                known = [n for field in PAIR_FIELDS for n in (field, *PAIR_ALIASES[field], *self.columns.values())]
                raise missing_column(self.source, tried[0], tried, available, taken=known)
        return chosen

    def add(self, row: int, values: Sequence[Any], names: Sequence[str]) -> None:
        self.rows_seen += 1
        t1, t2, raw_label = values
        for value, name in ((t1, names[0]), (t2, names[1])):
            problem = text_problem(value)
            if problem is not None:
                self.fail(problem[0], problem[1], row, name)
                return
        try:
            label = parse_label(raw_label)
        except ValueError as exc:
            self.fail("invalid label", str(exc), row, names[2])
            return
        if self.label_range is not None and not (self.label_range[0] <= label <= self.label_range[1]):
            low, high = self.label_range
            self.fail("label out of range", f"label {label:g} is outside the declared range [{low:g}, {high:g}]", row, names[2])
            return
        self.text1.append(t1)
        self.text2.append(t2)
        self.labels.append(label)

    def count(self) -> int:
        return len(self.labels)

    def scan_tuples(self, items: Sequence[Any]) -> None:
        if self.columns:
            raise ConfigError("columns= applies to named columns; a list of (text1, text2, label) tuples has none")
        for i, item in enumerate(items):
            if isinstance(item, (str, bytes, Mapping)) or not isinstance(item, Sequence):
                self.rows_seen += 1
                self.fail("wrong record type", f"expected a (text1, text2, label) tuple, got {type(item).__name__} {short_repr(item)}", i + 1)
                continue
            if len(item) != 3:
                self.rows_seen += 1
                self.fail("wrong number of fields", f"wrong number of fields: expected 3 (text1, text2, label), got {len(item)}", i + 1)
                continue
            self.add(i + 1, list(item), PAIR_FIELDS)

    def build(self, name: str, empty_message: str) -> PairDataset:
        if self.spooled:
            return self.finish_spool("pairs", name, empty_message, label_range=self.label_range)  # type: ignore[no-any-return]
        self.check_done(empty_message)
        return PairDataset(
            self.text1,
            self.text2,
            np.asarray(self.labels, dtype=np.float64),
            name=name,
            source=self.source,
            label_range=self.label_range,
            skipped=dict(self.skipped),
        )


def read_delimited(
    path: str | os.PathLike[str],
    *,
    delimiter: str = "\t",
    quoting: int = csv.QUOTE_NONE,
    has_header: bool = True,
    fieldnames: Sequence[str] | None = None,
    allow_extra_fields: bool = False,
    columns: dict[str, str] | None = None,
    label_range: tuple[float, float] | None = None,
    lenient: bool = False,
    name: str | None = None,
) -> PairDataset:
    """Read pairs from a delimited text file with full control of the dialect.

    ``has_header=False`` needs ``fieldnames`` (the names given to the file's columns, which
    ``columns`` then refers to). ``allow_extra_fields=True`` accepts rows with more fields than
    names (the extra trailing ones are ignored, as STS-B needs); fewer is always an error.
    """
    path = Path(path)
    source = os.fspath(path)
    if has_header and fieldnames is not None:
        raise ConfigError("fieldnames is for files without a header (has_header=False)")
    sink = _PairSink(source, lenient, columns, label_range)
    scan_delimited(
        path,
        sink,
        delimiter=delimiter,
        quoting=quoting,
        has_header=has_header,
        fieldnames=fieldnames,
        allow_extra_fields=allow_extra_fields,
    )
    return sink.build(name or path.stem, "file has no data rows" + (" (header only)" if has_header else ""))


def read_pairs(
    source: Any,
    *,
    columns: dict[str, str] | None = None,
    format: str | None = None,  # noqa: A002 - the natural name for users
    label_range: tuple[float, float] | None = None,
    split: str | None = None,
    lenient: bool = False,
    name: str | None = None,
) -> PairDataset:
    """Read labelled pairs from a file, a saved or hub Hugging Face dataset, or Python data.

    ``source`` may be:

    * a path to ``.csv`` (comma, standard quoting), ``.tsv`` (tab, no quoting), ``.jsonl`` (one
      JSON object per line; ``.json`` also accepts one JSON array of objects) or ``.parquet``;
      files have a header row (CSV/TSV) or keys (JSON);
    * a directory written by ``datasets.save_to_disk`` (a ``DatasetDict`` needs ``split``);
    * a Hugging Face hub id such as ``"sentence-transformers/stsb"`` (needs ``split``; uses the
      network or the local cache), also forced with ``format="hub"``;
    * Python data: a list of dicts, a list of ``(text1, text2, label)`` tuples, a dict of lists,
      a ``datasets.Dataset``/``DatasetDict`` or a pandas ``DataFrame``.

    ``columns`` maps the canonical names ``text1``, ``text2``, ``label`` to the source's columns
    (any subset; an unknown key is a :class:`ConfigError`). Without a mapping, a canonical
    column that is absent is looked up by its alias (``sentence1``, ``sentence2``, ``score``).

    Strict by default: the first bad row raises :class:`DataError` naming source, row and
    field. ``lenient=True`` skips bad rows and counts them in ``PairDataset.skipped``; a
    missing column, an empty source or an undecodable file still raise. ``label_range``
    (inclusive) declares the valid labels: a label outside it is a bad row.
    """
    fmt = check_format(format)
    check_columns(columns, PAIR_FIELDS)  # configuration errors before any I/O
    check_label_range(label_range)
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if fmt == "hub":
            return read_hub_pairs(text, None, split, columns, label_range, lenient, name)
        path = Path(text).expanduser()
        if path.is_dir():
            if fmt not in (None, "hf"):
                raise ConfigError(f"{text} is a directory; format {fmt!r} applies to a file")
            ds = pick_split(load_from_disk(path, text), split, text)
            sink = _PairSink(text, lenient, columns, label_range)
            scan_hf_dataset(ds, sink)
            default = path.name + (f":{split}" if split else "")
            return sink.build(name or default, "dataset has no rows")
        if path.is_file():
            if split is not None:
                raise ConfigError(f"split={split!r} does not apply to a single file ({text}); a file holds one split")
            if fmt == "hf":
                raise ConfigError(f"format 'hf' is for a directory written by datasets.save_to_disk, not the file {text}")
            fmt = fmt or infer_format(path)
            sink = _PairSink(text, lenient, columns, label_range)
            scan_file(path, fmt, sink)
            header_only = " (header only)" if fmt in ("csv", "tsv") else ""
            return sink.build(name or path.stem, f"file has no data rows{header_only}")
        if fmt is None and is_hub_id(text) and not looks_like_path(text):
            if split is None:
                raise InputPathError(f"no such file or directory; if {text!r} is a Hugging Face hub id, pass split=", source=text)
            return read_hub_pairs(text, None, split, columns, label_range, lenient, name)
        raise InputPathError("no such file or directory", source=text)
    if fmt is not None:
        raise ConfigError(f"format={fmt!r} applies to paths, not to {type(source).__name__} objects")
    sink, default_name = _python_sink(source, split, columns, label_range, lenient)
    return sink.build(name or default_name, "no rows")


def _python_sink(source: Any, split: str | None, columns: Any, label_range: Any, lenient: bool) -> tuple[_PairSink, str]:
    if is_hf_dataset_dict(source) or is_hf_dataset(source):
        label = "<datasets.Dataset>"
        ds = pick_split(source, split, label)
        sink = _PairSink(label, lenient, columns, label_range)
        scan_hf_dataset(ds, sink)
        return sink, "dataset" + (f":{split}" if split else "")
    if split is not None:
        raise ConfigError(f"split={split!r} applies to dataset directories, DatasetDicts and hub names only")
    if isinstance(source, Mapping):
        sink = _PairSink("<dict of lists>", lenient, columns, label_range)
        for key, value in source.items():
            if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
                raise DataError(f"a dict of lists needs a list per column, got {type(value).__name__}", source=sink.source, field=str(key))
        if not source or all(len(v) == 0 for v in source.values()):
            raise DataError("no rows", source=sink.source)
        scan_columns([str(k) for k in source], lambda k: source[k], sink)
        return sink, "pairs"
    if hasattr(source, "columns") and hasattr(source, "to_dict") and hasattr(source, "iloc"):  # pandas DataFrame
        sink = _PairSink("<DataFrame>", lenient, columns, label_range)
        if len(source) == 0:
            raise DataError("no rows", source=sink.source)
        scan_columns([str(c) for c in source.columns], lambda k: source[k].tolist(), sink)
        return sink, "pairs"
    if isinstance(source, (list, tuple)):
        kind = "<list of dicts>" if source and isinstance(source[0], Mapping) else "<list of tuples>"
        sink = _PairSink(kind, lenient, columns, label_range)
        if not source:
            raise DataError("no rows (empty list)", source="<list>")
        scan_sequence(source, sink)
        return sink, "pairs"
    raise ConfigError(
        f"cannot read pairs from a {type(source).__name__}; give a path, a hub id, a list of dicts or "
        "(text1, text2, label) tuples, a dict of lists, a datasets.Dataset or a pandas DataFrame"
    )


def read_hub_pairs(
    name: str,
    config: str | None,
    split: str | None,
    columns: dict[str, str] | None,
    label_range: tuple[float, float] | None,
    lenient: bool,
    display_name: str | None,
) -> PairDataset:
    """Pairs from the ``split`` of the hub dataset ``name`` (and ``config``); needs the network or the cache."""
    # Check the cheap arguments before touching the network.
    sink = _PairSink(f"hf:{name}" + (f"/{config}" if config else ""), lenient, columns, label_range)
    if not split:
        raise ConfigError(f"reading {sink.source} from the Hugging Face hub needs split= (e.g. 'train', 'validation', 'test')")
    ds = load_hub_dataset(name, config=config, split=split)
    scan_hf_dataset(ds, sink)
    return sink.build(display_name or f"{name}:{split}", "dataset has no rows")


def read_texts(source: Any, column: str | None = None, *, lenient: bool = False) -> list[str]:
    """Read plain sentences (for ``anglekit encode``), validated like pair texts.

    ``source`` is a ``.txt`` file (or one without extension: one text per line, line endings
    removed, nothing else changed; a blank line is an error naming its line unless ``lenient``),
    a ``.csv``/``.tsv``/``.jsonl``/``.json``/``.parquet`` file, or a list of strings. For tabular
    files ``column`` names the text column; by default ``text``, then ``sentence``, then the only
    column. What a lenient read skips is logged as a warning.
    """
    return collect_texts(source, column, lenient).texts
