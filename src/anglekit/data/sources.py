"""Sources: the low-level machinery every reader of :mod:`anglekit.data` shares.

What a source is (a file of a known format, a saved or hub Hugging Face dataset, Python data),
how bytes become text and text becomes lines, and how rows are fed to a *sink* that validates them
(strict: the first problem raises :class:`DataError` naming source, row and field; lenient: bad rows
are counted by reason). The record-specific sinks live with their readers
(:mod:`~anglekit.data.readers` for pairs, :mod:`~anglekit.data.triplets` for triplets); the text sink
is here because sentences, NLI files and ``read_texts`` all use it.

Pandas, pyarrow and datasets are optional (``pip install anglekit[data]``) and imported only when
a source needs them.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import difflib
import io
import itertools
import json
import logging
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, DataError, InputPathError
from anglekit.io.text import is_blank

__all__ = [
    "EXTENSIONS",
    "FORMATS",
    "HUB_ID_RE",
    "TEXT_ALIASES",
    "TEXT_EXTENSIONS",
    "DelimitedRows",
    "RowProblem",
    "Sink",
    "TextFile",
    "TextSink",
    "bad_bytes_message",
    "check_columns",
    "check_format",
    "collect_texts",
    "decode_file",
    "infer_format",
    "is_hf_dataset",
    "is_hf_dataset_dict",
    "is_hub_id",
    "load_from_disk",
    "load_hub_dataset",
    "looks_like_path",
    "misspelt_column",
    "missing_column",
    "pick_split",
    "read_lines",
    "scan_batches",
    "scan_columns",
    "scan_delimited",
    "scan_file",
    "scan_hf_dataset",
    "scan_objects",
    "scan_sequence",
    "scan_text_lines",
    "short_repr",
    "split_lines",
    "text_problem",
]

logger = logging.getLogger("anglekit.data")

TEXT_ALIASES = ("text", "sentence")
"""Column names ``read_texts`` looks for when no column is given (then: the only column)."""

FORMATS = ("csv", "tsv", "jsonl", "json", "parquet", "hf", "hub")
"""Values accepted by ``format=``: ``json`` reads JSON Lines or one JSON array of objects;
``hf`` is a directory written by ``datasets.save_to_disk``; ``hub`` a Hugging Face hub id."""

EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
TEXT_EXTENSIONS = ("", ".txt", ".text")
HUB_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
"""A Hugging Face hub id: ``name`` or ``org/name``."""
_SURROGATE = re.compile("[\udc80-\udcff]")  # where surrogateescape put undecodable bytes
BATCH_ROWS = 10_000
"""Rows per record batch when a Parquet file or a Hugging Face dataset is read."""


def is_hub_id(text: str) -> bool:
    """Whether ``text`` has the shape of a Hugging Face hub id (``name`` or ``org/name``)."""
    return bool(HUB_ID_RE.match(text))


# --------------------------------------------------------------------------------------------
# Field checks
# --------------------------------------------------------------------------------------------


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def text_problem(value: Any) -> tuple[str, str] | None:
    """``(reason, message)`` when ``value`` is not a usable text, else ``None``."""
    if isinstance(value, str):
        if is_blank(value):
            return "empty text", "text is empty" if not value else f"text is blank (only whitespace or invisible characters: {short_repr(value)})"
        return None
    if value is None:
        return "empty text", "text is missing (null)"
    if isinstance(value, float) and math.isnan(value):
        return "empty text", "text is missing (NaN)"
    return "non-string text", f"text must be a string, got {type(value).__name__} {short_repr(value)}"


# --------------------------------------------------------------------------------------------
# Sinks: collect validated rows, raise (strict) or count (lenient) problems
# --------------------------------------------------------------------------------------------


class Sink:
    """Collects rows for one read. ``fail`` raises in strict mode and counts in lenient mode."""

    fields: tuple[str, ...] = ()
    optional: frozenset[str] = frozenset()
    """Chosen columns a record (JSON object, dict) may lack: the sink gets None for them."""

    def __init__(self, source: str, lenient: bool) -> None:
        self.source = source
        self.lenient = lenient
        self.skipped: Counter[str] = Counter()
        self.first_skip: dict[str, str] = {}
        self.rows_seen = 0

    def new_column(self, name: str, kind: str = "text") -> Any:
        """Where the sink keeps one column: a list, or inside :func:`anglekit.data.stream.spooling`
        a column of the spool (rows written to a memory-mapped Arrow file in batches)."""
        from anglekit.data.stream import current_spool

        spool = current_spool()
        return [] if spool is None else spool.column(name, kind)

    @property
    def spooled(self) -> bool:
        """Whether this sink writes its rows to a spool (see :meth:`new_column`)."""
        from anglekit.data.stream import SpoolColumn

        return any(isinstance(value, SpoolColumn) for value in vars(self).values())

    def finish_spool(self, kind: str, name: str, empty_message: str, **info: Any) -> Any:
        """The :class:`~anglekit.data.stream.ArrowRows` of a spooled read (after the usual checks)."""
        from anglekit.data.stream import current_spool

        self.check_done(empty_message)
        return current_spool().finish(kind, name=name, source=self.source, skipped=dict(self.skipped), **info)  # type: ignore[union-attr]

    def fail(self, reason: str, message: str, row: int | None, field: str | None = None) -> None:
        error = DataError(message, source=self.source, row=row, field=field)
        if not self.lenient:
            raise error
        self.skipped[reason] += 1
        self.first_skip.setdefault(reason, str(error))

    def resolve(self, available: Sequence[str]) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def add(self, row: int, values: Sequence[Any], names: Sequence[str]) -> None:  # pragma: no cover
        raise NotImplementedError

    def count(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def scan_tuples(self, items: Sequence[Any]) -> None:  # pragma: no cover - abstract
        """Feed Python records that are not mappings (tuples; plain strings for a text sink)."""
        raise NotImplementedError

    def record_values(self, row: int, record: Mapping[str, Any], chosen: Sequence[str]) -> list[Any] | None:
        """The values a record (JSON object, dict) gives :meth:`add`: those of ``chosen`` (None for an
        :attr:`optional` one it lacks). A sink whose columns follow a pattern (``negative_1..n``)
        may read more of them than the first record named, or fail the record (then None)."""
        return [record.get(name) for name in chosen]

    def check_done(self, empty_message: str) -> None:
        """Raise when nothing was read; log what a lenient read skipped."""
        if self.rows_seen == 0:
            raise DataError(empty_message, source=self.source)
        if self.skipped:
            total = sum(self.skipped.values())
            detail = "; ".join(f"{r}: {n} (first: {self.first_skip[r]})" for r, n in sorted(self.skipped.items()))
            if self.count() == 0:
                raise DataError(f"no valid rows: all {total} rows were skipped ({detail})", source=self.source)
            logger.warning("%s: lenient read skipped %d of %d rows: %s", self.source, total, self.rows_seen, detail)


def misspelt_column(available: Sequence[str], known: Sequence[str]) -> tuple[str, str] | None:
    """``(column, known name)`` for the first of ``available`` that is not a ``known`` name but
    close to one (a typo: ``negatve`` for ``negative``, ``anchr`` for ``anchor``), else None."""
    for column in available:
        if column in known:
            continue
        close = difflib.get_close_matches(str(column), known, n=1, cutoff=MISSPELLING_CUTOFF)
        if close:
            return str(column), close[0]
    return None


MISSPELLING_CUTOFF = 0.8
"""difflib's similarity above which a column name reads as a misspelling of a known one."""


def missing_column(source: str, wanted: str, tried: Sequence[str], available: Sequence[str], taken: Sequence[str] = ()) -> DataError:
    """The error for a column that is not there, listing the columns that are (and the one that
    looks like a misspelling of a name tried, if any; ``taken``: columns that are other fields')."""
    names = ", ".join(repr(a) for a in available) or "none"
    looked = " or ".join(repr(t) for t in tried)
    typo = misspelt_column([c for c in available if c not in taken], tried)
    hint = f"; {typo[0]!r} looks like a misspelling of {typo[1]!r}" if typo is not None else ""
    return DataError(f"missing column {looked}{hint}; available columns: {names}", source=source, field=wanted)


def check_columns(columns: Mapping[str, str] | None, allowed: Sequence[str]) -> dict[str, str]:
    """Validate a ``columns=`` mapping (canonical name -> source column); ``{}`` for ``None``."""
    if columns is None:
        return {}
    if not isinstance(columns, Mapping):
        raise ConfigError(f"columns must be a dict mapping {list(allowed)} to source column names, got {columns!r}")
    unknown = [key for key in columns if key not in allowed]
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} in columns; allowed keys: {list(allowed)}")
    for key, value in columns.items():
        if not isinstance(value, str) or not value:
            raise ConfigError(f"columns[{key!r}] must be a non-empty column name, got {value!r}")
    return dict(columns)


class TextSink(Sink):
    """Collects texts: one column of a table (``column``, else ``text``/``sentence``/the only one) or lines."""

    fields = ("text",)

    def __init__(self, source: str, lenient: bool, column: str | None) -> None:
        super().__init__(source, lenient)
        if column is not None and (not isinstance(column, str) or not column):
            raise ConfigError(f"column must be a non-empty column name, got {column!r}")
        self.column = column
        self.texts: list[str] = self.new_column("text")

    def resolve(self, available: Sequence[str]) -> list[str]:
        if self.column is not None:
            if self.column not in available:
                raise missing_column(self.source, self.column, (self.column,), available)
            return [self.column]
        for name in TEXT_ALIASES:
            if name in available:
                return [name]
        if len(available) == 1:
            return [available[0]]
        raise DataError(
            f"cannot tell which column holds the texts: none is named {' or '.join(map(repr, TEXT_ALIASES))}; "
            f"available columns: {', '.join(map(repr, available))}; pass column=",
            source=self.source,
        )

    def add(self, row: int, values: Sequence[Any], names: Sequence[str]) -> None:
        self.rows_seen += 1
        (text,) = values
        problem = text_problem(text)
        if problem is not None:
            self.fail(problem[0], problem[1], row, names[0])
            return
        self.texts.append(text)

    def count(self) -> int:
        return len(self.texts)

    def scan_tuples(self, items: Sequence[Any]) -> None:
        for i, item in enumerate(items):
            self.add(i + 1, [item], ["text"])


# --------------------------------------------------------------------------------------------
# Bytes -> text
# --------------------------------------------------------------------------------------------


def decode_file(path: Path, source: str) -> tuple[str, bool]:
    """Read and decode a text file. Returns ``(text, has_undecodable_bytes)``.

    UTF-8 (a byte-order mark is removed) and BOM-marked UTF-16 are accepted. Undecodable bytes
    are kept as lone surrogates (``surrogateescape``) so that the row holding them can be named.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read file: {exc.strerror or exc}", source=source) from None
    if not data.strip():
        raise DataError("file is empty (no rows)", source=source)
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16"), False
        except UnicodeDecodeError as exc:
            raise DataError(f"file starts with a UTF-16 byte-order mark but is not valid UTF-16: {exc.reason}", source=source) from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    if b"\x00" in data[:65536]:
        raise DataError("file contains NUL bytes: it looks binary, not UTF-8 text", source=source)
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="surrogateescape"), True


def bad_bytes_message(text: str) -> str:
    """The message for a text holding undecodable bytes (lone surrogates): a snippet around the first."""
    match = _SURROGATE.search(text)
    assert match is not None
    start = max(0, match.start() - 10)
    snippet = text[start : match.start() + 6].encode("utf-8", errors="surrogateescape")
    return f"undecodable bytes (not valid UTF-8) near {snippet!r}; is the file in another encoding?"


def split_lines(text: str) -> list[str]:
    """The lines of ``text``: split on ``\\n``, one ``\\r`` before it removed, nothing else changed.
    A text with ``\\r`` and no ``\\n`` (classic Mac line ends) is split on ``\\r``.

    The final newline ends the last line; it does not start a blank one.
    """
    lines = text.split("\n" if "\n" in text or "\r" not in text else "\r")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


KNOWN_LATIN1_FILES: frozenset[str] = frozenset({"train_5500.label", "TREC_10.label"})
"""File names that are not clean UTF-8 in the public copies and are decoded as Latin-1 on purpose.

``TREC/train_5500.label`` holds one byte 0xF0 (line 66, "sister\\xf0city"), which is not UTF-8;
SentEval opens both TREC files as Latin-1, and so does :func:`read_lines` (and says so in ``note``).
"""


@dataclass(frozen=True)
class TextFile:
    """The lines of one text file (line ends removed) and the decoding that was used."""

    path: str
    lines: list[str]
    encoding: str
    note: str | None = None


def read_lines(path: str | os.PathLike[str], *, what: str = "a text file") -> TextFile:
    """Read ``path`` as strict UTF-8 (a BOM is dropped) and split it with :func:`split_lines`.

    Lines are kept as they are: blank lines included (a blank gold score, a missing label). A file
    in :data:`KNOWN_LATIN1_FILES` that is not valid UTF-8 is decoded as Latin-1 and the fact is
    recorded in ``TextFile.note``. Any other undecodable file is a :class:`DataError` naming the
    file and the offending byte. ``what`` describes the expected content for the error raised when
    the file is missing. (Texts that must not be blank are read with :func:`collect_texts`.)
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"file not found; expected {what}", source=str(p))
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read file: {exc.strerror or exc}", source=str(p)) from None
    encoding = "utf-8"
    note = None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_no = raw.count(b"\n", 0, exc.start) + 1
        if p.name in KNOWN_LATIN1_FILES:
            text = raw.decode("latin-1")
            encoding = "latin-1"
            note = f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}, line {line_no}); decoded as Latin-1 as SentEval does for this file"
        else:
            raise DataError(
                f"not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start} ({exc.reason}); expected {what} in UTF-8",
                source=str(p),
                row=line_no,
            ) from exc
    return TextFile(path=str(p), lines=split_lines(text), encoding=encoding, note=note)


def scan_text_lines(path: Path, sink: TextSink) -> None:
    """Feed the lines of a plain-text file to ``sink``, one text a line (row = line number).

    Unlike :func:`read_lines`, undecodable bytes are reported per line (lenient: skipped).
    """
    text, has_bad = decode_file(path, sink.source)
    for lineno, line in enumerate(split_lines(text), start=1):
        if has_bad and _SURROGATE.search(line):
            sink.rows_seen += 1
            sink.fail("undecodable bytes", bad_bytes_message(line), lineno)
            continue
        sink.add(lineno, [line], ["text"])
    if has_bad and sink.lenient and not sink.texts:
        raise DataError("no line decodes as UTF-8: the file is in another encoding", source=sink.source)


# --------------------------------------------------------------------------------------------
# Format scanners: feed a sink
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _large_csv_fields() -> Iterator[None]:
    # The csv module refuses fields over 128 KiB by default; a long document is legitimate input.
    old = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)
    try:
        yield
    finally:
        csv.field_size_limit(old)


@dataclass(frozen=True)
class RowProblem:
    """What is wrong with one row of a table: a reason (what a lenient read counts) and a message."""

    reason: str
    message: str
    field: str | None = None


class DelimitedRows:
    """The rows of a CSV/TSV text stream, read as they come (no more than a row is held): the header
    (or the given ``fieldnames``) at once, as :attr:`names`, then :meth:`rows`.

    A malformed or empty header raises :class:`DataError`; a bad row is handed out with its
    :class:`RowProblem`, so that a strict reader raises it and a lenient one counts it and goes on.
    ``check_bytes``: look for undecodable bytes (kept as lone surrogates by ``surrogateescape``).
    Row numbers count records after the header, 1-based (a quoted field may span lines).
    """

    def __init__(
        self,
        handle: Iterable[str],
        source: str,
        *,
        delimiter: str,
        quoting: int,
        has_header: bool = True,
        fieldnames: Sequence[str] | None = None,
        check_bytes: bool = True,
    ) -> None:
        self.source, self.delimiter, self.check_bytes = source, delimiter, check_bytes
        self.has_header = has_header
        self._reader = csv.reader(handle, delimiter=delimiter, quoting=quoting, strict=quoting != csv.QUOTE_NONE)
        self.header_lines = 0
        if not has_header:
            if not fieldnames:
                raise ConfigError("a file without a header needs fieldnames")
            self.names = list(fieldnames)
            return
        with _large_csv_fields():
            try:
                header = next(self._reader)
                while not header:  # leading blank lines
                    header = next(self._reader)
            except StopIteration:
                raise DataError("file is empty (no rows)", source=source) from None
            except csv.Error as exc:
                raise DataError(f"malformed header: {exc}", source=source, row=None) from None
        self.header_lines = self._reader.line_num
        self.names = [h.strip() for h in header]
        if check_bytes and any(_SURROGATE.search(h) for h in self.names):
            raise DataError(f"header: {bad_bytes_message(' '.join(self.names))}", source=source)

    def check_unique(self, chosen: Sequence[str]) -> list[int]:
        """The positions of the ``chosen`` columns; a DataError for one the header names twice."""
        for name in chosen:
            if self.names.count(name) > 1:
                raise DataError(f"column {name!r} appears {self.names.count(name)} times in the header", source=self.source, field=name)
        return [self.names.index(name) for name in chosen]

    def rows(self, *, allow_extra_fields: bool = False) -> Iterator[tuple[int, list[str], RowProblem | None]]:
        """``(row, fields, problem)`` of each record (blank lines skipped); ``problem`` is None for a
        good row: as many fields as the header (or at least as many, ``allow_extra_fields``), each decodable."""
        expected = len(self.names)
        what = "the header's" if self.has_header else "expected"
        at_least = "at least " if allow_extra_fields else ""
        previous = self.header_lines
        with _large_csv_fields():
            while True:
                try:
                    fields = next(self._reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    yield previous + 1 - self.header_lines, [], RowProblem("malformed CSV", f"malformed CSV: {exc}")
                    previous = self._reader.line_num
                    continue
                row = previous + 1 - self.header_lines
                previous = self._reader.line_num
                if not fields:
                    continue  # a blank line holds no record
                if self.check_bytes:
                    bad = next((j for j, f in enumerate(fields) if _SURROGATE.search(f)), None)
                    if bad is not None:
                        field = self.names[bad] if bad < len(self.names) else None
                        yield row, fields, RowProblem("undecodable bytes", bad_bytes_message(fields[bad]), field)
                        continue
                if len(fields) != expected and not (allow_extra_fields and len(fields) > expected):
                    message = f"wrong number of fields: got {len(fields)}, {what} {at_least}{expected} (delimiter {self.delimiter!r})"
                    yield row, fields, RowProblem("wrong number of fields", message)
                    continue
                yield row, fields, None


def scan_delimited(
    path: Path,
    sink: Sink,
    *,
    delimiter: str,
    quoting: int,
    has_header: bool,
    fieldnames: Sequence[str] | None,
    allow_extra_fields: bool,
) -> None:
    """Feed a CSV/TSV file to ``sink`` (through :class:`DelimitedRows`)."""
    source = sink.source
    text, has_bad = decode_file(path, source)
    table = DelimitedRows(
        io.StringIO(text, newline=""), source, delimiter=delimiter, quoting=quoting, has_header=has_header, fieldnames=fieldnames, check_bytes=has_bad
    )
    chosen = sink.resolve(table.names)
    index = table.check_unique(chosen)
    for row, fields, problem in table.rows(allow_extra_fields=allow_extra_fields):
        if problem is not None:
            sink.rows_seen += 1
            sink.fail(problem.reason, problem.message, row, problem.field)
            continue
        sink.add(row, [fields[i] for i in index], chosen)
    if has_bad and sink.lenient and sink.count() == 0 and sink.rows_seen:
        raise DataError("no row decodes as UTF-8: the file is in another encoding", source=source)


def scan_objects(objects: Iterator[tuple[int, Any]], sink: Sink, kind: str = "JSON object") -> None:
    """Feed ``(row, object)`` pairs, each a mapping of column name -> value."""
    chosen: list[str] | None = None
    for row, obj in objects:
        if not isinstance(obj, Mapping):
            sink.rows_seen += 1
            sink.fail("not an object", f"expected a {kind}, got {type(obj).__name__} {short_repr(obj)}", row)
            continue
        if chosen is None:
            chosen = sink.resolve(list(obj.keys()))
        missing = next((name for name in chosen if name not in obj and name not in sink.optional), None)
        if missing is not None:
            sink.rows_seen += 1
            keys = ", ".join(map(repr, obj.keys())) or "none"
            sink.fail("missing field", f"field {missing!r} is missing (keys here: {keys})", row, missing)
            continue
        values = sink.record_values(row, obj, chosen)
        if values is not None:
            sink.add(row, values, chosen)


def _scan_json(path: Path, sink: Sink, fmt: str) -> None:
    source = sink.source
    text, has_bad = decode_file(path, source)
    stripped = text.lstrip()
    if fmt == "json" and stripped.startswith("{"):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # several objects: JSON Lines in a .json file, read line by line below
        if isinstance(whole, dict):
            raise DataError(
                "the top level is one JSON object, not a list of records: write a JSON array [{...}, {...}] or JSON Lines (.jsonl, one object a line)",
                source=source,
            )
    if fmt == "json" and stripped.startswith("["):  # one JSON array of objects
        if has_bad:
            line = text[: _SURROGATE.search(text).start()].count("\n") + 1  # type: ignore[union-attr]
            raise DataError(bad_bytes_message(text), source=source, row=line)
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"malformed JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", source=source) from None
        if not items:
            raise DataError("file holds an empty JSON array (no rows)", source=source)
        scan_objects(((i + 1, item) for i, item in enumerate(items)), sink)
        return

    def lines() -> Iterator[tuple[int, Any]]:
        for lineno, line in enumerate(split_lines(text), start=1):
            if not line.strip():
                continue  # a blank line holds no record
            if has_bad and _SURROGATE.search(line):
                sink.rows_seen += 1
                sink.fail("undecodable bytes", bad_bytes_message(line), lineno)
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                sink.rows_seen += 1
                sink.fail("malformed JSON", f"malformed JSON: {exc.msg} at column {exc.colno}", lineno)
                continue
            yield lineno, obj

    scan_objects(lines(), sink)
    if has_bad and sink.lenient and sink.count() == 0 and sink.rows_seen:
        raise DataError("no line decodes as UTF-8: the file is in another encoding", source=source)


def scan_columns(available: Sequence[str], get_column: Callable[[str], Sequence[Any]], sink: Sink) -> None:
    """Feed a column-oriented table (Parquet, datasets.Dataset, dict of lists, DataFrame)."""
    chosen = sink.resolve(list(available))
    data = [list(get_column(name)) for name in chosen]
    lengths = {name: len(col) for name, col in zip(chosen, data, strict=True)}
    if len(set(lengths.values())) > 1:
        raise DataError(f"columns differ in length: {lengths}", source=sink.source)
    for i, values in enumerate(zip(*data, strict=True)):
        sink.add(i + 1, values, chosen)


def scan_sequence(items: Sequence[Any], sink: Sink) -> None:
    """Python data: a list of dicts, else of records the sink knows (tuples; strings for texts)."""
    if isinstance(items[0], Mapping):
        scan_objects(((i + 1, item) for i, item in enumerate(items)), sink, kind="dict")
        return
    sink.scan_tuples(items)


def _scan_parquet(path: Path, sink: Sink) -> None:
    """A Parquet file, read in record batches of its chosen columns (never whole into Python lists)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("reading Parquet needs pyarrow: pip install 'anglekit[data]'") from None
    try:
        handle = pq.ParquetFile(path)
        names = handle.schema_arrow.names
        chosen = sink.resolve(names)
    except DataError:
        raise
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise DataError(f"not a readable Parquet file: {exc}", source=sink.source) from None
    if handle.metadata.num_rows == 0:
        raise DataError("file has no rows", source=sink.source)

    def batches() -> Iterator[Mapping[str, Sequence[Any]]]:
        try:
            for batch in handle.iter_batches(batch_size=BATCH_ROWS, columns=chosen):
                yield {name: batch.column(name).to_pylist() for name in chosen}
        except Exception as exc:
            raise DataError(f"not a readable Parquet file: {exc}", source=sink.source) from None

    scan_batches(chosen, batches(), sink)


def scan_batches(available: Sequence[str], batches: Iterator[Mapping[str, Sequence[Any]]], sink: Sink) -> None:
    """Feed record batches (column name -> values), rows numbered across batches: a source read a
    batch at a time, so that no more than a batch of it is ever held as Python objects."""
    chosen = sink.resolve(list(available))
    row = 0
    for batch in batches:
        columns = [batch[name] for name in chosen]
        lengths = {name: len(col) for name, col in zip(chosen, columns, strict=True)}
        if len(set(lengths.values())) > 1:
            raise DataError(f"columns differ in length: {lengths}", source=sink.source)
        for values in zip(*columns, strict=True):
            row += 1
            sink.add(row, values, chosen)


def is_hf_dataset(obj: Any) -> bool:
    """A ``datasets.Dataset`` or ``IterableDataset`` (or a dict of them)."""
    return type(obj).__module__.startswith("datasets.") and hasattr(obj, "column_names") and (hasattr(obj, "num_rows") or hasattr(obj, "iter"))


def is_hf_dataset_dict(obj: Any) -> bool:
    return type(obj).__module__.startswith("datasets.") and type(obj).__name__ in {"DatasetDict", "IterableDatasetDict"}


def pick_split(obj: Any, split: str | None, source: str) -> Any:
    """From a DatasetDict pick ``split``; a single Dataset is returned as is."""
    if is_hf_dataset_dict(obj):
        splits = list(obj.keys())
        if split is None:
            raise ConfigError(f"{source} holds several splits {splits}; choose one with split=")
        if split not in obj:
            raise ConfigError(f"{source} has no split {split!r}; available splits: {splits}")
        return obj[split]
    if split is not None and getattr(obj, "split", None) is not None and str(obj.split) != split:
        raise ConfigError(f"{source} holds split {str(obj.split)!r}, not {split!r}")
    return obj


def scan_hf_dataset(ds: Any, sink: Sink) -> None:
    """Feed a ``datasets.Dataset`` (memory-mapped Arrow, read in record batches of the chosen
    columns) or an ``IterableDataset`` (streamed batch by batch)."""
    if getattr(ds, "num_rows", None) is not None:
        if ds.num_rows == 0:
            raise DataError("dataset has no rows", source=sink.source)
        chosen = sink.resolve(list(ds.column_names))
        arrow = ds.select_columns(chosen).with_format("arrow")
        batches = ({name: table.column(name).to_pylist() for name in chosen} for table in arrow.iter(batch_size=BATCH_ROWS))
        scan_batches(chosen, batches, sink)
        return
    stream = iter(ds.iter(batch_size=BATCH_ROWS))  # an IterableDataset: its columns may be known only from its first batch
    first = next(stream, None)
    if first is None:
        raise DataError("dataset has no rows", source=sink.source)
    names = list(ds.column_names) if ds.column_names else list(first)
    scan_batches(names, itertools.chain([first], stream), sink)


def load_from_disk(path: Path, source: str) -> Any:
    try:
        import datasets
    except ImportError:  # pragma: no cover
        raise ConfigError("reading a saved Hugging Face dataset needs datasets: pip install 'anglekit[data]'") from None
    try:
        return datasets.load_from_disk(str(path))
    except Exception as exc:  # FileNotFoundError, ValueError, arrow errors: all mean "not a saved dataset"
        raise DataError(
            f"is a folder, but not a saved Hugging Face dataset (datasets.save_to_disk: {exc}); give a file, such a "
            "folder, or a folder of a known dataset (STS-B, SICK, MRPC, GitHub Issues) by name or through "
            "anglekit.data.load_dataset_by_name",
            source=source,
        ) from None


def load_hub_dataset(name: str, *, config: str | None = None, split: str) -> Any:
    """``datasets.load_dataset(name, config, split=split)`` with a clear error when it fails.

    Needs the network (or a warm Hugging Face cache when ``HF_HUB_OFFLINE=1``).
    """
    source = f"hf:{name}" + (f"/{config}" if config else "")
    if not split:
        raise ConfigError(f"reading {source} from the Hugging Face hub needs a split (e.g. 'train', 'validation', 'test')")
    try:
        import datasets
    except ImportError:  # pragma: no cover
        raise ConfigError("reading from the Hugging Face hub needs datasets: pip install 'anglekit[data]'") from None
    try:
        return datasets.load_dataset(name, config, split=split)
    except Exception as exc:  # ConnectionError (offline), DatasetNotFoundError, ValueError (bad split), ...
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") or os.environ.get("HF_DATASETS_OFFLINE", "") not in ("", "0")
        hint = " (offline mode is on: only cached datasets can be loaded)" if offline else ""
        raise DataError(
            f"could not load split {split!r} from the Hugging Face hub{hint}: {type(exc).__name__}: {exc}. If it is not a hub dataset, check the local path.",
            source=source,
        ) from exc


# --------------------------------------------------------------------------------------------
# Formats and whole sources
# --------------------------------------------------------------------------------------------


def infer_format(path: str | os.PathLike[str]) -> str:
    """Format name from a file's extension (``.csv``, ``.tsv``, ``.jsonl``, ``.json``, ``.parquet``)."""
    suffix = Path(path).suffix.lower()
    if suffix in EXTENSIONS:
        return EXTENSIONS[suffix]
    known = ", ".join(sorted(EXTENSIONS))
    raise ConfigError(
        f"cannot infer the format of {os.fspath(path)!r} from its extension {suffix or '(none)'!r}; known: {known}; give the file one of those extensions (or, in Python, pass format=: one of {', '.join(FORMATS)})"
    )


def check_format(fmt: str | None) -> str | None:
    """A ``format=`` value, lower-cased (``ndjson`` = ``jsonl``); unknown formats are a ConfigError."""
    if fmt is None:
        return None
    fmt = fmt.lower()
    if fmt == "ndjson":
        fmt = "jsonl"
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; known formats: {', '.join(FORMATS)}")
    return fmt


def looks_like_path(text: str) -> bool:
    """Whether ``text`` reads as a path (``./``, ``/``, ``~``, a known extension), not a hub id."""
    suffix = Path(text).suffix.lower()
    return text.startswith((".", "/", "~", "\\")) or suffix in EXTENSIONS or suffix in (".txt", ".text")


def scan_file(path: Path, fmt: str, sink: Sink) -> None:
    """Feed a csv/tsv/jsonl/json/parquet file to ``sink``."""
    if fmt == "csv":
        scan_delimited(path, sink, delimiter=",", quoting=csv.QUOTE_MINIMAL, has_header=True, fieldnames=None, allow_extra_fields=False)
    elif fmt == "tsv":
        scan_delimited(path, sink, delimiter="\t", quoting=csv.QUOTE_NONE, has_header=True, fieldnames=None, allow_extra_fields=False)
    elif fmt in ("jsonl", "json"):
        _scan_json(path, sink, fmt)
    elif fmt == "parquet":
        _scan_parquet(path, sink)
    else:  # pragma: no cover - guarded by callers
        raise ConfigError(f"format {fmt!r} does not apply to a file")


def collect_texts(source: Any, column: str | None = None, lenient: bool = False, *, plain: bool = False) -> TextSink:
    """Texts from a file or a list of strings, as a sink (texts plus what a lenient read skipped).

    ``.txt`` files (or files without extension) hold one text a line; a blank line is an error
    naming its line unless ``lenient``. Tabular files give one ``column`` (see :class:`TextSink`).

    ``plain=True`` reads a file as one text a line whatever its extension (``s1.dev``, ``*.pos``).
    """
    if isinstance(source, (list, tuple)):
        sink = TextSink("<list of texts>", lenient, column)
        if not source:
            raise DataError("no texts (empty list)", source=sink.source)
        if column is not None:
            raise ConfigError("column= applies to tabular files, not to a list of strings")
        scan_sequence(source, sink)
        sink.check_done("no texts")
        return sink
    if not isinstance(source, (str, os.PathLike)):
        raise ConfigError(f"cannot read texts from a {type(source).__name__}; give a path or a list of strings")
    if column is not None and (not isinstance(column, str) or not column):
        raise ConfigError(f"column must be a non-empty column name, got {column!r}")
    path = Path(os.fspath(source)).expanduser()
    text_source = os.fspath(source)
    if path.is_dir():
        raise InputPathError("is a folder, not a file; give a .txt file (one text a line) or a csv/tsv/jsonl/json/parquet file", source=text_source)
    if not path.is_file():
        raise InputPathError("no such file", source=text_source)
    sink = TextSink(text_source, lenient, column)
    suffix = path.suffix.lower()
    if plain or suffix in TEXT_EXTENSIONS:
        if column is not None:
            raise ConfigError(f"column= applies to tabular files, not to the plain-text file {text_source}")
        scan_text_lines(path, sink)
    else:
        scan_file(path, infer_format(path), sink)
    sink.check_done("file has no texts")
    return sink
