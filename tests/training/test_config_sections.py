"""TrainConfig in sections: flat keys and sections, transformers' spellings, pass-through to the
Trainer (report_to, run_name, optim, torch_compile, schedulers), callbacks, early validation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from transformers import SchedulerType, TrainerCallback, TrainingArguments

from anglekit.config import settings_of
from anglekit.errors import ConfigError
from anglekit.model import DEFAULT_BATCH_SIZE
from anglekit.training.config import DEFAULT_EVAL_BATCH_SIZE, LoraSection, ModelSection, TrainConfig, TrainerSection
from anglekit.training.run import train

HF_FIELDS = {f.name for f in dataclasses.fields(TrainingArguments)}


def test_eval_batch_size_default_is_the_one_inference_batch_size() -> None:
    assert DEFAULT_EVAL_BATCH_SIZE == DEFAULT_BATCH_SIZE == TrainConfig().trainer.eval_batch_size


def test_every_trainer_alias_is_a_training_arguments_field() -> None:
    """The HF spellings accepted on train are TrainingArguments' own names (fails if transformers renames one)."""
    aliases = [a for s in settings_of(TrainConfig) if s.section == "trainer" for a in s.aliases]
    assert {"per_device_train_batch_size", "num_train_epochs", "lr_scheduler_type", "gradient_accumulation_steps"} <= set(aliases)
    assert [a for a in aliases if a not in HF_FIELDS] == []


def test_hf_spellings_set_the_same_settings() -> None:
    ours = TrainConfig.from_dict({"batch_size": 4, "epochs": 2.0, "scheduler": "cosine", "gradient_accumulation": 3})
    theirs = TrainConfig.from_dict({"per_device_train_batch_size": 4, "num_train_epochs": 2.0, "lr_scheduler_type": "cosine", "gradient_accumulation_steps": 3})
    assert ours == theirs


def test_sections_in_yaml_and_flat_flags_on_top(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("model: {name: m, pooling: cls_avg}\ndata: {train_data: d.jsonl}\nlora: {enabled: true, rank: 8}\ntrainer: {batch_size: 8}\n")
    config = TrainConfig.from_yaml(path, {"lora_rank": 4, "per_device_train_batch_size": 2})
    assert (config.model.name, config.model.pooling, config.lora.rank, config.trainer.batch_size) == ("m", "cls_avg", 4, 2)
    assert TrainConfig.from_dict(config.to_dict()) == config == TrainConfig.from_dict(config.flat())


def test_sections_built_directly() -> None:
    config = TrainConfig(model=ModelSection(name="m"), lora=LoraSection(enabled=True, rank=4))
    assert config.flat()["lora_rank"] == 4 and config.flat()["model"] == "m"


@pytest.mark.parametrize("scheduler", [s.value for s in SchedulerType])
def test_every_transformers_scheduler_is_accepted(scheduler: str) -> None:
    assert TrainerSection(scheduler=scheduler).scheduler == scheduler


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"scheduler": "exponential"}, "scheduler must be one of linear"),
        ({"optim": "sgd-fast"}, "optim must be one of"),
        ({"scheduler_kwargs": "{min_lr: 1"}, "scheduler_kwargs must be a JSON object"),
        ({"scheduler_kwargs": "[1, 2]"}, "scheduler_kwargs must be a JSON object"),
        ({"device": "tpu"}, "device must be one of auto, cpu, cuda"),
        ({"report_to": 3}, "report_to must be str"),
        ({"torch_compile": "yes"}, "torch_compile must be bool"),
        ({"pooling": "mean"}, "unknown pooling 'mean'"),
        ({"objective": "paperr"}, "unknown objective preset 'paperr'"),
        ({"model_dtype": "fp8"}, "dtype must be one of fp32, bf16, fp16"),
        ({"load_in_kbit": 3, "lora": True}, "load_in_kbit must be one of 4, 8"),
        ({"quiet": 1}, "quiet must be bool"),
        ({"eval_steps": 10}, r"eval_steps \(10\) needs dev_data"),
        ({"eval_steps": 1, "test_data": "stsb:test", "probe_data": "stsb:dev"}, r"eval_steps \(1\) needs dev_data"),
        ({"eval_steps": 5, "dev_data": ""}, "needs dev_data"),
        ({"max_steps": 0}, "max_steps is 0, which trains nothing"),
        ({"max_steps": 0, "epochs": 2}, "max_steps is 0"),
    ],
)
def test_invalid_settings_fail_at_construction(data: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        TrainConfig.from_dict(data, source="run.yaml")


def test_dtype_alias_model_dtype() -> None:
    assert TrainConfig.from_dict({"model_dtype": "bf16"}).model.dtype == "bf16"
    assert TrainConfig.from_dict({"dtype": "bf16"}).model.dtype == "bf16"


class _Recorder(TrainerCallback):
    def __init__(self) -> None:
        self.args: TrainingArguments | None = None
        self.steps = 0

    def on_train_begin(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        self.args = args

    def on_step_end(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps += 1


def test_trainer_settings_and_callbacks_reach_the_trainer(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    recorder = _Recorder()
    config = TrainConfig.from_dict(
        {
            "model": str(tiny_bert_dir), "train_data": str(pair_file), "output_dir": str(tmp_path / "run"),
            "max_steps": 2, "batch_size": 4, "positive_threshold": 4.0, "device": "cpu", "precision": "fp32",
            "quiet": True, "run_name": "my-run", "optim": "adamw_torch", "scheduler": "cosine_with_min_lr",
            "scheduler_kwargs": '{"min_lr": 1e-6}', "report_to": "none",
        }
    )  # fmt: skip
    result = train(config, callbacks=[recorder])
    assert result.steps == 2 == recorder.steps
    args = recorder.args
    assert args is not None
    assert (args.run_name, args.optim, args.lr_scheduler_type, args.lr_scheduler_kwargs) == ("my-run", "adamw_torch", "cosine_with_min_lr", {"min_lr": 1e-6})
    assert args.report_to in ([], "none", ["none"]) and args.torch_compile is False
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())["train"]
    assert saved["run_name"] == "my-run" and saved["scheduler_kwargs"] == '{"min_lr": 1e-6}'


def test_wrong_objective_family_fails_before_any_data_is_read(tmp_path: Path) -> None:
    config = TrainConfig.from_dict(
        {"model": "m", "train_data": str(tmp_path / "missing.jsonl"), "objective": "paper", "margin_degrees": 5.0,
         "output_dir": str(tmp_path / "run")}
    )  # fmt: skip
    with pytest.raises(ConfigError, match="--margin-degrees applies to the contrastive"):
        train(config)
    assert not (tmp_path / "run").exists()


def test_settings_that_need_each_other_are_accepted_together() -> None:
    config = TrainConfig.from_dict({"eval_steps": 5, "dev_data": "dev.tsv", "max_steps": 1})
    assert config.trainer.eval_steps == 5 and config.trainer.max_steps == 1
    assert TrainConfig.from_dict({"max_steps": -1}).trainer.max_steps == -1


def test_cli_train_eval_steps_without_dev_data_is_one_line_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from helpers import run_cli

    code, _, err = run_cli(
        ["train", "--model", str(tmp_path / "no-model"), "--train-data", str(tmp_path / "no.tsv"), "--eval-steps", "5", "--output-dir", str(tmp_path / "run")],
        capsys,
    )
    assert code == 2 and err.count("\n") == 1 and "needs dev_data" in err and "--dev-data" in err, err
    assert not (tmp_path / "run").exists()
    code, _, err = run_cli(
        ["train", "--model", str(tmp_path / "no-model"), "--train-data", str(tmp_path / "no.tsv"), "--max-steps", "0", "--output-dir", str(tmp_path / "run")],
        capsys,
    )
    assert code == 2 and "max_steps is 0" in err and not (tmp_path / "run").exists(), err
