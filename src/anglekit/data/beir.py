"""Retrieval sets in the BEIR layout: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

- ``corpus.jsonl``: one ``{"_id", "text"[, "title"]}`` a line; a document's text is
  ``(title + " " + text).strip()``, as BEIR, MTEB and sentence-transformers build it;
- ``queries.jsonl``: one ``{"_id", "text"}`` a line;
- ``qrels/<split>.tsv``: ``query-id TAB corpus-id TAB score`` (a header line is optional); a score
  above 0 marks the document relevant (binary relevance, as sentence-transformers'
  ``InformationRetrievalEvaluator``).

Files may be gzipped (``corpus.jsonl.gz``). :func:`read_beir` reads a folder, or a hub dataset
repository with those files (BEIR's ``BeIR/NAME``, whose judgements live in ``BeIR/NAME-qrels``).
Every problem is a :class:`~anglekit.errors.DataError` naming the file, the row and the field or
value: a missing file, malformed JSON, a record without ``_id`` or ``text``, a duplicate id, an
empty corpus, a judgement naming an unknown query or document. :func:`flickr30k_retrieval` serves
the Flickr30k test captions as such a set.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anglekit.data.sources import short_repr, text_problem
from anglekit.errors import ConfigError, DataError

__all__ = ["RetrievalSet", "flickr30k_retrieval", "load_retrieval_set", "read_beir"]


@dataclass
class RetrievalSet:
    """A corpus, queries and their relevant documents (``qrels[query id] = {document id, ...}``)."""

    name: str
    corpus_ids: list[str]
    corpus: list[str]
    query_ids: list[str]
    queries: list[str]
    qrels: dict[str, set[str]]
    ignore_identical_ids: bool = False
    """True: a document whose id is the query's own id is left out of that query's ranking."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Queries without a relevant document (left out, as sentence-transformers does), judgements with score 0."""
    sources: tuple[str, ...] = ()


def _find(folder: Path, name: str) -> Path:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise DataError(f"missing {name} (a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv)", source=str(folder / name))


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                yield number, line.rstrip("\r\n")
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise DataError(f"cannot read: {exc}", source=str(path)) from None


def _read_records(path: Path, what: str) -> tuple[list[str], list[str]]:
    """(ids, texts) of a BEIR corpus or queries file; duplicates and bad records are DataErrors."""
    ids: list[str] = []
    texts: list[str] = []
    first_row: dict[str, int] = {}
    for row, line in _lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"malformed JSON ({exc.msg})", source=str(path), row=row) from None
        if not isinstance(record, dict):
            raise DataError(f"expected a JSON object, got {short_repr(record)}", source=str(path), row=row)
        ident = record.get("_id")
        if isinstance(ident, int) and not isinstance(ident, bool):
            ident = str(ident)
        if not isinstance(ident, str) or not ident:
            raise DataError(f"expected a non-empty string id, got {short_repr(ident)}", source=str(path), row=row, field="_id")
        title = record.get("title") or ""
        if not isinstance(title, str):
            raise DataError(f"expected a string, got {short_repr(title)}", source=str(path), row=row, field="title")
        text = record.get("text")
        if not isinstance(text, str):
            raise DataError(f"expected a string, got {short_repr(text)}", source=str(path), row=row, field="text")
        text = f"{title} {text}".strip() if title else text
        problem = text_problem(text)
        if problem is not None:
            raise DataError(problem[1], source=str(path), row=row, field="text")
        if ident in first_row:
            raise DataError(f"duplicate {what} id {ident!r} (first at row {first_row[ident]})", source=str(path), row=row, field="_id")
        first_row[ident] = row
        ids.append(ident)
        texts.append(text)
    if not ids:
        raise DataError(f"no {what} records (the file is empty)", source=str(path))
    return ids, texts


def _qrels_file(qrels: Path, split: str | None, prefer: str = "test") -> Path:
    """The judgements file of ``split`` in the folder ``qrels`` (a BEIR set's ``qrels/``)."""
    if not qrels.is_dir():
        raise DataError("missing qrels/ (a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv)", source=str(qrels))
    if split is not None:
        return _find(qrels, f"{split}.tsv")
    found = sorted(p for p in qrels.iterdir() if p.name.endswith((".tsv", ".tsv.gz")))
    if not found:
        raise DataError("no <split>.tsv judgements in qrels/", source=str(qrels))
    for preferred in (f"{prefer}.tsv", f"{prefer}.tsv.gz"):
        if qrels / preferred in found:
            return qrels / preferred
    if len(found) > 1:
        raise ConfigError(f"{qrels}: several splits ({', '.join(p.name for p in found)}) and no {prefer}.tsv; name one (DIR:SPLIT)")
    return found[0]


def _read_qrels(path: Path, queries: set[str], corpus: set[str]) -> tuple[dict[str, set[str]], int]:
    """query id -> relevant document ids (score > 0), and the count of score-0 judgements."""
    qrels: dict[str, set[str]] = {}
    zero = 0
    for row, line in _lines(path):
        if not line.strip():
            continue
        cells = line.split("\t")
        if row == 1 and cells[0].strip().lower() in ("query-id", "query_id", "qid", "query"):
            continue  # the header
        if len(cells) == 4:  # TREC: query-id, iteration, corpus-id, score
            cells = [cells[0], cells[2], cells[3]]
        if len(cells) != 3:
            raise DataError(f"expected query-id TAB corpus-id TAB score, got {len(cells)} fields", source=str(path), row=row)
        query, document, score_text = (c.strip() for c in cells)
        try:
            score = float(score_text)
        except ValueError:
            raise DataError(f"score must be a number, got {score_text!r}", source=str(path), row=row, field="score") from None
        if query not in queries:
            raise DataError(f"unknown query id {query!r} (not in queries.jsonl)", source=str(path), row=row, field="query-id")
        if document not in corpus:
            raise DataError(f"unknown corpus id {document!r} (not in corpus.jsonl)", source=str(path), row=row, field="corpus-id")
        if score > 0:
            qrels.setdefault(query, set()).add(document)
        else:
            zero += 1
    return qrels, zero


def _from_hub(name: str) -> tuple[Path, Path]:
    """A local snapshot of the hub dataset ``name`` (its BEIR files) and the folder of its judgements:
    its ``qrels/``, or the snapshot of ``NAME-qrels`` (BEIR's split of the judgements) when it has none."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - a dependency of transformers
        raise ConfigError(f"{name}: reading a hub dataset needs huggingface_hub") from exc
    try:
        folder = Path(snapshot_download(name, repo_type="dataset", allow_patterns=["*.jsonl", "*.jsonl.gz", "qrels/*", "*.tsv"]))
        if not (folder / "qrels").is_dir():
            return folder, Path(snapshot_download(f"{name}-qrels", repo_type="dataset", allow_patterns=["*.tsv"]))
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - offline, unknown repository, ...: one line naming the dataset
        raise DataError(
            f"not a folder, and the hub dataset cannot be fetched ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})", source=name
        ) from None
    return folder, folder / "qrels"


def read_beir(source: str | os.PathLike[str], *, split: str | None = None, prefer: str = "test") -> RetrievalSet:
    """A BEIR-layout set from a folder or a hub dataset name (``DIR:SPLIT`` or ``split=`` picks the
    qrels file; default: ``prefer`` (``test``) when there, else the only one)."""
    text = os.fspath(source)
    if split is None and ":" in text and not Path(text).exists():
        text, split = text.rsplit(":", 1)
    folder = Path(text).expanduser()
    judgements = folder / "qrels"
    if not folder.exists():
        if "/" not in text or text.startswith((".", "/", "~")):
            raise DataError("no such folder (a BEIR folder, a hub dataset name, or flickr30k)", source=text)
        folder, judgements = _from_hub(text)
    elif not folder.is_dir():
        raise DataError("is a file; a BEIR set is a folder with corpus.jsonl, queries.jsonl and qrels/<split>.tsv", source=text)
    corpus_path, queries_path = _find(folder, "corpus.jsonl"), _find(folder, "queries.jsonl")
    qrels_path = _qrels_file(judgements, split, prefer)
    corpus_ids, corpus = _read_records(corpus_path, "corpus")
    query_ids, queries = _read_records(queries_path, "query")
    qrels, zero = _read_qrels(qrels_path, set(query_ids), set(corpus_ids))
    if not qrels:
        raise DataError("no relevant (score > 0) judgement", source=str(qrels_path))
    kept = [i for i, q in enumerate(query_ids) if q in qrels]
    skipped = {"queries without relevant documents": len(query_ids) - len(kept), "judgements with score 0": zero}
    return RetrievalSet(
        name=Path(text).name or text,
        corpus_ids=corpus_ids,
        corpus=corpus,
        query_ids=[query_ids[i] for i in kept],
        queries=[queries[i] for i in kept],
        qrels=qrels,
        skipped={k: v for k, v in skipped.items() if v},
        sources=(str(corpus_path), str(queries_path), str(qrels_path)),
    )


def flickr30k_retrieval(directory: str | os.PathLike[str], split: str = "test", *, query_caption: int = 1) -> RetrievalSet:
    """Flickr30k as a retrieval set: caption ``query_caption`` of each image is a query, every
    caption of the split is the corpus, the image's other captions are relevant (the query's own
    caption, which has the query's id, is left out of its ranking)."""
    from anglekit.data.flickr import load_flickr30k_captions

    data = load_flickr30k_captions(directory, split)
    per = len(data.captions[0])
    if not 1 <= query_caption <= per:
        raise ConfigError(f"query_caption must be 1..{per}, got {query_caption}")
    corpus_ids = [f"{i}-{c + 1}" for i in range(data.n_images) for c in range(per)]
    corpus = [caption for captions in data.captions for caption in captions]
    query_ids = [f"{i}-{query_caption}" for i in range(data.n_images)]
    queries = [captions[query_caption - 1] for captions in data.captions]
    qrels = {q: {f"{i}-{c + 1}" for c in range(per) if c + 1 != query_caption} for i, q in enumerate(query_ids)}
    return RetrievalSet(f"flickr30k:{split}", corpus_ids, corpus, query_ids, queries, qrels, ignore_identical_ids=True, sources=tuple(data.sources))


def load_retrieval_set(spec: str, data_root: str | os.PathLike[str] | None, *, split: str = "test", query_caption: int = 1) -> RetrievalSet:
    """The retrieval set a spec names: ``flickr30k[:SPLIT]`` (under ``data_root``), a BEIR folder
    (``DIR[:SPLIT]``; without one, the ``split`` judgements when there, else the only ones) or a hub dataset name."""
    name, _, given = spec.partition(":")
    if name == "flickr30k" and not Path(spec).exists():
        if data_root is None:
            raise ConfigError("flickr30k: needs the data root (--data-root or $ANGLEKIT_DATA)")
        return flickr30k_retrieval(Path(data_root) / "flickr30k", given or split, query_caption=query_caption)
    return read_beir(spec, prefer=split)
