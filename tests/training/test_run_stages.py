"""The stages of ``train()`` alone: the trainer arguments derived from the typed config, the step
count, and the data stage (issue 29, item 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from anglekit.errors import UndefinedScoreError
from anglekit.training.config import TrainConfig
from anglekit.training.precision import resolve_precision
from anglekit.training.run import build_datasets, check, load_eval_sets, total_steps, training_arguments


def config(tmp_path: Path, **values: Any) -> TrainConfig:
    return TrainConfig.from_dict({"model": "m", "train_data": "x.jsonl", "output_dir": str(tmp_path / "run"), **values})


class Tokenized:
    def __init__(self, lengths: list[int]) -> None:
        self._lengths = lengths

    def __len__(self) -> int:
        return len(self._lengths)

    def lengths(self) -> list[int]:
        return self._lengths


def test_training_arguments_follow_the_typed_config(tmp_path: Path) -> None:
    run = config(
        tmp_path, batch_size=8, eval_batch_size=16, learning_rate=3e-5, weight_decay=0.01, scheduler="cosine", warmup_ratio=0.1,
        gradient_accumulation=2, max_grad_norm=0.5, seed=7, logging_steps=5, optim="adamw_torch", run_name="r1", device="cpu",
    ).trainer  # fmt: skip
    args = training_arguments(run, tmp_path / "run", 200, False, resolve_precision("fp32", "cpu"))
    assert (args.per_device_train_batch_size, args.per_device_eval_batch_size) == (8, 16)
    assert (args.learning_rate, args.weight_decay, args.max_grad_norm, args.seed) == (3e-5, 0.01, 0.5, 7)
    assert getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type) == "cosine" and args.warmup_steps == 20  # 10% of 200 steps
    assert args.gradient_accumulation_steps == 2 and args.logging_steps == 5 and args.run_name == "r1"
    assert getattr(args.optim, "value", args.optim) == "adamw_torch" and not args.bf16 and not args.fp16
    assert args.load_best_model_at_end is False and args.metric_for_best_model is None
    with_dev = training_arguments(run, tmp_path / "run", 200, True, resolve_precision("bf16", "cpu"))
    assert with_dev.load_best_model_at_end and with_dev.metric_for_best_model == "spearman" and with_dev.bf16


def test_total_steps_counts_batches_or_token_budgets(tmp_path: Path) -> None:
    run = config(tmp_path, batch_size=4, epochs=2.0).trainer
    assert total_steps(run, Tokenized([5] * 17)) == 8  # 4 full batches an epoch, 2 epochs
    assert total_steps(config(tmp_path, batch_size=4, max_steps=3).trainer, Tokenized([5] * 17)) == 3
    budget = config(tmp_path, max_batch_tokens=10, epochs=1.0).trainer
    assert total_steps(budget, Tokenized([5] * 8)) == 4  # two texts of 5 tokens per budget of 10


def test_the_data_stage_reads_every_split_and_refuses_unscorable_test_pairs(tmp_path: Path, pair_file: Path, tiny_bert_dir: Path) -> None:
    good = config(tmp_path, model=str(tiny_bert_dir), train_data=str(pair_file), test_data=str(pair_file), positive_threshold=3.0)
    (dataset,) = build_datasets(good, check(good))
    dev_set, test_set, probe_set = load_eval_sets(good.data)
    assert len(dataset.train_set) == 64 and len(test_set.labels) == 64 and dev_set is None and probe_set is None
    assert dataset.name is None and dataset.weight == 1.0 and dataset.task.kind == "pairs"
    flat = tmp_path / "flat.jsonl"
    flat.write_text("".join(f'{{"text1": "a{i}", "text2": "b{i}", "label": 3}}\n' for i in range(5)), encoding="utf-8")
    bad = config(tmp_path, model=str(tiny_bert_dir), train_data=str(pair_file), test_data=str(flat))
    with pytest.raises(UndefinedScoreError, match="all 5 gold labels equal 3"):
        load_eval_sets(bad.data)


class Rows:
    def __init__(self, text: str) -> None:
        self.text = text

    def summary(self) -> str:
        return self.text


def test_a_run_of_one_dataset_and_of_several_describe_themselves_from_the_same_list(tmp_path: Path) -> None:
    """One dataset is a list of one: what the run records (the rows, the unit, the objective settings,
    the batch kinds) reads the list, in the shapes train_config.json and the card had before."""
    from types import SimpleNamespace

    from anglekit.losses import ContrastiveConfig, ObjectiveConfig
    from anglekit.training.multi import TrainingDataset
    from anglekit.training.run import Run
    from anglekit.training.tasks import TASKS

    angle, cosine = ObjectiveConfig(), ContrastiveConfig()
    one = Run(config(tmp_path), [], tmp_path, datasets=[TrainingDataset(None, TASKS["pairs"], None, 1.0, Rows("64 pairs"), angle)])
    assert (one.summary(), one.unit, one.batch_kinds()) == ("64 pairs", "pairs", "pairs")
    assert one.objective_settings() == vars(angle)
    two = [
        TrainingDataset("sts", TASKS["pairs"], None, 2.0, Rows("64 pairs"), angle),
        TrainingDataset("nli", TASKS["triplets"], None, 1.0, Rows("8 triplets"), cosine),
    ]
    several = Run(config(tmp_path), [], tmp_path, datasets=two)
    assert several.summary() == "[sts, pairs, weight 2] 64 pairs; [nli, triplets, weight 1] 8 triplets"
    assert several.unit == "rows" and several.batch_kinds() == {"sts": "pairs", "nli": "triplets"}
    assert several.objective_settings() == {"sts": repr(angle), "nli": repr(cosine)}
    assert Run(config(tmp_path), [], tmp_path, datasets=[two[0], SimpleNamespace(**{**vars(two[0]), "name": "b"})]).unit == "pairs"


def test_build_datasets_weights_only_a_dataset_whose_weight_is_not_one(tmp_path: Path, pair_file: Path, tiny_bert_dir: Path) -> None:
    from anglekit.training.multi import Weighted
    from anglekit.training.run import dataset_plans

    both = config(tmp_path, model=str(tiny_bert_dir), train_data=[f"{pair_file};name=a", f"{pair_file};name=b;weight=0.5"], positive_threshold=3.0)
    first, second = build_datasets(both, dataset_plans(both))
    assert (first.name, second.name) == ("a", "b")
    assert not isinstance(first.objective, Weighted)
    assert isinstance(second.objective, Weighted) and second.objective.weight == 0.5 and second.weight == 0.5


def test_a_finished_run_is_not_loaded_again(tmp_path: Path) -> None:
    from anglekit.errors import ConfigError
    from anglekit.training.run import Run, TrainResult, load

    done = TrainResult(output_dir=tmp_path, model_dir=tmp_path / "model", steps=3, train_seconds=1.0, pairs_per_second=2.0, peak_memory_mb=1.0)
    with pytest.raises(ConfigError, match="already complete"):
        load(Run(config(tmp_path), [], tmp_path, finished=done))
