"""Readers for SentEval's copies of the STS and transfer data sets (and the SemEval originals).

Every reader decodes strictly: a file that is not valid UTF-8 is an error naming the file and the
byte, except for the files listed in :data:`KNOWN_LATIN1_FILES`, which are known to be Latin-1 in
every public copy and are decoded as Latin-1 on purpose (SentEval itself opens them that way); the
decoding used is returned with the data so that reports can state it.

Layouts (``root`` is the folder that holds ``senteval/`` and ``sts12-16-original/``):

* ``senteval/STS/STS1x-en-test/STS.input.<subset>.txt``: ``s1 TAB s2`` per line, line-aligned with
  ``STS.gs.<subset>.txt`` (one score 0-5 per line; a blank score line means: no gold, skip the pair,
  exactly as SentEval does).
* ``sts12-16-original/STS1x/``: the same in original casing; STS16's files are named
  ``STS2016.input.<subset>.txt`` / ``STS2016.gs.<subset>.txt`` and carry two more columns
  (the sources of s1 and s2), which are ignored.
* ``senteval/STS/STSBenchmark/sts-{train,dev,test}.csv`` (and ``stsb/``): TAB-separated
  ``genre, file, year, id, score, s1, s2`` (some rows have extra trailing columns: the first 7 count).
* ``senteval/SICK/SICK_{train,trial,test_annotated}.txt``: TAB, header
  ``pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment``.
* Transfer sets: ``MR``, ``CR``, ``SUBJ``, ``MPQA`` (one sentence a line, two files per label),
  ``SST/binary/sentiment-{train,dev,test}`` (``sentence TAB label``), ``TREC`` (``COARSE:fine question``),
  ``MRPC/msr_paraphrase_{train,test}.txt`` (TAB, header ``Quality, #1 ID, #2 ID, #1 String, #2 String``).

Texts of the SentEval copies are tokenised already; SentEval splits every sentence on whitespace
and joins the tokens with one space before encoding. ``normalize_whitespace=True`` (the default for
the SentEval copies) does the same; for the originals the text is passed on untouched.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from anglekit.data.sources import KNOWN_LATIN1_FILES, TextFile, read_lines
from anglekit.errors import DataError
from anglekit.io.text import is_blank

__all__ = [  # KNOWN_LATIN1_FILES, TextFile and read_lines are re-exported from anglekit.data.sources
    "BINARY_TASK_FILES",
    "KNOWN_LATIN1_FILES",
    "MRPC_FILES",
    "MRPC_HEADER",
    "SICK_FILES",
    "SICK_HEADER",
    "SST_FILES",
    "STSB_FILES",
    "STS_EXPECTED_PAIRS",
    "STS_VARIANTS",
    "STS_YEARS",
    "TREC_CLASSES",
    "TREC_FILES",
    "LabelledSentences",
    "ScoredPairs",
    "StsSubset",
    "StsYear",
    "TextFile",
    "load_binary_task",
    "load_mrpc_senteval",
    "load_sick_relatedness",
    "load_sst_binary",
    "load_sts_subset",
    "load_sts_year",
    "load_stsbenchmark",
    "load_trec",
    "read_lines",
    "sts_year_dir",
    "unique_texts",
]

PathLike = str | os.PathLike[str]

STS_YEARS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
"""The subsets of each SemEval STS year, as SentEval evaluates them (STS13 without the licensed SMT)."""

STS_EXPECTED_PAIRS: dict[str, int] = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}
"""Scored pairs per year after skipping blank gold lines (SentEval's counts)."""

STS_VARIANTS = ("senteval", "original")


def _norm(text: str, normalize_whitespace: bool) -> str:
    return " ".join(text.split()) if normalize_whitespace else text


def _parse_float(value: str, *, source: str, row: int, field_name: str, lo: float | None = None, hi: float | None = None) -> float:
    try:
        number = float(value)
    except ValueError:
        raise DataError(f"expected a number, got {value!r}", source=source, row=row, field=field_name) from None
    if not math.isfinite(number):
        raise DataError(f"expected a finite number, got {value!r}", source=source, row=row, field=field_name)
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        raise DataError(f"expected a score in [{lo}, {hi}], got {number}", source=source, row=row, field=field_name)
    return number


# --------------------------------------------------------------------------------------------
# STS 2012-2016


@dataclass(frozen=True)
class StsSubset:
    """One SemEval subset: the scored pairs (blank-gold pairs removed) and where they came from."""

    year: str
    name: str
    text1: list[str]
    text2: list[str]
    gold: np.ndarray
    n_lines: int
    n_skipped: int
    input_path: str
    gold_path: str
    encoding: str = "utf-8"

    @property
    def n_pairs(self) -> int:
        return len(self.gold)


@dataclass(frozen=True)
class StsYear:
    name: str
    subsets: tuple[StsSubset, ...]
    directory: str
    variant: str = "senteval"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def n_pairs(self) -> int:
        return sum(s.n_pairs for s in self.subsets)


def sts_year_dir(root: PathLike, year: str, variant: str = "senteval") -> Path:
    """Where ``year`` (``"STS12"``..``"STS16"``) lives under ``root`` for the ``variant`` copy."""
    if year not in STS_YEARS:
        raise DataError(f"unknown STS year {year!r}; expected one of {sorted(STS_YEARS)}")
    if variant == "senteval":
        return Path(root) / "senteval" / "STS" / f"{year}-en-test"
    if variant == "original":
        return Path(root) / "sts12-16-original" / year
    raise DataError(f"unknown STS copy {variant!r}; expected one of {STS_VARIANTS}")


def load_sts_subset(input_path: PathLike, gold_path: PathLike, *, year: str = "", name: str = "", normalize_whitespace: bool = True) -> StsSubset:
    """Read one ``STS.input``/``STS.gs`` pair of files.

    The input must hold ``s1 TAB s2`` (or 4 columns: ``s1 TAB s2 TAB source1 TAB source2``, the
    SemEval 2016 release) on every line; the gold file one score in [0, 5] or a blank line per input
    line. Blank gold lines are skipped together with their pair, as SentEval does.
    """
    inp = read_lines(input_path, what="STS input: one 's1<TAB>s2' pair per line")
    gs = read_lines(gold_path, what="STS gold scores: one score (0-5) or a blank line per input line")
    if len(inp.lines) != len(gs.lines):
        raise DataError(
            f"has {len(inp.lines)} lines but its gold file {gs.path} has {len(gs.lines)}; "
            "expected line-aligned files (one gold line, possibly blank, per input pair)",
            source=inp.path,
        )
    text1: list[str] = []
    text2: list[str] = []
    gold: list[float] = []
    skipped = 0
    for row, (line, score) in enumerate(zip(inp.lines, gs.lines, strict=True), start=1):
        parts = line.split("\t")
        if len(parts) not in (2, 4):  # checked on every line, scored or not
            raise DataError(
                f"expected 2 tab-separated columns (s1, s2) or 4 (s1, s2, source1, source2), got {len(parts)}",
                source=inp.path,
                row=row,
            )
        if score.strip() == "":
            skipped += 1
            continue
        gold.append(_parse_float(score.strip(), source=gs.path, row=row, field_name="score", lo=0.0, hi=5.0))
        text1.append(_norm(parts[0], normalize_whitespace))
        text2.append(_norm(parts[1], normalize_whitespace))
    encoding = "utf-8" if inp.encoding == gs.encoding == "utf-8" else f"{inp.encoding}/{gs.encoding}"
    return StsSubset(
        year=year,
        name=name,
        text1=text1,
        text2=text2,
        gold=np.asarray(gold, dtype=np.float64),
        n_lines=len(inp.lines),
        n_skipped=skipped,
        input_path=inp.path,
        gold_path=gs.path,
        encoding=encoding,
    )


def load_sts_year(root: PathLike, year: str, *, variant: str = "senteval", normalize_whitespace: bool | None = None, check_counts: bool = True) -> StsYear:
    """All subsets of one STS year from the ``variant`` copy under ``root``.

    ``normalize_whitespace`` defaults to True for the SentEval copy (SentEval's split-and-join) and
    False for the originals. With ``check_counts`` the total of scored pairs must match SentEval's
    (:data:`STS_EXPECTED_PAIRS`): a different count means a different copy of the data.
    """
    directory = sts_year_dir(root, year, variant)
    if not directory.is_dir():
        raise DataError(
            f"folder not found; expected the {variant} copy of {year} with files "
            f"STS.input.<subset>.txt / STS.gs.<subset>.txt for subsets {', '.join(STS_YEARS[year])}",
            source=str(directory),
        )
    if normalize_whitespace is None:
        normalize_whitespace = variant == "senteval"
    prefix = "STS2016" if (variant == "original" and year == "STS16") else "STS"
    subsets = []
    for name in STS_YEARS[year]:
        subsets.append(
            load_sts_subset(
                directory / f"{prefix}.input.{name}.txt",
                directory / f"{prefix}.gs.{name}.txt",
                year=year,
                name=name,
                normalize_whitespace=normalize_whitespace,
            )
        )
    result = StsYear(name=year, subsets=tuple(subsets), directory=str(directory), variant=variant)
    if check_counts and result.n_pairs != STS_EXPECTED_PAIRS[year]:
        raise DataError(
            f"{year} has {result.n_pairs} scored pairs; expected {STS_EXPECTED_PAIRS[year]} "
            "(SentEval's count after skipping blank gold lines): is this the right copy?",
            source=str(directory),
        )
    return result


# --------------------------------------------------------------------------------------------
# scored pair sets: STS-B and SICK-R


@dataclass(frozen=True)
class ScoredPairs:
    """A scored pair set read by this module (STS-B, SICK-R, MRPC ...)."""

    name: str
    split: str
    text1: list[str]
    text2: list[str]
    labels: np.ndarray
    source: str
    encoding: str = "utf-8"

    def __len__(self) -> int:
        return len(self.labels)


STSB_FILES = {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}
SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


def _split_file(directory: PathLike, files: dict[str, str], split: str, dataset: str) -> Path:
    if split not in files:
        raise DataError(f"unknown split {split!r} for {dataset}; expected one of {sorted(files)}")
    return Path(directory) / files[split]


def load_stsbenchmark(directory: PathLike, split: str = "test", *, normalize_whitespace: bool = True) -> ScoredPairs:
    """STS-B from ``sts-<split>.csv``: TAB columns genre, file, year, id, score, s1, s2 (first 7 count)."""
    path = _split_file(directory, STSB_FILES, split, "STS-B")
    tf = read_lines(path, what="STS-B rows: genre, file, year, id, score, s1, s2 separated by TABs")
    text1, text2, labels = [], [], []
    for row, line in enumerate(tf.lines, start=1):
        parts = line.strip().split("\t")
        if len(parts) < 7:
            raise DataError(f"expected at least 7 tab-separated columns (genre, file, year, id, score, s1, s2), got {len(parts)}", source=tf.path, row=row)
        labels.append(_parse_float(parts[4], source=tf.path, row=row, field_name="score", lo=0.0, hi=5.0))
        text1.append(_norm(parts[5], normalize_whitespace))
        text2.append(_norm(parts[6], normalize_whitespace))
    return ScoredPairs("STS-B", split, text1, text2, np.asarray(labels, dtype=np.float64), tf.path, tf.encoding)


SICK_HEADER = ("pair_ID", "sentence_A", "sentence_B", "relatedness_score")


def load_sick_relatedness(directory: PathLike, split: str = "test", *, normalize_whitespace: bool = True) -> ScoredPairs:
    """SICK-R: ``sentence_A``, ``sentence_B`` and ``relatedness_score`` (1-5) of ``SICK_<split>.txt``."""
    path = _split_file(directory, SICK_FILES, split, "SICK")
    tf = read_lines(path, what="SICK: a TAB header 'pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment' then one pair per line")
    if not tf.lines or tuple(tf.lines[0].strip().split("\t")[:4]) != SICK_HEADER:
        got = tf.lines[0][:120] if tf.lines else "an empty file"
        raise DataError(f"expected the header {'<TAB>'.join(SICK_HEADER)}<TAB>..., got {got!r}", source=tf.path, row=0)
    text1, text2, labels = [], [], []
    for row, line in enumerate(tf.lines[1:], start=1):
        parts = line.strip().split("\t")
        if len(parts) < 4:
            raise DataError(f"expected at least 4 tab-separated columns ({', '.join(SICK_HEADER)}), got {len(parts)}", source=tf.path, row=row)
        labels.append(_parse_float(parts[3], source=tf.path, row=row, field_name="relatedness_score", lo=1.0, hi=5.0))
        text1.append(_norm(parts[1], normalize_whitespace))
        text2.append(_norm(parts[2], normalize_whitespace))
    return ScoredPairs("SICK-R", split, text1, text2, np.asarray(labels, dtype=np.float64), tf.path, tf.encoding)


# --------------------------------------------------------------------------------------------
# transfer tasks


@dataclass(frozen=True)
class LabelledSentences:
    """Sentences with integer class labels (``classes[label]`` names the class)."""

    name: str
    texts: list[str]
    labels: np.ndarray
    classes: tuple[str, ...]
    sources: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def n_empty(self) -> int:
        return sum(1 for t in self.texts if is_blank(t))


BINARY_TASK_FILES: dict[str, tuple[str, str, str]] = {
    # task: (folder, file of class 1, file of class 0)
    "MR": ("MR", "rt-polarity.pos", "rt-polarity.neg"),
    "CR": ("CR", "custrev.pos", "custrev.neg"),
    "SUBJ": ("SUBJ", "subj.objective", "subj.subjective"),
    "MPQA": ("MPQA", "mpqa.pos", "mpqa.neg"),
}


def load_binary_task(senteval_dir: PathLike, task: str, *, normalize_whitespace: bool = True) -> LabelledSentences:
    """MR, CR, SUBJ or MPQA: one sentence a line in two files, one per class.

    Empty lines are kept as (empty) sentences, as SentEval keeps them (CR has 4, MPQA 3): the
    published sizes (CR 3775, MPQA 10606) count them. Their number is in ``n_empty``.
    """
    if task not in BINARY_TASK_FILES:
        raise DataError(f"unknown binary task {task!r}; expected one of {sorted(BINARY_TASK_FILES)}")
    folder, pos_name, neg_name = BINARY_TASK_FILES[task]
    texts: list[str] = []
    labels: list[int] = []
    sources, notes = [], []
    for label, fname in ((1, pos_name), (0, neg_name)):
        tf = read_lines(Path(senteval_dir) / folder / fname, what=f"{task} sentences, one per line")
        if not tf.lines:
            raise DataError(f"is empty; expected {task} sentences, one per line", source=tf.path)
        texts.extend(_norm(line, normalize_whitespace) for line in tf.lines)
        labels.extend([label] * len(tf.lines))
        sources.append(tf.path)
        if tf.note:
            notes.append(f"{tf.path}: {tf.note}")
    classes = (neg_name.split(".")[-1], pos_name.split(".")[-1])
    return LabelledSentences(task, texts, np.asarray(labels, dtype=np.int64), classes, tuple(sources), tuple(notes))


SST_FILES = {"train": "sentiment-train", "dev": "sentiment-dev", "test": "sentiment-test"}


def load_sst_binary(senteval_dir: PathLike, split: str, *, normalize_whitespace: bool = True) -> LabelledSentences:
    """SST-2 split from ``SST/binary/sentiment-<split>``: ``sentence TAB label`` (label 0 or 1)."""
    path = _split_file(Path(senteval_dir) / "SST" / "binary", SST_FILES, split, "SST-2")
    tf = read_lines(path, what="SST-2 rows: 'sentence<TAB>label' with label 0 or 1")
    texts, labels = [], []
    for row, line in enumerate(tf.lines, start=1):
        parts = line.strip().split("\t")
        if len(parts) != 2:
            raise DataError(f"expected 2 tab-separated columns (sentence, label), got {len(parts)}", source=tf.path, row=row)
        if parts[1].strip() not in ("0", "1"):
            raise DataError(f"expected label 0 or 1, got {parts[1]!r}", source=tf.path, row=row, field="label")
        texts.append(_norm(parts[0], normalize_whitespace))
        labels.append(int(parts[1]))
    notes = (f"{tf.path}: {tf.note}",) if tf.note else ()
    return LabelledSentences(f"SST-2/{split}", texts, np.asarray(labels, dtype=np.int64), ("negative", "positive"), (tf.path,), notes)


TREC_FILES = {"train": "train_5500.label", "test": "TREC_10.label"}
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


def load_trec(senteval_dir: PathLike, split: str, *, normalize_whitespace: bool = True) -> LabelledSentences:
    """TREC question classification: ``COARSE:fine question`` per line; the label is the coarse class."""
    path = _split_file(Path(senteval_dir) / "TREC", TREC_FILES, split, "TREC")
    tf = read_lines(path, what="TREC rows: 'COARSE:fine question' (e.g. 'DESC:manner How did ...')")
    texts, labels = [], []
    for row, line in enumerate(tf.lines, start=1):
        head, sep, rest = line.strip().partition(" ")
        coarse, colon, _fine = head.partition(":")
        if not sep or not colon:
            raise DataError(f"expected 'COARSE:fine question', got {line[:80]!r}", source=tf.path, row=row)
        if coarse not in TREC_CLASSES:
            raise DataError(f"expected a coarse class in {TREC_CLASSES}, got {coarse!r}", source=tf.path, row=row, field="label")
        texts.append(_norm(rest, normalize_whitespace))
        labels.append(TREC_CLASSES.index(coarse))
    notes = (f"{tf.path}: {tf.note}",) if tf.note else ()
    return LabelledSentences(f"TREC/{split}", texts, np.asarray(labels, dtype=np.int64), TREC_CLASSES, (tf.path,), notes)


MRPC_FILES = {"train": "msr_paraphrase_train.txt", "test": "msr_paraphrase_test.txt"}
MRPC_HEADER = ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")


def load_mrpc_senteval(senteval_dir: PathLike, split: str, *, normalize_whitespace: bool = True) -> ScoredPairs:
    """MRPC (SentEval copy) ``msr_paraphrase_<split>.txt``: labels 0/1 from the Quality column."""
    path = _split_file(Path(senteval_dir) / "MRPC", MRPC_FILES, split, "MRPC")
    tf = read_lines(path, what="MRPC: a TAB header 'Quality, #1 ID, #2 ID, #1 String, #2 String' then one pair a line")
    if not tf.lines or tuple(c.strip() for c in tf.lines[0].split("\t")) != MRPC_HEADER:
        got = tf.lines[0][:120] if tf.lines else "an empty file"
        raise DataError(f"expected the header {'<TAB>'.join(MRPC_HEADER)}, got {got!r}", source=tf.path, row=0)
    text1, text2, labels = [], [], []
    for row, line in enumerate(tf.lines[1:], start=1):
        parts = line.strip().split("\t")
        if len(parts) != 5:
            raise DataError(f"expected 5 tab-separated columns ({', '.join(MRPC_HEADER)}), got {len(parts)}", source=tf.path, row=row)
        if parts[0] not in ("0", "1"):
            raise DataError(f"expected Quality 0 or 1, got {parts[0]!r}", source=tf.path, row=row, field="Quality")
        labels.append(float(parts[0]))
        text1.append(_norm(parts[3], normalize_whitespace))
        text2.append(_norm(parts[4], normalize_whitespace))
    return ScoredPairs("MRPC", split, text1, text2, np.asarray(labels, dtype=np.float64), tf.path, tf.encoding)


def unique_texts(*groups: Sequence[str]) -> list[str]:
    """The distinct texts of ``groups`` in first-seen order."""
    return list(dict.fromkeys(t for g in groups for t in g))
