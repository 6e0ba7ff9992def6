"""Contrastive tasks (SimCSE, SimACE): sentences with dropout views, and triplets.

Each distinct text is tokenized once (``TokenizedSentences``, ``TokenizedTriplets``) with a stable
id per text, which identical-text detection compares; the collators pad per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from anglekit.data.stream import ArrowRows
from anglekit.errors import ConfigError
from anglekit.losses.combined import ObjectiveOutput
from anglekit.losses.guide import GuideVectors
from anglekit.model.padding import pad_token_ids
from anglekit.training.guide import guide_rows, guided
from anglekit.training.tasks.base import BatchServices, TrainingTask
from anglekit.training.tasks.streamed import StreamedRows


def _distinct_ids(columns: Sequence[Sequence[str]]) -> tuple[list[str], np.ndarray]:
    """Distinct texts over all columns (first appearance order) and each cell's text id [n, k]."""
    distinct: dict[str, int] = {}
    n = len(columns[0])
    ids = np.empty((n, len(columns)), dtype=np.int64)
    for row in range(n):
        for col, column in enumerate(columns):
            ids[row, col] = distinct.setdefault(column[row], len(distinct))
    return list(distinct), ids


@dataclass(frozen=True)
class TokenizedSentence:
    ids: list[int]
    text_id: int


class TokenizedSentences(Dataset):
    """Sentences in token ids (each distinct text tokenized once) with a stable id per text."""

    def __init__(self, token_ids: list[list[int]], text_ids: np.ndarray) -> None:
        if text_ids.ndim != 1:
            raise ValueError("text_ids must be one-dimensional")
        self.token_ids = token_ids
        self.text_ids = text_ids

    @classmethod
    def build(cls, texts: Sequence[str], tokenize: Callable[[list[str]], list[list[int]]]) -> TokenizedSentences:
        """Tokenize the distinct texts in one call of ``tokenize``."""
        distinct, ids = _distinct_ids([list(texts)])
        return cls(tokenize(distinct), ids[:, 0])

    def __len__(self) -> int:
        return len(self.text_ids)

    def __getitem__(self, index: int) -> TokenizedSentence:
        text_id = int(self.text_ids[index])
        return TokenizedSentence(self.token_ids[text_id], text_id)

    def lengths(self) -> list[int]:
        sizes = np.fromiter((len(ids) for ids in self.token_ids), dtype=np.int64, count=len(self.token_ids))
        return sizes[self.text_ids].tolist()


class SentenceCollator:
    """Batch of sentences -> {input_ids [B,T], attention_mask [B,T], text_ids [B]}.

    Tokenized once; the trainer makes the two dropout views by running the batch twice through the
    model in training mode (stacked as [2B, T] in one forward pass).
    """

    def __init__(self, pad_id: int, *, left_padding: bool = False) -> None:
        self.pad_id = pad_id
        self.left_padding = left_padding

    def __call__(self, batch: Sequence[TokenizedSentence]) -> dict[str, Any]:
        if not batch:
            raise ValueError("empty batch")
        out: dict[str, Tensor] = pad_token_ids([item.ids for item in batch], self.pad_id, left=self.left_padding)
        out["text_ids"] = torch.tensor([item.text_id for item in batch])
        return out


@dataclass(frozen=True)
class TokenizedTriplet:
    anchor: list[int]
    positive: list[int]
    negative: list[int] | None
    text_ids: tuple[int, ...]
    negatives: tuple[list[int], ...] | None = None
    """n-tuples: the row's hard negatives (``negative`` is then None and ``text_ids`` holds the
    anchor's, the positive's and then each negative's id)."""
    scores: tuple[float, ...] | None = None
    """Distillation: the teacher's scores of the positive and of each negative."""
    row: int = -1
    """The training row (for a teacher's or a guide's embeddings of it; -1: streamed)."""


class TokenizedTriplets(Dataset):
    """Triplets (or anchor/positive pairs, or n-tuples) in token ids, each distinct text tokenized once.

    n-tuples (``ntuple=True``): ``row_text_ids`` is [n, 2 + k], k the most negatives a row holds,
    with -1 where a shorter (padded) row has no negative.
    """

    def __init__(self, token_ids: list[list[int]], row_text_ids: np.ndarray, *, ntuple: bool = False) -> None:
        if row_text_ids.ndim != 2 or (row_text_ids.shape[1] < 2 if ntuple else row_text_ids.shape[1] not in (2, 3)):
            raise ValueError("row_text_ids must be [n, 2 + k] for n-tuples" if ntuple else "row_text_ids must be [n, 2] or [n, 3]")
        self.token_ids = token_ids
        self.row_text_ids = row_text_ids
        self.ntuple = ntuple

    @property
    def parts(self) -> int:
        """2 (anchor, positive) or 3 (with a hard negative); n-tuples: 2 + the most negatives of a row."""
        return int(self.row_text_ids.shape[1])

    @property
    def negatives_per_row(self) -> int:
        """The most hard negatives a row holds (the width of every n-tuple batch)."""
        return self.parts - 2

    @classmethod
    def build_ntuples(
        cls, anchor: Sequence[str], positive: Sequence[str], negatives: Sequence[Sequence[str]], tokenize: Callable[[list[str]], list[list[int]]]
    ) -> TokenizedTriplets:
        """n-tuples (each row's negatives a sequence; shorter rows padded with -1 ids)."""
        if not (len(anchor) == len(positive) == len(negatives)):
            raise ValueError(f"columns differ in length: {len(anchor)}, {len(positive)}, {len(negatives)}")
        width = max((len(row) for row in negatives), default=0)
        distinct: dict[str, int] = {}
        ids = np.full((len(anchor), 2 + width), -1, dtype=np.int64)
        for row, texts in enumerate(zip(anchor, positive, strict=True)):
            for col, text in enumerate([*texts, *negatives[row]]):
                ids[row, col] = distinct.setdefault(text, len(distinct))
        return cls(tokenize(list(distinct)), ids, ntuple=True)

    @classmethod
    def build(
        cls,
        anchor: Sequence[str],
        positive: Sequence[str],
        negative: Sequence[str] | None,
        tokenize: Callable[[list[str]], list[list[int]]],
    ) -> TokenizedTriplets:
        columns = [list(anchor), list(positive)] + ([list(negative)] if negative is not None else [])
        if len({len(c) for c in columns}) != 1:
            raise ValueError(f"columns differ in length: {[len(c) for c in columns]}")
        distinct, ids = _distinct_ids(columns)
        return cls(tokenize(distinct), ids)

    def __len__(self) -> int:
        return len(self.row_text_ids)

    def __getitem__(self, index: int) -> TokenizedTriplet:
        ids = tuple(int(v) for v in self.row_text_ids[index] if v >= 0)
        if self.ntuple:
            negatives = tuple(self.token_ids[i] for i in ids[2:])
            return TokenizedTriplet(self.token_ids[ids[0]], self.token_ids[ids[1]], None, ids, negatives, row=int(index))
        negative = self.token_ids[ids[2]] if len(ids) == 3 else None
        return TokenizedTriplet(self.token_ids[ids[0]], self.token_ids[ids[1]], negative, ids, row=int(index))

    def lengths(self) -> list[int]:
        """Per row, its longest text (padding slots count 0)."""
        sizes = np.fromiter((len(ids) for ids in self.token_ids), dtype=np.int64, count=len(self.token_ids))
        sizes = np.append(sizes, 0)  # index -1 (a padding slot) reads this 0
        return sizes[self.row_text_ids].max(axis=1).tolist()


def streamed_ntuples(rows: ArrowRows, tokenize: Callable[[list[str]], list[list[int]]], tokenizer: Any) -> tuple[StreamedRows, TripletCollator]:
    """Streamed triplet rows as n-tuples (as :meth:`TokenizedTriplets.build_ntuples` gives them):
    (anchor, positive, negatives) rows, a triplet's one ``negative`` (n = 1) or none (n = 0); with
    their :class:`TripletCollator` (padding to the most negatives a row holds, ``tokenizer``'s pad)."""
    negative = ["negatives"] if rows.is_ntuples else (["negative"] if rows.has_negatives else [])
    width = rows.negatives_per_row if rows.is_ntuples else len(negative)
    dataset = StreamedRows(
        rows, ["anchor", "positive", *negative], tokenize,
        lambda ids, text_ids, i: TokenizedTriplet(ids[0], ids[1], None, tuple(text_ids), tuple(ids[2:])),
    )  # fmt: skip
    return dataset, TripletCollator(tokenizer.pad_token_id, left_padding=tokenizer.padding_side == "left", negatives_per_row=width)


class TripletCollator:
    """Batch of triplets -> {input_ids [kB,T], attention_mask, text_ids [kB], parts}: k = 2 or 3.

    Rows 0..B-1 are anchors, B..2B-1 positives, 2B..3B-1 hard negatives (when present); one
    forward pass per batch.

    n-tuples (``negatives_per_row`` = n given): rows 2B.. are the batch's real negatives, row by
    row (padding is never embedded), and ``negative_index`` [B, n] says which of them is row i's
    k-th negative (-1: padding); ``text_ids`` is [2B + M] for M real negatives.
    """

    def __init__(self, pad_id: int, *, left_padding: bool = False, negatives_per_row: int | None = None) -> None:
        self.pad_id = pad_id
        self.left_padding = left_padding
        self.negatives_per_row = negatives_per_row

    def __call__(self, batch: Sequence[TokenizedTriplet]) -> dict[str, Any]:
        if not batch:
            raise ValueError("empty batch")
        if self.negatives_per_row is not None:
            return self._ntuples(batch, self.negatives_per_row)
        parts = len(batch[0].text_ids)
        if any(len(item.text_ids) != parts for item in batch):
            raise ValueError("a batch mixes triplets with and without a hard negative")
        sequences = [item.anchor for item in batch] + [item.positive for item in batch]
        if parts == 3:
            sequences += [item.negative for item in batch]  # type: ignore[misc]
        out: dict[str, Tensor] = pad_token_ids(sequences, self.pad_id, left=self.left_padding)
        out["text_ids"] = torch.tensor([item.text_ids[k] for k in range(parts) for item in batch])
        out["parts"] = torch.tensor(parts)
        return _with_rows(out, batch)

    def _ntuples(self, batch: Sequence[TokenizedTriplet], width: int) -> dict[str, Any]:
        sequences = [item.anchor for item in batch] + [item.positive for item in batch]
        text_ids = [item.text_ids[0] for item in batch] + [item.text_ids[1] for item in batch]
        index = torch.full((len(batch), width), -1, dtype=torch.long)
        for row, item in enumerate(batch):
            negatives = item.negatives if item.negatives is not None else (() if item.negative is None else (item.negative,))
            if len(negatives) > width:
                raise ValueError(f"a row holds {len(negatives)} negatives; this collator pads to {width}")
            for k, (ids, text_id) in enumerate(zip(negatives, item.text_ids[2:], strict=False)):
                index[row, k] = len(sequences) - 2 * len(batch)
                sequences.append(ids)
                text_ids.append(text_id)
        out: dict[str, Tensor] = pad_token_ids(sequences, self.pad_id, left=self.left_padding)
        out["text_ids"] = torch.tensor(text_ids)
        out["negative_index"] = index
        return _with_rows(out, batch)


def _with_rows(out: dict[str, Any], batch: Sequence[TokenizedTriplet]) -> dict[str, Any]:
    """``out`` with the batch's training ``rows`` [B] (for a guide), when every item knows its row."""
    if all(item.row >= 0 for item in batch):
        out["rows"] = torch.tensor([item.row for item in batch])
    return out


@dataclass(frozen=True)
class NTupleBatch:
    """An n-tuple batch's embeddings: B anchors and positives, M real negatives, and where each
    row's k-th negative is (``index`` [B, n], -1: padding)."""

    anchors: Tensor
    positives: Tensor
    negatives: Tensor
    anchor_ids: Tensor
    positive_ids: Tensor
    negative_ids: Tensor
    index: Tensor

    @classmethod
    def split(cls, vectors: Tensor, inputs: dict[str, Tensor]) -> NTupleBatch:
        """From the [2B + M, D] (or [layers, 2B + M, D]) vectors of a :class:`TripletCollator` n-tuple batch."""
        index = inputs["negative_index"]
        text_ids = inputs["text_ids"]
        size = index.shape[0]
        return cls(
            vectors[..., :size, :], vectors[..., size : 2 * size, :], vectors[..., 2 * size :, :],
            text_ids[:size], text_ids[size : 2 * size], text_ids[2 * size :], index,
        )  # fmt: skip

    @property
    def valid(self) -> Tensor:
        """[B, n] bool: True where row i has a k-th negative."""
        return self.index >= 0

    def dense(self) -> tuple[Tensor, Tensor]:
        """(negatives [B, n, D] with zeros in the padding slots, their text ids [B, n] with -1 there)."""
        valid = self.valid
        rows, width, dim = self.index.shape[0], self.index.shape[1], self.negatives.shape[-1]
        dense = self.negatives.new_zeros(rows, width, dim)
        dense = dense.index_put(valid.nonzero(as_tuple=True), self.negatives)
        ids = torch.full_like(self.index, -1).index_put(valid.nonzero(as_tuple=True), self.negative_ids)
        return dense, ids

    def owners(self) -> Tensor:
        """[M] the row of each real negative (row-major, the collator's order)."""
        return self.valid.nonzero(as_tuple=True)[0]


def dropout_views(model: Any, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Two embeddings of the same batch: the batch stacked twice through ``model`` in one pass.

    In training mode dropout draws independent masks for the two copies, so the views differ;
    in eval mode they coincide.
    """
    size = input_ids.shape[0]
    vectors = model(input_ids=torch.cat([input_ids, input_ids]), attention_mask=torch.cat([attention_mask, attention_mask]))
    return vectors[:size], vectors[size:]


class ContrastiveTask(TrainingTask):
    """InfoNCE over in-batch candidates (SimCSE with cosine, SimACE with angles and a margin)."""

    probes_batches = True
    min_batch_size = 2

    def load_data(self, data: Any, train_dataset: Any = None) -> Any:
        with self.reading(data):
            train_set = self.read(data, train_dataset)
        if len(train_set) < 2:
            raise ConfigError(f"{data.train_data}: a contrastive objective needs at least 2 training rows, got {len(train_set)}")
        return train_set

    def read(self, data: Any, train_dataset: Any = None) -> Any:
        """The rows of ``data.train_data``, or of ``train_dataset`` when given (sentences or triplets)."""
        raise NotImplementedError


class SentenceTask(ContrastiveTask):
    """Unsupervised: a batch is B sentences; two dropout views of each (the batch stacked twice
    as [2B, T], one pass) give anchors and positives (SimCSE's own implementation does the same;
    it equals two forward passes in distribution and runs faster)."""

    kind = "sentences"
    unit = "sentences"
    reads_text_column = True

    def read(self, data: Any, train_dataset: Any = None) -> Any:
        from anglekit.data.sentences import read_sentences
        from anglekit.data.training_data import resolve_sentences, sentence_column

        if train_dataset is not None:
            return read_sentences(train_dataset, column=sentence_column(data.text_column, data.column_mapping()))
        return resolve_sentences(data.train_data, column=data.text_column, columns=data.column_mapping())

    def tokenize(self, train_set: Any, embedder: Any) -> tuple[Any, Any]:
        if isinstance(train_set, ArrowRows):
            tokenized: Any = StreamedRows(train_set, ["text"], self.text_tokenizer(embedder), lambda ids, text_ids, i: TokenizedSentence(ids[0], text_ids[0]))
        else:
            tokenized = TokenizedSentences.build(train_set.texts, self.text_tokenizer(embedder))
        return tokenized, SentenceCollator(embedder.tokenizer.pad_token_id, left_padding=embedder.tokenizer.padding_side == "left")

    def model_inputs(self, inputs: dict[str, Tensor]) -> dict[str, Tensor]:
        """The batch stacked twice ([2B, T]): in training mode dropout makes the two views differ."""
        return {"input_ids": torch.cat([inputs["input_ids"]] * 2), "attention_mask": torch.cat([inputs["attention_mask"]] * 2)}

    def loss_from_vectors(self, services: BatchServices, objective: Any, vectors: Tensor, inputs: dict[str, Tensor]) -> tuple[Tensor, ObjectiveOutput, int]:
        text_ids = inputs["text_ids"]
        size = text_ids.shape[0]
        anchors, positives = vectors[:size].float(), vectors[size:].float()
        (candidates, candidate_ids), offset = services.gather(positives, text_ids)
        services.count_candidates(candidates, None)
        out = objective(anchors, candidates, anchor_ids=text_ids, positive_ids=candidate_ids, offset=offset)
        services.probe(anchors, positives, None)
        return torch.cat([anchors, positives]), out, anchors.shape[0]


class TripletTask(ContrastiveTask):
    """Supervised: a batch is B (anchor, positive[, hard negative]) rows, [2B or 3B, T] in one pass."""

    kind = "triplets"
    unit = "triplets"
    columns = "anchor and positive columns (negative optional), or an NLI set's premise, hypothesis and label columns"

    def read(self, data: Any, train_dataset: Any = None) -> Any:
        from anglekit.data.training_data import resolve_triplets
        from anglekit.data.triplets import read_triplets

        pad = getattr(data, "pad_negatives", False)
        if train_dataset is not None:
            return read_triplets(train_dataset, columns=data.column_mapping(), nli_pairing=data.nli_pairing, pad_negatives=pad)
        return resolve_triplets(data.train_data, nli_pairing=data.nli_pairing, columns=data.column_mapping(), pad_negatives=pad)

    def tokenize(self, train_set: Any, embedder: Any) -> tuple[Any, Any]:
        left = embedder.tokenizer.padding_side == "left"
        if getattr(train_set, "negatives", None) is not None:  # n-tuples
            tokenized = TokenizedTriplets.build_ntuples(train_set.anchor, train_set.positive, train_set.negatives, self.text_tokenizer(embedder))
            return tokenized, TripletCollator(embedder.tokenizer.pad_token_id, left_padding=left, negatives_per_row=tokenized.negatives_per_row)
        if isinstance(train_set, ArrowRows) and train_set.is_ntuples:
            return streamed_ntuples(train_set, self.text_tokenizer(embedder), embedder.tokenizer)
        if isinstance(train_set, ArrowRows):
            columns = ["anchor", "positive"] + (["negative"] if train_set.has_negatives else [])
            tokenized: Any = StreamedRows(
                train_set, columns, self.text_tokenizer(embedder),
                lambda ids, text_ids, i: TokenizedTriplet(ids[0], ids[1], ids[2] if len(ids) == 3 else None, text_ids),
            )  # fmt: skip
        else:
            tokenized = TokenizedTriplets.build(train_set.anchor, train_set.positive, train_set.negative, self.text_tokenizer(embedder))
        return tokenized, TripletCollator(embedder.tokenizer.pad_token_id, left_padding=embedder.tokenizer.padding_side == "left")

    def loss_from_vectors(self, services: BatchServices, objective: Any, vectors: Tensor, inputs: dict[str, Tensor]) -> tuple[Tensor, ObjectiveOutput, int]:
        if "negative_index" in inputs:
            return self._ntuple_loss(services, objective, vectors.float(), inputs)
        parts = int(inputs["parts"])
        text_ids = inputs["text_ids"]
        size = inputs["input_ids"].shape[0] // parts
        vectors = vectors.float()
        anchors, positives = vectors[:size], vectors[size : 2 * size]
        negatives = vectors[2 * size :] if parts == 3 else None
        g = guide_rows(objective, vectors, inputs)
        extra = [] if g is None else [g[size : 2 * size]] + ([] if negatives is None else [g[2 * size :]])
        every_negative, negative_ids = None, None
        if negatives is None:
            (every_positive, positive_ids, *gathered), offset = services.gather(positives, text_ids[size : 2 * size], *extra)
        else:
            (every_positive, positive_ids, every_negative, negative_ids, *gathered), offset = services.gather(
                positives, text_ids[size : 2 * size], negatives, text_ids[2 * size :], *extra
            )
        services.count_candidates(every_positive, every_negative)
        guide = guided(None if g is None else GuideVectors(g[:size], *gathered))
        out = objective(
            anchors,
            every_positive,
            every_negative,
            anchor_ids=text_ids[:size],
            positive_ids=positive_ids,
            negative_ids=negative_ids,
            offset=offset,
            **guide,
        )
        services.probe(anchors, positives, negatives)
        return vectors, out, size

    def _ntuple_loss(self, services: BatchServices, objective: Any, vectors: Tensor, inputs: dict[str, Tensor]) -> tuple[Tensor, ObjectiveOutput, int]:
        """n-tuples: every anchor meets every positive and every real negative of the batch (of
        every process when gathering); padding slots are masked out of the softmax."""
        batch = NTupleBatch.split(vectors, inputs)
        dense, dense_ids = batch.dense()
        g = guide_rows(objective, vectors, inputs)
        g_batch = None if g is None else NTupleBatch.split(g, inputs)
        extra = [] if g_batch is None else [g_batch.positives, g_batch.dense()[0]]
        (every_positive, positive_ids, every_negative, negative_ids, *gathered), offset = services.gather(
            batch.positives, batch.positive_ids, dense, dense_ids, *extra
        )
        valid: Tensor | None = negative_ids >= 0  # padding slots have the id -1, on every process
        services.count_candidates(every_positive, every_negative[negative_ids >= 0])
        if dense.shape[1] == 0:  # padded rows without any negative: no hard negatives at all
            every_negative, negative_ids, valid = None, None, None
            gathered = gathered[:1]
        guide = guided(None if g_batch is None else GuideVectors(g_batch.anchors, *gathered))
        out = objective(
            batch.anchors,
            every_positive,
            every_negative,
            anchor_ids=batch.anchor_ids,
            positive_ids=positive_ids,
            negative_ids=negative_ids,
            offset=offset,
            negative_valid=valid,
            **guide,
        )
        first = dense[:, 0] if dense.shape[1] and bool(batch.valid[:, 0].all()) else None
        services.probe(batch.anchors, batch.positives, first)
        return vectors, out, batch.anchors.shape[0]
