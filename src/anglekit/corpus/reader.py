"""Corpus files read in chunks, in constant memory: (ids, texts) from .txt, .jsonl, .csv, .tsv, .parquet.

The whole-file readers of :mod:`anglekit.data` validate a file and return Python lists; a corpus to
embed may be larger than memory, so :func:`iter_corpus` reads it record by record and hands out
chunks of ``chunk_rows`` records. Validation and messages are the readers' (source, row, field):
a blank or non-string text, undecodable bytes, malformed JSON or CSV, a missing column; CSV and TSV
files are scanned by :class:`anglekit.data.sources.DelimitedRows`, the readers' own scanner, fed
the open file. Always strict: the first bad record raises :class:`~anglekit.errors.DataError`.

Ids: the ``id_column`` (default: ``id`` when the file has one) holding strings or integers (kept as
strings); without one, the row as errors count it (1-based: the line number of a .txt or .jsonl
file, the record number of a table).
Texts: the ``text_column`` (default ``text``, then ``sentence``, then the only other column).
Titles (opt-in, ``title_column``): a record's text is ``(title + " " + text).strip()``, as BEIR,
MTEB and sentence-transformers build a document; a missing, null or blank title adds nothing.
:func:`corpus_columns` names a table's columns without reading it.
"""

from __future__ import annotations

import codecs
import csv
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.data.sources import TEXT_ALIASES, DelimitedRows, bad_bytes_message, missing_column, short_repr, text_problem
from anglekit.errors import ConfigError, DataError

__all__ = ["CORPUS_FORMATS", "DEFAULT_CHUNK_ROWS", "CorpusChunk", "corpus_columns", "corpus_format", "corpus_signature", "iter_corpus"]

DEFAULT_CHUNK_ROWS = 10_000
CORPUS_FORMATS = {".txt": "txt", ".text": "txt", "": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv",
                  ".tsv": "tsv", ".tab": "tsv", ".parquet": "parquet", ".pq": "parquet"}  # fmt: skip
"""File extension -> corpus format."""
ID_COLUMN = "id"
_SURROGATE = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True)
class CorpusChunk:
    """Consecutive records of a corpus: ``start`` is the 0-based index of the first."""

    start: int
    ids: list[str]
    texts: list[str]

    def __len__(self) -> int:
        return len(self.texts)


def corpus_format(path: str | os.PathLike[str]) -> str:
    """``txt``, ``jsonl``, ``csv``, ``tsv`` or ``parquet`` from the extension (a ConfigError otherwise)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        raise ConfigError(f"{os.fspath(path)}: a .json array cannot be read in chunks; write JSON Lines (.jsonl, one object a line)")
    if suffix not in CORPUS_FORMATS:
        known = ", ".join(s for s in CORPUS_FORMATS if s)
        raise ConfigError(f"{os.fspath(path)}: unknown corpus format {suffix!r}; known: {known} (or no extension: one text a line)")
    return CORPUS_FORMATS[suffix]


def corpus_signature(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What identifies a corpus file across machines and copies: its name, size and the SHA-256 of
    its first and last MiB (cheap; a copy elsewhere has the same signature)."""
    import hashlib

    p = Path(path)
    size = p.stat().st_size
    digest = hashlib.sha256()
    with open(p, "rb") as handle:
        digest.update(handle.read(1 << 20))
        if size > 2 << 20:
            handle.seek(size - (1 << 20))
            digest.update(handle.read(1 << 20))
    return {"name": p.name, "bytes": size, "sha256_ends": digest.hexdigest()}


def _check_id(value: Any, source: str, row: int, field: str) -> str:
    if isinstance(value, str):
        if not value:
            raise DataError("id is empty", source=source, row=row, field=field)
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise DataError(f"id must be a string or an integer, got {type(value).__name__} {short_repr(value)}", source=source, row=row, field=field)


def _check_text(value: Any, source: str, row: int, field: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise DataError(problem[1], source=source, row=row, field=field)
    return value


def _titled(title: Any, text: str, source: str, row: int, field: str | None) -> str:
    """``text`` with its title before it (BEIR's ``title + " " + text``); no title: ``text``."""
    if field is None or title is None or (isinstance(title, float) and title != title):  # absent, null, NaN
        return text
    if not isinstance(title, str):
        raise DataError(f"title must be a string, got {type(title).__name__} {short_repr(title)}", source=source, row=row, field=field)
    return f"{title} {text}".strip()


def _open_text(path: Path, source: str, *, newline: str) -> Any:
    """The file opened as text (UTF-8, a BOM dropped; BOM-marked UTF-16), undecodable bytes kept
    as lone surrogates so that the record holding them can be named."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(65536)
    except OSError as exc:
        raise DataError(f"cannot read file: {exc.strerror or exc}", source=source) from None
    if not head.strip() and path.stat().st_size <= len(head):
        raise DataError("file is empty (no rows)", source=source)
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return open(path, encoding="utf-16", errors="strict", newline=newline)
    if b"\x00" in head:
        raise DataError("file contains NUL bytes: it looks binary, not UTF-8 text", source=source)
    return open(path, encoding="utf-8-sig", errors="surrogateescape", newline=newline)


def _lines(path: Path, source: str) -> Iterator[tuple[int, str]]:
    """(line number, line) without its line end: split on ``\\n`` (one ``\\r`` before it dropped), or
    on ``\\r`` in a file without any ``\\n`` (classic Mac), as :func:`anglekit.data.sources.split_lines`."""
    with _open_text(path, source, newline="\n") as handle:
        try:
            for lineno, line in enumerate(handle, start=1):
                if lineno == 1 and not line.endswith("\n") and "\r" in line:
                    pieces = line.split("\r")
                    if pieces[-1] == "":
                        pieces.pop()
                    yield from enumerate(pieces, start=1)
                    return
                if line.endswith("\n"):
                    line = line[:-1]
                if line.endswith("\r"):
                    line = line[:-1]
                yield lineno, line
        except UnicodeDecodeError as exc:  # UTF-16 files are decoded strictly
            raise DataError(f"not valid UTF-16: {exc.reason}", source=source) from None


def _txt(path: Path, source: str, text_column: str | None, id_column: str | None, title_column: str | None = None) -> Iterator[tuple[int, Any, str]]:
    if text_column is not None or id_column is not None or title_column is not None:
        raise ConfigError(f"{source}: a plain-text corpus holds one text a line (ids are line numbers); --column and --id-column apply to tables")
    for lineno, line in _lines(path, source):
        if _SURROGATE.search(line):
            raise DataError(bad_bytes_message(line), source=source, row=lineno)
        yield lineno, None, _check_text(line, source, lineno, "text")


def _pick_columns(available: Sequence[str], text_column: str | None, id_column: str | None, source: str) -> tuple[str, str | None]:
    """(text column, id column or None) of a table with columns ``available``."""
    names = list(available)
    if id_column is not None and id_column not in names:
        raise missing_column(source, id_column, (id_column,), names)
    ident = id_column if id_column is not None else (ID_COLUMN if ID_COLUMN in names else None)
    if text_column is not None:
        if text_column not in names:
            raise missing_column(source, text_column, (text_column,), names)
        if text_column == ident:
            raise ConfigError(f"{source}: the text column and the id column are both {text_column!r}")
        return text_column, ident
    for name in TEXT_ALIASES:
        if name in names:
            return name, ident
    others = [n for n in names if n != ident]
    if len(others) == 1:
        return others[0], ident
    raise DataError(
        f"cannot tell which column holds the texts: none is named {' or '.join(map(repr, TEXT_ALIASES))}; "
        f"available columns: {', '.join(map(repr, names))}; pass the text column (--column)",
        source=source,
    )


def _jsonl(path: Path, source: str, text_column: str | None, id_column: str | None, title_column: str | None = None) -> Iterator[tuple[int, Any, str]]:
    chosen: tuple[str, str | None] | None = None
    for lineno, line in _lines(path, source):
        if not line.strip():
            continue  # a blank line holds no record
        if _SURROGATE.search(line):
            raise DataError(bad_bytes_message(line), source=source, row=lineno)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"malformed JSON: {exc.msg} at column {exc.colno}", source=source, row=lineno) from None
        if not isinstance(obj, dict):
            raise DataError(f"expected a JSON object, got {type(obj).__name__} {short_repr(obj)}", source=source, row=lineno)
        if chosen is None:
            chosen = _pick_columns(list(obj), text_column, id_column, source)
            _check_title_column(title_column, list(obj), chosen[0], source)  # named by the first record; later ones may lack it
        text_name, id_name = chosen
        for name in (text_name, id_name):
            if name is not None and name not in obj:
                keys = ", ".join(map(repr, obj)) or "none"
                raise DataError(f"field {name!r} is missing (keys here: {keys})", source=source, row=lineno, field=name)
        ident = _check_id(obj[id_name], source, lineno, id_name) if id_name is not None else None
        text = _check_text(obj[text_name], source, lineno, text_name)
        yield lineno, ident, _titled(obj.get(title_column) if title_column else None, text, source, lineno, title_column)


def _delimited(
    path: Path, source: str, text_column: str | None, id_column: str | None, tsv: bool, title_column: str | None = None
) -> Iterator[tuple[int, Any, str]]:
    """The records of a CSV/TSV file, streamed through :class:`anglekit.data.sources.DelimitedRows`
    (the scanner every reader of tables shares); the first bad row raises."""
    delimiter, quoting = ("\t", csv.QUOTE_NONE) if tsv else (",", csv.QUOTE_MINIMAL)
    with _open_text(path, source, newline="") as handle:
        table = DelimitedRows(handle, source, delimiter=delimiter, quoting=quoting)
        text_name, id_name = _pick_columns(table.names, text_column, id_column, source)
        _check_title_column(title_column, table.names, text_name, source)
        t_index, *i_index = table.check_unique([text_name] + ([id_name] if id_name is not None else []))
        title_index = table.names.index(title_column) if title_column else None
        for row, fields, problem in table.rows():
            if problem is not None:
                raise DataError(problem.message, source=source, row=row, field=problem.field)
            ident = _check_id(fields[i_index[0]], source, row, id_name) if id_name is not None else None
            text = _check_text(fields[t_index], source, row, text_name)
            yield row, ident, _titled(fields[title_index] if title_index is not None else None, text, source, row, title_column)


def _parquet(
    path: Path, source: str, text_column: str | None, id_column: str | None, batch_rows: int, title_column: str | None = None
) -> Iterator[tuple[int, Any, str]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("reading Parquet needs pyarrow: pip install 'anglekit[data]'") from None
    try:
        handle = pq.ParquetFile(path)
        names = handle.schema_arrow.names
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise DataError(f"not a readable Parquet file: {exc}", source=source) from None
    text_name, id_name = _pick_columns(names, text_column, id_column, source)
    _check_title_column(title_column, names, text_name, source)
    wanted = [text_name] + ([id_name] if id_name is not None else []) + ([title_column] if title_column else [])
    row = 0
    try:
        batches = handle.iter_batches(batch_size=batch_rows, columns=wanted)
        for batch in batches:
            texts = batch.column(text_name).to_pylist()
            ids = batch.column(id_name).to_pylist() if id_name is not None else [None] * len(texts)
            titles = batch.column(title_column).to_pylist() if title_column else [None] * len(texts)
            for ident, text, title in zip(ids, texts, titles, strict=True):
                row += 1
                checked_id = _check_id(ident, source, row, id_name) if id_name is not None else None
                yield row, checked_id, _titled(title, _check_text(text, source, row, text_name), source, row, title_column)
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"not a readable Parquet file: {exc}", source=source, row=row + 1) from None


def _check_title_column(title_column: str | None, names: Sequence[str], text_name: str, source: str) -> None:
    if title_column is None:
        return
    if title_column not in names:
        raise missing_column(source, title_column, (title_column,), list(names))
    if title_column == text_name:
        raise ConfigError(f"{source}: the text column and the title column are both {title_column!r}")


def corpus_columns(path: str | os.PathLike[str]) -> list[str] | None:
    """The column names of a table corpus (a .jsonl file's first record, a csv/tsv header, a
    Parquet schema); None for a plain-text corpus. Problems are the readers' DataErrors."""
    p = Path(os.fspath(path)).expanduser()
    source = os.fspath(path)
    fmt = corpus_format(p)
    if not p.is_file():
        raise DataError("no such file" if not p.is_dir() else "is a folder, not a file", source=source)
    if fmt == "txt":
        return None
    if fmt == "parquet":
        try:
            import pyarrow.parquet as pq

            return list(pq.ParquetFile(p).schema_arrow.names)
        except ImportError:  # pragma: no cover - depends on the environment
            raise ConfigError("reading Parquet needs pyarrow: pip install 'anglekit[data]'") from None
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise DataError(f"not a readable Parquet file: {exc}", source=source) from None
    if fmt in ("csv", "tsv"):
        with _open_text(p, source, newline="") as handle:
            return list(
                DelimitedRows(handle, source, delimiter="\t" if fmt == "tsv" else ",", quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL).names
            )
    for lineno, line in _lines(p, source):
        if line.strip():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"malformed JSON: {exc.msg} at column {exc.colno}", source=source, row=lineno) from None
            if not isinstance(obj, dict):
                raise DataError(f"expected a JSON object, got {type(obj).__name__} {short_repr(obj)}", source=source, row=lineno)
            return [str(k) for k in obj]
    raise DataError("file has no texts", source=source)


def iter_corpus(
    path: str | os.PathLike[str],
    *,
    text_column: str | None = None,
    id_column: str | None = None,
    title_column: str | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Iterator[CorpusChunk]:
    """The records of the corpus file ``path`` in chunks of ``chunk_rows`` (the last may be shorter),
    reading no more than a chunk at a time. An empty corpus is a DataError. ``title_column``: a
    column whose value goes before each text (BEIR's documents; a table corpus only)."""
    if not isinstance(chunk_rows, int) or isinstance(chunk_rows, bool) or chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    for name, value in (("text_column", text_column), ("id_column", id_column), ("title_column", title_column)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"{name} must be a non-empty column name, got {value!r}")
    p = Path(os.fspath(path)).expanduser()
    source = os.fspath(path)
    if p.is_dir():
        raise DataError("is a folder, not a file; give a .txt, .jsonl, .csv, .tsv or .parquet corpus", source=source)
    fmt = corpus_format(p)
    if not p.is_file():
        raise DataError("no such file", source=source)
    if fmt == "txt":
        records = _txt(p, source, text_column, id_column, title_column)
    elif fmt == "jsonl":
        records = _jsonl(p, source, text_column, id_column, title_column)
    elif fmt in ("csv", "tsv"):
        records = _delimited(p, source, text_column, id_column, fmt == "tsv", title_column)
    else:
        records = _parquet(p, source, text_column, id_column, min(chunk_rows, 65536), title_column)
    start = 0
    ids: list[str] = []
    texts: list[str] = []
    for row, ident, text in records:
        ids.append(ident if ident is not None else str(row))
        texts.append(text)
        if len(texts) == chunk_rows:
            yield CorpusChunk(start, ids, texts)
            start += len(texts)
            ids, texts = [], []
    if texts:
        yield CorpusChunk(start, ids, texts)
    elif start == 0:
        raise DataError("file has no texts", source=source)
