"""What mining checks before it creates anything: its paths (no file it writes is one it reads,
through a link or another spelling either) and that the pool can give ``num_negatives``."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError, InputPathError
from anglekit.io.atomic import same_file
from anglekit.mining.pool import Pool, text_hashes

__all__ = ["OUTPUT_FORMATS", "WORK_FILES", "WORK_FOLDERS", "MinePaths", "check_paths", "check_pool_size"]

OUTPUT_FORMATS = {".jsonl": "jsonl", ".parquet": "parquet"}
WORK_FILES = ("queries.jsonl", "positives.jsonl")
"""Files the mine writes into its work folder."""
WORK_FOLDERS = ("corpus", "positives", "queries", "candidates")
"""Folders of the work folder that the mine replaces when they hold another encode or search."""


@dataclass(frozen=True)
class MinePaths:
    """The files a mine writes (output, summary, histogram, work folder) and its corpus file (None: the positives)."""

    output: Path
    summary: Path
    histogram: Path
    work: Path
    corpus: Path | None


def _check_corpus(corpus: str | os.PathLike[str] | None) -> Path | None:
    """The corpus file, refused now (before anything is created) when it is missing, a folder or of an unknown format."""
    from anglekit.corpus.reader import corpus_format

    if corpus is None:
        return None
    path = Path(os.fspath(corpus)).expanduser()
    if path.is_dir():
        raise InputPathError("--corpus is a folder, not a file; give a .txt, .jsonl, .csv, .tsv or .parquet corpus", source=os.fspath(corpus))
    corpus_format(path)
    if not path.is_file():
        raise InputPathError("--corpus: no such file", source=os.fspath(corpus))
    return path


def _inputs(pairs: Any, corpus: Path | None) -> dict[str, Path]:
    """The local files (or folders) the mine reads, by flag."""
    found: dict[str, Path] = {}
    if isinstance(pairs, (str, os.PathLike)) and os.fspath(pairs):
        path = Path(os.fspath(pairs)).expanduser()
        if path.exists():
            found["--input"] = path
    if corpus is not None:
        found["--corpus"] = corpus
    return found


def _refuse(outputs: dict[str, Path], work: Path, inputs: dict[str, Path]) -> None:
    for flag, source in inputs.items():
        real = os.path.realpath(source)
        for shown, target in outputs.items():
            if same_file(target, source):
                raise ConfigError(f"{shown} is the {flag} file {source} ({real}); anglekit mine never writes over its input: choose another --output")
        for name in WORK_FILES:
            if same_file(work / name, source):
                raise ConfigError(f"--work-dir {work}: the mine writes {name} there, which is the {flag} file {source}; choose another --work-dir")
        for name in WORK_FOLDERS:
            if Path(real).is_relative_to(os.path.realpath(work / name)):
                raise ConfigError(
                    f"--work-dir {work}: the mine may replace its folder {name}/, which holds the {flag} file {source}; choose another --work-dir"
                )


def check_paths(output: str | os.PathLike[str], work_dir: str | os.PathLike[str] | None, corpus: str | os.PathLike[str] | None, pairs: Any) -> MinePaths:
    """The mine's paths; a ConfigError (or DataError for a missing corpus) before anything is
    created when the output format is unknown, the corpus cannot be read, or a file the mine
    writes is one it reads (the same file through a link, a hard link or another spelling)."""
    out = Path(os.fspath(output)).expanduser()
    if out.suffix.lower() not in OUTPUT_FORMATS:
        raise ConfigError(f"--output {out}: must end in {' or '.join(OUTPUT_FORMATS)} (the n-tuple layout anglekit train reads)")
    stem = out.with_suffix("")
    summary, histogram = stem.with_name(stem.name + ".summary.json"), stem.with_name(stem.name + ".scores.png")
    work = Path(os.fspath(work_dir)).expanduser() if work_dir is not None else out.with_name(out.name + ".mine")
    corpus_path = _check_corpus(corpus)
    outputs = {f"--output {out}": out, f"{summary} (the summary beside --output)": summary, f"{histogram} (the histogram beside --output)": histogram}
    _refuse(outputs, work, _inputs(pairs, corpus_path))
    return MinePaths(out, summary, histogram, work, corpus_path)


def _spread(values: np.ndarray) -> str:
    return f"min {int(values.min())}, median {float(np.median(values)):g}, max {int(values.max())}"


def check_pool_size(pool: Pool, anchors: list[str], pair_anchor: np.ndarray, pair_positive: list[str], count: int, say: Callable[[str], None]) -> None:
    """A ConfigError when no anchor has ``count`` candidates in the pool (the pool less the anchor's
    own text and its positives); a note through ``say`` when some have fewer (their pairs are left out)."""
    anchor_hashes = text_hashes(anchors)
    positives = np.bincount(pair_anchor, minlength=len(anchors))
    own = np.zeros(len(anchors), bool)
    own[pair_anchor[text_hashes(pair_positive) == anchor_hashes[pair_anchor]]] = True
    in_pool = (pool.rows_of(anchor_hashes) >= 0) & ~own
    available = pool.distinct - positives - in_pool.astype(np.int64)
    short = available < count
    if short.all():
        raise ConfigError(
            f"--num-negatives {count}: no anchor has that many candidates; the pool holds {pool.distinct} distinct texts and each anchor's "
            f"candidates (the pool less the anchor and its positives) number {_spread(available)}; "
            + (f"ask at most {int(available.max())}" if available.max() else "give a --corpus of more texts")
        )
    if short.any():
        say(f"{int(short.sum())} of {len(anchors)} anchors have fewer than {count} candidates ({_spread(available[short])}); their pairs are left out")
