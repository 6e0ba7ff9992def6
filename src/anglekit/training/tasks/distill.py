"""Distillation: n-tuples with a teacher's scores (the ``scored`` batch kind).

Rows are (anchor, positive, negative_1..negative_n) with the ``positive_score`` and
``negative_k_score`` columns ``anglekit mine`` writes (:func:`anglekit.data.triplets.score_columns`);
a batch is embedded as the n-tuple batches of the triplet task are (anchors, positives, then the
real negatives row by row, one forward pass) and carries the teacher's scores [B, 1 + n] beside
them. ``embed-distill`` also needs the teacher's embeddings: the model ``--distill-teacher`` names
embeds every training row once before training (anchors as queries, positives and negatives as
documents, each with its own prompts), and each batch looks its rows up
(:class:`~anglekit.losses.distill.TeacherTable`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from anglekit.data.records import TripletDataset
from anglekit.data.triplets import score_columns
from anglekit.errors import ConfigError, DataError
from anglekit.losses.combined import ObjectiveOutput
from anglekit.losses.distill import DistillObjective, Teacher, TeacherTable
from anglekit.losses.distill_configs import DistillConfig
from anglekit.losses.guide import GuideVectors
from anglekit.losses.registry import ResolvedObjective
from anglekit.training.frozen import embed_frozen, load_frozen
from anglekit.training.guide import attach_guide, guide_rows, guided
from anglekit.training.tasks.base import BatchServices, TrainingTask
from anglekit.training.tasks.contrastive import NTupleBatch, TokenizedTriplet, TokenizedTriplets, TripletCollator

__all__ = ["DistillTask", "ScoredCollator", "ScoredTuples", "check_scored", "teacher_table"]


class ScoredTuples(TokenizedTriplets):
    """n-tuples in token ids with each row's teacher scores ``scores`` [rows, 1 + n] (NaN in padding)."""

    def __init__(self, token_ids: list[list[int]], row_text_ids: np.ndarray, scores: np.ndarray) -> None:
        super().__init__(token_ids, row_text_ids, ntuple=True)
        if scores.shape != (row_text_ids.shape[0], row_text_ids.shape[1] - 1):
            raise ValueError(f"scores must be [{row_text_ids.shape[0]}, {row_text_ids.shape[1] - 1}], got {scores.shape}")
        self.scores = scores

    @classmethod
    def build_scored(cls, train_set: TripletDataset, tokenize: Callable[[list[str]], list[list[int]]]) -> ScoredTuples:
        """Tokenize ``train_set``'s distinct texts once; its scores padded with NaN to the widest row."""
        base = TokenizedTriplets.build_ntuples(train_set.anchor, train_set.positive, train_set.negative_lists(), tokenize)
        scores = np.full((len(train_set), base.parts - 1), np.nan)
        for row, values in enumerate(train_set.scores or ()):
            scores[row, : len(values)] = values
        return cls(base.token_ids, base.row_text_ids, scores)

    def __getitem__(self, index: int) -> TokenizedTriplet:
        item = super().__getitem__(index)
        width = 1 + len(item.negatives or ())
        return dataclasses.replace(item, scores=tuple(float(v) for v in self.scores[index, :width]), row=int(index))


class ScoredCollator(TripletCollator):
    """An n-tuple batch (:class:`TripletCollator`) with ``teacher_scores`` [B, 1 + n] (0 in padding
    slots, masked by ``negative_index``) and the training ``rows`` [B]."""

    def __call__(self, batch: Sequence[TokenizedTriplet]) -> dict[str, Any]:
        out = super().__call__(batch)
        width = out["negative_index"].shape[1]
        scores = torch.zeros(len(batch), 1 + width, dtype=torch.float32)
        for row, item in enumerate(batch):
            if item.scores is None:
                raise ValueError("a scored batch holds a row without teacher scores")
            scores[row, : len(item.scores)] = torch.tensor(item.scores, dtype=torch.float32)
        out["teacher_scores"] = scores
        out["rows"] = torch.tensor([item.row for item in batch])
        return out


def check_scored(name: str, train_set: Any) -> None:
    """A DataError naming the data, the score columns and the objective ``name`` when ``train_set``
    holds no teacher scores (n-tuples without ``*_score`` columns, triplets, pairs)."""
    if isinstance(train_set, TripletDataset) and train_set.scores is not None:
        return
    source = getattr(train_set, "source", None) or getattr(train_set, "name", None) or "the training data"
    width = getattr(train_set, "negatives_per_row", 0) if getattr(train_set, "negatives", None) is not None else 0
    if width == 0:
        raise DataError(
            f"the objective {name!r} learns a teacher's scores of n-tuples: give anchor, positive, negative_1..negative_n and "
            f"positive_score, negative_1_score.. columns (the layout anglekit mine writes)",
            source=str(source),
        )
    columns = score_columns(width)
    raise DataError(
        f"the objective {name!r} learns a teacher's scores, and these n-tuples lack the columns {', '.join(columns)} "
        "(the layout anglekit mine writes; score them with a teacher first)",
        source=str(source),
    )


def teacher_table(name: str, train_set: TripletDataset, batch_size: int = 64) -> TeacherTable:
    """The teacher model ``name``'s embeddings of ``train_set`` for ``embed-distill``: each distinct
    anchor embedded once as a query, each distinct positive or negative once as a document
    (:mod:`anglekit.training.frozen`, shared with ``--guide``)."""
    teacher = load_frozen(name, "--distill-teacher")
    negative_lists = train_set.negative_lists()
    documents = [*train_set.positive, *(text for row in negative_lists for text in row)]
    frozen = embed_frozen(teacher, {"query": train_set.anchor, "document": documents}, batch_size=batch_size, what=f"embed-distill: the teacher {name}")
    negatives = np.full((len(train_set), train_set.negatives_per_row), -1, dtype=np.int64)
    for row, texts in enumerate(negative_lists):
        negatives[row, : len(texts)] = frozen.index("document", texts)
    return TeacherTable(
        frozen.vectors,
        torch.tensor(frozen.index("query", train_set.anchor)),
        torch.tensor(frozen.index("document", train_set.positive)),
        torch.from_numpy(negatives),
    )


class DistillTask(TrainingTask):
    """A batch is B n-tuples with the teacher's scores, embedded as [2B + M, T] in one pass."""

    kind = "scored"
    unit = "rows"

    def load_data(self, data: Any, train_dataset: Any = None) -> Any:
        from anglekit.data.training_data import resolve_triplets
        from anglekit.data.triplets import read_triplets

        if getattr(data, "stream_data", False):
            raise ConfigError("the distillation objectives hold the teacher scores in memory: train them without --stream-data")
        pad = getattr(data, "pad_negatives", False)
        if train_dataset is not None:
            return read_triplets(train_dataset, columns=data.column_mapping(), pad_negatives=pad, scores=True)
        return resolve_triplets(data.train_data, columns=data.column_mapping(), pad_negatives=pad, scores=True)

    def columns_kind(self, train_set: Any) -> str:
        """``triplets``: the anchor is a query, the positive and negatives documents."""
        return "triplets"

    def build_objective(self, objective: ResolvedObjective, train_set: Any, positive_threshold: float | None, student: str | None = None) -> tuple[Any, Any]:
        """The objective, refused (before the model loads) for data without teacher scores and for
        embed-distill without a teacher; with embed-distill, the teacher embeds the rows here."""
        check_scored(objective.name, train_set)
        config = objective.config
        table = None
        if getattr(config, "embed_distill_weight", 0) > 0:
            if not config.distill_teacher:
                raise ConfigError(
                    f"the objective {objective.name!r} (embed_distill_weight > 0) needs --distill-teacher MODEL, the teacher whose cosines it learns"
                )
            table = teacher_table(config.distill_teacher, train_set)
        if positive_threshold is not None and getattr(config, "ibn_weight", 0) > 0 and positive_threshold != 1.0:
            raise ConfigError(f"--positive-threshold {positive_threshold:g}: n-tuple rows are pairs labelled 1 (positive) and 0 (negatives); leave it unset")
        if isinstance(config, DistillConfig):
            return attach_guide(DistillObjective(config, table), config, train_set, student), config
        return super().build_objective(objective, train_set, positive_threshold, student)

    def tokenize(self, train_set: Any, embedder: Any) -> tuple[Any, Any]:
        tokenized = ScoredTuples.build_scored(train_set, self.text_tokenizer(embedder))
        left = embedder.tokenizer.padding_side == "left"
        return tokenized, ScoredCollator(embedder.tokenizer.pad_token_id, left_padding=left, negatives_per_row=tokenized.negatives_per_row)

    def loss_from_vectors(self, services: BatchServices, objective: Any, vectors: Tensor, inputs: dict[str, Tensor]) -> tuple[Tensor, ObjectiveOutput, int]:
        vectors = vectors.float()
        batch = NTupleBatch.split(vectors, inputs)
        dense, dense_ids = batch.dense()
        services.count_candidates(batch.positives, batch.negatives)
        teacher = Teacher(inputs["teacher_scores"].float(), rows=inputs.get("rows"))
        g = guide_rows(objective, vectors, inputs)
        g_batch = None if g is None else NTupleBatch.split(g, inputs)
        guide = guided(None if g_batch is None else GuideVectors(g_batch.anchors, g_batch.positives, g_batch.dense()[0]))
        out = objective(
            batch.anchors, batch.positives, dense, teacher=teacher, valid=batch.valid,
            anchor_ids=batch.anchor_ids, positive_ids=batch.positive_ids, negative_ids=dense_ids, **guide,
        )  # fmt: skip
        first = dense[:, 0] if dense.shape[1] and bool(batch.valid[:, 0].all()) else None
        services.probe(batch.anchors, batch.positives, first)
        return vectors, out, batch.anchors.shape[0]
