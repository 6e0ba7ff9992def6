"""The catalogue: every dataset known by name (pairs, sentences, triplets), found locally or on the hub.

Named datasets are looked up here and only here. Local copies are searched under the data root
(:mod:`anglekit.data.root`: ``$ANGLEKIT_DATA``, else the per-user data folder); a name with no local
copy falls back to its hub copy where it has one. When neither works, the error names both places
a local copy is looked for.

Pair datasets (:data:`KNOWN_DATASETS`, :func:`load_dataset_by_name`):

=================  =============================================  ==============================================
name               local directory (files)                        hub fallback (``datasets.load_dataset``)
=================  =============================================  ==============================================
``stsb``           ``stsb/`` or ``senteval/STS/STSBenchmark/``    ``sentence-transformers/stsb``: columns
                   (``sts-train.csv``, ``sts-dev.csv``,           sentence1, sentence2, score; splits train /
                   ``sts-test.csv``: TAB, no header, no quoting;  validation / test (5749 / 1500 / 1379). Its
                   genre, file, year, id, score, s1, s2, extra    scores are divided by 5 (range 0-1); they are
                   trailing columns ignored). Labels 0-5.         kept as they are (label_range (0, 1)).
``sick``           ``senteval/SICK/`` (``SICK_train.txt``,        ``mteb/sickr-sts``: sentence1, sentence2,
                   ``SICK_trial.txt`` = dev,                      score (1-5). Only its ``test`` split is used:
                   ``SICK_test_annotated.txt``: TAB with header   it holds all 9,927 SICK pairs (what MTEB
                   pair_ID, sentence_A, sentence_B,               reports), not the 4,927-pair SemEval test
                   relatedness_score, ...). Labels 1-5.           split of the local copy.
``mrpc``           ``mrpc/`` (``msr-para-{train,val,test}.tsv``,  ``nyu-mll/glue``, config ``mrpc``: sentence1,
                   original text, 3576 / 500 / 1725) or           sentence2, label; splits train / validation
                   ``senteval/MRPC/`` (``msr_paraphrase_{train,   (3668 / 408). GLUE hides the test labels
                   test}.txt``, tokenised, 4076 / 1725, no dev).  (all -1), so its test split is refused.
                   TAB with header Quality, #1 ID, #2 ID,
                   #1 String, #2 String; labels 0/1.
``github-issues``  ``github-issues/`` as written by ``anglekit    ``WhereIsAI/github-issue-similarity``: text1,
                   github-issues build`` (``<split>.jsonl``,      text2, label; splits train / valid / test.
                   ``github_issues.json``); labels 0/1.           Read by :mod:`anglekit.data.github_issues`.
=================  =============================================  ==============================================

Sentence corpora (:func:`load_sentences_by_name`; every pair dataset above also gives the distinct
texts of both its sides):

===================  ==============================================================
``mr``, ``cr``,      SentEval's transfer sets: every sentence of both label files
``subj``, ``mpqa``   (MR 10662, CR 3775, SUBJ 10000, MPQA 10606); the split is ignored
``flickr30k:SPLIT``  Flickr30k captions, all five per image (train 145000, dev 5070,
                     test 5000)
``snli:SPLIT``       the distinct premises and hypotheses of SNLI (dev / test offline)
===================  ==============================================================

Triplet (NLI) sets (:func:`load_triplets_by_name`): ``snli`` (the local SentEval copy, else
``stanfordnlp/snli``), ``mnli`` (``nyu-mll/multi_nli``), ``all-nli``
(``sentence-transformers/all-nli``, config ``triplet``).

Texts are kept exactly as in the files (the SentEval copies are tokenised and lower-cased
already). Split names: see :mod:`anglekit.data.splits`.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.data.github_issues import FILE_SPLITS as GITHUB_ISSUES_SPLITS
from anglekit.data.github_issues import HUB_ID as GITHUB_ISSUES_HUB_ID
from anglekit.data.github_issues import MANIFEST as GITHUB_ISSUES_MANIFEST
from anglekit.data.github_issues import NAMES as GITHUB_ISSUES_NAMES
from anglekit.data.github_issues import load_github_issues
from anglekit.data.nli import load_snli, snli_files
from anglekit.data.readers import read_delimited, read_hub_pairs, read_pairs
from anglekit.data.records import PairDataset, SentenceDataset, TripletDataset
from anglekit.data.root import DATA_ENV_VAR, default_data_root, explicit_or_default_root, missing_locally
from anglekit.data.sources import collect_texts, is_hub_id
from anglekit.data.spec import hub_source, parse_spec
from anglekit.data.splits import normalize_split
from anglekit.data.triplets import read_triplets
from anglekit.errors import ConfigError, DataError, InputPathError

__all__ = [  # DATA_ENV_VAR, default_data_root and normalize_split are re-exported from root and splits
    "DATA_ENV_VAR",
    "KNOWN_DATASETS",
    "NLI_DATASETS",
    "SENTENCE_CORPORA",
    "KnownDataset",
    "default_data_root",
    "detect_dataset",
    "is_known_nli_name",
    "is_known_sentence_name",
    "is_snli_dir",
    "known_pair_dataset",
    "load_dataset_by_name",
    "load_mrpc",
    "load_sentences_by_name",
    "load_sick",
    "load_stsb",
    "load_triplets_by_name",
    "normalize_split",
    "pair_sentences",
    "resolve_dataset",
    "sentence_names",
    "snli_sentences",
]

STSB_FIELDS = ("genre", "file", "year", "id", "score", "sentence1", "sentence2")
_PAIR_COLUMNS_SICK = {"text1": "sentence_A", "text2": "sentence_B", "label": "relatedness_score"}
_PAIR_COLUMNS_MRPC = {"text1": "#1 String", "text2": "#2 String", "label": "Quality"}


def _split_file(directory: Path, files: dict[str, str], split: str, dataset: str) -> Path:
    canonical = normalize_split(split)
    if canonical not in files:
        have = ", ".join(files)
        raise ConfigError(f"{dataset} at {directory} has no {canonical!r} split (it has: {have})")
    path = directory / files[canonical]
    if not path.is_file():
        raise DataError(f"expected file {files[canonical]!r} for the {canonical!r} split is missing", source=str(directory))
    return path


def _as_dir_or_file(path: str | os.PathLike[str]) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise InputPathError("no such file or directory", source=os.fspath(path))
    return p


# --------------------------------------------------------------------------------------------
# Local loaders
# --------------------------------------------------------------------------------------------

_STSB_FILES = {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}
_SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
_MRPC_FILES = {"train": "msr-para-train.tsv", "dev": "msr-para-val.tsv", "test": "msr-para-test.tsv"}
_MRPC_SENTEVAL_FILES = {"train": "msr_paraphrase_train.txt", "test": "msr_paraphrase_test.txt"}


def load_stsb(path: str | os.PathLike[str], split: str = "test", *, lenient: bool = False) -> PairDataset:
    """STS-B from a directory holding ``sts-{train,dev,test}.csv`` (or one such file).

    Both ``stsb/`` (original casing) and ``senteval/STS/STSBenchmark/`` (SentEval's tokenised
    copy) work. The files are TAB-separated without header or quoting: genre, file, year, id,
    score, s1, s2; rows with extra trailing columns keep the first 7, fewer than 7 is an error.
    Labels are the 0-5 scores as floats.
    """
    p = _as_dir_or_file(path)
    file = _split_file(p, _STSB_FILES, split, "STS-B") if p.is_dir() else p
    canonical = normalize_split(split)
    return read_delimited(
        file,
        delimiter="\t",
        quoting=csv.QUOTE_NONE,
        has_header=False,
        fieldnames=STSB_FIELDS,
        allow_extra_fields=True,
        columns={"text1": "sentence1", "text2": "sentence2", "label": "score"},
        label_range=(0.0, 5.0),
        lenient=lenient,
        name=f"stsb:{canonical}",
    )


def load_sick(path: str | os.PathLike[str], split: str = "test", *, lenient: bool = False) -> PairDataset:
    """SICK relatedness (SICK-R) from ``senteval/SICK/`` (or one of its files); labels 1-5.

    Splits: ``train`` (SICK_train.txt, 4500), ``dev`` (SICK_trial.txt, 500), ``test``
    (SICK_test_annotated.txt, 4927).
    """
    p = _as_dir_or_file(path)
    file = _split_file(p, _SICK_FILES, split, "SICK") if p.is_dir() else p
    canonical = normalize_split(split)
    return read_pairs(file, format="tsv", columns=_PAIR_COLUMNS_SICK, label_range=(1.0, 5.0), lenient=lenient, name=f"sick:{canonical}")


def load_mrpc(path: str | os.PathLike[str], split: str = "test", *, lenient: bool = False) -> PairDataset:
    """MRPC from ``mrpc/`` (train / dev / test) or SentEval's ``senteval/MRPC/`` (train / test).

    Label = Quality (1 paraphrase, 0 not). The text contains unbalanced quote marks, so the files
    are read without quoting.
    """
    p = _as_dir_or_file(path)
    canonical = normalize_split(split)
    if p.is_dir():
        if any((p / f).is_file() for f in _MRPC_FILES.values()):
            file = _split_file(p, _MRPC_FILES, split, "MRPC")
        elif any((p / f).is_file() for f in _MRPC_SENTEVAL_FILES.values()):
            if canonical == "dev":
                raise ConfigError(f"the SentEval copy of MRPC at {p} has no dev split (only train and test); the 'mrpc' copy (msr-para-val.tsv) has one")
            file = _split_file(p, _MRPC_SENTEVAL_FILES, split, "MRPC")
        else:
            raise DataError("no MRPC files here (msr-para-*.tsv or msr_paraphrase_*.txt)", source=str(p))
    else:
        file = p
    return read_pairs(file, format="tsv", columns=_PAIR_COLUMNS_MRPC, label_range=(0.0, 1.0), lenient=lenient, name=f"mrpc:{canonical}")


# --------------------------------------------------------------------------------------------
# Pair datasets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KnownDataset:
    """A pair dataset the catalogue knows: how to find it locally and where it is on the hub."""

    name: str
    loader: Callable[..., PairDataset]  # loader(path, split, lenient=)
    local_dirs: tuple[str, ...]  # relative to the data root, first found wins
    marker_files: tuple[str, ...]  # any of these in a directory identifies the dataset
    hub_id: str
    hub_config: str | None
    hub_columns: dict[str, str]
    hub_splits: dict[str, str]  # canonical split -> hub split
    hub_label_range: tuple[float, float]
    hub_note: str = ""


KNOWN_DATASETS: dict[str, KnownDataset] = {
    "stsb": KnownDataset(
        name="stsb",
        loader=load_stsb,
        local_dirs=("stsb", "senteval/STS/STSBenchmark", "STSBenchmark"),
        marker_files=tuple(_STSB_FILES.values()),
        hub_id="sentence-transformers/stsb",
        hub_config=None,
        hub_columns={"text1": "sentence1", "text2": "sentence2", "label": "score"},
        hub_splits={"train": "train", "dev": "validation", "test": "test"},
        hub_label_range=(0.0, 1.0),
        hub_note="scores divided by 5 (0-1)",
    ),
    "sick": KnownDataset(
        name="sick",
        loader=load_sick,
        local_dirs=("senteval/SICK", "SICK", "sick"),
        marker_files=tuple(_SICK_FILES.values()),
        hub_id="mteb/sickr-sts",
        hub_config=None,
        hub_columns={"text1": "sentence1", "text2": "sentence2", "label": "score"},
        hub_splits={"test": "test"},
        hub_label_range=(1.0, 5.0),
        hub_note="MTEB's copy: all 9,927 SICK pairs in one 'test' split",
    ),
    "mrpc": KnownDataset(
        name="mrpc",
        loader=load_mrpc,
        local_dirs=("mrpc", "senteval/MRPC", "MRPC"),
        marker_files=(*_MRPC_FILES.values(), *_MRPC_SENTEVAL_FILES.values()),
        hub_id="nyu-mll/glue",
        hub_config="mrpc",
        hub_columns={"text1": "sentence1", "text2": "sentence2", "label": "label"},
        hub_splits={"train": "train", "dev": "validation"},
        hub_label_range=(0.0, 1.0),
        hub_note="GLUE's test labels are hidden (-1); use a local copy for the test split",
    ),
    "github-issues": KnownDataset(
        name="github-issues",
        loader=load_github_issues,
        local_dirs=("github-issues", "github_issues", "github-issue-similarity"),
        marker_files=(GITHUB_ISSUES_MANIFEST,),
        hub_id=GITHUB_ISSUES_HUB_ID,
        hub_config=None,
        hub_columns={"text1": "text1", "text2": "text2", "label": "label"},
        hub_splits=dict(GITHUB_ISSUES_SPLITS),
        hub_label_range=(0.0, 1.0),
        hub_note="labels 0/1 (duplicate issues); splits train / valid / test",
    ),
}

_NAME_ALIASES = {
    "stsb": "stsb",
    "sts-b": "stsb",
    "stsbenchmark": "stsb",
    "sts-benchmark": "stsb",
    "sick": "sick",
    "sick-r": "sick",
    "sickr": "sick",
    "sick-sts": "sick",
    "mrpc": "mrpc",
    **{name: "github-issues" for name in GITHUB_ISSUES_NAMES},
}

# --------------------------------------------------------------------------------------------
# Sentence corpora and NLI sets
# --------------------------------------------------------------------------------------------

SENTENCE_CORPORA: dict[str, tuple[str, ...]] = {
    "mr": ("senteval/MR/rt-polarity.pos", "senteval/MR/rt-polarity.neg"),
    "cr": ("senteval/CR/custrev.pos", "senteval/CR/custrev.neg"),
    "subj": ("senteval/SUBJ/subj.objective", "senteval/SUBJ/subj.subjective"),
    "mpqa": ("senteval/MPQA/mpqa.pos", "senteval/MPQA/mpqa.neg"),
}
"""Known one-sentence-a-line corpora: name -> files under the data root."""

_FLICKR_NAMES = ("flickr30k", "flickr")
_FLICKR_DIR = "flickr30k"
_FLICKR_FILES = {"train": ("Train", "train"), "dev": ("Val", "val"), "test": ("Test", "test")}  # folder, file stem

NLI_DATASETS: dict[str, tuple[str, str | None, dict[str, str]]] = {
    "snli": ("stanfordnlp/snli", None, {"train": "train", "dev": "validation", "test": "test"}),
    "mnli": ("nyu-mll/multi_nli", None, {"train": "train", "dev": "validation_matched", "test": "validation_mismatched"}),
    "all-nli": ("sentence-transformers/all-nli", "triplet", {"train": "train", "dev": "dev", "test": "test"}),
}
"""NLI sets by name: hub id, config, canonical split -> hub split. SNLI is read locally when present."""
_NLI_ALIASES = {"snli": "snli", "mnli": "mnli", "multinli": "mnli", "multi_nli": "mnli", "all-nli": "all-nli", "allnli": "all-nli"}
_SNLI_DIRS = ("senteval/SNLI", "SNLI", "snli")


# --------------------------------------------------------------------------------------------
# Lookups
# --------------------------------------------------------------------------------------------


def known_pair_dataset(name: str) -> KnownDataset | None:
    """The pair dataset a name or alias (``sts-b``, ``sick-r``, ``gis`` ...) stands for, if any."""
    key = _NAME_ALIASES.get(name.lower())
    return KNOWN_DATASETS[key] if key else None


def is_known_sentence_name(name: str) -> bool:
    """Whether ``name`` is a sentence corpus of the catalogue (a pair dataset counts: its texts)."""
    key = name.lower()
    return key in SENTENCE_CORPORA or key in _FLICKR_NAMES or key == "snli" or known_pair_dataset(name) is not None


def is_known_nli_name(name: str) -> bool:
    """Whether ``name`` is an NLI set of the catalogue (``snli``, ``mnli``, ``all-nli`` and aliases)."""
    return name.lower() in _NLI_ALIASES


def sentence_names() -> list[str]:
    """The names :func:`load_sentences_by_name` knows, sorted (for messages)."""
    return sorted([*SENTENCE_CORPORA, _FLICKR_DIR, "snli", *KNOWN_DATASETS])


def detect_dataset(directory: str | os.PathLike[str]) -> str | None:
    """Which known pair dataset (``"stsb"``, ``"sick"``, ``"mrpc"``, ``"github-issues"``) a directory
    holds, by its files."""
    d = Path(directory)
    if not d.is_dir():
        return None
    for known in KNOWN_DATASETS.values():
        if any((d / f).is_file() for f in known.marker_files):
            return known.name
    return None


def is_snli_dir(directory: Path) -> bool:
    """Whether ``directory`` holds SentEval's SNLI layout (``labels.<split>`` files)."""
    return any((directory / f"labels.{split}").is_file() for split in ("train", "dev", "test"))


def _local_dir(known: KnownDataset, root: Path | None) -> Path | None:
    if root is None:
        return None
    for rel in known.local_dirs:
        candidate = root / rel
        if detect_dataset(candidate) == known.name:
            return candidate
    return None


def _snli_dir(root: Path | None) -> Path | None:
    if root is None:
        return None
    for rel in _SNLI_DIRS:
        if is_snli_dir(root / rel):
            return root / rel
    return None


# --------------------------------------------------------------------------------------------
# Loading by name
# --------------------------------------------------------------------------------------------


def _load_from_hub(known: KnownDataset, split: str, lenient: bool, root: Path | None) -> PairDataset:
    canonical = normalize_split(split)
    if canonical not in known.hub_splits:
        raise ConfigError(
            f"the hub copy {known.hub_id!r} of {known.name} has no usable {canonical!r} split ({known.hub_note}), "
            f"and {missing_locally(known.name, known.local_dirs, root)}"
        )
    try:
        return read_hub_pairs(
            known.hub_id,
            known.hub_config,
            known.hub_splits[canonical],
            known.hub_columns,
            known.hub_label_range,
            lenient,
            f"{known.name}:{canonical}",
        )
    except DataError as exc:
        raise DataError(f"{missing_locally(known.name, known.local_dirs, root)}; the hub copy failed too: {exc}") from exc


def load_dataset_by_name(
    name_or_path: str | os.PathLike[str],
    split: str | None = "test",
    *,
    data_root: str | os.PathLike[str] | None = None,
    lenient: bool = False,
    **read_kwargs: Any,
) -> PairDataset:
    """Load pairs by catalogue name, local path or hub id.

    Resolution, first match wins:

    1. an existing file: :func:`read_pairs` on it (``split`` must be ``None``: a file is one split;
       ``read_kwargs`` such as ``columns``/``format``/``label_range`` are passed on);
    2. an existing directory: a known layout (STS-B, SICK, MRPC, GitHub Issues, detected by file
       names) is read with its loader; otherwise a ``datasets.save_to_disk`` directory via :func:`read_pairs`;
    3. a known name (``stsb``/``sts-b``, ``sick``/``sick-r``, ``mrpc``, ``github-issues``): the local
       copy under ``data_root`` (default :func:`default_data_root`) when there is one, else the hub
       copy listed in this module's docstring (needs the network or the HF cache);
    4. anything else that looks like a hub id (``org/name``, or ``org/name/config``):
       ``datasets.load_dataset`` with ``split``.
    """
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    if path.is_file():
        if split is not None:
            raise ConfigError(f"split={split!r} does not apply to the single file {text}; a file is one split")
        return read_pairs(path, lenient=lenient, **read_kwargs)
    if path.is_dir():
        detected = detect_dataset(path)
        if detected is not None:
            if read_kwargs:
                raise ConfigError(f"{sorted(read_kwargs)} do not apply to the known dataset {detected!r} at {text}")
            return KNOWN_DATASETS[detected].loader(path, split or "test", lenient=lenient)
        return read_pairs(path, split=split, lenient=lenient, **read_kwargs)
    known = known_pair_dataset(text)
    if known is not None:
        if read_kwargs:
            raise ConfigError(f"{sorted(read_kwargs)} do not apply to the known dataset {known.name!r}")
        root = explicit_or_default_root(data_root)
        local = _local_dir(known, root)
        if local is not None:
            return known.loader(local, split or "test", lenient=lenient)
        return _load_from_hub(known, split or "test", lenient, root)
    parts = text.split("/")
    if len(parts) == 3 and all(parts) and is_hub_id("/".join(parts[:2])):
        if not split:
            raise ConfigError(f"loading {text!r} from the hub needs a split")
        columns = read_kwargs.pop("columns", None)
        label_range = read_kwargs.pop("label_range", None)
        name = read_kwargs.pop("name", None)
        if read_kwargs:
            raise ConfigError(f"unknown options for a hub dataset: {sorted(read_kwargs)}")
        return read_hub_pairs("/".join(parts[:2]), parts[2], split, columns, label_range, lenient, name)
    close = similar_known_name(text)
    if close is not None and "/" not in text:
        raise ConfigError(f"{text!r} is not a known dataset name, a file or a folder; did you mean {close!r}? (a hub dataset of that name: hf:{text})")
    if is_hub_id(text):
        if not split:
            raise ConfigError(f"loading {text!r} from the hub needs a split")
        return read_pairs(text, format="hub", split=split, lenient=lenient, **read_kwargs)
    raise InputPathError("no such file or directory, and not a known dataset name or a hub id", source=text)


def known_names() -> list[str]:
    """Every name and alias the catalogue knows (pairs, sentence corpora, NLI sets)."""
    return sorted({*_NAME_ALIASES, *SENTENCE_CORPORA, *_FLICKR_NAMES, *_NLI_ALIASES})


def similar_known_name(text: str) -> str | None:
    """The known dataset name ``text`` is most likely a typo of (None when it is one, or none is close)."""
    import difflib

    key = text.lower()
    names = known_names()
    if key in names:
        return None
    matches = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
    return matches[0] if matches else None


def _plain_texts(path: Path, lenient: bool) -> SentenceDataset:
    sink = collect_texts(path, None, lenient, plain=True)
    return SentenceDataset(sink.texts, name=path.name, source=str(path), skipped=dict(sink.skipped))


def _joined_corpus(name: str, files: list[Path], source: Path, root: Path, places: tuple[str, ...], lenient: bool) -> SentenceDataset:
    if not files[0].is_file():
        raise DataError(missing_locally(name, places, root), source=str(files[0]))
    joined = SentenceDataset.concatenate([_plain_texts(path, lenient) for path in files], name=name).deduplicate()
    joined.source = str(source)
    return joined


def snli_sentences(directory: Path, split: str, lenient: bool = False) -> SentenceDataset:
    """The distinct premises and hypotheses of ``split`` in SentEval's SNLI folder ``directory``."""
    s1, s2, _ = snli_files(directory, split)
    texts = collect_texts(s1, None, lenient, plain=True).texts + collect_texts(s2, None, lenient, plain=True).texts
    return SentenceDataset(texts, name=f"snli:{normalize_split(split)}", source=str(directory)).deduplicate()


def pair_sentences(pairs: PairDataset, source: str | None = None) -> SentenceDataset:
    """The distinct texts of both sides of a pair dataset, in order of first appearance."""
    texts = list(dict.fromkeys(pairs.text1 + pairs.text2))
    return SentenceDataset(texts, name=pairs.name, source=source or pairs.source or pairs.name)


def load_sentences_by_name(name: str, split: str, *, data_root: str | os.PathLike[str] | None = None, lenient: bool = False) -> SentenceDataset | None:
    """The distinct sentences of a named corpus (see the module doc), or ``None`` for an unknown name.

    Sentence corpora are read from the data root only; a pair dataset is loaded as
    :func:`load_dataset_by_name` does (local copy, else hub).
    """
    key = name.lower()
    root = explicit_or_default_root(data_root)
    if key in SENTENCE_CORPORA:
        rels = SENTENCE_CORPORA[key]
        places = tuple(sorted({str(Path(rel).parent) for rel in rels}))
        if root is None:
            raise ConfigError(missing_locally(key, places, None))
        return _joined_corpus(key, [root / rel for rel in rels], root / Path(rels[0]).parent, root, places, lenient)
    if key in _FLICKR_NAMES:
        if root is None:
            raise ConfigError(missing_locally(_FLICKR_DIR, (_FLICKR_DIR,), None))
        canonical = normalize_split(split)
        folder, stem = _FLICKR_FILES[canonical]
        base = root / _FLICKR_DIR / folder
        files = [base / f"{stem}.{j}" for j in range(1, 6)]
        return _joined_corpus(f"{_FLICKR_DIR}:{canonical}", files, base, root, (_FLICKR_DIR,), lenient)
    if key == "snli":
        local = _snli_dir(root)
        if local is None:
            raise DataError(missing_locally("snli", _SNLI_DIRS, root))
        return snli_sentences(local, split, lenient)
    if known_pair_dataset(name) is not None:
        return pair_sentences(load_dataset_by_name(name, split, data_root=root, lenient=lenient))
    return None


def load_triplets_by_name(
    name: str,
    split: str,
    *,
    data_root: str | os.PathLike[str] | None = None,
    lenient: bool = False,
    nli_pairing: str = "zip",
) -> TripletDataset | None:
    """Triplets of a named NLI set, or ``None`` for an unknown name.

    SNLI is read from its local SentEval copy when the data root has the split, else from the hub
    like MultiNLI and all-nli (``hub id, config, split`` in :data:`NLI_DATASETS`).
    """
    key = _NLI_ALIASES.get(name.lower())
    if key is None:
        return None
    canonical = normalize_split(split)
    hub_id, config, splits = NLI_DATASETS[key]
    root = explicit_or_default_root(data_root) if key == "snli" else None
    if key == "snli":
        local = _snli_dir(root)
        if local is not None and (local / f"labels.{canonical}").is_file():
            return load_snli(local, canonical, pairing=nli_pairing, lenient=lenient)
    try:
        return read_triplets(
            hub_id,
            format="hub",
            config=config,
            split=splits[canonical],
            lenient=lenient,
            nli_pairing=nli_pairing,
            name=f"{key}:{canonical}",
        )
    except DataError as exc:
        if key != "snli":
            raise
        raise DataError(f"{missing_locally(f'snli:{canonical}', _SNLI_DIRS, root)}; the hub copy failed too: {exc}") from exc


# --------------------------------------------------------------------------------------------
# The --data spec of the pair objectives
# --------------------------------------------------------------------------------------------


def resolve_dataset(
    spec: str,
    default_split: str = "test",
    *,
    data_root: str | os.PathLike[str] | None = None,
    lenient: bool = False,
) -> PairDataset:
    """Resolve a ``--data`` string of the command line to a dataset.

    Grammar (parsed by :func:`anglekit.data.spec.parse_spec`)::

        spec   := [ "hf:" ] source [ ":" split ]
        source := NAME          known dataset: stsb (sts-b), sick (sick-r), mrpc, github-issues
                | PATH          a file (csv/tsv/jsonl/json/parquet) or a directory (a known
                                layout, or a datasets.save_to_disk directory)
                | ORG/NAME[/CONFIG]   a Hugging Face hub dataset (and config)
        split  := train | dev | validation | val | test | any split name of a saved/hub dataset

    Examples: ``stsb:test``, ``sick`` (split = ``default_split``), ``/data/stsb:dev``,
    ``./mrpc:train``, ``pairs.jsonl``, ``hf:sentence-transformers/stsb:validation``,
    ``nyu-mll/glue/mrpc:validation``.

    Rules: the text after the last ``:`` is the split when it looks like one (letters, digits,
    ``-``, ``_``) and the whole spec is not an existing path. An existing path wins over a known
    name; a relative path that does not exist from the current directory is also tried under the
    data root (``$ANGLEKIT_DATA``, else the per-user data folder). ``hf:`` forces the hub. A single
    file has no splits: ``file.csv:test`` is an error (``file.csv`` alone is fine).
    """
    source, split, explicit, force_hub = parse_spec(spec, default_split)
    spec = spec.strip()
    if force_hub:
        hub_id, config = hub_source(source, spec)
        if config is None:
            return read_pairs(hub_id, format="hub", split=split, lenient=lenient)
        return load_dataset_by_name(source, split, lenient=lenient)

    path = Path(source).expanduser()
    if not path.exists() and not path.is_absolute() and known_pair_dataset(source) is None:
        root = Path(data_root).expanduser() if data_root is not None else default_data_root()
        if root is not None and (root / source).exists():
            path = root / source
    if path.is_file():
        if explicit:
            raise ConfigError(f"{spec!r}: {path} is a single file and has no splits; drop ':{split}'")
        return load_dataset_by_name(path, None, lenient=lenient)
    if path.exists():
        return load_dataset_by_name(path, split, lenient=lenient)
    return load_dataset_by_name(source, split, data_root=data_root, lenient=lenient)
