"""Training data at scale: validated rows spooled to a memory-mapped Arrow file, not Python lists.

Inside :func:`spooling`, the readers (:func:`~anglekit.data.readers.read_pairs`,
:func:`~anglekit.data.sentences.read_sentences`, :func:`~anglekit.data.triplets.read_triplets`)
validate every row exactly as they always do (same checks, same errors, same lenient skips) but
write the valid rows, ``SPOOL_BATCH_ROWS`` at a time, to an Arrow IPC file, and return an
:class:`ArrowRows` that reads it memory-mapped. A corpus of any size then costs the process a
few batches of Python objects, whatever its source (a file, a saved or in-memory ``datasets``
dataset, an ``IterableDataset``).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError

SPOOL_BATCH_ROWS = 10_000
"""Rows per Arrow record batch written (the Python objects a spooled read holds at most)."""
_SPOOL: contextvars.ContextVar[Spool | None] = contextvars.ContextVar("anglekit_spool", default=None)


class SpoolColumn:
    """A sink's column while spooling: ``append`` and ``len`` like a list (the length counts every
    row, written or buffered)."""

    def __init__(self, spool: Spool, name: str) -> None:
        self.spool = spool
        self.name = name
        self.buffer: list[Any] = []
        self.kind = "text"
        self.written = 0
        self.filled = False
        """Whether any row gave this column a value (triplets without negatives leave it empty)."""

    def append(self, value: Any) -> None:
        # A row's values are appended lead column first: when the lead is about to start a new row
        # past the batch size, every buffered row is complete, so the batch is written then.
        if self.name == self.spool.lead and len(self.buffer) >= self.spool.batch_rows:
            self.spool.flush()
        self.buffer.append(value)

    def __len__(self) -> int:
        return self.written + len(self.buffer)


class Spool:
    """The Arrow file one read writes (see the module doc)."""

    def __init__(self, folder: Path, batch_rows: int) -> None:
        self.folder = folder
        self.batch_rows = batch_rows
        self.columns: dict[str, SpoolColumn] = {}
        self.lead = ""
        self.path = folder / "rows.arrow"
        self._writer: Any = None
        self._schema: Any = None
        self.remove_folder = False
        self.finished = False
        """Whether :meth:`finish` handed the file on (as :class:`ArrowRows`, which owns it then)."""

    def column(self, name: str, kind: str) -> SpoolColumn:
        """A new column (``kind``: ``text``, ``float``, or ``texts``: a list of texts a row, an
        n-tuple's negatives); the first one decides when to flush."""
        if self._writer is not None or name in self.columns:
            raise ConfigError("a spool takes one read; start another spooling() for another dataset")
        column = SpoolColumn(self, name)
        column.kind = kind
        self.columns[name] = column
        self.lead = self.lead or name
        return column

    def flush(self) -> None:
        import pyarrow as pa

        rows = len(self.columns[self.lead].buffer)
        if rows == 0:
            return
        arrays = {}
        for name, column in self.columns.items():
            kind = {"float": pa.float64(), "texts": pa.large_list(pa.large_string())}.get(column.kind, pa.large_string())
            full = len(column.buffer) == rows
            column.filled = column.filled or full
            values = [list(v) for v in column.buffer] if column.kind == "texts" and full else column.buffer
            arrays[name] = pa.array(values if full else [None] * rows, type=kind)  # a column left empty (no negatives)
        batch = pa.record_batch(arrays)
        if self._writer is None:
            self._schema = batch.schema
            self._writer = pa.ipc.new_file(str(self.path), self._schema)
        self._writer.write_batch(batch)
        for column in self.columns.values():
            column.written += len(column.buffer)
            column.buffer = []

    def finish(self, kind: str, *, name: str, source: str, label_range: tuple[float, float] | None = None,
               skipped: dict[str, int] | None = None) -> ArrowRows:  # fmt: skip
        """Close the file and open it memory-mapped."""
        self.flush()
        if self._writer is None:
            raise ConfigError(f"{source}: nothing to spool")
        self._writer.close()
        self._writer = None
        present = [n for n, c in self.columns.items() if c.filled]
        rows = ArrowRows(kind, self.path, present, name=name, source=source, label_range=label_range, skipped=skipped or {},
                         remove_folder=self.remove_folder)  # fmt: skip
        self.finished = True
        return rows


def current_spool() -> Spool | None:
    """The spool of the enclosing :func:`spooling` block (None outside one)."""
    return _SPOOL.get()


@contextlib.contextmanager
def spooling(folder: str | Path | None = None, *, batch_rows: int | None = None) -> Iterator[Spool]:
    """Make the readers called inside the block spool their rows (see the module doc) into
    ``folder`` (default: a new temporary folder, removed when the returned rows are collected, or
    on leaving the block when no rows came out of it: a read that failed, or none made)."""
    made = folder is None
    target = Path(tempfile.mkdtemp(prefix="anglekit-rows-")) if made else Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    spool = Spool(target, batch_rows or SPOOL_BATCH_ROWS)
    spool.remove_folder = made
    token = _SPOOL.set(spool)
    try:
        yield spool
    finally:
        _SPOOL.reset(token)
        if spool._writer is not None:  # the read failed half-way
            spool._writer.close()
            spool._writer = None
        if made and not spool.finished:  # nothing owns the temporary folder: gone with the block
            shutil.rmtree(target, ignore_errors=True)


class ArrowRows:
    """Validated training rows in a memory-mapped Arrow file: ``kind`` ``pairs`` (text1, text2,
    label), ``sentences`` (text) or ``triplets`` (anchor, positive[, negative], or anchor, positive,
    negatives: n-tuples, a list of texts a row).

    ``formats`` maps a column to what is done to each of its texts as it is read (a role's prompt,
    :meth:`formatted`); the file itself is never rewritten."""

    def __init__(self, kind: str, path: Path, columns: list[str], *, name: str, source: str,
                 label_range: tuple[float, float] | None, skipped: dict[str, int], remove_folder: bool = False) -> None:  # fmt: skip
        import pyarrow as pa

        self.kind = kind
        self.path = path
        self.name = name
        self.source = source
        self.label_range = label_range
        self.skipped = dict(skipped)
        self._map = pa.memory_map(str(path))
        self.table = pa.ipc.open_file(self._map).read_all().select(columns)  # zero-copy views of the mapped file
        self.formats: dict[str, Callable[[str], str]] = {}
        if remove_folder:  # a temporary folder: gone with the last reference to these rows
            weakref.finalize(self, _remove, self._map, path.parent)

    def formatted(self, formats: Mapping[str, Callable[[str], str]]) -> ArrowRows:
        """The same rows (the same mapped file) whose ``column`` texts read as ``formats[column](text)``."""
        view = copy.copy(self)
        view.formats = {**self.formats, **formats}
        view._origin = self  # the mapped file lives (and its temporary folder stays) while a view does
        return view

    def format(self, column: str, values: Any) -> Any:
        """``values`` (a column's text, or list of texts) as ``formats`` reads them."""
        how = self.formats.get(column)
        if how is None or values is None:
            return values
        return [how(v) for v in values] if isinstance(values, list) else how(values)

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def texts(self, column: str, start: int = 0, stop: int | None = None) -> list[Any]:
        """The texts of ``column`` in rows ``start:stop`` (only those become Python strings; a
        list of texts a row for ``negatives``), formatted as ``formats`` says."""
        stop = len(self) if stop is None else stop
        return [self.format(column, v) for v in self.table.column(column).slice(start, stop - start).to_pylist()]

    def row(self, index: int) -> dict[str, Any]:
        return {name: self.format(name, self.table.column(name)[index].as_py()) for name in self.table.column_names}

    @property
    def labels(self) -> np.ndarray:
        """The labels (pairs), float64."""
        return self.table.column("label").to_numpy()

    @property
    def has_negatives(self) -> bool:
        return "negative" in self.table.column_names

    @property
    def is_ntuples(self) -> bool:
        """Rows of (anchor, positive, negatives): a list of hard negatives each."""
        return "negatives" in self.table.column_names

    def negative_counts(self) -> np.ndarray:
        """n-tuples: how many negatives each row holds (shorter rows were padded); empty otherwise."""
        if not self.is_ntuples:
            return np.zeros(0, dtype=np.int64)
        import pyarrow.compute as pc

        return pc.list_value_length(self.table.column("negatives")).to_numpy(zero_copy_only=False).astype(np.int64)

    @property
    def negatives_per_row(self) -> int:
        """n-tuples: the most negatives a row holds; 0 otherwise."""
        counts = self.negative_counts()
        return int(counts.max()) if len(counts) else 0

    def summary(self) -> str:
        if self.is_ntuples:
            what = f"n-tuples (anchor, positive, {self.negatives_per_row} hard negatives)"
        else:
            what = {"pairs": "pairs", "sentences": "sentences", "triplets": "triplets" if self.has_negatives else "anchor/positive pairs"}[self.kind]
        return f"{self.name or self.source}: {len(self)} {what} (streamed from {self.path.name})"


def _remove(mapping: Any, folder: Path) -> None:
    with contextlib.suppress(Exception):
        mapping.close()
    shutil.rmtree(folder, ignore_errors=True)


__all__ = ["ArrowRows", "Spool", "SpoolColumn", "current_spool", "spooling"]
