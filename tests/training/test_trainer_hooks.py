"""Pins of the private transformers.Trainer hooks that AnglETrainer overrides.

anglekit overrides three private hooks (see anglekit.training.trainer): ``_get_train_sampler``
(length-grouped batches), ``_save`` (adapter-only LoRA checkpoints) and
``_issue_warnings_after_load`` (a checkpoint lacking a trained weight is an error). If
transformers renames one, changes its parameters or stops calling it, these tests fail loudly
instead of the override silently never running.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from transformers import Trainer, TrainingArguments

from anglekit.data.readers import read_pairs
from anglekit.losses import AnglEObjective, ObjectiveConfig
from anglekit.model.embedder import Embedder
from anglekit.training.sampler import LengthGroupedSampler
from anglekit.training.tasks import PairTask
from anglekit.training.trainer import AnglETrainer

HOOKS = {
    "_get_train_sampler": ["self", "train_dataset"],
    "_save": ["self", "output_dir", "state_dict"],
    "_issue_warnings_after_load": ["self", "load_result"],
}


@pytest.mark.parametrize(("name", "parameters"), list(HOOKS.items()))
def test_overridden_hooks_exist_with_the_same_parameters(name: str, parameters: list[str]) -> None:
    assert hasattr(Trainer, name), f"transformers.Trainer.{name} is gone; anglekit.training.trainer overrides it"
    assert list(inspect.signature(getattr(Trainer, name)).parameters) == parameters
    assert list(inspect.signature(getattr(AnglETrainer, name)).parameters)[: len(parameters)] == parameters
    assert getattr(AnglETrainer, name) is not getattr(Trainer, name)


def _trainer(tiny_bert_dir: Path, pair_file: Path, out: Path, *, batch: int = 4, accumulation: int = 1) -> AnglETrainer:
    embedder = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    task = PairTask()
    tokenized, collator = task.tokenize(read_pairs(pair_file), embedder)
    args = TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=accumulation,
        use_cpu=True,
        report_to="none",
        disable_tqdm=True,
    )
    objective = AnglEObjective(ObjectiveConfig.from_preset("cosine"))
    return AnglETrainer(model=embedder, args=args, train_dataset=tokenized, data_collator=collator, objective=objective, task=task)


def _length_grouped_samplers(loader: Any) -> list[LengthGroupedSampler]:
    samplers = [getattr(loader, "sampler", None), getattr(getattr(loader, "batch_sampler", None), "sampler", None)]
    base = getattr(loader, "base_dataloader", None)  # accelerate may wrap the loader
    if base is not None:
        samplers += [base.sampler, getattr(base.batch_sampler, "sampler", None)]
    return [s for s in samplers if isinstance(s, LengthGroupedSampler)]


def test_the_train_dataloader_uses_the_length_grouped_sampler(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    loader = _trainer(tiny_bert_dir, pair_file, tmp_path / "run").get_train_dataloader()
    assert _length_grouped_samplers(loader), loader


@pytest.mark.parametrize(("batch", "accumulation"), [(4, 1), (4, 3), (5, 2)])
def test_the_length_groups_are_one_optimizer_step(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, batch: int, accumulation: int) -> None:
    """The sampler groups per_device_train_batch_size x gradient_accumulation_steps pairs: the pairs of
    one optimizer step, so that its micro-batches are of similar length and none straddles two groups."""
    trainer = _trainer(tiny_bert_dir, pair_file, tmp_path / "run", batch=batch, accumulation=accumulation)
    samplers = _length_grouped_samplers(trainer.get_train_dataloader())
    assert samplers and all(s.batch_size == batch * accumulation for s in samplers), [s.batch_size for s in samplers]
    direct = trainer._get_train_sampler()
    assert isinstance(direct, LengthGroupedSampler) and direct.batch_size == batch * accumulation


def test_save_model_and_checkpoint_loading_go_through_the_hooks(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = _trainer(tiny_bert_dir, pair_file, tmp_path / "run")
    calls: list[str] = []
    save, warn = AnglETrainer._save, AnglETrainer._issue_warnings_after_load

    def spy_save(self: AnglETrainer, output_dir: str | None = None, state_dict: Any = None) -> None:
        calls.append("_save")
        save(self, output_dir, state_dict=state_dict)

    def spy_warn(self: AnglETrainer, load_result: Any) -> None:
        calls.append("_issue_warnings_after_load")
        warn(self, load_result)

    monkeypatch.setattr(AnglETrainer, "_save", spy_save)
    monkeypatch.setattr(AnglETrainer, "_issue_warnings_after_load", spy_warn)
    checkpoint = tmp_path / "checkpoint"
    trainer.save_model(str(checkpoint))
    assert calls == ["_save"] and any(checkpoint.glob("*.safetensors"))
    trainer._load_from_checkpoint(str(checkpoint))
    assert calls == ["_save", "_issue_warnings_after_load"]
