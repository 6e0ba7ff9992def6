"""Training: TrainConfig, length-grouped sampling, the pair collator, the positive rule, and
end-to-end runs on the tiny BERT (in-process, and a killed-then-resumed CLI subprocess)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from anglekit.data.beir import read_beir
from anglekit.errors import ConfigError, DataError
from anglekit.metrics.ir import evaluate_retrieval_set
from anglekit.model.embedder import Embedder
from anglekit.training.config import TrainConfig
from anglekit.training.run import TrainResult, _prepare_output_dir, train
from anglekit.training.sampler import LengthGroupedSampler
from anglekit.training.tasks import default_positive_threshold
from anglekit.training.tasks.pairs import PairCollator, TokenizedPair, TokenizedPairs

import helpers
from helpers import train_config

REPO = Path(__file__).resolve().parents[2]
LOSS_KEYS = ("loss_cosine", "loss_ibn", "loss_angle")


# ====================================================================== TrainConfig


def test_train_config_defaults_are_valid() -> None:
    config = TrainConfig()
    assert config.trainer.batch_size == 32 and config.objective.name == "paper" and config.trainer.resume is False
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_unknown_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="batchsize"):
        TrainConfig.from_dict({"model": "m", "batchsize": 8}, source="my.yaml")
    with pytest.raises(TypeError):
        TrainConfig(batchsize=8)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("batch_size", "8"),
        ("batch_size", 8.0),
        ("batch_size", True),
        ("learning_rate", "1e-5"),
        ("epochs", True),
        ("group_by_length", "yes"),
        ("group_by_length", 1),
        ("model", 3),
        ("pooling", 1),
        ("train_data", None),
        ("eval_steps", 2.5),
    ],
)
def test_wrong_type_is_a_config_error(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=field):
        TrainConfig.from_dict({field: value})
    with pytest.raises(ConfigError, match="cfg.yaml"):  # from_dict names the source
        TrainConfig.from_dict({field: value}, source="cfg.yaml")


def test_int_is_accepted_for_a_float_field() -> None:
    assert TrainConfig.from_dict({"learning_rate": 1, "epochs": 2}).trainer.learning_rate == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 0},
        {"learning_rate": -1e-5},
        {"epochs": 0.0},
        {"precision": "fp8"},
        {"scheduler": "exponential"},
        {"warmup_ratio": 1.0},
        {"warmup_steps": -1},
        {"save_total_limit": 0},
        {"eval_steps": 0},
        {"save_steps": -4},
        {"max_length": 0},
        {"gradient_accumulation": 0},
    ],
)
def test_invalid_values_are_config_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        TrainConfig.from_dict(kwargs)


def test_require_inputs() -> None:
    with pytest.raises(ConfigError, match="model, train_data"):
        TrainConfig().require_inputs()
    with pytest.raises(ConfigError, match="train_data"):
        TrainConfig.from_dict({"model": "m"}).require_inputs()
    TrainConfig.from_dict({"model": "m", "train_data": "d"}).require_inputs()


def test_yaml_round_trip(tmp_path: Path) -> None:
    config = TrainConfig.from_dict(
        dict(
            model="some/model",
            train_data="pairs.jsonl",
            dev_data="dev.tsv",
            pooling="cls_avg",
            prompt="q: {text}",
            max_length=64,
            batch_size=8,
            learning_rate=3e-5,
            epochs=0.5,
            eval_steps=10,
            cosine_weight=0.0,
            positive_threshold=4.0,
            group_by_length=False,
            device="cpu",
        )
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    assert TrainConfig.from_yaml(path) == config


def test_yaml_accepts_dashes_and_flags_override(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("model: m\ntrain-data: d.jsonl\nbatch-size: 8\nlearning_rate: 1.0e-4\n")
    config = TrainConfig.from_yaml(path, {"batch_size": 4})
    assert (config.model.name, config.data.train_data, config.trainer.batch_size, config.trainer.learning_rate) == ("m", "d.jsonl", 4, 1e-4)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("", "empty"),
        ("# only a comment\n", "empty"),
        ("model: [unclosed\n", "not valid YAML"),
        ("- model\n- train_data\n", "expected a mapping"),
        ("just a string\n", "expected a mapping"),
        ("model: m\nbogus_key: 1\n", "bogus_key"),
        ("model: m\nbatch_size: eight\n", "batch_size"),
    ],
)
def test_bad_yaml_is_a_config_error_naming_the_file(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad-config.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=match) as info:
        TrainConfig.from_yaml(path)
    assert str(path) in str(info.value)


def test_missing_or_undecodable_yaml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read") as info:
        TrainConfig.from_yaml(tmp_path / "nope.yaml")
    assert "nope.yaml" in str(info.value)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage\xc3")
    with pytest.raises(ConfigError, match="binary.yaml"):
        TrainConfig.from_yaml(binary)


# ====================================================================== LengthGroupedSampler


def _lengths(n: int = 1000, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(1, 200) for _ in range(n)]


@pytest.mark.parametrize(("n", "batch"), [(1000, 8), (37, 4), (5, 8), (1, 1), (0, 4)])
def test_sampler_is_a_permutation(n: int, batch: int) -> None:
    sampler = LengthGroupedSampler(_lengths(n), batch, seed=3)
    order = list(sampler)
    assert len(sampler) == n
    assert sorted(order) == list(range(n))


def test_sampler_order_depends_only_on_seed_and_epoch() -> None:
    lengths = _lengths()
    a = LengthGroupedSampler(lengths, 8, seed=1)
    b = LengthGroupedSampler(lengths, 8, seed=1)
    assert list(a) == list(b)
    assert list(a) == list(a)  # iterating again gives the same order
    b.set_epoch(1)
    assert list(b) != list(a)
    a.set_epoch(1)
    assert list(a) == list(b)
    assert list(LengthGroupedSampler(lengths, 8, seed=2)) != list(LengthGroupedSampler(lengths, 8, seed=1))


def test_sampler_batches_have_similar_lengths() -> None:
    lengths = _lengths(2000)
    batch = 16

    def mean_spread(order: list[int]) -> float:
        spreads = []
        for start in range(0, len(order) - batch + 1, batch):
            chunk = [lengths[i] for i in order[start : start + batch]]
            spreads.append(max(chunk) - min(chunk))
        return float(np.mean(spreads))

    grouped = mean_spread(list(LengthGroupedSampler(lengths, batch, seed=0)))
    shuffled = list(range(len(lengths)))
    random.Random(0).shuffle(shuffled)
    random_spread = mean_spread(shuffled)
    assert grouped < random_spread / 5, (grouped, random_spread)


def test_sampler_batches_are_not_sorted_globally() -> None:
    """The batches are shuffled: the order of batch lengths is not monotone."""
    lengths = _lengths(2000)
    order = list(LengthGroupedSampler(lengths, 16, seed=0))
    firsts = [lengths[order[i]] for i in range(0, len(order), 16)]
    assert firsts != sorted(firsts) and firsts != sorted(firsts, reverse=True)


def _batch_tops(order: list[int], lengths: list[int], batch: int) -> list[int]:
    return [max(lengths[i] for i in order[start : start + batch]) for start in range(0, len(order), batch)]


def test_sampler_shuffles_length_homogeneous_batches() -> None:
    """One mega-batch of distinct lengths: every batch is 8 neighbours in length order and every index
    comes once, while the order of the batches follows neither the lengths nor a fixed sequence
    (it changes with the seed and with the epoch)."""
    batch, n = 8, 800
    lengths = list(range(n))
    random.Random(0).shuffle(lengths)
    tops_by_run = {}
    for seed, epoch in ((0, 0), (0, 1), (1, 0), (2, 5)):
        sampler = LengthGroupedSampler(lengths, batch, seed=seed, mega=n // batch)
        sampler.set_epoch(epoch)
        order = list(sampler)
        assert sorted(order) == list(range(n))
        for start in range(0, n, batch):
            chunk = sorted(lengths[i] for i in order[start : start + batch])
            assert chunk == list(range(chunk[0], chunk[0] + batch)), chunk
        tops = _batch_tops(order, lengths, batch)
        assert tops != sorted(tops) and tops != sorted(tops, reverse=True)
        tops_by_run[(seed, epoch)] = tuple(tops)
    assert len(set(tops_by_run.values())) == len(tops_by_run), "the batch order does not change with seed or epoch"


def test_sampler_batch_order_is_not_sorted_inside_mega_batches() -> None:
    """With the default mega-batches (10 here) the batches' lengths rise from one batch to the next
    about as often as they fall; unshuffled they would fall inside every mega-batch."""
    lengths = _lengths(4000)
    tops = _batch_tops(list(LengthGroupedSampler(lengths, 8, seed=0)), lengths, 8)
    rises = sum(b > a for a, b in zip(tops, tops[1:], strict=False))
    assert rises > len(tops) // 4, (rises, len(tops))


def test_sampler_keeps_the_short_batch_last() -> None:
    lengths = _lengths(37)
    order = list(LengthGroupedSampler(lengths, 8, seed=0, mega=100))
    # 37 = 4 full batches + 5: the 5 shortest items (sorted descending inside the one mega-batch) come last.
    assert sorted(lengths[i] for i in order[-5:]) == sorted(lengths)[:5]


def test_sampler_rejects_bad_batch_size() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        LengthGroupedSampler([1, 2], 0)


# ====================================================================== TokenizedPairs / PairCollator


class _CountingTokenizer:
    """A tokenizer stand-in: one id per character, counting its calls."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[int]]:
        self.calls.append(list(texts))
        return [[100 + ord(c) for c in text] for text in texts]


def test_tokenized_pairs_identical_texts_share_an_id_and_are_tokenized_once() -> None:
    text1 = ["ab", "cde", "ab", "x"]
    text2 = ["cde", "ab", "fghij", "x"]
    labels = np.array([1.0, 2.5, 0.0, 5.0])
    tok = _CountingTokenizer()
    pairs = TokenizedPairs.build(text1, text2, labels, tok)
    assert len(tok.calls) == 1
    assert sorted(tok.calls[0]) == sorted({"ab", "cde", "fghij", "x"})  # each distinct text once
    assert len(pairs) == 4
    items = [pairs[i] for i in range(4)]
    assert items[0].text_id1 == items[1].text_id2 == items[2].text_id1  # "ab"
    assert items[0].text_id2 == items[1].text_id1  # "cde"
    assert items[3].text_id1 == items[3].text_id2  # "x" with itself
    assert len({items[0].text_id1, items[0].text_id2, items[2].text_id2, items[3].text_id1}) == 4
    assert items[2].ids2 == [100 + ord(c) for c in "fghij"]
    assert [item.label for item in items] == [1.0, 2.5, 0.0, 5.0]
    assert all(isinstance(item.label, float) for item in items)
    assert pairs.lengths() == [3, 3, 5, 1]


def test_tokenized_pairs_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        TokenizedPairs.build(["a", "b"], ["c"], np.array([1.0, 2.0]), _CountingTokenizer())
    with pytest.raises(ValueError):
        TokenizedPairs([[1]], np.zeros((2, 3), dtype=np.int64), np.zeros(2))


@pytest.mark.parametrize("left", [False, True])
def test_pair_collator_shapes_and_padding(left: bool) -> None:
    batch = [
        TokenizedPair([1, 2, 3], [4], 3.5, 0, 1),
        TokenizedPair([5], [6, 7, 8, 9, 10], 1, 2, 3),
        TokenizedPair([1, 2, 3], [11, 12], 0.0, 0, 4),
    ]
    out = PairCollator(pad_id=0, left_padding=left)(batch)
    assert out["input_ids"].shape == (6, 5) and out["attention_mask"].shape == (6, 5)
    assert out["input_ids"].dtype == torch.long
    assert out["labels"].dtype == torch.float32 and out["labels"].tolist() == [3.5, 1.0, 0.0]
    assert out["text_ids"].tolist() == [0, 2, 0, 1, 3, 4]  # first sides, then second sides
    sequences = [[1, 2, 3], [5], [1, 2, 3], [4], [6, 7, 8, 9, 10], [11, 12]]
    for row, seq in enumerate(sequences):
        ids = out["input_ids"][row].tolist()
        mask = out["attention_mask"][row].tolist()
        pad = 5 - len(seq)
        if left:
            assert ids == [0] * pad + seq and mask == [0] * pad + [1] * len(seq)
        else:
            assert ids == seq + [0] * pad and mask == [1] * len(seq) + [0] * pad
    with pytest.raises(ValueError, match="empty"):
        PairCollator(0)([])


def test_pair_collator_with_real_tokenizer(load_bert: Any) -> None:
    embedder = load_bert()
    pairs = TokenizedPairs.build(["a dog", "a man is playing"], ["a dog", "cat"], np.array([5, 1]), embedder.tokenize_unpadded)
    out = PairCollator(embedder.tokenizer.pad_token_id)([pairs[0], pairs[1]])
    assert out["input_ids"].shape == (4, 6)  # [CLS] a man is playing [SEP]
    assert out["text_ids"][0] == out["text_ids"][2]  # "a dog" on both sides of pair 0
    vectors = embedder(input_ids=out["input_ids"], attention_mask=out["attention_mask"])
    assert vectors.shape == (4, 32)


# ====================================================================== positive rule


def test_default_positive_threshold() -> None:
    scores = np.array([0.0, 1.2, 3.3, 5.0])
    assert default_positive_threshold((0.0, 5.0), scores) == pytest.approx(4.0)
    assert default_positive_threshold((1.0, 5.0), scores) == pytest.approx(4.2)
    assert default_positive_threshold(None, np.array([0.0, 1.0, 1.0, 0.0])) == 1.0
    assert default_positive_threshold(None, np.array([1.0, 1.0])) == 1.0
    with pytest.raises(ConfigError, match="positive_threshold"):
        default_positive_threshold(None, scores)
    with pytest.raises(ConfigError, match="positive_threshold"):
        default_positive_threshold(None, np.array([0.0, 0.5, 1.0]))


def test_scores_without_range_and_without_threshold_refuse_to_train(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    config = TrainConfig.from_dict(dict(model=str(tiny_bert_dir), train_data=str(pair_file), output_dir=str(tmp_path / "run"), device="cpu", quiet=True))
    with pytest.raises(ConfigError, match="positive_threshold"):
        train(config)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


# ====================================================================== end to end (in-process)


def _config(tiny_bert_dir: Path, pair_file: Path, output_dir: Path, **kwargs: Any) -> TrainConfig:
    return train_config(
        tiny_bert_dir,
        pair_file,
        output_dir,
        **{
            "max_steps": 6,
            "batch_size": 4,
            "logging_steps": 1,
            "learning_rate": 1e-3,
            "positive_threshold": 4.0,
            "device": "cpu",
            "precision": "fp32",
            **kwargs,
        },
    )


@pytest.fixture(scope="module")
def trained_run(tiny_bert_dir: Path, pair_file: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """One short training run without a dev set, shared by the tests that inspect its outputs."""
    out = tmp_path_factory.mktemp("trained") / "run"
    result = train(_config(tiny_bert_dir, pair_file, out))
    return result, out


def test_training_writes_metrics_with_loss_components(trained_run: tuple[Any, Path]) -> None:
    result, out = trained_run
    records = helpers.read_jsonl(out / "metrics.jsonl")
    train_records = [r for r in records if "loss" in r]
    assert [r["step"] for r in train_records] == [1, 2, 3, 4, 5, 6]
    objective = json.loads((out / "train_config.json").read_text())["objective"]
    for r in train_records:
        for key in LOSS_KEYS:
            assert key in r and math.isfinite(r[key]), (key, r)
        # With logging_steps=1 the logged loss is the weighted sum of this step's components.
        weighted = sum(objective[f"{k}_weight"] * r[f"loss_{k}"] for k in ("cosine", "ibn", "angle"))
        assert r["loss"] == pytest.approx(weighted, rel=1e-4)
    assert not any("eval_spearman" in r for r in records)


def test_results_written_before_tokenize_seconds_still_read(trained_run: tuple[Any, Path]) -> None:
    result, out = trained_run
    data = json.loads((out / "results.json").read_text())
    del data["tokenize_seconds"]
    old = TrainResult.from_dict(data)
    assert old.tokenize_seconds is None and old.steps == result.steps == 6
    assert "tokenizing" not in old.table() and "tokenizing" in result.table()


def test_training_writes_results_and_a_loadable_model(trained_run: tuple[Any, Path], tiny_bert_dir: Path) -> None:
    from anglekit.model.embedder import Embedder

    result, out = trained_run
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 6 == result.steps
    assert results["model_dir"] == str(out / "model")
    assert results["best_checkpoint"] is None
    assert results["pairs_per_second"] > 0
    assert results["tokenize_seconds"] == result.tokenize_seconds and result.tokenize_seconds > 0
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["train"]["max_steps"] == 6 and saved["objective"]["positive_threshold"] == 4.0
    model = Embedder.from_pretrained(out / "model", device="cpu")
    vectors = model.encode(["a man is playing the guitar .", "dog"])
    assert vectors.shape == (2, 32) and np.isfinite(vectors).all()
    # It learned something: the weights moved away from the starting point.
    start = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    assert not np.allclose(vectors, start.encode(["a man is playing the guitar .", "dog"]), atol=1e-4)
    assert "model saved to" in result.table()


def test_a_second_run_into_the_same_output_dir_is_refused(trained_run: tuple[Any, Path], tiny_bert_dir: Path, pair_file: Path) -> None:
    _, out = trained_run
    before = (out / "metrics.jsonl").read_text()
    with pytest.raises(ConfigError, match="already holds a run") as info:
        train(_config(tiny_bert_dir, pair_file, out))
    assert "--resume" in str(info.value) and "--overwrite-output-dir" in str(info.value)
    assert (out / "metrics.jsonl").read_text() == before


def test_prepare_output_dir(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _prepare_output_dir(TrainConfig.from_dict(dict(output_dir=str(out))).trainer) is None  # fresh
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(ConfigError, match="already holds a run"):
        _prepare_output_dir(TrainConfig.from_dict(dict(output_dir=str(out))).trainer)
    for step in (2, 10):
        checkpoint = out / f"checkpoint-{step}"
        checkpoint.mkdir()
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        (checkpoint / "model.safetensors").write_bytes(b"weights")
    (out / "checkpoint-12").mkdir()  # killed while saving: no trainer_state.json yet
    assert _prepare_output_dir(TrainConfig.from_dict(dict(output_dir=str(out), resume=True)).trainer) == str(out / "checkpoint-10")
    assert _prepare_output_dir(TrainConfig.from_dict(dict(output_dir=str(out), overwrite_output_dir=True)).trainer) is None
    assert sorted(p.name for p in out.iterdir()) == []
    # --resume with nothing to resume starts from the beginning.
    assert _prepare_output_dir(TrainConfig.from_dict(dict(output_dir=str(tmp_path / "empty"), resume=True)).trainer) is None


def _complete_checkpoint(path: Path, step: int) -> None:
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"weights")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))


def test_resume_skips_a_half_written_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _complete_checkpoint(out / "checkpoint-4", 4)
    (out / "checkpoint-8").mkdir()  # killed while saving: weights started, no trainer_state.json yet
    (out / "checkpoint-8" / "model.safetensors").write_bytes(b"trunc")
    assert _prepare_output_dir(TrainConfig.from_dict(dict(output_dir=str(out), resume=True)).trainer) == str(out / "checkpoint-4")


def test_training_with_dev_set_evaluates_and_keeps_the_best_checkpoint(tiny_bert_dir: Path, pair_file: Path, dev_pair_file: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    out = tmp_path / "run"
    result = train(_config(tiny_bert_dir, pair_file, out, dev_data=str(dev_pair_file), eval_steps=3, max_steps=6))
    records = helpers.read_jsonl(out / "metrics.jsonl")
    evals = [r for r in records if "eval_spearman" in r]
    assert [r["step"] for r in evals] == [3, 6]
    for r in evals:
        assert -100.0 <= r["eval_spearman"] <= 100.0 and -100.0 <= r["eval_pearson"] <= 100.0
    assert any(set(LOSS_KEYS) <= set(r) for r in records)
    best = result.best_checkpoint
    assert best is not None and Path(best).name in ("checkpoint-3", "checkpoint-6") and Path(best).is_dir()
    assert json.loads((out / "results.json").read_text())["best_checkpoint"] == best
    state = json.loads((Path(best) / "trainer_state.json").read_text())
    assert state["best_model_checkpoint"] == best
    scores = {r["step"]: r["eval_spearman"] for r in evals}
    assert state["best_metric"] == pytest.approx(max(scores.values()))
    # The saved model is the best checkpoint's weights (load_best_model_at_end).
    checkpoint = load_file(str(Path(best) / "model.safetensors"))
    final = load_file(str(out / "model" / "model.safetensors"))
    compared = 0
    for name, tensor in final.items():
        key = f"backbone.{name}"
        if key in checkpoint:
            torch.testing.assert_close(tensor, checkpoint[key], rtol=0, atol=0)
            compared += 1
    assert compared >= len(final) - 2  # every weight (a tied/buffer name or two may be stored once)


@pytest.mark.parametrize("steps", [{"save_steps": 4}, {"save_steps": 4, "eval_steps": 3}])
def test_dev_set_with_save_steps_works_or_is_a_config_error(
    tiny_bert_dir: Path, pair_file: Path, dev_pair_file: Path, tmp_path: Path, steps: dict[str, int]
) -> None:
    config = _config(tiny_bert_dir, pair_file, tmp_path / "run", dev_data=str(dev_pair_file), max_steps=4, **steps)
    try:
        train(config)
    except ConfigError as exc:
        assert "save_steps" in str(exc)


# ====================================================================== kill and resume (CLI subprocess)


def _train_argv(tiny_bert_dir: Path, pair_file: Path, out: Path) -> list[str]:
    return [
        "train",
        "--model", str(tiny_bert_dir),
        "--train-data", str(pair_file),
        "--output-dir", str(out),
        "--max-steps", "12",
        "--save-steps", "4",
        "--batch-size", "4",
        "--logging-steps", "1",
        "--learning-rate", "1e-3",
        "--positive-threshold", "4.0",
        "--device", "cpu",
        "--precision", "fp32",
        "--quiet",
    ]  # fmt: skip


def _checkpoint_done(path: Path, step: int) -> bool:
    try:
        state = json.loads((path / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return state.get("global_step") == step and (path / "model.safetensors").is_file()


def _kill(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


def _console_script() -> list[str]:
    script = Path(sys.executable).with_name("anglekit")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "anglekit.cli"]


@pytest.fixture(scope="module")
def killed_and_resumed(tiny_bert_dir: Path, pair_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """SIGKILL a CLI training run (12 steps, a checkpoint every 4) once checkpoint-4 is complete and
    step 5 is logged, then rerun the same command (refused), then with --resume (finishes).

    Returns what the tests below inspect; every child process is killed in a finally.
    """
    root = tmp_path_factory.mktemp("kill-resume")
    out = root / "run"
    argv = _train_argv(tiny_bert_dir, pair_file, out)
    env = {**os.environ, "ANGLEKIT_TEST_STEP_SLEEP": "0", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    info: dict[str, Any] = {"out": out, "argv": argv}
    held = root / "held"
    with (root / "first.log").open("w") as log:
        # The run is held before step 6 (see helpers._slow_cli) until it is killed: the kill lands
        # mid-run by construction, after checkpoint-4 and the log of step 5.
        first = subprocess.Popen(
            [sys.executable, str(Path(helpers.__file__)), "slow-cli", *argv], cwd=root,
            env={**env, "ANGLEKIT_TEST_HOLD_AT_STEP": "6", "ANGLEKIT_TEST_HOLD_FILE": str(held)},
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 240

            def logged_step_5() -> bool:
                try:
                    return any(r.get("step") == 5 and "loss" in r for r in helpers.read_jsonl(out / "metrics.jsonl"))
                except (OSError, ValueError):
                    return False

            while not held.exists():
                if first.poll() is not None:
                    pytest.fail(f"training exited ({first.returncode}) early:\n{(root / 'first.log').read_text()[-3000:]}")
                if time.monotonic() > deadline:  # only a guard against a hang
                    pytest.fail("the run did not reach step 6 within 240 s")
                time.sleep(0.05)
            assert _checkpoint_done(out / "checkpoint-4", 4) and logged_step_5()
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=60)
        finally:
            _kill(first)
    info["kill_returncode"] = first.returncode
    info["checkpoint_4_complete"] = _checkpoint_done(out / "checkpoint-4", 4)
    info["finished_before_kill"] = (out / "results.json").exists() or (out / "checkpoint-12").exists()
    info["metrics_at_kill"] = helpers.read_jsonl(out / "metrics.jsonl")
    # Without --resume the same command is refused (exit 2, nothing touched).
    info["refused"] = subprocess.run([*_console_script(), *argv], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    info["resumed"] = subprocess.run([*_console_script(), *argv, "--resume"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    return info


def test_kill_leaves_a_complete_checkpoint(killed_and_resumed: dict[str, Any]) -> None:
    info = killed_and_resumed
    assert info["kill_returncode"] == -signal.SIGKILL
    assert info["checkpoint_4_complete"]
    assert not info["finished_before_kill"]
    steps = [r["step"] for r in info["metrics_at_kill"] if "loss" in r]
    assert 5 <= max(steps) < 12


def test_rerun_without_resume_is_refused(killed_and_resumed: dict[str, Any]) -> None:
    refused = killed_and_resumed["refused"]
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "already holds a run" in refused.stderr and "--resume" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_resume_finishes_the_run(killed_and_resumed: dict[str, Any]) -> None:
    info = killed_and_resumed
    out: Path = info["out"]
    resumed = info["resumed"]
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    state = json.loads((out / "checkpoint-12" / "trainer_state.json").read_text())
    assert state["global_step"] == 12 and state["max_steps"] == 12  # as an uninterrupted run
    assert json.loads((out / "results.json").read_text())["steps"] == 12
    records = helpers.read_jsonl(out / "metrics.jsonl")
    logged = [r["step"] for r in records if "loss" in r]
    killed_at = max(r["step"] for r in info["metrics_at_kill"] if "loss" in r)
    assert killed_at > 4
    # Steps the killed run logged after its checkpoint were trimmed and redone: each step once.
    assert logged == list(range(1, 13))
    assert all(key in r for r in records if "loss" in r for key in LOSS_KEYS)


def test_resumed_run_equals_an_uninterrupted_run(killed_and_resumed: dict[str, Any], tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    """Same seed and settings, run in one go (in-process): same steps, same final weights."""
    from safetensors.torch import load_file

    out: Path = killed_and_resumed["out"]
    assert killed_and_resumed["resumed"].returncode == 0
    reference_out = tmp_path / "reference"
    reference = train(_config(tiny_bert_dir, pair_file, reference_out, max_steps=12, save_steps=4))
    assert reference.steps == 12
    resumed_weights = load_file(str(out / "model" / "model.safetensors"))
    reference_weights = load_file(str(reference_out / "model" / "model.safetensors"))
    assert resumed_weights.keys() == reference_weights.keys()
    for name in reference_weights:
        torch.testing.assert_close(resumed_weights[name], reference_weights[name], rtol=1e-5, atol=1e-6, msg=name)
    # And the logged losses of the steps after the checkpoint agree too.
    ours = {r["step"]: r["loss"] for r in helpers.read_jsonl(out / "metrics.jsonl")[len(killed_and_resumed["metrics_at_kill"]) :] if "loss" in r}
    theirs = {r["step"]: r["loss"] for r in helpers.read_jsonl(reference_out / "metrics.jsonl") if "loss" in r}
    for step, loss in ours.items():
        assert loss == pytest.approx(theirs[step], rel=1e-4), step


def test_resumed_metrics_have_each_step_once(killed_and_resumed: dict[str, Any]) -> None:
    records = helpers.read_jsonl(killed_and_resumed["out"] / "metrics.jsonl")
    steps = [r["step"] for r in records if "loss" in r]
    assert steps == list(range(1, 13))


def test_fp16_without_a_gpu_is_a_clear_error(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: fp16 is valid here")
    with pytest.raises(ConfigError, match="fp16 needs a CUDA GPU"):
        train(_config(tiny_bert_dir, pair_file, tmp_path / "run", precision="fp16"))
    assert not (tmp_path / "run" / "model").exists()


def test_bf16_mixed_precision_trains_on_the_cpu(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    """bf16 autocast (the GPU default where supported) also runs on the CPU: a finite loss, a saved model."""
    result = train(_config(tiny_bert_dir, pair_file, tmp_path / "run", precision="bf16", max_steps=3))
    assert result.steps == 3
    losses = [r["loss"] for r in helpers.read_jsonl(tmp_path / "run" / "metrics.jsonl") if "loss" in r]
    assert losses and all(np.isfinite(losses))
    assert (result.model_dir / "anglekit_config.json").is_file()


def test_training_with_a_dev_retrieval_set_keeps_the_best_checkpoint_by_ndcg(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    rng = random.Random(3)
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": helpers.random_sentence(rng)}) + "\n" for i in range(40)))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": helpers.random_sentence(rng)}) + "\n" for i in range(10)))
    (folder / "qrels" / "dev.tsv").write_text("".join(f"q{i}\td{3 * i}\t1\n" for i in range(10)))
    (folder / "qrels" / "test.tsv").write_text("q0\td1\t1\n")  # not used: training scores the dev judgements
    out = tmp_path / "run"
    result = train(_config(tiny_bert_dir, pair_file, out, dev_retrieval=str(folder), eval_steps=3, max_steps=6))
    evals = [r for r in helpers.read_jsonl(out / "metrics.jsonl") if "eval_ndcg@10" in r]
    assert [r["step"] for r in evals] == [3, 6]
    assert all(0 <= r["eval_ndcg@10"] <= 1 and "eval_map@100" in r and "eval_spearman" not in r for r in evals)
    state = json.loads((Path(result.best_checkpoint) / "trainer_state.json").read_text())
    assert state["best_metric"] == pytest.approx(max(r["eval_ndcg@10"] for r in evals))
    # with query/document prompts the dev metric scores the model as it is used: the trained model's
    # encode_query/encode_document give the figure logged at its one evaluation (and not the role-less one)
    roled = train(_config(tiny_bert_dir, pair_file, tmp_path / "roled", dev_retrieval=str(folder), eval_steps=3, max_steps=3,
                          prompts={"query": "find: ", "document": "text about "}))  # fmt: skip
    logged = next(r for r in helpers.read_jsonl(tmp_path / "roled" / "metrics.jsonl") if "eval_ndcg@10" in r)
    model = Embedder.from_pretrained(roled.model_dir, device="cpu")
    data = read_beir(folder, split="dev")
    scored = evaluate_retrieval_set(model.encode_document, data, encode_queries=model.encode_query)["metrics"]
    assert logged["eval_ndcg@10"] == pytest.approx(scored["ndcg@10"], abs=1e-5)
    assert logged["eval_map@100"] == pytest.approx(scored["map@100"], abs=1e-5)
    assert evaluate_retrieval_set(model.encode, data)["metrics"]["map@100"] != pytest.approx(scored["map@100"], abs=1e-5)
    with pytest.raises(DataError, match="unknown corpus id 'nope'"):
        (folder / "qrels" / "dev.tsv").write_text("q0\tnope\t1\n")
        train(_config(tiny_bert_dir, pair_file, tmp_path / "run2", dev_retrieval=str(folder)))
    assert not (tmp_path / "run2" / "model").exists()
