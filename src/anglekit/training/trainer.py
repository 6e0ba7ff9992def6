"""AnglETrainer: transformers.Trainer driving an Embedder with a named-component objective.

Why transformers.Trainer: it already gives device placement, fp16/bf16, gradient accumulation,
schedules, checkpoints with optimizer/scheduler/RNG state, resume, seeds and multi-GPU (DDP via
accelerate) in a form users know. What is ours: the loss (one forward pass over both sides of a
batch), component logging, dev evaluation by Spearman, length-grouped sampling and token-budget
batches (``max_batch_tokens``: :meth:`AnglETrainer.get_train_dataloader`, documented as the method to
override).

With several datasets (``datasets``: :mod:`anglekit.training.multi`), each batch comes from one of
them (the same loader override, over :class:`~anglekit.training.multi.DatasetBatchSampler`) and
:meth:`AnglETrainer.route` hands it to that dataset's task and weighted objective; its loss is
logged as ``loss/<dataset>`` and its components as ``loss_<dataset>/<component>``.

What a batch is and how it becomes embeddings and a loss is the training task's business
(:mod:`anglekit.training.tasks`: pairs, sentences with dropout views, triplets); the trainer
gives tasks its services (gathering candidates across processes, counting them, probes).

With several processes, contrastive objectives see the positives and hard negatives of every
process (:mod:`anglekit.training.gather`, differentiable) unless ``gather_candidates`` is off.

Private Trainer hooks overridden here (each pinned by a test in tests/training/test_trainer_hooks.py
that fails when transformers changes them): ``_get_train_sampler`` (length-grouped batches),
``_save`` (adapter-only LoRA checkpoints) and ``_issue_warnings_after_load`` (a checkpoint that
lacks a trained weight is an error).

With ``gradcache_chunk_size``, :meth:`AnglETrainer.training_step` (documented as the method to
override) runs :func:`anglekit.training.gradcache.gradcache_step` instead of one forward and one
backward; it relies on Trainer's ``_prepare_inputs``, ``compute_loss_context_manager`` and
``current_gradient_accumulation_steps``, pinned in tests/training/test_gradcache.py.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from functools import partial
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader
from transformers import Trainer
from transformers.trainer_utils import seed_worker

from anglekit.errors import ConfigError
from anglekit.losses import AnglEObjective, ContrastiveObjective
from anglekit.metrics.ir import evaluate_retrieval_set
from anglekit.metrics.similarity import evaluate_pairs
from anglekit.model import DEFAULT_BATCH_SIZE
from anglekit.training.gather import gather_rows
from anglekit.training.gradcache import check_gradcache, gradcache_step
from anglekit.training.multi import DatasetBatchSampler, TrainingDataset, component_names
from anglekit.training.probes import ProbeAccumulator, batch_probes, gradient_norms
from anglekit.training.sampler import LengthGroupedSampler, TokenBudgetBatchSampler
from anglekit.training.tasks import TASKS, TrainingTask

logger = logging.getLogger(__name__)


class AnglETrainer(Trainer):
    """Trainer whose model is an :class:`~anglekit.model.embedder.Embedder` and whose loss is an objective.

    ``eval_dataset`` is a pair dataset with ``text1``, ``text2`` and ``labels``; evaluation encodes
    it with the model and reports ``eval_spearman`` and ``eval_pearson`` (x 100).
    """

    def __init__(
        self,
        *args: Any,
        objective: AnglEObjective | ContrastiveObjective,
        task: TrainingTask | None = None,
        group_by_length: bool = True,
        eval_batch_size: int = DEFAULT_BATCH_SIZE,
        probes: ProbeAccumulator | None = None,
        gather_candidates: bool = True,
        gradcache_chunk_size: int | None = None,
        max_batch_tokens: int | None = None,
        datasets: Sequence[TrainingDataset] | None = None,
        dataset_order: str = "proportional",
        dev_retrieval: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.dev_retrieval = dev_retrieval
        """A :class:`~anglekit.data.beir.RetrievalSet` scored at each evaluation (``eval_ndcg@10`` ...), or None."""
        # compute_loss returns each batch's mean loss and ignores num_items_in_batch, so the
        # Trainer must divide by the gradient-accumulation steps itself. It skips that when it
        # thinks the model takes loss kwargs (any forward(**kwargs), as the Embedder's) and the
        # batch has "labels": pair batches would then sum, not average, accumulated steps.
        self.model_accepts_loss_kwargs = False
        self.objective = objective
        self.task = task if task is not None else TASKS[objective.batch_kind]
        self.probes = probes
        self.gather_candidates = gather_candidates
        self._candidates: list[int] = []
        """Candidates per anchor (positives + hard negatives, all processes) of the steps since the last log."""
        self._guided: list[float] = []
        """With ``--guide``: each training batch's share of in-batch negatives the guide left out, since the last log."""
        self._guided_all: list[float] = [0.0, 0.0]
        """Their sum and count over the whole run (:meth:`guide_masked_overall`)."""
        self.group_by_length = group_by_length
        self.eval_batch_size = eval_batch_size
        self._component_sums: dict[str, float] = defaultdict(float)
        self._component_counts: dict[str, int] = defaultdict(int)
        self.pairs_trained = 0
        """Pairs that went through a training step in this process (for throughput)."""
        if gradcache_chunk_size is not None:
            check_gradcache(objective)
        self.gradcache_chunk_size = gradcache_chunk_size
        self.max_batch_tokens = max_batch_tokens
        self.datasets = list(datasets) if datasets else None
        """Several datasets (``train_dataset`` a :class:`~anglekit.training.multi.MultiDataset`):
        each batch is routed to its dataset's task and weighted objective."""
        self.dataset_order = dataset_order
        self._dataset_sums: dict[str, float] = defaultdict(float)
        self._dataset_counts: dict[str, int] = defaultdict(int)
        if self.datasets is not None and gradcache_chunk_size is not None:
            for entry in self.datasets:
                check_gradcache(entry.objective)

    # ------------------------------------------------------------------ data
    def _get_train_sampler(self, train_dataset: Any = None) -> torch.utils.data.Sampler | None:
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        if self.group_by_length and hasattr(dataset, "lengths"):
            batch = self.args.train_batch_size * self.args.gradient_accumulation_steps
            seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
            return LengthGroupedSampler(dataset.lengths(), batch, seed=seed)
        return super()._get_train_sampler(train_dataset)

    def token_budget_sampler(self, dataset: Any = None) -> TokenBudgetBatchSampler:
        """The ``max_batch_tokens`` batch sampler over the training rows (seeded like the grouped sampler)."""
        if self.max_batch_tokens is None:
            raise ValueError("token_budget_sampler: this trainer has no max_batch_tokens")
        dataset = dataset if dataset is not None else self.train_dataset
        if not hasattr(dataset, "lengths"):
            raise ConfigError(f"max_batch_tokens needs the rows' token lengths, which {type(dataset).__name__} does not give")
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        return TokenBudgetBatchSampler(dataset.lengths(), self.max_batch_tokens, seed=seed)

    def dataset_batch_sampler(self, dataset: Any = None) -> DatasetBatchSampler:
        """Several datasets: batches that never cross them, interleaved by ``dataset_order``
        (:class:`~anglekit.training.multi.DatasetBatchSampler`; seeded like the grouped sampler)."""
        dataset = dataset if dataset is not None else self.train_dataset
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        return DatasetBatchSampler(
            dataset, self.args.train_batch_size, order=self.dataset_order, seed=seed, group_by_length=self.group_by_length,
            max_tokens=self.max_batch_tokens, block=self.args.world_size,
        )  # fmt: skip

    def get_train_dataloader(self) -> DataLoader:
        """Trainer's loader, or with ``max_batch_tokens`` one over token-budget batches.

        The batch sampler goes to ``accelerator.prepare``: one process iterates it as is (its
        ``set_epoch`` is called by Trainer, and a resume skips whole batches with
        ``skip_first_batches``); several processes each get whole batches (accelerate's
        ``BatchSamplerShard`` deals batch i to process i mod N and accepts batches of varying size).
        """
        if (self.max_batch_tokens is None and self.datasets is None) or self.train_dataset is None:
            return super().get_train_dataloader()
        sampler: Any
        if self.datasets is not None:
            sampler = self.dataset_batch_sampler()
        else:
            sampler = self.token_budget_sampler()
            if sampler.oversized:
                logger.warning(
                    "%d training row(s) are longer than max_batch_tokens=%d: each trains in a batch of its own", sampler.oversized, self.max_batch_tokens
                )
        collator = self._get_collator_with_removed_columns(self.data_collator, description="Training")
        loader = DataLoader(
            self.train_dataset,
            batch_sampler=sampler,
            collate_fn=collator,
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
            persistent_workers=self.args.dataloader_persistent_workers,
            worker_init_fn=partial(seed_worker, num_workers=self.args.dataloader_num_workers, rank=self.args.process_index),
        )
        return self.accelerator.prepare(loader)

    # ------------------------------------------------------------------ loss
    def route(self, inputs: dict[str, Tensor]) -> tuple[Any, Any, str | None, dict[str, Tensor]]:
        """(task, objective, dataset name, inputs without the tag) of a batch: its dataset's with
        several datasets, else the run's."""
        if self.datasets is None or "dataset" not in inputs:
            return self.task, self.objective, None, inputs
        entry = self.datasets[int(inputs["dataset"])]
        return entry.task, entry.objective, entry.name, {k: v for k, v in inputs.items() if k != "dataset"}

    def compute_loss(
        self, model: Any, inputs: dict[str, Tensor], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        task, objective, name, inputs = self.route(inputs)
        vectors, out, size = task.loss(self, objective, model, inputs)
        if model.training:
            self.pairs_trained += size
            self._record_stats(out)
        self._record(out.components, name, out.loss)
        if return_outputs:
            return out.loss, {"embeddings": vectors}
        return out.loss

    def training_step(self, model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None) -> Tensor:
        """Trainer's step, or with ``gradcache_chunk_size`` a GradCache step (the same loss and
        gradient, one chunk's activation memory; see :mod:`anglekit.training.gradcache`)."""
        if self.gradcache_chunk_size is None:
            return super().training_step(model, inputs, num_items_in_batch)
        model.train()
        if hasattr(self.optimizer, "train") and callable(self.optimizer.train):
            self.optimizer.train()
        inputs = self._prepare_inputs(inputs)
        task, objective, name, inputs = self.route(inputs)
        steps = getattr(self, "current_gradient_accumulation_steps", None) or self.args.gradient_accumulation_steps
        _, out, size = gradcache_step(
            task, self, objective, model, inputs, self.gradcache_chunk_size,
            backward=self.accelerator.backward, loss_scale=1.0 / steps,
            no_sync=lambda: self.accelerator.no_sync(model), forward_context=self.compute_loss_context_manager,
        )  # fmt: skip
        self.pairs_trained += size
        self._record_stats(out)
        self._record(out.components, name, out.loss)
        return out.loss.detach() / steps

    def _record(self, components: dict[str, Tensor], dataset: str | None = None, loss: Tensor | None = None) -> None:
        """Remember a batch's components for the next log; with several datasets under
        ``<dataset>/<component>``, and the dataset's (weighted) loss as ``loss/<dataset>``."""
        if dataset is not None:
            components = component_names(dataset, components)
            if loss is not None:
                self._dataset_sums[dataset] += float(loss.detach())
                self._dataset_counts[dataset] += 1
        for name, value in components.items():
            self._component_sums[name] += float(value.detach())
            self._component_counts[name] += 1

    def _record_stats(self, out: Any) -> None:
        """Remember a training batch's guide share (``out.stats['guide_masked']``), if it has one."""
        share = getattr(out, "stats", {}).get("guide_masked")
        if share is not None:
            value = float(share)
            self._guided.append(value)
            self._guided_all[0] += value
            self._guided_all[1] += 1

    def guide_masked_overall(self) -> float | None:
        """The share of in-batch negatives a guide left out, per training batch, averaged over the
        run (this process's batches); None when no batch was guided."""
        total, count = self._guided_all
        return total / count if count else None

    def gather(self, *tensors: Tensor) -> tuple[list[Tensor], int]:
        """Candidates and their text ids from every process, and where this process's rows start
        (:mod:`anglekit.training.gather`); this process's own batch when gathering is off or in
        evaluation."""
        if not (self.gather_candidates and self.model.training):
            return list(tensors), 0
        return gather_rows(*tensors)

    def count_candidates(self, positives: Tensor, negatives: Tensor | None) -> None:
        if self.model.training:
            self._candidates.append(positives.shape[0] + (0 if negatives is None else negatives.shape[0]))

    def probe(self, anchors: Tensor, positives: Tensor, negatives: Tensor | None) -> None:
        if self.probes is not None and self.model.training:
            self.probes.add(batch_probes(anchors, positives, negatives))

    def probe_gradients(self, components: dict[str, Tensor], wrt: Tensor) -> None:
        if self.probes is not None and self.model.training:
            self.probes.add(gradient_norms(components, wrt))

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            if self._candidates:
                logs["candidates"] = sum(self._candidates) / len(self._candidates)
                self._candidates.clear()
            if self._guided:
                logs["guide_masked"] = sum(self._guided) / len(self._guided)
                self._guided.clear()
            for name, total in self._component_sums.items():
                logs[f"loss_{name}"] = total / max(1, self._component_counts[name])
            for name, total in self._dataset_sums.items():
                logs[f"loss/{name}"] = total / max(1, self._dataset_counts[name])
            self._component_sums.clear()
            self._component_counts.clear()
            self._dataset_sums.clear()
            self._dataset_counts.clear()
        super().log(logs, start_time)

    # ------------------------------------------------------------------ eval
    def evaluate(self, eval_dataset: Any = None, ignore_keys: Any = None, metric_key_prefix: str = "eval") -> dict[str, float]:
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        pairs = dataset if hasattr(dataset, "text1") else None
        if pairs is None and self.dev_retrieval is None:
            raise ValueError("evaluate() needs an eval_dataset of pairs or a dev_retrieval set")
        model = self.accelerator.unwrap_model(self.model)
        encode = partial(model.encode, batch_size=self.eval_batch_size)
        metrics: dict[str, float] = {}
        if pairs is not None:
            scores = evaluate_pairs(encode, pairs.text1, pairs.text2, pairs.labels, source=getattr(pairs, "source", None) or None)
            metrics.update({f"{metric_key_prefix}_spearman": scores.spearman, f"{metric_key_prefix}_pearson": scores.pearson})
        if self.dev_retrieval is not None:
            documents, queries = partial(model.encode_document, batch_size=self.eval_batch_size), partial(model.encode_query, batch_size=self.eval_batch_size)
            found = evaluate_retrieval_set(documents, self.dev_retrieval, encode_queries=queries)["metrics"]  # the model's role prompts
            metrics.update({f"{metric_key_prefix}_{name}": value for name, value in found.items()})
        self.log(dict(metrics))
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics

    # ----------------------------------------------------------- checkpoints
    def _trainable_names(self) -> set[str] | None:
        """Names of the weights a checkpoint must hold, or None for all of them.

        With LoRA only the adapters (and a training head, if any) change, so checkpoints hold
        those alone: megabytes instead of the whole frozen base (gigabytes for a 7B model, and no
        k-bit base tensors to serialise). Resume and best-model loading put them back onto the
        base that the run loads from its config.
        """
        model = self.accelerator.unwrap_model(self.model)
        if not getattr(model, "has_lora", False):
            return None
        return {name for name, parameter in model.named_parameters() if parameter.requires_grad}

    def _save(self, output_dir: str | None = None, state_dict: dict[str, Tensor] | None = None) -> None:
        trainable = self._trainable_names() if state_dict is None else None
        if trainable is not None:
            state_dict = {k: v for k, v in self.accelerator.unwrap_model(self.model).state_dict().items() if k in trainable}
        super()._save(output_dir, state_dict=state_dict)

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        """Adapter-only checkpoints leave the frozen base out on purpose; a missing trained
        weight is an error, never a warning (it would resume from untrained adapters)."""
        trainable = self._trainable_names()
        if trainable is not None:
            from torch.nn.modules.module import _IncompatibleKeys

            lost = sorted(k for k in load_result.missing_keys if k in trainable)
            if lost:
                raise RuntimeError(
                    f"checkpoint lacks {len(lost)} trained weight(s), e.g. {lost[:3]}: it was written by a "
                    "different LoRA configuration (rank, targets) than this run's"
                )
            load_result = _IncompatibleKeys([], list(load_result.unexpected_keys))
        super()._issue_warnings_after_load(load_result)
