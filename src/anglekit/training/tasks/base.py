"""What a training task is: the data an objective trains on, and how a batch becomes a loss.

Each batch kind (``pairs``, ``sentences``, ``triplets``) is one :class:`TrainingTask` in a
module of its own, registered once in :mod:`anglekit.training.tasks`. A task bundles:

* :meth:`~TrainingTask.load_data`: the training rows from ``train_data``;
* :meth:`~TrainingTask.build_objective`: the objective module for the preset as the objective
  registry resolved it once (:class:`~anglekit.losses.registry.ResolvedObjective`), with the
  settings the task derives from its data (:meth:`~TrainingTask.objective_settings`);
* :meth:`~TrainingTask.tokenize`: the tokenized dataset and its collator;
* :meth:`~TrainingTask.model_inputs` and :meth:`~TrainingTask.loss_from_vectors`: what the model
  embeds for a batch, and how those vectors become the loss; :meth:`~TrainingTask.loss` chains
  them (GradCache, :mod:`anglekit.training.gradcache`, runs them apart).

A new batch kind is one new module with a subclass and one line in the registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
from torch import Tensor

from anglekit.data.sources import EXTENSIONS, TEXT_EXTENSIONS
from anglekit.errors import ConfigError
from anglekit.losses.combined import ObjectiveOutput
from anglekit.losses.registry import ResolvedObjective, all_presets
from anglekit.model.long_text import RowChunks, expand_rows, pool_rows, tokenize_whole
from anglekit.training.guide import attach_guide


class BatchServices(Protocol):
    """What a task's :meth:`~TrainingTask.loss` may ask of the trainer running it."""

    def gather(self, *tensors: Tensor) -> tuple[list[Tensor], int]: ...

    def count_candidates(self, positives: Tensor, negatives: Tensor | None) -> None: ...

    def probe(self, anchors: Tensor, positives: Tensor, negatives: Tensor | None) -> None: ...

    def probe_gradients(self, components: dict[str, Tensor], wrt: Tensor) -> None: ...


class TrainingTask(ABC):
    """One batch kind: its data, objective, tokenization and loss."""

    kind: ClassVar[str]
    """The batch kind of the objective presets this task trains (``losses.registry``)."""
    reads_text_column: ClassVar[bool] = False
    """Whether ``text_column`` picks the column of a tabular ``train_data``."""
    probes_batches: ClassVar[bool] = False
    """Whether training-dynamics probes are measured on its batches."""
    min_batch_size: ClassVar[int] = 1
    """The smallest batch it can train on (in-batch negatives need 2)."""
    unit: ClassVar[str] = "rows"
    """What one training row is, for throughput (``pairs/s``, ``sentences/s``)."""
    columns: ClassVar[str] = ""
    """The columns of a training file, in messages (empty: it reads sentence files too)."""

    def check_data_file(self, spec: Any, objective: str) -> None:
        """A ConfigError naming ``spec`` when it is a file of sentences (``.txt``, ``.text`` or no
        extension: one sentence a line) and this task reads columns; before anything is loaded."""
        if not self.columns or not isinstance(spec, str) or not spec.strip():
            return
        path = Path(spec.strip()).expanduser()
        if path.suffix.lower() not in TEXT_EXTENSIONS or not path.is_file():
            return
        kind = f"a {path.suffix} file" if path.suffix else "a file without an extension"
        sentences = " or ".join(sorted(p for p, k in all_presets().items() if k == "sentences")) or "a sentence objective"
        raise ConfigError(
            f"{spec}: {kind} is read as sentences, one a line, but the objective {objective!r} trains on {self.kind}: give a file "
            f"({', '.join(sorted(EXTENSIONS))}) with {self.columns}, or train on sentences with {sentences}"
        )

    def check_model(self, objective: ResolvedObjective, facts: Any, source: str) -> None:
        """A ConfigError when the model (its :class:`~anglekit.model.checks.ModelFacts`) cannot
        train ``objective``; called before any data or weights are loaded. By default: the
        objective family's size check (:meth:`ResolvedObjective.size_problem`) on the hidden size."""
        hidden = facts.hidden_size
        problem = None if hidden is None else objective.size_problem([hidden], "hidden size")
        if problem is not None:
            raise ConfigError(f"{source}: this model's hidden size is {hidden}: {problem}")

    @abstractmethod
    def load_data(self, data: Any, train_dataset: Any = None) -> Any:
        """The training rows of ``data`` (a :class:`~anglekit.training.config.DataSection`), or of
        ``train_dataset`` (a ``datasets.Dataset``/``IterableDataset``, read in record batches with
        the same checks, ``data.columns`` naming its columns) when given."""

    def build_objective(self, objective: ResolvedObjective, train_set: Any, positive_threshold: float | None, student: str | None = None) -> tuple[Any, Any]:
        """(objective module, its typed config) for ``objective`` plus what the task derives from
        ``train_set`` (:meth:`objective_settings`); with ``--guide``, the guide attached (its
        embeddings of ``train_set``; ``student``: the model trained, for a guide that is it)."""
        resolved = objective.with_settings(**self.objective_settings(objective.config, train_set, positive_threshold))
        return attach_guide(resolved.build(), resolved.config, train_set, student), resolved.config

    def objective_settings(self, config: Any, train_set: Any, positive_threshold: float | None) -> dict[str, Any]:
        """Config fields the task sets from its data (none by default), given the preset's ``config``."""
        return {}

    def columns_kind(self, train_set: Any) -> str:
        """The kind of rows ``train_set`` holds, whose columns take roles (``training.roles``): the
        task's own kind, unless its data comes in another shape (a pair objective on n-tuples)."""
        return self.kind

    @abstractmethod
    def tokenize(self, train_set: Any, embedder: Any) -> tuple[Any, Any]:
        """(tokenized dataset, collator): each distinct text tokenized once, padded per batch."""

    def model_inputs(self, inputs: dict[str, Tensor]) -> dict[str, Tensor]:
        """What the model embeds for a batch: ``input_ids`` and ``attention_mask`` [N, T], one row
        per vector the objective needs (GradCache embeds them in chunks of rows)."""
        return {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}

    @abstractmethod
    def loss_from_vectors(self, services: BatchServices, objective: Any, vectors: Tensor, inputs: dict[str, Tensor]) -> tuple[Tensor, ObjectiveOutput, int]:
        """(embeddings, objective output, rows trained) of one batch whose :meth:`model_inputs`
        the model embedded as ``vectors`` ([N, D], or a layer stack [n, N, D] for ESE)."""

    def loss(self, services: BatchServices, objective: Any, model: Any, inputs: dict[str, Tensor]) -> tuple[Tensor, ObjectiveOutput, int]:
        """(embeddings, objective output, rows trained) of one batch: one forward pass over
        :meth:`model_inputs` (with every layer's output when the objective needs them, ESE)."""
        extra = {"layers": True} if getattr(objective, "needs_layers", False) else {}
        rows, windows = self.embedding_rows(model, inputs)
        vectors = self.pool(model, model(**rows, **extra), windows)
        return self.fp32_loss(services, objective, vectors, inputs)

    def fp32_loss(self, services: BatchServices, objective: Any, vectors: Tensor, inputs: dict[str, Tensor]) -> tuple[Tensor, ObjectiveOutput, int]:
        """:meth:`loss_from_vectors` in fp32: the pooled embeddings are cast up and autocast (bf16
        or fp16 mixed precision) is off while the objective computes, so its cosines, angles and
        exponentials never round to 8 mantissa bits; the gradient flows back through the cast."""
        with torch.autocast(device_type=vectors.device.type, enabled=False):
            return self.loss_from_vectors(services, objective, vectors.float(), inputs)

    @staticmethod
    def reading(data: Any) -> AbstractContextManager[Any]:
        """Where a read's rows go: Python lists, or with ``data.stream_data`` a memory-mapped Arrow
        file (:func:`anglekit.data.stream.spooling`; tokenized per batch by the ``Streamed*`` datasets)."""
        if getattr(data, "stream_data", False):
            from anglekit.data.stream import spooling

            return spooling()
        return nullcontext()

    # ------------------------------------------------------------------ long texts
    @staticmethod
    def text_tokenizer(embedder: Any) -> Callable[[list[str]], list[list[int]]]:
        """How a task tokenizes its texts: cut at ``max_length``, or whole when the model chunks
        long texts (``long_text``; the windows are cut per batch by :meth:`embedding_rows`)."""
        if getattr(embedder.config, "long_text", "truncate") == "truncate":
            return embedder.tokenize_unpadded
        return partial(tokenize_whole, embedder)

    def embedding_rows(self, model: Any, inputs: dict[str, Tensor]) -> tuple[dict[str, Tensor], RowChunks | None]:
        """The rows the model embeds for a batch: :meth:`model_inputs`, or their windows when the
        model chunks long texts and a row is longer than a window (then also how to pool them)."""
        rows = self.model_inputs(inputs)
        embedder = _embedder_of(model)
        windows = None if embedder is None else expand_rows(embedder, rows)
        return (rows if windows is None else windows.inputs), windows

    @staticmethod
    def pool(model: Any, vectors: Tensor, windows: RowChunks | None) -> Tensor:
        """One vector per :meth:`model_inputs` row from the vectors of :meth:`embedding_rows`."""
        if windows is None:
            return vectors
        return pool_rows(vectors, windows, _embedder_of(model).config.long_text)


def _embedder_of(model: Any) -> Any:
    """The Embedder inside ``model`` (unwrapping DDP/accelerate's ``module``), or None."""
    from anglekit.model.config import EmbedderConfig

    while model is not None and not isinstance(getattr(model, "config", None), EmbedderConfig):
        model = getattr(model, "module", None)
    return model
