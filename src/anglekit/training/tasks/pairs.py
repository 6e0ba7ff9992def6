"""Labelled pairs for the AnglE objectives (cosine, in-batch negatives, angle: paper eq. 8).

``TokenizedPairs`` tokenizes every distinct text of a pair dataset in a single tokenizer call and
gives each distinct text an integer id; those ids are what in-batch-negative identical-sentence
detection compares. ``PairCollator`` stacks a batch's two sides into one [2B, T] tensor so the
backbone runs one forward pass per batch: measured on CPU (MiniLM, STS-B, 32 pairs, fp32), that is
faster than one pass per side padded to its own width, which saves only 2-5% of the padded tokens
(each side's lengths follow the same distribution) but halves each pass's matrices.

n-tuples. ``train_data`` of anchor/positive rows (``negative`` or ``negative_1..negative_n``:
:func:`anglekit.data.training_data.tuple_columns`) trains the same objectives: each row becomes the
labelled pairs (anchor, positive, 1) and (anchor, negative_k, 0) (padding negatives never become
pairs); the cosine and angle terms rank each positive above its own row's negatives (ranking
within a row: ``groups``), and the in-batch term's softmax runs over every positive and every
negative of the batch (docs/objectives.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from anglekit.data.records import TripletDataset
from anglekit.data.stream import ArrowRows
from anglekit.errors import ConfigError, DataError
from anglekit.losses.combined import ObjectiveOutput
from anglekit.losses.guide import GuideVectors
from anglekit.losses.registry import ResolvedObjective
from anglekit.model.padding import pad_token_ids
from anglekit.training.guide import guide_rows, guided
from anglekit.training.tasks.base import BatchServices, TrainingTask
from anglekit.training.tasks.contrastive import NTupleBatch, TokenizedTriplets, TripletCollator, streamed_ntuples
from anglekit.training.tasks.streamed import StreamedRows


@dataclass(frozen=True)
class TokenizedPair:
    ids1: list[int]
    ids2: list[int]
    label: float
    text_id1: int
    text_id2: int
    row: int = -1
    """The training row (a guide's embeddings of it)."""


class TokenizedPairs(Dataset):
    """A pair dataset in token ids, with a stable id per distinct text."""

    def __init__(self, token_ids: list[list[int]], pair_text_ids: np.ndarray, labels: np.ndarray) -> None:
        if pair_text_ids.ndim != 2 or pair_text_ids.shape[1] != 2 or len(pair_text_ids) != len(labels):
            raise ValueError("pair_text_ids must be [n, 2] and match labels in length")
        self.token_ids = token_ids
        self.pair_text_ids = pair_text_ids
        self.labels = np.asarray(labels, dtype=np.float64)

    @classmethod
    def build(cls, text1: Sequence[str], text2: Sequence[str], labels: np.ndarray, tokenize: Callable[[list[str]], list[list[int]]]) -> TokenizedPairs:
        """Tokenize the distinct texts of the pairs in one call of ``tokenize``."""
        if not (len(text1) == len(text2) == len(labels)):
            raise ValueError(f"text1, text2 and labels differ in length: {len(text1)}, {len(text2)}, {len(labels)}")
        distinct: dict[str, int] = {}
        pair_ids = np.empty((len(text1), 2), dtype=np.int64)
        for row, (a, b) in enumerate(zip(text1, text2, strict=True)):
            pair_ids[row, 0] = distinct.setdefault(a, len(distinct))
            pair_ids[row, 1] = distinct.setdefault(b, len(distinct))
        token_ids = tokenize(list(distinct))
        return cls(token_ids, pair_ids, np.asarray(labels, dtype=np.float64))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> TokenizedPair:
        t1, t2 = (int(v) for v in self.pair_text_ids[index])
        return TokenizedPair(self.token_ids[t1], self.token_ids[t2], float(self.labels[index]), t1, t2, int(index))

    def lengths(self) -> list[int]:
        """Per pair, the longer side's token count: what decides a batch's padded width."""
        sizes = np.fromiter((len(ids) for ids in self.token_ids), dtype=np.int64, count=len(self.token_ids))
        return np.maximum(sizes[self.pair_text_ids[:, 0]], sizes[self.pair_text_ids[:, 1]]).tolist()


class PairCollator:
    """Batch of pairs -> {input_ids [2B,T], attention_mask [2B,T], labels [B], text_ids [2B]}.

    Rows 0..B-1 are the first texts, rows B..2B-1 the second texts.
    """

    def __init__(self, pad_id: int, *, left_padding: bool = False) -> None:
        self.pad_id = pad_id
        self.left_padding = left_padding

    def __call__(self, batch: Sequence[TokenizedPair]) -> dict[str, Any]:
        if not batch:
            raise ValueError("empty batch")
        sequences = [item.ids1 for item in batch] + [item.ids2 for item in batch]
        out: dict[str, Tensor] = pad_token_ids(sequences, self.pad_id, left=self.left_padding)
        out["labels"] = torch.tensor([item.label for item in batch], dtype=torch.float32)
        out["text_ids"] = torch.tensor([item.text_id1 for item in batch] + [item.text_id2 for item in batch])
        if all(item.row >= 0 for item in batch):
            out["rows"] = torch.tensor([item.row for item in batch])
        return out


POSITIVE_FRACTION = 0.8
"""Default in-batch-negative positive rule: label >= lower + 0.8 * (upper - lower) of the label range."""


def default_positive_threshold(label_range: tuple[float, float] | None, labels: np.ndarray) -> float:
    """The explicit positive rule used when none is configured (see DESIGN.md, in-batch negatives)."""
    distinct = np.unique(labels)
    if label_range is None and set(distinct.tolist()) <= {0.0, 1.0}:
        return 1.0
    if label_range is None:
        raise ConfigError(
            "in-batch negatives need a positive rule: the training labels are scores without a declared "
            "range, so set positive_threshold (a pair is positive when label >= it)"
        )
    lower, upper = label_range
    return lower + POSITIVE_FRACTION * (upper - lower)


def is_tuple_rows(train_set: Any) -> bool:
    """Whether ``train_set`` holds (anchor, positive[, negatives]) rows, in memory or streamed."""
    return isinstance(train_set, TripletDataset) or (isinstance(train_set, ArrowRows) and train_set.kind == "triplets")


def negatives_count(train_set: Any) -> int:
    """The real hard negatives of every row of tuple rows (:func:`is_tuple_rows`), together."""
    if isinstance(train_set, TripletDataset):
        return sum(len(row) for row in train_set.negative_lists())
    if train_set.is_ntuples:
        return int(train_set.negative_counts().sum())
    return len(train_set) if train_set.has_negatives else 0


def check_label_spread(name: str, config: Any, train_set: Any) -> None:
    """A DataError naming the data and the label when every label of ``train_set`` is the same
    and no term of preset ``name``'s ``config`` learns from that: the cosine and angle terms rank
    pairs by label (one label: nothing to rank, the loss is 0); the in-batch-negative term trains
    only when that label marks positives (>= ``positive_threshold``). n-tuple rows count as the pairs
    they expand to: (anchor, positive, 1) and (anchor, negative_k, 0) for each real negative."""
    if is_tuple_rows(train_set):
        labels = np.concatenate([np.ones(len(train_set)), np.zeros(negatives_count(train_set))])
    else:
        labels = np.asarray(train_set.labels, dtype=np.float64)
    if len(labels) == 0 or labels.min() != labels.max():
        return
    value = float(labels[0])
    threshold = getattr(config, "positive_threshold", None)
    if getattr(config, "ibn_weight", 0) > 0 and threshold is not None and value >= threshold:
        return  # every pair is a positive: the in-batch negatives still train
    ranking = [t for t in ("cosine", "angle") if getattr(config, f"{t}_weight", 0) > 0]
    why = []
    if ranking:
        why.append(f"the {' and '.join(ranking)} term{'s' if len(ranking) > 1 else ''} rank pairs by label, and one label leaves nothing to rank")
    if getattr(config, "ibn_weight", 0) > 0:
        why.append(f"the in-batch-negative term needs positives (label >= {threshold:g})")
    source = getattr(train_set, "source", None) or getattr(train_set, "name", None) or "the training data"
    raise DataError(
        f"every one of the {len(labels)} labels is {value:g}, so the objective {name!r} would train at loss 0: {'; '.join(why)}; "
        "give pairs with different labels",
        source=str(source),
        field="label",
    )


def check_positives(name: str, config: Any, train_set: Any, given: float | None) -> None:
    """A ConfigError naming the term and the threshold when the in-batch-negative term of preset
    ``name``'s ``config`` is on but no pair of ``train_set`` is a positive (label >=
    ``positive_threshold``): the term would be 0 on every step. ``given``: the threshold as set
    (None: the default rule chose it). n-tuple rows hold positives (their pairs labelled 1)."""
    threshold = getattr(config, "positive_threshold", None)
    if getattr(config, "ibn_weight", 0) <= 0 or threshold is None or len(train_set) == 0:
        return
    labels = np.ones(1) if is_tuple_rows(train_set) else np.asarray(train_set.labels, dtype=np.float64)
    highest = float(labels.max())
    if highest >= threshold:
        return
    source = getattr(train_set, "source", None) or getattr(train_set, "name", None) or "the training data"
    setting = f"--positive-threshold {given:g}" if given is not None else f"the default positive threshold {threshold:g}"
    pairs = "its n-tuple rows are pairs labelled 1 and 0" if is_tuple_rows(train_set) else f"its highest label is {highest:g}"
    raise ConfigError(
        f"{setting} leaves the in-batch-negative term of the objective {name!r} without a positive pair in {source} ({pairs}), "
        f"so the term would be 0 on every step; give a threshold of at most {highest:g} with --positive-threshold, or turn the term off with --ibn-weight 0"
    )


class PairTask(TrainingTask):
    """A batch is B labelled pairs, embedded as [2B, T] (first texts, then second texts) in one pass."""

    kind = "pairs"
    unit = "pairs"
    columns = "text1, text2 and label columns (or anchor, positive and negative_1.. columns, as anglekit mine writes)"

    def load_data(self, data: Any, train_dataset: Any = None) -> Any:
        from anglekit.data.readers import read_pairs
        from anglekit.data.training_data import resolve_pairs, resolve_triplets, tuple_columns, tuple_names
        from anglekit.data.triplets import read_triplets

        if train_dataset is not None and tuple_names(list(getattr(train_dataset, "column_names", None) or []), data.column_mapping()):
            return read_triplets(train_dataset, columns=data.column_mapping(), pad_negatives=getattr(data, "pad_negatives", False))
        if train_dataset is None and tuple_columns(data.train_data, data.column_mapping()):
            with self.reading(data):
                return resolve_triplets(data.train_data, columns=data.column_mapping(), pad_negatives=getattr(data, "pad_negatives", False))
        with self.reading(data):
            if train_dataset is not None:
                train_set = read_pairs(train_dataset, columns=data.column_mapping())
            else:
                train_set = resolve_pairs(data.train_data, columns=data.column_mapping(), default_split="train")
        if len(train_set) == 0:
            raise ConfigError(f"{data.train_data}: no training pairs")
        return train_set

    def columns_kind(self, train_set: Any) -> str:
        """``triplets`` for (anchor, positive[, negatives]) rows: their anchor is a query and their
        positive and negatives documents, as for a contrastive objective on the same rows."""
        return "triplets" if is_tuple_rows(train_set) else self.kind

    def objective_settings(self, config: Any, train_set: Any, positive_threshold: float | None) -> dict[str, Any]:
        """The in-batch negatives' ``positive_threshold`` (the given one, or from the labels' range)."""
        if getattr(config, "ibn_weight", 0) <= 0:
            return {}
        threshold = positive_threshold
        if threshold is None and is_tuple_rows(train_set):
            threshold = 1.0  # n-tuple rows expand to pairs labelled 1 (positive) and 0 (negative)
        if threshold is None:
            threshold = default_positive_threshold(train_set.label_range, train_set.labels)
        return {"positive_threshold": float(threshold)}

    def build_objective(self, objective: ResolvedObjective, train_set: Any, positive_threshold: float | None, student: str | None = None) -> tuple[Any, Any]:
        """As the base task's, but refused when every training label is the same and no term of the
        objective trains on that, or when its in-batch-negative term has no positive pair (before
        the model is loaded)."""
        module, config = super().build_objective(objective, train_set, positive_threshold, student)
        check_label_spread(objective.name, config, train_set)
        check_positives(objective.name, config, train_set, positive_threshold)
        return module, config

    def tokenize(self, train_set: Any, embedder: Any) -> tuple[Any, Any]:
        if isinstance(train_set, TripletDataset):  # n-tuples (a triplet is n = 1; no negative: n = 0)
            tokenized = TokenizedTriplets.build_ntuples(train_set.anchor, train_set.positive, train_set.negative_lists(), self.text_tokenizer(embedder))
            left = embedder.tokenizer.padding_side == "left"
            return tokenized, TripletCollator(embedder.tokenizer.pad_token_id, left_padding=left, negatives_per_row=tokenized.negatives_per_row)
        if isinstance(train_set, ArrowRows) and train_set.kind == "triplets":  # streamed n-tuples (a triplet is n = 1)
            return streamed_ntuples(train_set, self.text_tokenizer(embedder), embedder.tokenizer)
        if isinstance(train_set, ArrowRows):
            labels = train_set.labels
            tokenized: Any = StreamedRows(
                train_set, ["text1", "text2"], self.text_tokenizer(embedder),
                lambda ids, text_ids, i: TokenizedPair(ids[0], ids[1], float(labels[i]), text_ids[0], text_ids[1]),
            )  # fmt: skip
        else:
            tokenized = TokenizedPairs.build(train_set.text1, train_set.text2, train_set.labels, self.text_tokenizer(embedder))
        return tokenized, PairCollator(embedder.tokenizer.pad_token_id, left_padding=embedder.tokenizer.padding_side == "left")

    def loss_from_vectors(self, services: BatchServices, objective: Any, vectors: Tensor, inputs: dict[str, Tensor]) -> tuple[Tensor, ObjectiveOutput, int]:
        if "negative_index" in inputs:
            return self._ntuple_loss(services, objective, vectors.float(), inputs)
        labels = inputs["labels"]
        text_ids = inputs["text_ids"]
        size = labels.shape[0]
        # Objectives compute in float32 even under autocast: exp/logsumexp of scaled scores.
        # vectors: [2B, D], or [layers, 2B, D] for ESE (first texts, then second texts, in each layer).
        vectors = vectors.float()
        g = guide_rows(objective, vectors, inputs)
        guide = guided(None if g is None else GuideVectors(g[:size], g[size:]))
        out = objective(vectors[..., :size, :], vectors[..., size:, :], labels.float(), text_ids[:size], text_ids[size:], **guide)
        final = vectors if vectors.dim() == 2 else vectors[-1]
        services.probe(final[:size], final[size:], None)  # recorded only when probes are on (probe_steps)
        services.probe_gradients(out.components, vectors)
        return final, out, size

    def _ntuple_loss(self, services: BatchServices, objective: Any, vectors: Tensor, inputs: dict[str, Tensor]) -> tuple[Tensor, ObjectiveOutput, int]:
        """n-tuple rows expanded to labelled pairs: (anchor, positive, 1), (anchor, negative_k, 0),
        grouped by row (see the module doc); vectors [2B + M, D], or [layers, 2B + M, D] for ESE."""
        batch = NTupleBatch.split(vectors, inputs)
        size = batch.index.shape[0]
        owners = batch.owners()
        rows = torch.arange(size, device=owners.device)
        first = torch.cat([rows, owners])  # each pair's anchor: [B + M]
        second = torch.cat([rows + size, 2 * size + torch.arange(owners.shape[0], device=owners.device)])
        labels = torch.cat([torch.ones(size), torch.zeros(owners.shape[0])]).to(vectors.device)
        text_ids = inputs["text_ids"]
        x, y = vectors[..., first, :], vectors[..., second, :]
        g = guide_rows(objective, vectors, inputs)
        guide = guided(None if g is None else GuideVectors(g[first], g[second]))
        out = objective(x, y, labels, text_ids[first], text_ids[second], first, **guide)
        final = vectors if vectors.dim() == 2 else vectors[-1]
        services.probe(final[:size], final[size : 2 * size], None)
        services.probe_gradients(out.components, vectors)
        return final, out, size
