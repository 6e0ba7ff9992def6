"""The documents queries are written for: a corpus file read by :func:`anglekit.corpus.iter_corpus`.

Formats: ``.txt`` (one document a line, ids are the line numbers), or a table (``.jsonl``, ``.csv``,
``.tsv``, ``.parquet``) with a text column (``text``, else ``sentence``, else the only other column,
or ``--column``), an optional ``id`` column (BEIR's ``_id`` when there is no ``id``; default: the
row number) and an optional ``title`` column. A BEIR ``corpus.jsonl`` (``_id``, ``title``,
``text``) is such a table. A document's text is ``(title + " " + text).strip()``, as BEIR, MTEB and
sentence-transformers build it, so the positives written are the documents retrieval sees.

Refused (a :class:`~anglekit.errors.DataError` naming the file, row and field): an empty file, a
blank or missing text, a malformed record, and an id given twice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from anglekit.corpus.reader import corpus_columns, iter_corpus
from anglekit.errors import DataError

ID_COLUMNS = ("id", "_id")
"""The id column of a table corpus: the first of these it has."""
TITLE_COLUMN = "title"


@dataclass(frozen=True)
class Documents:
    """A corpus in memory: ``ids[i]`` names ``texts[i]`` (the title joined before the text)."""

    source: str
    ids: list[str]
    texts: list[str]
    id_column: str | None
    title_column: str | None

    def __len__(self) -> int:
        return len(self.texts)


def read_documents(path: str | os.PathLike[str], *, text_column: str | None = None, limit: int | None = None) -> Documents:
    """The documents of the corpus file ``path`` (the first ``limit`` when given)."""
    source = os.fspath(path)
    columns = corpus_columns(path) or []
    id_column = next((name for name in ID_COLUMNS if name in columns and name != text_column), None)
    title_column = TITLE_COLUMN if TITLE_COLUMN in columns and text_column != TITLE_COLUMN else None
    if title_column is not None and text_column is None and not ({"text", "sentence"} & set(columns)):
        title_column = None  # no text column by name: the reader takes the only other column, maybe the title
    ids: list[str] = []
    texts: list[str] = []
    first: dict[str, int] = {}
    for chunk in iter_corpus(path, text_column=text_column, id_column=id_column, title_column=title_column):
        for offset, (ident, text) in enumerate(zip(chunk.ids, chunk.texts, strict=True)):
            number = chunk.start + offset + 1
            if ident in first:
                raise DataError(
                    f"id {ident!r} is given twice (records {first[ident]} and {number}); ids must name one document each",
                    source=source,
                    field=id_column,
                )
            first[ident] = number
            ids.append(ident)
            texts.append(text)
            if limit is not None and len(texts) >= limit:
                return Documents(source, ids, texts, id_column, title_column)
    return Documents(source, ids, texts, id_column, title_column)


__all__ = ["ID_COLUMNS", "TITLE_COLUMN", "Documents", "read_documents"]
