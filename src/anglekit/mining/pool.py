"""The candidate pool of mining: the corpus file's texts, then the positives it lacks.

As sentence-transformers' ``mine_hard_negatives`` does with ``corpus``, the positives join the
corpus: pool rows ``0 .. file_rows - 1`` are the corpus file's records, the rows after them the
distinct positives the file does not hold, in the order the pairs give them. Texts are matched by
content (:func:`text_hash`); a text the pool holds twice is searched once, at its first row.
The vectors come from two shard folders (:class:`PoolShards`), read one shard at a time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import DataError

__all__ = ["Pool", "PoolShards", "scan_pool", "text_hash", "text_hashes"]


def text_hash(text: str) -> int:
    """The 64-bit BLAKE2b hash of a text (UTF-8) that mining matches texts by."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def text_hashes(texts: list[str]) -> np.ndarray:
    """:func:`text_hash` of each text, as uint64."""
    return np.fromiter((text_hash(t) for t in texts), dtype=np.uint64, count=len(texts))


@dataclass
class Pool:
    """The pool's texts by hash: ``file_rows`` records of ``path`` (None: no corpus file), then ``added``."""

    path: Path | None
    text_column: str | None
    id_column: str | None
    file_rows: int
    added: list[str]
    hashes: np.ndarray
    order: np.ndarray

    def rows_of(self, hashes: np.ndarray) -> np.ndarray:
        """The first pool row holding each hash (-1: not in the pool)."""
        if not len(self.hashes):
            return np.full(len(hashes), -1, np.int64)
        sorted_hashes = self.hashes[self.order]
        at = np.clip(np.searchsorted(sorted_hashes, hashes), 0, len(sorted_hashes) - 1)
        return np.where(sorted_hashes[at] == hashes, self.order[at], -1)

    @cached_property
    def distinct(self) -> int:
        """How many distinct texts the pool holds."""
        return int(len(np.unique(self.hashes)))

    def first(self) -> np.ndarray:
        """True for the first row of each distinct text (mining searches those, as a pool without repeats)."""
        out = np.zeros(len(self.hashes), bool)
        sorted_hashes = self.hashes[self.order]
        starts = np.ones(len(sorted_hashes), bool)
        starts[1:] = sorted_hashes[1:] != sorted_hashes[:-1]
        out[self.order[starts]] = True
        return out

    def texts_of(self, rows: np.ndarray) -> dict[int, str]:
        """The texts of pool ``rows`` (one more pass over the corpus file for its rows)."""
        from anglekit.corpus.reader import iter_corpus

        wanted = np.unique(rows[rows >= 0])
        out = {int(row): self.added[int(row) - self.file_rows] for row in wanted[wanted >= self.file_rows]}
        wanted = wanted[wanted < self.file_rows]
        if self.path is not None and len(wanted):
            for chunk in iter_corpus(self.path, text_column=self.text_column, id_column=self.id_column):
                lo, hi = np.searchsorted(wanted, [chunk.start, chunk.start + len(chunk)])
                for row in wanted[lo:hi]:
                    out[int(row)] = chunk.texts[int(row) - chunk.start]
        return out


def _scan_file(path: Path, text_column: str | None, id_column: str | None) -> np.ndarray:
    """The text hash of every record of the corpus file; duplicate ids are a DataError naming the id and its records."""
    from anglekit.corpus.reader import iter_corpus

    parts: list[np.ndarray] = []
    id_parts: list[np.ndarray] = []
    for chunk in iter_corpus(path, text_column=text_column, id_column=id_column):
        parts.append(text_hashes(chunk.texts))
        id_parts.append(text_hashes(chunk.ids))
    hashes = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    if not len(hashes):
        raise DataError("the corpus has no records", source=str(path))
    ids = np.concatenate(id_parts)
    order = np.argsort(ids, kind="stable")
    repeated = np.nonzero(ids[order][1:] == ids[order][:-1])[0]
    if len(repeated):
        first, second = sorted((int(order[repeated[0]]), int(order[repeated[0] + 1])))
        ident = next(c.ids[first - c.start] for c in iter_corpus(path, text_column=text_column, id_column=id_column) if c.start <= first < c.start + len(c))
        raise DataError(f"duplicate id {ident!r} (records {first + 1} and {second + 1}); ids must be unique", source=str(path))
    return hashes


def scan_pool(path: Path | None, text_column: str | None, id_column: str | None, positives: list[str]) -> Pool:
    """The pool of the corpus file ``path`` (None: none) and the ``positives`` it lacks (each distinct text once)."""
    file_hashes = _scan_file(path, text_column, id_column) if path is not None else np.zeros(0, np.uint64)
    distinct = list(dict.fromkeys(positives))
    in_file = np.isin(text_hashes(distinct), file_hashes)
    added = [text for text, found in zip(distinct, in_file, strict=True) if not found]
    hashes = np.concatenate([file_hashes, text_hashes(added)])
    return Pool(path, text_column, id_column, len(file_hashes), added, hashes, np.argsort(hashes, kind="stable"))


@dataclass
class PoolShards:
    """The pool's vectors: ``parts`` are (first pool row, :class:`~anglekit.corpus.shards.ShardSet`)."""

    parts: list[tuple[int, Any]]

    @property
    def rows(self) -> int:
        return sum(int(shards.rows) for _, shards in self.parts)

    @property
    def dim(self) -> int:
        return int(self.parts[0][1].dim)

    @property
    def manifest(self) -> dict[str, Any]:
        """The first part's manifest (the model that encoded the pool)."""
        return dict(self.parts[0][1].manifest)

    def key(self) -> list[Any]:
        """What identifies the pool's vectors: each part's first row, input and rows."""
        return [[start, shards.manifest.get("input"), shards.rows] for start, shards in self.parts]

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first pool row, float32 vectors) of each shard in pool order, one in memory at a time."""
        for start, shards in self.parts:
            offset = start
            for _, vectors in shards:
                yield offset, np.asarray(vectors, dtype=np.float32)
                offset += len(vectors)

    def gather(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of pool ``rows`` (any order)."""
        out = np.zeros((len(rows), self.dim), np.float32)
        for start, vectors in self.blocks():
            mask = (rows >= start) & (rows < start + len(vectors))
            if mask.any():
                out[mask] = vectors[rows[mask] - start]
        return out
