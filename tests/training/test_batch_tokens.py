"""--max-batch-tokens: token-budget batches (sampler, settings, the trainer's loader, resume, the loss)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.training.config import TrainConfig
from anglekit.training.run import train
from anglekit.training.sampler import TokenBudgetBatchSampler
from anglekit.training.trainer import AnglETrainer

import helpers
from helpers import train_config


def _lengths(n: int, seed: int = 0, low: int = 1, high: int = 60) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(low, high) for _ in range(n)]


# ====================================================================== the sampler


@pytest.mark.parametrize(("n", "budget"), [(1, 10), (97, 64), (500, 200), (300, 7)])
def test_every_batch_holds_the_budget_and_every_row_comes_once(n: int, budget: int) -> None:
    lengths = _lengths(n, seed=n)
    sampler = TokenBudgetBatchSampler(lengths, budget, seed=5)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        seen = sorted(i for batch in batches for i in batch)
        assert seen == list(range(n))  # every row exactly once per epoch
        for batch in batches:
            width = max(lengths[i] for i in batch)
            # brute force: the budget holds, or the batch is one row longer than the budget
            assert len(batch) * width <= budget or (len(batch) == 1 and lengths[batch[0]] > budget), (batch, width)


def test_batches_are_filled_greedily_from_length_sorted_rows() -> None:
    """No batch could take the next row of the sorted order without breaking the budget (a
    budget that still holds room is not wasted), checked against a brute-force packing."""
    lengths = _lengths(400, seed=2)
    budget = 150
    sampler = TokenBudgetBatchSampler(lengths, budget, seed=0)
    expected: list[int] = []
    batch: list[int] = []
    for length in sorted(lengths):
        if batch and (len(batch) + 1) * max(batch + [length]) > budget:
            expected.append(len(batch))
            batch = []
        batch.append(length)
    expected.append(len(batch))
    assert sorted(len(b) for b in sampler) == sorted(expected)


def test_a_row_longer_than_the_budget_is_a_batch_alone() -> None:
    lengths = [5, 5, 50, 5, 70, 5]
    sampler = TokenBudgetBatchSampler(lengths, 20, seed=0)
    batches = list(sampler)
    assert [2] in batches and [4] in batches
    assert sampler.oversized == 2
    assert sorted(len(b) for b in batches) == [1, 1, 4]


def test_same_seed_and_epoch_give_the_same_batches() -> None:
    lengths = _lengths(300, seed=1, high=12)  # many ties: which rows share a batch is up to the seed
    a = TokenBudgetBatchSampler(lengths, 64, seed=1)
    b = TokenBudgetBatchSampler(lengths, 64, seed=1)
    for epoch in (0, 1, 4):
        a.set_epoch(epoch)
        b.set_epoch(epoch)
        assert list(a) == list(b)
    a.set_epoch(0)
    b.set_epoch(1)
    assert list(a) != list(b) and len(a) == len(b)  # a new epoch: new batches, the same count
    assert list(TokenBudgetBatchSampler(lengths, 64, seed=2)) != list(TokenBudgetBatchSampler(lengths, 64, seed=1))
    sets = [{frozenset(batch) for batch in TokenBudgetBatchSampler(lengths, 64, seed=seed)} for seed in (1, 2)]
    assert sets[0] != sets[1]  # not only the order of the batches: their rows too


def test_several_processes_each_get_whole_batches() -> None:
    """accelerate deals the batch sampler's batches to processes (BatchSamplerShard): each process
    trains whole token-budget batches, together all of them."""
    from accelerate.data_loader import BatchSamplerShard

    lengths = _lengths(211, seed=3)
    sampler = TokenBudgetBatchSampler(lengths, 90, seed=0)
    batches = [tuple(b) for b in sampler]
    for processes in (2, 3):
        shards = [list(BatchSamplerShard(sampler, processes, rank)) for rank in range(processes)]
        assert len({len(s) for s in shards}) == 1  # the same number of steps on every process
        dealt = [tuple(b) for shard in shards for b in shard]
        assert set(dealt) == set(batches)  # whole batches, none lost (a few repeated to even out)
        assert all(b in set(batches) for b in dealt)


def test_bad_budget_is_an_error() -> None:
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        TokenBudgetBatchSampler([1, 2], 0)


def test_empty_dataset_has_no_batches() -> None:
    sampler = TokenBudgetBatchSampler([], 10)
    assert len(sampler) == 0 and list(sampler) == []


# ====================================================================== settings


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"max_batch_tokens": 0}, "max_batch_tokens"),
        ({"max_batch_tokens": -5}, "max_batch_tokens"),
        ({"max_batch_tokens": "many"}, "max_batch_tokens"),
        ({"max_batch_tokens": 100, "group_by_length": False}, "needs group_by_length"),
        ({"max_batch_tokens": 100, "max_length": 128}, "below max_length"),
    ],
)
def test_bad_settings_are_config_errors(settings: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        TrainConfig.from_dict(settings)


def test_the_setting_round_trips() -> None:
    config = TrainConfig.from_dict({"max_batch_tokens": 256, "max_length": 256})
    assert config.trainer.max_batch_tokens == 256
    assert TrainConfig.from_dict(config.to_dict()) == config


# ====================================================================== training


def _config(tiny_bert_dir: Path, pair_file: Path, output_dir: Path, **kwargs: Any) -> TrainConfig:
    return train_config(
        tiny_bert_dir,
        pair_file,
        output_dir,
        **{"max_batch_tokens": 48, "logging_steps": 1, "learning_rate": 1e-3, "positive_threshold": 4.0, "device": "cpu", "precision": "fp32", **kwargs},
    )


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[int, int], ...]]:
    """Each training batch's rows as (text id 1, text id 2) pairs, in the order trained."""
    seen: list[tuple[tuple[int, int], ...]] = []
    original = AnglETrainer.compute_loss

    def compute_loss(self: AnglETrainer, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if model.training:
            ids = inputs["text_ids"].tolist()
            half = len(ids) // 2
            seen.append(tuple(zip(ids[:half], ids[half:], strict=False)))
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(AnglETrainer, "compute_loss", compute_loss)
    return seen


def _budget_holds(batches: list[tuple[tuple[int, int], ...]], lengths_by_text: dict[int, int], budget: int) -> bool:
    return all(len(b) * max(max(lengths_by_text[a], lengths_by_text[c]) for a, c in b) <= budget for b in batches)


def test_training_uses_token_budget_batches_and_resume_skips_exactly_the_trained_ones(
    tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An uninterrupted run's batches equal a run resumed from a checkpoint in its second epoch
    (the resumed run trains exactly the batches after it), with gradient accumulation 2."""
    seen = _recording(monkeypatch)
    from anglekit.data.readers import read_pairs
    from anglekit.model.embedder import Embedder
    from anglekit.training.tasks import TASKS

    embedder = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    tokenized, _ = TASKS["pairs"].tokenize(read_pairs(str(pair_file)), embedder)
    batches_per_epoch = len(TokenBudgetBatchSampler(tokenized.lengths(), 48))
    steps_per_epoch = batches_per_epoch // 2 + batches_per_epoch % 2
    assert batches_per_epoch >= 6  # 64 pairs in batches of ~48 tokens
    total = steps_per_epoch + 3
    checkpoint = steps_per_epoch + 1  # in the second epoch
    full = train(_config(tiny_bert_dir, pair_file, tmp_path / "full", max_steps=total, save_steps=checkpoint, gradient_accumulation=2))
    assert full.steps == total
    uninterrupted = list(seen)
    text_length = {t: len(ids) for t, ids in enumerate(tokenized.token_ids)}
    assert _budget_holds(uninterrupted, text_length, 48)
    first_epoch = uninterrupted[:batches_per_epoch]
    assert sorted(p for b in first_epoch for p in b) == sorted(tuple(int(v) for v in row) for row in tokenized.pair_text_ids)
    assert len({len(b) for b in uninterrupted}) > 1  # the number of pairs per batch varies

    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    shutil.copytree(tmp_path / "full" / f"checkpoint-{checkpoint}", resumed_dir / f"checkpoint-{checkpoint}")
    shutil.copy(tmp_path / "full" / "train_config.json", resumed_dir / "train_config.json")
    seen.clear()
    resumed = train(_config(tiny_bert_dir, pair_file, resumed_dir, max_steps=total, save_steps=checkpoint, gradient_accumulation=2, resume=True))
    assert resumed.steps == total
    trained_before = batches_per_epoch + (checkpoint - steps_per_epoch) * 2
    assert seen == uninterrupted[trained_before:]


def test_in_batch_loss_of_a_varying_batch_is_the_objective_on_that_batch_alone(load_bert: Any, pair_file: Path, tmp_path: Path) -> None:
    """With in-batch negatives (the paper's objective), each token-budget batch's loss equals the
    objective applied to that batch's pairs, each text embedded alone (no padding, no other rows)."""
    from transformers import TrainingArguments

    from anglekit.data.readers import read_pairs
    from anglekit.losses import AnglEObjective, ObjectiveConfig
    from anglekit.training.tasks import TASKS

    embedder = load_bert()
    task = TASKS["pairs"]
    tokenized, collator = task.tokenize(read_pairs(str(pair_file)), embedder)
    objective = AnglEObjective(ObjectiveConfig.from_preset("paper", positive_threshold=4.0))
    assert objective.config.ibn_weight > 0
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", remove_unused_columns=False, seed=3)
    trainer = AnglETrainer(model=embedder, args=args, train_dataset=tokenized, data_collator=collator, objective=objective, max_batch_tokens=60)
    loader = trainer.get_train_dataloader()
    sampler = trainer.token_budget_sampler()
    embedder.eval()  # no dropout: the reference must see the same network
    sizes = set()
    with torch.no_grad():
        for inputs, rows in zip(loader, sampler.batches(), strict=True):
            sizes.add(len(rows))
            loss = trainer.compute_loss(embedder, inputs)
            pairs = [tokenized[i] for i in rows]

            def alone(ids: list[int]) -> torch.Tensor:
                return embedder(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long))[0]

            first = torch.stack([alone(p.ids1) for p in pairs])
            second = torch.stack([alone(p.ids2) for p in pairs])
            labels = torch.tensor([p.label for p in pairs], dtype=torch.float32)
            ids1 = torch.tensor([p.text_id1 for p in pairs])
            ids2 = torch.tensor([p.text_id2 for p in pairs])
            reference = objective(first, second, labels, ids1, ids2).loss
            torch.testing.assert_close(loss, reference, rtol=1e-4, atol=1e-5)
    assert len(sizes) > 1


def test_a_budget_below_every_row_trains_in_batches_of_one(
    tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    seen = _recording(monkeypatch)
    with caplog.at_level("WARNING", logger="anglekit.training.trainer"):
        result = train(_config(tiny_bert_dir, pair_file, tmp_path / "run", max_batch_tokens=1, max_steps=3, objective="cosine"))
    assert result.steps == 3 and [len(b) for b in seen] == [1, 1, 1]
    assert "64 training row(s) are longer than max_batch_tokens=1" in caplog.text


def test_gradcache_takes_token_budget_batches(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GradCache embeds a varying batch in chunks; the run trains and every batch holds the budget."""
    seen: list[int] = []
    from anglekit.training import trainer as trainer_module

    original = trainer_module.gradcache_step

    def step(task: Any, services: Any, objective: Any, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        seen.append(int(inputs["labels"].shape[0]))
        return original(task, services, objective, model, inputs, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "gradcache_step", step)
    result = train(_config(tiny_bert_dir, pair_file, tmp_path / "run", max_steps=4, gradcache_chunk_size=3))
    assert result.steps == 4 and len(seen) == 4 and len(set(seen)) > 1


def test_cli_refuses_a_budget_without_length_grouping(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, capsys: Any) -> None:
    code, _, err = helpers.run_cli(
        ["train", "--model", str(tiny_bert_dir), "--train-data", str(pair_file), "--output-dir", str(tmp_path / "o"),
         "--max-batch-tokens", "64", "--no-group-by-length"],
        capsys,
    )  # fmt: skip
    assert code == 2 and "needs group_by_length" in err and not (tmp_path / "o").exists()


def test_two_processes_each_train_whole_token_budget_batches(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """A real 2-process (gloo) run under torchrun with in-batch candidates gathered: at step k
    process 0 trains batch 2k and process 1 batch 2k+1 of the sampler, whole, so each anchor meets
    the positives of both (simcse-unsup: a batch's own sentences)."""
    import json
    import os
    import subprocess
    import sys

    from anglekit.model.embedder import Embedder
    from anglekit.training.tasks import TASKS

    sentences = tmp_path / "s.txt"
    rng = random.Random(0)
    sentences.write_text("".join(helpers.random_sentence(rng) + "\n" for _ in range(40)), encoding="utf-8")
    config = TrainConfig.from_dict({"model": str(tiny_bert_dir), "train_data": str(sentences), "objective": "simcse-unsup"})
    task = TASKS["sentences"]
    tokenized, _ = task.tokenize(task.load_data(config.data), Embedder.from_pretrained(tiny_bert_dir, device="cpu"))
    batches = list(TokenBudgetBatchSampler(tokenized.lengths(), 40, seed=42))
    assert len({len(b) for b in batches[:6]}) > 1
    expected = [float(len(batches[2 * k]) + len(batches[2 * k + 1])) for k in range(3)]

    out = tmp_path / "run"
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [
        str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "anglekit.cli", "train",
        "--model", str(tiny_bert_dir), "--train-data", str(sentences), "--objective", "simcse-unsup",
        "--max-batch-tokens", "40", "--max-steps", "3", "--logging-steps", "1", "--output-dir", str(out), "--device", "cpu",
        "--quiet", "--seed", "42",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["candidates"] for r in records if "loss" in r] == expected
