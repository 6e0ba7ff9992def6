"""Loader of the GitHub Issues Similarity dataset in its published format (hub or local files).

Published format (our understanding of the hub card of ``WhereIsAI/github-issue-similarity``,
read before going offline and **not re-verified**): default config with columns ``text1``,
``text2`` (strings) and ``label`` (int 0/1); splits ``train`` / ``valid`` / ``test`` (18565 / 1547 /
1548 rows) stored as ``data/<split>-00000-of-00001.parquet``; a second config ``positive``
(``anchor``, ``positive``) holds only the duplicate pairs and is not used here.

:func:`load_github_issues` accepts

* the hub id (``WhereIsAI/github-issue-similarity``) or the short names ``github-issues`` /
  ``gis``: read with ``datasets.load_dataset`` (network or the local HF cache);
* a folder written by ``anglekit github-issues build`` (``<split>.jsonl``), a snapshot of the
  hub repository (``data/<split>-*.parquet``), or any folder with ``<split>.{jsonl,json,csv,tsv,parquet}``;
* a single file (one split).

Split names: those of :func:`anglekit.data.splits.normalize_split` (``train``; ``dev``, also
``valid``, ``validation``, ``val``; ``test``); the files and the hub call the dev split ``valid``.

The catalogue (:mod:`anglekit.data.catalog`) lists the dataset as ``github-issues`` with
:func:`load_github_issues` as its loader; this module does not import the catalogue. The builder
(:mod:`anglekit.github_issues`) imports from here (``MANIFEST``), never the other way round.
"""

from __future__ import annotations

import os
from pathlib import Path

from anglekit.data.readers import read_pairs
from anglekit.data.records import PairDataset
from anglekit.data.splits import normalize_split
from anglekit.errors import ConfigError, DataError, InputPathError

__all__ = ["FILE_SPLITS", "HUB_ID", "MANIFEST", "NAMES", "load_github_issues"]

HUB_ID = "WhereIsAI/github-issue-similarity"
NAMES = ("github-issues", "github_issues", "github-issue-similarity", "gis")
FILE_SPLITS = {"train": "train", "dev": "valid", "test": "test"}
"""Canonical split -> the split's name in the files and on the hub."""
MANIFEST = "github_issues.json"
"""The file ``anglekit github-issues build`` writes next to the splits; it marks such a folder."""
_COLUMNS = {"text1": "text1", "text2": "text2", "label": "label"}
_EXTENSIONS = ("jsonl", "json", "parquet", "csv", "tsv")


def _split_name(split: str) -> str:
    try:
        return FILE_SPLITS[normalize_split(split)]
    except ConfigError:
        raise ConfigError(f"unknown split {split!r} of the GitHub issues dataset (train, valid/dev/validation, test)") from None


def _split_file(folder: Path, split: str) -> Path | None:
    for ext in _EXTENSIONS:
        candidate = folder / f"{split}.{ext}"
        if candidate.is_file():
            return candidate
        if candidate.exists():
            raise DataError(f"is a folder; expected the {split} pairs (text1, text2, label)", source=str(candidate))
    for sub in ("data", "default"):
        matches = sorted((folder / sub).glob(f"{split}-*.parquet")) + sorted((folder / sub / split).glob("*.parquet"))
        if matches:
            return matches[0] if len(matches) == 1 else None
    return None


def load_github_issues(
    path_or_hub: str | os.PathLike[str] = HUB_ID,
    split: str | None = "test",
    *,
    lenient: bool = False,
) -> PairDataset:
    """The ``split`` of the GitHub issues pairs as a :class:`PairDataset` (labels 0/1, range (0, 1)).

    The signature fits :class:`anglekit.data.catalog.KnownDataset.loader` (``loader(path, split, lenient=)``).
    """
    text = os.fspath(path_or_hub)
    path = Path(text).expanduser()
    if path.is_file():
        return read_pairs(path, columns=_COLUMNS, label_range=(0.0, 1.0), lenient=lenient, name=f"github-issues:{path.stem}")
    canonical = _split_name(split or "test")
    if path.is_dir():
        found = _split_file(path, canonical)
        if found is None:
            raise DataError(
                f"no {canonical!r} split here: expected {canonical}.jsonl (anglekit github-issues build) or data/{canonical}-*.parquet (hub snapshot)",
                source=text,
            )
        return read_pairs(found, columns=_COLUMNS, label_range=(0.0, 1.0), lenient=lenient, name=f"github-issues:{canonical}")
    hub = HUB_ID if text.lower() in NAMES else text
    if hub.count("/") != 1:
        raise InputPathError("no such file or directory, and not a hub id", source=text)
    return read_pairs(hub, format="hub", split=canonical, columns=_COLUMNS, label_range=(0.0, 1.0), lenient=lenient, name=f"github-issues:{canonical}")
