"""Training rows tokenized as they are read, from memory-mapped Arrow (``stream_data``).

The in-memory datasets (``TokenizedPairs``, ...) tokenize every distinct text once, up front, and
give each distinct text a dense id. For a corpus larger than memory these read each row from an
:class:`~anglekit.data.stream.ArrowRows` when the loader asks for it and tokenize it then; a
text's id (what identical-sentence detection compares) is a 63-bit hash of the text, equal for
equal texts as the dense ids are. ``lengths()`` (for length-grouped batches) tokenizes the rows
once in slices and keeps only the counts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from anglekit.data.stream import ArrowRows

LENGTH_SLICE = 4096
"""Rows tokenized at a time when counting lengths."""


def text_id(text: str) -> int:
    """A stable 63-bit id of a text: never negative, as the in-memory datasets' dense ids, since a
    negative id marks a padding slot (an n-tuple row's missing negative)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little") & 0x7FFF_FFFF_FFFF_FFFF


class StreamedRows(Dataset):
    """Rows of ``columns`` of ``rows``, tokenized with ``tokenize`` when read; an item is
    ``make(token ids per text, text ids per text, row index)`` (the task's item type), its texts
    in column order, a list column (an n-tuple's ``negatives``) contributing each of its texts.
    Texts are read through the rows' ``formats`` (a column's role prompt)."""

    def __init__(
        self,
        rows: ArrowRows,
        columns: list[str],
        tokenize: Callable[[list[str]], list[list[int]]],
        make: Callable[[list[list[int]], tuple[int, ...], int], Any],
    ) -> None:
        self.rows = rows
        self.columns = columns
        self.tokenize = tokenize
        self.make = make
        self._arrays = [rows.table.column(name) for name in columns]
        self._lengths: list[int] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def texts(self, index: int) -> list[str]:
        """The row's texts, in column order, a list column's flattened."""
        if not 0 <= index < len(self):
            raise IndexError(f"row {index} of {len(self)}")
        out: list[str] = []
        for name, array in zip(self.columns, self._arrays, strict=True):
            value = self.rows.format(name, array[index].as_py())
            if isinstance(value, list):
                out.extend(value)
            else:
                out.append(value)
        return out

    def __getitem__(self, index: int) -> Any:
        texts = self.texts(index)
        return self.make(self.tokenize(texts), tuple(text_id(t) for t in texts), index)

    def lengths(self) -> list[int]:
        """Per row, the longest of its texts in tokens (computed once, in slices)."""
        if self._lengths is None:
            out = np.zeros(len(self), dtype=np.int64)
            for start in range(0, len(self), LENGTH_SLICE):
                for name in self.columns:
                    values = self.rows.texts(name, start, min(start + LENGTH_SLICE, len(self)))
                    if values and isinstance(values[0], list):  # a list column: each row's longest text
                        flat = [text for row in values for text in row]
                        counts = np.fromiter((len(row) for row in values), dtype=np.int64, count=len(values))
                        sizes_flat = np.fromiter((len(seq) for seq in self.tokenize(flat)), dtype=np.int64, count=len(flat))
                        sizes = np.zeros(len(values), dtype=np.int64)
                        starts, has = np.cumsum(counts) - counts, counts > 0
                        if has.any():  # each row's segment of the flat sizes (rows without negatives stay 0)
                            sizes[has] = np.maximum.reduceat(sizes_flat, starts[has])
                    else:
                        ids = self.tokenize(values)
                        sizes = np.fromiter((len(seq) for seq in ids), dtype=np.int64, count=len(ids))
                    np.maximum(out[start : start + len(sizes)], sizes, out=out[start : start + len(sizes)])
            self._lengths = out.tolist()
        return self._lengths


__all__ = ["StreamedRows", "text_id"]
