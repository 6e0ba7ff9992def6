"""Record types: labelled pairs, plain sentences and triplets, each as a validated dataset.

A :class:`PairDataset`, :class:`SentenceDataset` or :class:`TripletDataset` is what the readers
return. Each is validated on construction (every text a non-empty ``str``, every label a finite
float inside the declared range, all columns of one length), so that code downstream (collator,
trainer, evaluation) can trust it without re-checking. Record types know no reader: reading is
:mod:`~anglekit.data.readers`, :mod:`~anglekit.data.sentences` and :mod:`~anglekit.data.triplets`.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from anglekit.errors import ConfigError, DataError
from anglekit.io.text import is_blank

__all__ = ["NTupleRecord", "PairDataset", "PairRecord", "SentenceDataset", "TripletDataset", "TripletRecord", "check_label_range"]


def check_label_range(label_range: Any) -> tuple[float, float] | None:
    """Normalise a declared ``(low, high)`` label range; ``None`` means undeclared."""
    if label_range is None:
        return None
    try:
        low, high = label_range
        low, high = float(low), float(high)
    except (TypeError, ValueError):
        raise ConfigError(f"label_range must be a (low, high) pair of numbers, got {label_range!r}") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ConfigError(f"label_range must be finite with low <= high, got {label_range!r}")
    return (low, high)


def _format_number(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class PairRecord:
    """One labelled pair of texts. ``label`` is a float, never rounded or cast to int."""

    text1: str
    text2: str
    label: float

    def __post_init__(self) -> None:
        for name in ("text1", "text2"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise DataError(f"text must be a str, got {type(value).__name__}", field=name)
        label = self.label
        if isinstance(label, bool) or not isinstance(label, numbers.Real):
            raise DataError(f"label must be a number, got {type(label).__name__}", field="label")
        object.__setattr__(self, "label", float(label))


@dataclass(eq=False)
class PairDataset:
    """A validated dataset of labelled text pairs, stored column-wise.

    Attributes:
        text1, text2: the two sides of each pair (non-empty strings, kept exactly as read).
        labels: float64 array, one label per pair (finite; inside ``label_range`` when declared).
        name: a short display name (``"stsb:test"``, a file stem, ...).
        source: where the data came from (a path, a hub id, ``"<python list>"``).
        label_range: the declared ``(low, high)`` range of labels (inclusive), or ``None``.
        skipped: what a lenient read skipped, as ``reason -> count`` (empty for a strict read).
    """

    text1: list[str]
    text2: list[str]
    labels: np.ndarray
    name: str = ""
    source: str = ""
    label_range: tuple[float, float] | None = None
    skipped: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = self.source or self.name or None
        self.text1 = list(self.text1)
        self.text2 = list(self.text2)
        try:
            labels = np.asarray(self.labels, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DataError(f"labels must be numbers: {exc}", source=where, field="label") from None
        if labels.ndim != 1:
            raise DataError(f"labels must be 1-dimensional, got shape {labels.shape}", source=where, field="label")
        self.labels = labels
        if not (len(self.text1) == len(self.text2) == len(self.labels)):
            raise DataError(
                f"text1, text2 and labels differ in length: {len(self.text1)}, {len(self.text2)}, {len(self.labels)}",
                source=where,
            )
        for column_name, column in (("text1", self.text1), ("text2", self.text2)):
            for i, text in enumerate(column):
                if not isinstance(text, str):
                    raise DataError(f"text must be a str, got {type(text).__name__}", source=where, row=i + 1, field=column_name)
                if is_blank(text):
                    raise DataError("text is empty", source=where, row=i + 1, field=column_name)
        bad = np.flatnonzero(~np.isfinite(self.labels))
        if bad.size:
            raise DataError(f"label is not finite ({self.labels[bad[0]]})", source=where, row=int(bad[0]) + 1, field="label")
        self.label_range = check_label_range(self.label_range)
        if self.label_range is not None and len(self.labels):
            low, high = self.label_range
            outside = np.flatnonzero((self.labels < low) | (self.labels > high))
            if outside.size:
                i = int(outside[0])
                raise DataError(
                    f"label {_format_number(self.labels[i])} is outside the declared range [{_format_number(low)}, {_format_number(high)}]",
                    source=where,
                    row=i + 1,
                    field="label",
                )
        self.skipped = {str(k): int(v) for k, v in dict(self.skipped).items()}

    @classmethod
    def from_records(
        cls,
        records: Iterable[PairRecord | Sequence[Any]],
        *,
        name: str = "",
        source: str = "",
        label_range: tuple[float, float] | None = None,
    ) -> PairDataset:
        """Build from :class:`PairRecord` objects or ``(text1, text2, label)`` sequences."""
        text1: list[str] = []
        text2: list[str] = []
        labels: list[float] = []
        where = source or name or None
        for i, record in enumerate(records):
            if not isinstance(record, PairRecord):
                if isinstance(record, (str, bytes)) or not isinstance(record, Sequence) or len(record) != 3:
                    raise DataError(
                        f"expected a PairRecord or a (text1, text2, label) triple, got {type(record).__name__}",
                        source=where,
                        row=i + 1,
                    )
                t1, t2, label = record
                for field_name, value in (("text1", t1), ("text2", t2)):
                    if not isinstance(value, str):
                        raise DataError(f"text must be a str, got {type(value).__name__}", source=where, row=i + 1, field=field_name)
                if isinstance(label, bool) or not isinstance(label, numbers.Real):
                    raise DataError(f"label must be a number, got {type(label).__name__}", source=where, row=i + 1, field="label")
                record = PairRecord(t1, t2, label)
            text1.append(record.text1)
            text2.append(record.text2)
            labels.append(record.label)
        return cls(text1, text2, np.asarray(labels, dtype=np.float64), name=name, source=source, label_range=label_range)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self.select(range(*index.indices(len(self))))
        i = operator.index(index)
        n = len(self)
        if i < -n or i >= n:
            raise IndexError(f"index {index} out of range for a dataset of {n} pairs")
        return PairRecord(self.text1[i], self.text2[i], float(self.labels[i]))

    def __iter__(self) -> Iterator[PairRecord]:
        for t1, t2, label in zip(self.text1, self.text2, self.labels.tolist(), strict=True):
            yield PairRecord(t1, t2, label)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PairDataset):
            return NotImplemented
        return (
            self.text1 == other.text1
            and self.text2 == other.text2
            and np.array_equal(self.labels, other.labels)
            and self.name == other.name
            and self.source == other.source
            and self.label_range == other.label_range
            and self.skipped == other.skipped
        )

    __hash__ = None  # type: ignore[assignment]  # mutable container

    def __repr__(self) -> str:
        return f"PairDataset(name={self.name!r}, source={self.source!r}, pairs={len(self)}, label_range={self.label_range})"

    def select(self, indices: Iterable[int] | np.ndarray) -> PairDataset:
        """A new dataset with the pairs at ``indices`` (in that order; repeats allowed).

        A boolean mask of the dataset's length is accepted too. Metadata (name, source,
        label_range, skipped) is carried over.
        """
        idx = np.asarray(list(indices) if not isinstance(indices, np.ndarray) else indices)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise IndexError(f"boolean mask of shape {idx.shape} does not match {len(self)} pairs")
            idx = np.flatnonzero(idx)
        elif idx.size == 0:
            idx = idx.astype(np.int64)
        elif not np.issubdtype(idx.dtype, np.integer):
            raise TypeError(f"indices must be integers, got dtype {idx.dtype}")
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"index out of range for a dataset of {n} pairs")
        positions = [int(i) for i in idx.tolist()]
        return PairDataset(
            [self.text1[i] for i in positions],
            [self.text2[i] for i in positions],
            self.labels[idx] if idx.size else np.zeros(0, dtype=np.float64),
            name=self.name,
            source=self.source,
            label_range=self.label_range,
            skipped=dict(self.skipped),
        )

    def summary(self) -> str:
        """One readable paragraph: size, label statistics, declared range and anything skipped."""
        head = self.name or "pairs"
        if self.source and self.source != self.name:
            head += f" ({self.source})"
        parts = [f"{head}: {len(self)} pairs"]
        if len(self):
            labels = self.labels
            distinct = np.unique(labels)
            stats = f"labels {_format_number(labels.min())}..{_format_number(labels.max())}, mean {labels.mean():.3f}"
            if distinct.size <= 10:
                counts = ", ".join(f"{_format_number(v)}: {int((labels == v).sum())}" for v in distinct)
                stats += f" (values {counts})"
            parts.append(stats)
        if self.label_range is not None:
            low, high = self.label_range
            parts.append(f"declared range [{_format_number(low)}, {_format_number(high)}]")
        text = "; ".join(parts)
        if self.skipped:
            total = sum(self.skipped.values())
            reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(self.skipped.items()))
            text += f"; SKIPPED {total} row{'s' if total != 1 else ''} ({reasons})"
        return text


@dataclass(eq=False)
class SentenceDataset:
    """A validated list of sentences (non-empty strings, kept exactly as read)."""

    texts: list[str]
    name: str = ""
    source: str = ""
    skipped: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = self.source or self.name or None
        self.texts = list(self.texts)
        for i, text in enumerate(self.texts):
            if not isinstance(text, str):
                raise DataError(f"text must be a str, got {type(text).__name__}", source=where, row=i + 1, field="text")
            if is_blank(text):
                raise DataError("text is empty", source=where, row=i + 1, field="text")
        self.skipped = {str(k): int(v) for k, v in dict(self.skipped).items()}

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self.select(range(*index.indices(len(self))))
        return self.texts[operator.index(index)]

    def __iter__(self) -> Iterator[str]:
        return iter(self.texts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SentenceDataset):
            return NotImplemented
        return (self.texts, self.name, self.source, self.skipped) == (other.texts, other.name, other.source, other.skipped)

    __hash__ = None  # type: ignore[assignment]  # mutable container

    def __repr__(self) -> str:
        return f"SentenceDataset(name={self.name!r}, source={self.source!r}, sentences={len(self)})"

    def select(self, indices: Iterable[int] | np.ndarray) -> SentenceDataset:
        """A new dataset with the sentences at ``indices`` (in that order)."""
        positions = [int(i) for i in (indices.tolist() if isinstance(indices, np.ndarray) else indices)]
        return SentenceDataset([self.texts[i] for i in positions], name=self.name, source=self.source, skipped=dict(self.skipped))

    def deduplicate(self) -> SentenceDataset:
        """The distinct sentences in order of first appearance; the removed count is in ``skipped``."""
        distinct = list(dict.fromkeys(self.texts))
        skipped = dict(self.skipped)
        removed = len(self.texts) - len(distinct)
        if removed:
            skipped["duplicate"] = skipped.get("duplicate", 0) + removed
        return SentenceDataset(distinct, name=self.name, source=self.source, skipped=skipped)

    @classmethod
    def concatenate(cls, parts: Iterable[SentenceDataset], *, name: str | None = None) -> SentenceDataset:
        """One dataset of all sentences of ``parts`` in order (skipped counts added up)."""
        parts = list(parts)
        if not parts:
            raise DataError("no sentence sources to join")
        texts: list[str] = []
        skipped: dict[str, int] = {}
        for part in parts:
            texts.extend(part.texts)
            for reason, count in part.skipped.items():
                skipped[reason] = skipped.get(reason, 0) + count
        joined_name = name or "+".join(p.name for p in parts)
        return cls(texts, name=joined_name, source="+".join(p.source or p.name for p in parts), skipped=skipped)

    def summary(self) -> str:
        """One readable line: size, distinct count, length statistics, anything skipped."""
        head = self.name or "sentences"
        if self.source and self.source != self.name:
            head += f" ({self.source})"
        text = f"{head}: {len(self)} sentences"
        if self.texts:
            words = np.fromiter((len(t.split()) for t in self.texts), dtype=np.int64, count=len(self.texts))
            text += f", {len(set(self.texts))} distinct, {words.mean():.1f} words on average (max {words.max()})"
        if self.skipped:
            total = sum(self.skipped.values())
            reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(self.skipped.items()))
            text += f"; SKIPPED {total} ({reasons})"
        return text


def _check_text(text: Any, where: str | None, row: int, name: str) -> None:
    if not isinstance(text, str):
        raise DataError(f"text must be a str, got {type(text).__name__}", source=where, row=row, field=name)
    if is_blank(text):
        raise DataError("text is empty", source=where, row=row, field=name)


class TripletRecord(NamedTuple):
    """One triplet; ``negative`` is ``None`` when the data has no hard negatives."""

    anchor: str
    positive: str
    negative: str | None


class NTupleRecord(NamedTuple):
    """One n-tuple row: an anchor, its positive and its hard negatives (n of them)."""

    anchor: str
    positive: str
    negatives: tuple[str, ...]


@dataclass(eq=False)
class TripletDataset:
    """Aligned anchors, positives and (optionally) hard negatives: one per row (``negative``), or
    several (``negatives``, n-tuples: anchor, positive, negative_1..negative_n).

    Attributes:
        anchor, positive: texts (non-empty strings, kept exactly as read).
        negative: hard negatives aligned with them, or ``None`` when there are none.
        name, source: display name and origin.
        skipped: what a lenient read skipped (or an NLI conversion left unused), ``reason -> count``.
        negatives: each row's hard negatives (n-tuples; ``negative`` is then ``None``). Rows hold
            the same number unless the data was read with ``pad_negatives`` (then the training
            pads the shorter rows and masks the padding out of the loss).
        scores: n-tuples read with ``scores=True`` from a source with a teacher's ``positive_score``
            and ``negative_k_score`` columns: each row's scores of its positive and then of each of
            its negatives (finite numbers); ``None`` otherwise.
    """

    anchor: list[str]
    positive: list[str]
    negative: list[str] | None = None
    name: str = ""
    source: str = ""
    skipped: dict[str, int] = field(default_factory=dict)
    negatives: list[tuple[str, ...]] | None = None
    scores: list[tuple[float, ...]] | None = None

    def __post_init__(self) -> None:
        where = self.source or self.name or None
        self._check_scores(where)
        self.anchor = list(self.anchor)
        self.positive = list(self.positive)
        self.negative = None if self.negative is None else list(self.negative)
        columns = [("anchor", self.anchor), ("positive", self.positive)]
        if self.negative is not None:
            columns.append(("negative", self.negative))
        if self.negatives is not None:
            if self.negative is not None:
                raise DataError("give negative (one per row) or negatives (n per row), not both", source=where)
            self.negatives = [tuple(row) for row in self.negatives]
            columns.append(("negatives", self.negatives))  # type: ignore[arg-type]
        lengths = {n: len(c) for n, c in columns}
        if len(set(lengths.values())) > 1:
            raise DataError(f"columns differ in length: {lengths}", source=where)
        for column_name, column in columns:
            for i, text in enumerate(column):
                if column_name == "negatives":
                    for k, negative in enumerate(text):
                        _check_text(negative, where, i + 1, f"negative_{k + 1}")
                    continue
                _check_text(text, where, i + 1, column_name)
        self.skipped = {str(k): int(v) for k, v in dict(self.skipped).items()}

    def _check_scores(self, where: str | None) -> None:
        """Scores only for n-tuples: one finite number for each row's positive and each negative."""
        if self.scores is None:
            return
        if self.negatives is None or len(self.scores) != len(self.negatives):
            raise DataError("scores go with n-tuples (negatives), one tuple per row", source=where)
        self.scores = [tuple(row) for row in self.scores]
        for i, (row, negatives) in enumerate(zip(self.scores, self.negatives, strict=True)):
            if len(row) != 1 + len(negatives):
                raise DataError(f"{len(row)} scores for a positive and {len(negatives)} negatives", source=where, row=i + 1, field="scores")
            for k, value in enumerate(row):
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    name = "positive_score" if k == 0 else f"negative_{k}_score"
                    raise DataError(f"teacher score {value!r} is not a finite number", source=where, row=i + 1, field=name)

    @property
    def has_negatives(self) -> bool:
        """Whether there is one hard negative per row (the ``negative`` column)."""
        return self.negative is not None

    @property
    def negatives_per_row(self) -> int:
        """Hard negatives per row: 0, 1 (``negative``), or the most any n-tuple row holds."""
        if self.negatives is not None:
            return max((len(row) for row in self.negatives), default=0)
        return 0 if self.negative is None else 1

    @property
    def padded(self) -> bool:
        """Whether n-tuple rows hold differing numbers of negatives (read with ``pad_negatives``)."""
        return self.negatives is not None and len({len(row) for row in self.negatives}) > 1

    def negative_lists(self) -> list[tuple[str, ...]]:
        """Each row's hard negatives as a tuple (empty without negatives)."""
        if self.negatives is not None:
            return list(self.negatives)
        if self.negative is not None:
            return [(text,) for text in self.negative]
        return [()] * len(self.anchor)

    def __len__(self) -> int:
        return len(self.anchor)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self.select(range(*index.indices(len(self))))
        i = operator.index(index)
        if self.negatives is not None:
            return NTupleRecord(self.anchor[i], self.positive[i], self.negatives[i])
        return TripletRecord(self.anchor[i], self.positive[i], None if self.negative is None else self.negative[i])

    def __iter__(self) -> Iterator[TripletRecord | NTupleRecord]:
        for i in range(len(self)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TripletDataset):
            return NotImplemented
        return (self.anchor, self.positive, self.negative, self.negatives, self.scores, self.name, self.source, self.skipped) == (
            other.anchor,
            other.positive,
            other.negative,
            other.negatives,
            other.scores,
            other.name,
            other.source,
            other.skipped,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable container

    def __repr__(self) -> str:
        return f"TripletDataset(name={self.name!r}, source={self.source!r}, rows={len(self)}, negatives={self.has_negatives})"

    def select(self, indices: Iterable[int] | np.ndarray) -> TripletDataset:
        positions = [int(i) for i in (indices.tolist() if isinstance(indices, np.ndarray) else indices)]
        return TripletDataset(
            [self.anchor[i] for i in positions],
            [self.positive[i] for i in positions],
            None if self.negative is None else [self.negative[i] for i in positions],
            name=self.name,
            source=self.source,
            skipped=dict(self.skipped),
            negatives=None if self.negatives is None else [self.negatives[i] for i in positions],
            scores=None if self.scores is None else [self.scores[i] for i in positions],
        )

    def summary(self) -> str:
        head = self.name or "triplets"
        if self.source and self.source != self.name:
            head += f" ({self.source})"
        if self.negatives is not None:
            n = self.negatives_per_row
            parts = f"anchor, positive, {'up to ' if self.padded else ''}{n} hard negative{'s' if n != 1 else ''}{', padded' if self.padded else ''}"
            if self.scores is not None:
                parts += ", teacher scores"
        else:
            parts = "anchor, positive, hard negative" if self.has_negatives else "anchor, positive"
        text = f"{head}: {len(self)} rows ({parts})"
        if self.skipped:
            total = sum(self.skipped.values())
            reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(self.skipped.items()))
            text += f"; SKIPPED {total} ({reasons})"
        return text
