"""Plain sentences for unsupervised training: the reader of a :class:`SentenceDataset`.

A :class:`~anglekit.data.records.SentenceDataset` is a list of non-empty texts with a name, a
source and the counts of what a lenient read skipped. :func:`read_sentences` reads one from

* a ``.txt`` file (or a file without extension): one sentence a line, kept exactly as written
  (line endings removed); a blank line is an error naming the line (``lenient`` skips and counts);
* a column of a ``.csv`` / ``.tsv`` / ``.jsonl`` / ``.json`` / ``.parquet`` file (``column=``; by
  default ``text``, then ``sentence``, then the only column);
* a directory written by ``datasets.save_to_disk`` or a Hugging Face hub id (``split=`` and
  ``column=`` as above);
* a Python list of strings, or a ``datasets.Dataset`` / ``IterableDataset`` (read in record batches).

Duplicates are kept as read (the contrastive objectives leave identical texts out of each other's
negatives); :meth:`SentenceDataset.deduplicate` removes them when wanted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from anglekit.data.records import SentenceDataset
from anglekit.data.sources import (
    TextSink,
    check_format,
    collect_texts,
    infer_format,
    is_hf_dataset,
    is_hf_dataset_dict,
    is_hub_id,
    load_from_disk,
    load_hub_dataset,
    looks_like_path,
    pick_split,
    scan_hf_dataset,
)
from anglekit.errors import ConfigError, InputPathError

__all__ = ["SentenceDataset", "read_sentences"]  # SentenceDataset: re-exported from anglekit.data.records


def _from_sink(sink: TextSink, name: str) -> SentenceDataset:
    if sink.spooled:
        return sink.finish_spool("sentences", name, "no rows")  # type: ignore[no-any-return]
    return SentenceDataset(sink.texts, name=name, source=sink.source, skipped=dict(sink.skipped))


def read_sentences(
    source: Any,
    *,
    column: str | None = None,
    format: str | None = None,  # noqa: A002 - the natural name for users
    split: str | None = None,
    lenient: bool = False,
    name: str | None = None,
) -> SentenceDataset:
    """Read sentences for unsupervised training; see the module docstring for the sources.

    Strict by default: the first bad row raises :class:`DataError` naming the source, the row (the
    line number for text files) and the field. ``format="hub"`` forces a hub id.
    """
    fmt = check_format(format)
    if isinstance(source, (list, tuple)):
        if split is not None or fmt is not None:
            raise ConfigError("split= and format= apply to paths and hub ids, not to a list of strings")
        return _from_sink(collect_texts(list(source), column, lenient), name or "sentences")
    if is_hf_dataset(source) or is_hf_dataset_dict(source):  # a Dataset (memory-mapped) or an IterableDataset
        if fmt is not None:
            raise ConfigError("format= applies to paths and hub ids, not to a datasets object")
        sink = TextSink("<datasets.Dataset>", lenient, column)
        scan_hf_dataset(pick_split(source, split, "<datasets.Dataset>"), sink)
        sink.check_done("dataset has no rows")
        return _from_sink(sink, name or "dataset" + (f":{split}" if split else ""))
    if not isinstance(source, (str, os.PathLike)):
        raise ConfigError(f"cannot read sentences from a {type(source).__name__}; give a path, a hub id, a list of strings or a datasets.Dataset")
    text = os.fspath(source)
    path = Path(text).expanduser()
    if fmt == "hub" or (fmt is None and not path.exists() and is_hub_id(text) and not looks_like_path(text)):
        if not split:
            raise ConfigError(f"reading sentences from the hub dataset {text!r} needs split=")
        sink = TextSink(f"hf:{text}", lenient, column)
        scan_hf_dataset(load_hub_dataset(text, split=split), sink)
        sink.check_done("dataset has no rows")
        return _from_sink(sink, name or f"{text}:{split}")
    if path.is_dir():
        if fmt not in (None, "hf"):
            raise ConfigError(f"{text} is a directory; format {fmt!r} applies to a file")
        ds = pick_split(load_from_disk(path, text), split, text)
        sink = TextSink(text, lenient, column)
        scan_hf_dataset(ds, sink)
        sink.check_done("dataset has no rows")
        return _from_sink(sink, name or path.name + (f":{split}" if split else ""))
    if not path.is_file():
        raise InputPathError("no such file or directory", source=text)
    if split is not None:
        raise ConfigError(f"split={split!r} does not apply to a single file ({text}); a file holds one split")
    if fmt not in (None, "hf", "hub") and path.suffix.lower() not in ("", ".txt", ".text") and infer_format(path) != fmt:
        raise ConfigError(f"format={fmt!r} does not match the extension of {text}")
    return _from_sink(collect_texts(path, column, lenient), name or path.stem)
