"""NLI pairs -> triplets for supervised SimCSE: entailment as positive, contradiction as hard negative.

Sources:

* SentEval's SNLI copy (``senteval/SNLI``: ``s1.<split>``, ``s2.<split>``, ``labels.<split>``,
  line-aligned premise / hypothesis / label; ``dev`` and ``test`` offline): :func:`load_snli`.
* Any table with ``premise``, ``hypothesis`` and ``label`` columns: hub sets ``stanfordnlp/snli``,
  ``nyu-mll/multi_nli``, ``sentence-transformers/all-nli`` (config ``pair-class``), or local files,
  read with :func:`anglekit.data.triplets.read_triplets`, which calls :func:`nli_to_triplets`.
  (``sentence-transformers/all-nli`` config ``triplet`` is triplets already: anchor, positive,
  negative.)

Labels: the names ``entailment`` / ``neutral`` / ``contradiction`` (any case) or the Hugging Face
integers 0 / 1 / 2. No gold label (``-1`` on the hub, ``-`` in SNLI's raw files) is not an error:
such rows are counted as unused. Anything else is a DataError naming the source, row and field.

Pairing rule. Rows are grouped by premise (the exact text), groups in order of first appearance.
In each group the entailment hypotheses E_1..E_k and the contradiction hypotheses C_1..C_l are
taken in file order, and:

* ``zip`` (default): (premise, E_j, C_j) for j <= min(k, l). SNLI's annotators wrote one
  hypothesis of each label per premise and round, stored together, so the j-th entailment and the
  j-th contradiction come from the same round: this rebuilds the one-triplet-per-round layout of
  SimCSE's ``nli_for_simcse.csv``. The surplus of either side is counted as unused.
* ``cycle``: every entailment once, with C_{(j mod l)}: more triplets, contradictions reused.
* ``all``: every (E_i, C_j) combination (the layout of sentence-transformers/all-nli ``triplet``).

Premises with no entailment or no contradiction give no triplet; neutral pairs are never used.
Everything not used is counted in ``TripletDataset.skipped`` under ``unused: <reason>``.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from anglekit.data.records import TripletDataset
from anglekit.data.sources import collect_texts, read_lines, text_problem
from anglekit.data.splits import normalize_split
from anglekit.errors import ConfigError, DataError

__all__ = ["NLI_LABELS", "PAIRINGS", "load_snli", "nli_to_triplets", "parse_nli_label", "snli_files"]

NLI_LABELS = ("entailment", "neutral", "contradiction")
"""Label names; the Hugging Face integer of each is its index here."""
PAIRINGS = ("zip", "cycle", "all")
_NO_GOLD = {"-", "", "-1"}


def parse_nli_label(value: Any) -> str | None:
    """``entailment`` / ``neutral`` / ``contradiction``, or ``None`` for "no gold label".

    Raises ValueError with a readable reason for anything else.
    """
    if isinstance(value, bool):
        raise ValueError(f"NLI label must be a name or 0/1/2, got bool {value!r}")
    if isinstance(value, numbers.Integral):
        number = int(value)
        if number == -1:
            return None
        if 0 <= number < len(NLI_LABELS):
            return NLI_LABELS[number]
        raise ValueError(f"NLI label {number} is not 0 (entailment), 1 (neutral), 2 (contradiction) or -1 (no gold label)")
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _NO_GOLD:
            return None
        if text in NLI_LABELS:
            return text
        if text in {"0", "1", "2"}:
            return NLI_LABELS[int(text)]
        raise ValueError(f"NLI label {value!r} is not one of {', '.join(NLI_LABELS)} (or 0/1/2, -1/- for no gold label)")
    if value is None:
        return None
    raise ValueError(f"NLI label must be a name or 0/1/2, got {type(value).__name__} {value!r}")


def nli_to_triplets(
    premises: Sequence[Any],
    hypotheses: Sequence[Any],
    labels: Sequence[Any],
    *,
    pairing: str = "zip",
    name: str = "nli",
    source: str = "",
    lenient: bool = False,
    rows: Sequence[int] | None = None,
    field_names: tuple[str, str, str] = ("premise", "hypothesis", "label"),
    field_sources: tuple[str, str, str] | None = None,
    skipped: dict[str, int] | None = None,
) -> TripletDataset:
    """Triplets (premise, entailment, contradiction) from NLI pairs; see the module's pairing rule.

    ``rows`` gives each record's row number for error messages (default 1, 2, ...);
    ``field_sources`` names a different source per field (SNLI's three files). A bad text or label
    raises DataError (``lenient``: skipped and counted).
    """
    if pairing not in PAIRINGS:
        raise ConfigError(f"unknown NLI pairing {pairing!r}; valid values: {', '.join(PAIRINGS)}")
    if not (len(premises) == len(hypotheses) == len(labels)):
        raise DataError(f"premises, hypotheses and labels differ in length: {len(premises)}, {len(hypotheses)}, {len(labels)}", source=source or None)
    row_numbers = list(rows) if rows is not None else list(range(1, len(premises) + 1))
    sources = field_sources or (source, source, source)
    counts: dict[str, int] = dict(skipped or {})

    def count(reason: str, n: int = 1) -> None:
        if n:
            counts[reason] = counts.get(reason, 0) + n

    groups: dict[str, tuple[list[str], list[str]]] = {}
    for index, (premise, hypothesis, raw_label) in enumerate(zip(premises, hypotheses, labels, strict=True)):
        row = row_numbers[index]
        try:
            label = parse_nli_label(raw_label)
        except ValueError as exc:
            if not lenient:
                raise DataError(str(exc), source=sources[2] or None, row=row, field=field_names[2]) from None
            count("invalid label")
            continue
        bad = None
        for value, field_index in ((premise, 0), (hypothesis, 1)):
            problem = text_problem(value)
            if problem is not None:
                bad = (problem, field_index)
                break
        if bad is not None:
            (reason, message), field_index = bad
            if not lenient:
                raise DataError(message, source=sources[field_index] or None, row=row, field=field_names[field_index])
            count(reason)
            continue
        if label is None:
            count("unused: no gold label")
            continue
        if label == "neutral":
            count("unused: neutral")
            continue
        entail, contra = groups.setdefault(premise, ([], []))
        (entail if label == "entailment" else contra).append(hypothesis)

    anchor, positive, negative = _pair_hypotheses(groups, pairing, count)
    if not anchor:
        raise DataError("no triplets: no premise has both an entailment and a contradiction hypothesis", source=source or None)
    return TripletDataset(anchor, positive, negative, name=name, source=source, skipped=counts)


def _pair_hypotheses(groups: dict[str, tuple[list[str], list[str]]], pairing: str, count: Callable[[str, int], None]) -> tuple[list[str], list[str], list[str]]:
    """(anchors, positives, negatives): each premise's entailments paired with its contradictions
    by ``pairing`` (the module's rule); what is left unpaired is counted."""
    anchor: list[str] = []
    positive: list[str] = []
    negative: list[str] = []
    for premise, (entail, contra) in groups.items():
        if not entail or not contra:
            count("unused: entailment without a contradiction", len(entail))
            count("unused: contradiction without an entailment", len(contra))
            continue
        if pairing == "zip":
            n = min(len(entail), len(contra))
            chosen = list(zip(entail[:n], contra[:n], strict=True))
            count("unused: entailment without a contradiction", len(entail) - n)
            count("unused: contradiction without an entailment", len(contra) - n)
        elif pairing == "cycle":
            chosen = [(e, contra[j % len(contra)]) for j, e in enumerate(entail)]
            count("unused: contradiction without an entailment", max(0, len(contra) - len(entail)))
        else:  # all
            chosen = [(e, c) for e in entail for c in contra]
        for e, c in chosen:
            anchor.append(premise)
            positive.append(e)
            negative.append(c)
    return anchor, positive, negative


def snli_files(directory: str | os.PathLike[str], split: str) -> tuple[Path, Path, Path]:
    """The ``s1``, ``s2`` and ``labels`` files of ``split`` in SentEval's SNLI folder."""
    key = normalize_split(split)
    root = Path(directory).expanduser()
    files = tuple(root / f"{stem}.{key}" for stem in ("s1", "s2", "labels"))
    missing = [p.name for p in files if not p.is_file()]
    if missing:
        have = sorted({p.suffix.lstrip(".") for p in root.glob("labels.*")}) if root.is_dir() else []
        raise DataError(
            f"no SNLI {key!r} split here: missing {', '.join(missing)} (splits present: {', '.join(have) or 'none'}; "
            "SNLI's train set is not in the offline copy: use hf:stanfordnlp/snli:train)",
            source=str(root),
        )
    return files  # type: ignore[return-value]


def load_snli(directory: str | os.PathLike[str], split: str = "dev", *, pairing: str = "zip", lenient: bool = False) -> TripletDataset:
    """Triplets from SentEval's SNLI copy (``s1.<split>``, ``s2.<split>``, ``labels.<split>``).

    Texts are kept as in the files (tokenised, with a trailing space). The three files must have
    the same number of lines; a blank line is an error naming its file and line.
    """
    s1, s2, lab = snli_files(directory, split)
    premises = collect_texts(s1, plain=True).texts
    hypotheses = collect_texts(s2, plain=True).texts
    labels = read_lines(lab, what="SNLI labels, one a line").lines  # a blank line: no gold label
    lengths = {s1.name: len(premises), s2.name: len(hypotheses), lab.name: len(labels)}
    if len(set(lengths.values())) > 1:
        raise DataError(f"SNLI files are not line-aligned: {lengths}", source=str(Path(directory)))
    key = normalize_split(split)
    return nli_to_triplets(
        premises,
        hypotheses,
        labels,
        pairing=pairing,
        name=f"snli:{key}",
        source=str(Path(directory) / f"{{s1,s2,labels}}.{key}"),
        lenient=lenient,
        field_names=("text", "text", "label"),
        field_sources=(str(s1), str(s2), str(lab)),
    )
