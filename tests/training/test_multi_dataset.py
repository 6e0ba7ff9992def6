"""Several datasets in one run: typed entries (unknown keys, bad values and names are errors), the
repeated --train-data flag, batches that never cross datasets, proportional and round-robin order,
blocks for several processes, weighted losses, per-dataset loss logs, and end-to-end runs mixing a
pair objective with a contrastive one."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.losses import ContrastiveObjective
from anglekit.training.config import TrainConfig, TrainDataEntry
from anglekit.training.multi import DatasetBatchSampler, MultiCollator, MultiDataset, Weighted
from anglekit.training.run import dataset_plans, train

import helpers

# ------------------------------------------------------------------ config


def test_entries_from_yaml_mappings_and_flag_strings() -> None:
    config = TrainConfig.from_dict(
        {"train_data": [{"data": "stsb:train", "name": "sts", "weight": 2}, "mined.jsonl;objective=simcse-sup;weight=0.5"], "dataset_order": "round_robin"}
    )
    assert config.data.datasets == (
        TrainDataEntry("stsb:train", "sts", None, 2.0),
        TrainDataEntry("mined.jsonl", "mined", "simcse-sup", 0.5),
    )
    assert config.data.dataset_order == "round_robin"
    assert TrainConfig.from_dict(config.to_dict()) == config  # round trip through plain mappings
    # a single plain spec stays a spec (the single-dataset run)
    assert TrainConfig.from_dict({"train_data": ["a.jsonl"]}).data.train_data == "a.jsonl"
    assert TrainConfig.from_dict({"train_data": ["a.jsonl"]}).data.datasets is None


@pytest.mark.parametrize(
    "value,match",
    [
        ([{"data": "a.jsonl", "wieght": 2}], "unknown key.*wieght.*valid keys: data, name, objective, weight"),
        ([{"name": "x"}], "missing key 'data'"),
        (["a.jsonl;weight=0", "b.jsonl"], "weight must be a finite number > 0, got 0.0"),
        (["a.jsonl;weight=heavy", "b.jsonl"], "weight must be a number, got 'heavy'"),
        (["a.jsonl;weight=1e999", "b.jsonl"], "weight must be a finite number > 0, got inf"),
        (["a.jsonl;colour=red", "b.jsonl"], "unknown key 'colour'"),
        (["a.jsonl;weight", "b.jsonl"], "'weight' is not KEY=VALUE"),
        (["a.jsonl;objective=nope", "b.jsonl"], "train_data entry 'a.jsonl': unknown objective preset 'nope'"),
        (["x/a.jsonl", "y/a.jsonl"], "the name\\(s\\) 'a' are used by several datasets"),
        ([], "empty list"),
        ([3, "b.jsonl"], "got int 3"),
        ([{"data": "a.jsonl", "weight": True}, "b.jsonl"], "weight must be a finite number > 0, got True"),
        (12, "must be a dataset spec or a list of them, got int"),
    ],
)
def test_bad_entries_are_config_errors(value: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        TrainConfig.from_dict({"train_data": value})


def test_bad_order_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="dataset_order must be one of proportional, round_robin"):
        TrainConfig.from_dict({"train_data": "a.jsonl", "dataset_order": "random"})


def test_repeated_flag_gives_a_list() -> None:
    from anglekit.cli import build_parser

    args = build_parser().parse_args(["train", "--train-data", "a.jsonl", "--train-data", "b.jsonl;objective=simcse-sup", "--dataset-order", "round_robin"])
    assert args.train_data == ["a.jsonl", "b.jsonl;objective=simcse-sup"] and args.dataset_order == "round_robin"
    config = TrainConfig.from_dict({"train_data": args.train_data}, source="flags")
    assert [entry.name for entry in config.data.datasets] == ["a", "b"]
    single = build_parser().parse_args(["train", "--train-data", "stsb:train"])
    assert TrainConfig.from_dict({"train_data": single.train_data}).data.train_data == "stsb:train"


def test_model_after_train_data_is_the_model() -> None:
    """--train-data takes one value per flag, so ``anglekit train --train-data DATA MODEL`` (the order
    docs and users write) names the model, not a second dataset."""
    from anglekit.cli import build_parser

    args = build_parser().parse_args(["train", "--train-data", "a.jsonl", "some/model", "--max-steps", "1"])
    assert args.train_data == ["a.jsonl"] and args.model_argument == "some/model"
    with pytest.raises(SystemExit):  # and a flag without its value is argparse's error, as before
        build_parser().parse_args(["train", "some/model", "--train-data"])


def test_objective_settings_apply_to_the_entries_whose_family_has_them() -> None:
    config = TrainConfig.from_dict(
        {"model": "m", "train_data": ["a.jsonl", "b.jsonl;objective=simcse-sup"], "objective": "cosine", "cosine_tau": 0.1, "contrastive_tau": 0.07}
    )
    plans = dataset_plans(config)
    assert [(p.name, p.objective, p.task.kind) for p in plans] == [("a", "cosine", "pairs"), ("b", "simcse-sup", "triplets")]
    assert plans[0].overrides == {"cosine_tau": 0.1} and plans[1].overrides == {"tau": 0.07}
    config = TrainConfig.from_dict({"model": "m", "train_data": ["a.jsonl", "b.jsonl"], "objective": "cosine", "contrastive_tau": 0.07})
    with pytest.raises(ConfigError, match="--contrastive-tau applies to none of the objectives of train_data \\(cosine\\)"):
        dataset_plans(config)


# ------------------------------------------------------------------ sampling


class _Rows:
    def __init__(self, n: int, base: int) -> None:
        self.n, self.base = n, base

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return self.base + i

    def lengths(self) -> list[int]:
        return [1 + (i * 7) % 5 for i in range(self.n)]


SIZES = (40, 12, 24)


def _joined() -> MultiDataset:
    return MultiDataset([_Rows(n, 1000 * k) for k, n in enumerate(SIZES)])


def _dataset_of(joined: MultiDataset, batch: list[int]) -> set[int]:
    return {joined.locate(i)[0] for i in batch}


@pytest.mark.parametrize("order", ["proportional", "round_robin"])
@pytest.mark.parametrize("budget", [None, 9])
def test_no_batch_crosses_datasets_and_every_row_comes_once(order: str, budget: int | None) -> None:
    joined = _joined()
    sampler = DatasetBatchSampler(joined, 4, order=order, seed=3, max_tokens=budget)
    batches = sampler.batches()
    assert all(len(_dataset_of(joined, b)) == 1 for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(len(joined)))
    if budget is not None:
        lengths = joined.lengths()
        assert all(len(b) * max(lengths[i] for i in b) <= budget for b in batches)
    assert len(sampler) == len(batches)


def test_proportional_order_follows_the_datasets_sizes() -> None:
    joined = MultiDataset([_Rows(400, 0), _Rows(100, 10_000)])
    counts = []
    for epoch in range(4):
        sampler = DatasetBatchSampler(joined, 4, order="proportional", seed=1)
        sampler.set_epoch(epoch)
        labels = [_dataset_of(joined, b).pop() for b in sampler.batches()]
        assert labels.count(0) == 100 and labels.count(1) == 25  # exactly each dataset's batches
        first_half = labels[: len(labels) // 2]
        counts.append(first_half.count(1) / len(first_half))
    # at any point about 25 / 125 = 0.2 of the batches come from the small dataset
    assert all(0.08 < share < 0.32 for share in counts)
    again = DatasetBatchSampler(joined, 4, order="proportional", seed=1)
    again.set_epoch(3)
    assert again.batches() == sampler.batches()  # (seed, epoch) decide


def test_round_robin_takes_one_batch_of_each_in_turn() -> None:
    joined = _joined()
    labels = [_dataset_of(joined, b).pop() for b in DatasetBatchSampler(joined, 4, order="round_robin").batches()]
    # 10, 3 and 6 batches: in turn while each lasts
    assert labels[:9] == [0, 1, 2] * 3
    assert labels[9:] == [0, 2, 0, 2, 0, 2, 0, 0, 0, 0]


def test_blocks_keep_every_process_of_a_step_on_one_dataset() -> None:
    joined = _joined()
    sampler = DatasetBatchSampler(joined, 4, order="proportional", seed=2, block=2)
    batches = sampler.batches()
    for step in range(0, len(batches), 2):
        assert len(_dataset_of(joined, batches[step]) | _dataset_of(joined, batches[step + 1])) == 1
    assert sampler.dropped == 1 and len(batches) == 10 + 2 + 6  # dataset 1's third batch left out


def test_collator_refuses_a_mixed_batch_and_tags_the_dataset() -> None:
    collator = MultiCollator([lambda items: {"rows": torch.tensor(items)}, lambda items: {"rows": torch.tensor(items)}])
    joined = _joined()
    out = collator([joined[0], joined[1]])
    assert int(out["dataset"]) == 0 and out["rows"].tolist() == [0, 1]
    with pytest.raises(ValueError, match="mixes rows of datasets \\[0, 1\\]"):
        collator([joined[0], joined[40]])


def test_weighted_objective_scales_the_loss_only() -> None:
    inner = ContrastiveObjective.from_preset("simcse-unsup")
    a, p = torch.randn(4, 8), torch.randn(4, 8)
    plain, heavy = inner(a, p), Weighted(inner, 2.5)(a, p)
    assert float(heavy.loss) == pytest.approx(2.5 * float(plain.loss))
    assert float(heavy.components["simcse"]) == pytest.approx(float(plain.components["simcse"]))


# ------------------------------------------------------------------ end to end


def _ntuples(path: Path, rows: int = 16) -> Path:
    rng = random.Random(5)
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(rows):
            record = {"anchor": helpers.random_sentence(rng), "positive": helpers.random_sentence(rng)}
            record.update({f"negative_{k}": helpers.random_sentence(rng) for k in (1, 2)})
            handle.write(json.dumps(record) + "\n")
    return path


def test_training_on_pairs_and_n_tuples_logs_each_dataset(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from anglekit.training.trainer import AnglETrainer

    seen: list[tuple[str | None, str]] = []
    route = AnglETrainer.route

    def spy(self: AnglETrainer, inputs: dict) -> Any:
        task, objective, name, rest = route(self, inputs)
        seen.append((name, task.kind))
        return task, objective, name, rest

    monkeypatch.setattr(AnglETrainer, "route", spy)
    out = tmp_path / "run"
    settings = {
        "model": str(tiny_bert_dir), "output_dir": str(out), "device": "cpu", "quiet": True, "batch_size": 4, "max_steps": 6,
        "logging_steps": 1, "objective": "cosine", "dataset_order": "round_robin",
        "train_data": [f"{pair_file};name=sts", f"{_ntuples(tmp_path / 'mined.jsonl')};objective=simcse-sup;weight=0.5"],
    }  # fmt: skip
    result = train(TrainConfig.from_dict(settings))
    assert result.steps == 6
    assert seen == [("sts", "pairs"), ("mined", "triplets")] * 3  # in turn, each batch routed to its dataset
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in records if "loss" in r]
    assert [("loss/sts" in r, "loss/mined" in r) for r in logged] == [(True, False), (False, True)] * 3
    for r in logged:
        if "loss/mined" in r:
            assert r["loss/mined"] == pytest.approx(0.5 * r["loss_mined/simcse"], rel=1e-5)
            assert r["loss"] == pytest.approx(r["loss/mined"], rel=1e-4)
        else:
            assert r["loss/sts"] == pytest.approx(r["loss_sts/cosine"], rel=1e-5)
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["batch_kind"] == {"sts": "pairs", "mined": "triplets"}
    assert "[mined, triplets, weight 0.5]" in saved["train_data"] and "2 hard negatives" in saved["train_data"]
    card = (out / "model" / "README.md").read_text()
    assert "mined: " in card and "simcse-sup, weight 0.5" in card


def test_several_datasets_refuse_train_dataset_and_bad_batches(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    settings = {"model": str(tiny_bert_dir), "output_dir": str(tmp_path / "run"), "device": "cpu", "quiet": True,
                "train_data": [str(pair_file), f"{_ntuples(tmp_path / 'm.jsonl')};objective=simcse-sup"], "batch_size": 1}  # fmt: skip
    with pytest.raises(ConfigError, match="'simcse-sup' needs batch_size >= 2"):
        train(TrainConfig.from_dict(settings))


def test_cli_bad_entry_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from anglekit.cli import main

    code = main(["train", "m", "--train-data", "a.jsonl;weight=-1", "--train-data", "b.jsonl", "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "train_data entry 'a.jsonl': weight must be a finite number > 0, got -1.0" in err
    assert not (tmp_path / "run").exists()


def test_settings_that_do_nothing_are_warned(caplog: pytest.LogCaptureFixture) -> None:
    from anglekit.data.records import PairDataset, TripletDataset
    from anglekit.training.run import warn_unused_data_settings

    data = TrainConfig.from_dict({"train_data": "a.jsonl", "pad_negatives": True, "dataset_order": "round_robin"}).data
    pairs = PairDataset(["a"], ["b"], [1.0])
    with caplog.at_level("WARNING"):
        messages = warn_unused_data_settings(data, [pairs])
    assert len(messages) == 2 and "pads nothing" in caplog.text and "this run has one" in caplog.text
    assert warn_unused_data_settings(data.__class__(train_data="a.jsonl", pad_negatives=True), [TripletDataset(["a"], ["b"], negatives=[("c",)])]) == []
