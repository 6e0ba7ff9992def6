"""``--train-data`` specs for the contrastive objectives: sentences and triplets.

Pair objectives keep :func:`anglekit.data.catalog.resolve_dataset`; this module resolves the same
kind of spec (``[hf:]SOURCE[:SPLIT]``, parsed by :func:`anglekit.data.spec.parse_spec`) to a
:class:`SentenceDataset` or a :class:`TripletDataset`. The training run picks the resolver from the
objective's batch kind.

Sentences (:func:`resolve_sentences`): one or more sources joined with ``+`` (e.g.
``mr+subj+flickr30k:train``); each is

* a file: ``.txt`` (one sentence a line) or a column of a csv/tsv/jsonl/json/parquet file
  (``column=``, default ``text``/``sentence``/the only column);
* a directory written by ``datasets.save_to_disk`` (column as above), or ``hf:ORG/NAME:SPLIT``;
* a named corpus of the catalogue (:mod:`anglekit.data.catalog`: ``mr``, ``cr``, ``subj``,
  ``mpqa``, ``flickr30k:SPLIT``, ``snli:SPLIT``, and every pair dataset: the distinct texts of both
  sides), read under the data root (``$ANGLEKIT_DATA``, else the per-user data folder).

  Named corpora give their distinct sentences (first appearance order); a single file is kept as
  read; a ``+`` join keeps each distinct sentence once (sources overlap: SUBJ's subjective
  sentences are MR snippets), the number removed counted in ``skipped``.

Triplets (:func:`resolve_triplets`): a triplet file (anchor/positive[/negative] or
query/positive[/negative] columns, or premise/hypothesis/label NLI columns), a named NLI set of the
catalogue (``snli:SPLIT``: the local SentEval copy, else ``stanfordnlp/snli`` on the hub;
``mnli:SPLIT``; ``all-nli:SPLIT``), a ``save_to_disk`` directory, or ``hf:ORG/NAME[/CONFIG]:SPLIT``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from anglekit.data.catalog import (
    NLI_DATASETS,
    SENTENCE_CORPORA,
    detect_dataset,
    is_known_nli_name,
    is_known_sentence_name,
    is_snli_dir,
    load_dataset_by_name,
    load_sentences_by_name,
    load_triplets_by_name,
    pair_sentences,
    resolve_dataset,
    sentence_names,
    snli_sentences,
)
from anglekit.data.nli import load_snli
from anglekit.data.readers import read_pairs
from anglekit.data.records import PairDataset, SentenceDataset, TripletDataset
from anglekit.data.root import explicit_or_default_root
from anglekit.data.sentences import read_sentences
from anglekit.data.sources import Sink, infer_format, is_hf_dataset, is_hub_id, load_from_disk, scan_file
from anglekit.data.spec import hub_source, parse_spec
from anglekit.data.triplets import TRIPLET_ALIASES, negative_columns, read_triplets
from anglekit.errors import ConfigError, DataError, InputPathError

__all__ = [
    "HUB_NLI",
    "SENTENCE_CORPORA",
    "parse_columns",
    "resolve_pairs",
    "resolve_sentences",
    "resolve_training_data",
    "resolve_triplets",
    "tuple_columns",
    "tuple_names",
]

HUB_NLI = NLI_DATASETS
"""NLI sets by name (kept under this name; the catalogue's :data:`~anglekit.data.catalog.NLI_DATASETS`)."""


def parse_columns(text: str | None) -> dict[str, str] | None:
    """``"text1=q,text2=d,label=y"`` -> ``{"text1": "q", ...}`` (canonical name = the source's
    column); None for None. Which canonical names apply is checked by the reader of the batch kind."""
    if text is None:
        return None
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"columns must be NAME=COLUMN pairs separated by commas (text1=q,text2=d,label=y), got {text!r}")
    mapping: dict[str, str] = {}
    for part in text.split(","):
        name, eq, column = (piece.strip() for piece in part.partition("="))
        if not eq or not name or not column:
            raise ConfigError(f"columns: {part.strip()!r} is not NAME=COLUMN (e.g. text1=question)")
        if name in mapping:
            raise ConfigError(f"columns: {name!r} is mapped twice")
        mapping[name] = column
    return mapping


def _columns_source(spec: str, default_split: str, root: Path | None) -> tuple[str, str | None, str | None]:
    """(path or hub id, split or None, "hub" or None) of a spec read with a column mapping: a file,
    a ``save_to_disk`` folder or ``hf:ORG/NAME:SPLIT``; a known dataset has its own columns."""
    source, split, given, force_hub = parse_spec(spec, default_split)
    if force_hub:
        hub_id, config = hub_source(source, spec.strip())
        if config is not None:
            raise ConfigError(f"{spec!r}: columns= with a hub configuration: load it with datasets and pass the Dataset")
        return hub_id, split, "hub"
    path = _local_path(source, root)
    if path is None:
        raise ConfigError(f"{spec!r}: columns apply to a file, a save_to_disk folder or hf:ORG/NAME:SPLIT, not to a known dataset name")
    if path.is_file():
        if given:
            raise ConfigError(f"{spec!r}: {path} is a single file and has no splits; drop ':{split}'")
        return str(path), None, None
    return str(path), split if given else None, None


def resolve_pairs(
    spec: str,
    *,
    columns: dict[str, str] | None = None,
    default_split: str = "train",
    data_root: str | os.PathLike[str] | None = None,
    lenient: bool = False,
) -> PairDataset:
    """Pairs of a ``--train-data`` spec: :func:`~anglekit.data.catalog.resolve_dataset`, or with a
    ``columns`` mapping (text1/text2/label -> the source's names) the file, folder or hub split it names."""
    if columns is None:
        return resolve_dataset(spec, default_split=default_split, data_root=data_root, lenient=lenient)
    source, split, fmt = _columns_source(spec, default_split, explicit_or_default_root(data_root))
    return read_pairs(source, columns=columns, format=fmt, split=split, lenient=lenient)


def _local_path(source: str, root: Path | None, *, known: bool = False) -> Path | None:
    """An existing path: as given (from the current directory), else under the data root unless
    ``source`` is a known name (a known name wins over a folder of the same name in the root)."""
    path = Path(source).expanduser()
    if path.exists():
        return path
    if not known and root is not None and not path.is_absolute() and (root / source).exists():
        return root / source
    return None


def _one_sentence_source(spec: str, *, column: str | None, default_split: str, root: Path | None, lenient: bool) -> SentenceDataset:
    source, split, given, force_hub = parse_spec(spec, default_split)
    if force_hub:
        return read_sentences(source, format="hub", split=split, column=column, lenient=lenient)
    path = _local_path(source, root, known=is_known_sentence_name(source))
    if path is not None and path.is_file():
        if given:
            raise ConfigError(f"{spec!r}: {path} is a single file and has no splits; drop ':{split}'")
        return read_sentences(path, column=column, lenient=lenient)
    if path is not None and path.is_dir():
        if (path / "labels.dev").is_file() or (path / "labels.test").is_file():  # an SNLI folder
            return snli_sentences(path, split, lenient)
        if detect_dataset(path) is not None:
            return pair_sentences(load_dataset_by_name(path, split, lenient=lenient), str(path))
        return read_sentences(path, split=split if given else None, column=column, lenient=lenient)
    known = load_sentences_by_name(source, split, data_root=root, lenient=lenient)
    if known is not None:
        return known
    if is_hub_id(source) and "/" in source:
        return read_sentences(source, format="hub", split=split, column=column, lenient=lenient)
    raise InputPathError(
        f"no such file or directory, and not a known corpus ({', '.join(sentence_names())}) or a hub id",
        source=source,
    )


def resolve_sentences(
    spec: str,
    *,
    column: str | None = None,
    default_split: str = "train",
    data_root: str | os.PathLike[str] | None = None,
    lenient: bool = False,
    columns: dict[str, str] | None = None,
) -> SentenceDataset:
    """Resolve a ``--train-data`` spec to sentences; ``+`` joins several sources (see the module doc).
    ``columns``: ``{"text": NAME}``, the same as ``column=NAME``."""
    column = sentence_column(column, columns)
    root = explicit_or_default_root(data_root)
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"empty dataset spec {spec!r}")
    spec = spec.strip()
    if "+" in spec and not Path(spec).expanduser().exists():
        parts = [p.strip() for p in spec.split("+")]
        if not all(parts):
            raise ConfigError(f"{spec!r}: empty source between '+' signs")
        datasets = [_one_sentence_source(p, column=column, default_split=default_split, root=root, lenient=lenient) for p in parts]
        # Sources overlap (SUBJ's subjective sentences are MR snippets): keep each sentence once.
        return SentenceDataset.concatenate(datasets, name=spec).deduplicate()
    return _one_sentence_source(spec, column=column, default_split=default_split, root=root, lenient=lenient)


def sentence_column(column: str | None, columns: dict[str, str] | None) -> str | None:
    """The text column of sentence data from ``text_column`` and a ``columns`` mapping (``text=NAME``)."""
    if not columns:
        return column
    if set(columns) != {"text"}:
        raise ConfigError(f"sentence data takes one column mapping, text=NAME; got {', '.join(sorted(columns))}")
    if column is not None and column != columns["text"]:
        raise ConfigError(f"text_column {column!r} and columns text={columns['text']} disagree")
    return columns["text"]


def resolve_triplets(
    spec: str,
    *,
    default_split: str = "train",
    data_root: str | os.PathLike[str] | None = None,
    lenient: bool = False,
    nli_pairing: str = "zip",
    columns: dict[str, str] | None = None,
    pad_negatives: bool = False,
    scores: bool = False,
) -> TripletDataset:
    """Resolve a ``--train-data`` spec to triplets or n-tuples (see the module doc); ``columns``
    maps anchor/positive/negative to the names of a file, folder or hub split; ``pad_negatives``
    lets n-tuple rows hold fewer negatives, ``scores`` reads their teacher scores too
    (:mod:`anglekit.data.triplets`)."""
    if columns is not None:
        source, split, fmt = _columns_source(spec, default_split, explicit_or_default_root(data_root))
        return read_triplets(
            source, columns=columns, format=fmt, split=split, lenient=lenient, nli_pairing=nli_pairing, pad_negatives=pad_negatives, scores=scores
        )
    root = explicit_or_default_root(data_root)
    source, split, given, force_hub = parse_spec(spec, default_split)
    if force_hub:
        hub_id, config = hub_source(source, spec.strip())
        return read_triplets(
            hub_id, format="hub", config=config, split=split, lenient=lenient, nli_pairing=nli_pairing, pad_negatives=pad_negatives, scores=scores
        )
    path = _local_path(source, root, known=is_known_nli_name(source))
    if path is not None and path.is_file():
        if given:
            raise ConfigError(f"{spec!r}: {path} is a single file and has no splits; drop ':{split}'")
        return read_triplets(path, lenient=lenient, nli_pairing=nli_pairing, pad_negatives=pad_negatives, scores=scores)
    if path is not None and path.is_dir():
        if is_snli_dir(path):
            return load_snli(path, split, pairing=nli_pairing, lenient=lenient)
        return read_triplets(path, split=split if given else None, lenient=lenient, nli_pairing=nli_pairing, pad_negatives=pad_negatives, scores=scores)
    known = load_triplets_by_name(source, split, data_root=root, lenient=lenient, nli_pairing=nli_pairing)
    if known is not None:
        return known
    if is_hub_id(source) and "/" in source:
        return read_triplets(source, format="hub", split=split, lenient=lenient, nli_pairing=nli_pairing, pad_negatives=pad_negatives, scores=scores)
    raise InputPathError("no such file or directory, and not a known NLI set (snli, mnli, all-nli) or a hub id", source=source)


def resolve_training_data(
    spec: str, batch_kind: str, *, column: str | None = None, lenient: bool = False, nli_pairing: str = "zip"
) -> SentenceDataset | TripletDataset:
    """The training data of a contrastive objective: ``sentences`` or ``triplets`` by batch kind."""
    resolvers: dict[str, Callable[[], SentenceDataset | TripletDataset]] = {
        "sentences": lambda: resolve_sentences(spec, column=column, lenient=lenient),
        "triplets": lambda: resolve_triplets(spec, lenient=lenient, nli_pairing=nli_pairing),
    }
    if batch_kind not in resolvers:
        raise ConfigError(f"no training data reader for batch kind {batch_kind!r}; valid: {', '.join(resolvers)}")
    if column is not None and batch_kind != "sentences":
        raise ConfigError("text_column applies to sentence data (unsupervised objectives) only")
    return resolvers[batch_kind]()


class _Columns(DataError):
    """Raised by :class:`_ColumnPeek` with the column names (a DataError, so that readers that
    re-raise DataErrors, e.g. Parquet's, pass it on)."""

    def __init__(self, names: list[str]) -> None:
        super().__init__("columns found")
        self.names = names


def _first_record_names(path: Path, fmt: str) -> list[str] | None:
    """The column names of a csv/tsv header or of a JSON Lines file's first record, from the
    file's first line (so a large pair file is not read twice); None when it does not parse."""
    import csv
    import json

    try:
        with path.open(encoding="utf-8", errors="replace", newline="") as handle:
            if fmt in ("csv", "tsv"):
                return next(csv.reader(handle, delimiter="," if fmt == "csv" else "\t"), None)
            for line in handle:
                if line.strip():
                    record = json.loads(line)
                    return [str(key) for key in record] if isinstance(record, dict) else None
    except (OSError, ValueError, csv.Error):
        return None
    return None


class _ColumnPeek(Sink):
    """A sink that stops at the column names (raised as :class:`_Columns`)."""

    def resolve(self, available: Sequence[str]) -> list[str]:
        raise _Columns(list(available))


def _column_names(spec: str, root: Path | None) -> list[str] | None:
    """The column names of a local file or ``save_to_disk`` folder named by ``spec`` (None otherwise)."""
    source, split, given, force_hub = parse_spec(spec, "train")
    if force_hub:
        return None
    path = _local_path(source, root, known=is_known_nli_name(source) or is_known_sentence_name(source))
    if path is None:
        return None
    if path.is_dir():
        if detect_dataset(path) is not None or is_snli_dir(path):
            return None
        try:
            ds = load_from_disk(path, str(path))
        except (ConfigError, DataError):
            return None
        if not is_hf_dataset(ds):
            ds = ds[split] if given and split in ds else next(iter(ds.values()))
        return list(ds.column_names)
    try:
        fmt = infer_format(path)
    except (ConfigError, DataError):
        return None
    if fmt in ("csv", "tsv", "jsonl"):
        return _first_record_names(path, fmt)
    try:
        scan_file(path, fmt, _ColumnPeek(str(path), lenient=False))
    except _Columns as found:
        return found.names
    except (ConfigError, DataError, OSError):
        return None
    return None


def tuple_columns(spec: str, columns: dict[str, str] | None = None, *, data_root: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``spec`` holds anchor/positive rows (with ``negative`` or ``negative_1..negative_n``)
    rather than labelled pairs: its ``columns`` mapping names ``anchor``/``positive``, or the local
    file or folder has an anchor column (``anchor``, ``query``, ``sent0``) and a positive column
    and no ``text1``/``sentence1`` column. What lets the AnglE pair objectives train on n-tuples."""
    if columns:
        return "anchor" in columns or "positive" in columns
    if not isinstance(spec, str) or not spec.strip():
        return False
    return tuple_names(_column_names(spec.strip(), explicit_or_default_root(data_root)) or [])


def tuple_names(names: Sequence[str], columns: dict[str, str] | None = None) -> bool:
    """Whether column ``names`` (or a ``columns`` mapping) are those of anchor/positive rows, not of
    pairs (see :func:`tuple_columns`)."""
    if columns:
        return "anchor" in columns or "positive" in columns
    present = set(names)
    if {"text1", "sentence1"} & present:
        return False
    anchor = {"anchor", *TRIPLET_ALIASES["anchor"]} & present
    positive = {"positive", *TRIPLET_ALIASES["positive"]} & present
    return bool(anchor and positive) or bool(anchor and negative_columns(names, "columns"))
