"""GradCache: the gradient of a chunked step equals the full-batch gradient (float64, a tiny random
BERT with dropout on, seeded alike), through every task and with Matryoshka; its errors; and the
pins of the transformers.Trainer pieces its training_step relies on."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from transformers import Trainer, TrainingArguments

from anglekit.data.readers import read_pairs
from anglekit.errors import ConfigError
from anglekit.losses import (
    AnglEObjective,
    ContrastiveObjective,
    ESEObjective,
    MatryoshkaConfig,
    MatryoshkaObjective,
    ObjectiveConfig,
)
from anglekit.model.embedder import Embedder
from anglekit.training.config import TrainConfig
from anglekit.training.gradcache import gradcache_step
from anglekit.training.tasks import PairTask, SentenceTask, TripletTask
from anglekit.training.trainer import AnglETrainer

import helpers

TEXTS = [
    "a man plays a guitar", "the dog runs", "two dogs run in the park", "wow", "a woman is cooking",
    "the cat sleeps on the sofa", "a child rides a bike", "people walk in the rain", "the sun is hot",
    "a man plays the piano", "the dog sleeps", "a bird sings",
]  # fmt: skip


Services = helpers.SoloServices


@pytest.fixture
def model(tiny_bert_dir: Path) -> Embedder:
    embedder = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", device="cpu").double()
    embedder.train()  # dropout on (BERT's 0.1 on hidden states and attention)
    assert any(isinstance(m, nn.Dropout) and m.p > 0 for m in embedder.modules())
    return embedder


def _batch(task: Any, model: Embedder) -> dict[str, Tensor]:
    if isinstance(task, PairTask):
        padded = model.tokenize(TEXTS)  # 6 pairs: first texts, then second texts
        labels = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
        return {**padded, "labels": labels, "text_ids": torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 11])}
    if isinstance(task, SentenceTask):
        padded = model.tokenize(TEXTS[:8])
        return {**padded, "text_ids": torch.tensor([0, 1, 2, 3, 4, 5, 6, 1])}
    padded = model.tokenize(TEXTS)  # 4 triplets: anchors, positives, hard negatives
    return {**padded, "text_ids": torch.arange(12), "parts": torch.tensor(3)}


def _grads(model: nn.Module) -> dict[str, Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


def _reference(task: Any, objective: Any, model: Embedder, inputs: dict[str, Tensor], chunk: int, seed: int) -> tuple[Tensor, dict[str, Tensor], Tensor]:
    """The full batch's loss and gradient, embedded chunk by chunk *with* gradients (the same
    dropout draws as GradCache's first pass), backpropagated once."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    rows = task.model_inputs(inputs)
    n = rows["input_ids"].shape[0]
    parts = [model(**{k: v[s : s + chunk] for k, v in rows.items()}) for s in range(0, n, chunk)]
    _, out, _ = task.loss_from_vectors(Services(), objective, torch.cat(parts), inputs)
    out.loss.backward()
    return out.loss.detach(), _grads(model), torch.get_rng_state()


def _gradcache(task: Any, objective: Any, model: Embedder, inputs: dict[str, Tensor], chunk: int, seed: int) -> tuple[Tensor, dict[str, Tensor], Tensor]:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    _, out, _ = gradcache_step(task, Services(), objective, model, inputs, chunk, backward=lambda loss: loss.backward())
    return out.loss.detach(), _grads(model), torch.get_rng_state()


def _assert_same(a: dict[str, Tensor], b: dict[str, Tensor]) -> None:
    assert a.keys() == b.keys() and a
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-5, msg=name)


CASES = [
    (PairTask(), lambda: AnglEObjective(ObjectiveConfig(positive_threshold=1.0))),  # paper preset: ibn + cosine + angle
    (PairTask(), lambda: AnglEObjective(ObjectiveConfig.from_preset("ibn", positive_threshold=1.0))),
    (PairTask(), lambda: MatryoshkaObjective(AnglEObjective(ObjectiveConfig.from_preset("ibn", positive_threshold=1.0)), MatryoshkaConfig((32, 16, 8)))),
    (SentenceTask(), lambda: ContrastiveObjective.from_preset("simcse-unsup")),
    (SentenceTask(), lambda: ContrastiveObjective.from_preset("simace-unsup")),
    (TripletTask(), lambda: ContrastiveObjective.from_preset("simcse-sup")),
]


@pytest.mark.parametrize(("task", "make"), CASES, ids=["paper", "ibn", "matryoshka-ibn", "simcse-unsup", "simace-unsup", "simcse-sup"])
@pytest.mark.parametrize("chunk", [3, 5])
def test_gradcache_gradient_equals_the_full_batch_gradient_with_dropout(model: Embedder, task: Any, make: Any, chunk: int) -> None:
    objective = make()
    inputs = _batch(task, model)
    loss, grads, rng = _reference(task, objective, model, inputs, chunk, seed=7)
    cached_loss, cached, cached_rng = _gradcache(task, objective, model, inputs, chunk, seed=7)
    torch.testing.assert_close(cached_loss, loss, rtol=1e-10, atol=1e-10)
    _assert_same(cached, grads)
    assert torch.equal(cached_rng, rng)  # the second pass leaves the generator as the first left it


def test_gradcache_equals_one_full_batch_forward_without_dropout(model: Embedder) -> None:
    model.eval()  # no dropout: one forward over the whole batch is the reference
    task, objective = PairTask(), AnglEObjective(ObjectiveConfig(positive_threshold=1.0))
    inputs = _batch(task, model)
    model.zero_grad(set_to_none=True)
    vectors = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    _, out, _ = task.loss_from_vectors(Services(), objective, vectors, inputs)
    out.loss.backward()
    full = _grads(model)
    loss, cached, _ = _gradcache(task, objective, model, inputs, 4, seed=0)
    torch.testing.assert_close(loss, out.loss.detach())
    _assert_same(cached, full)


def test_without_restoring_the_rng_state_the_gradient_would_differ(model: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above is sensitive to dropout: skipping the RNG restore breaks the equality."""
    from contextlib import nullcontext

    from anglekit.training import gradcache

    task, objective = PairTask(), AnglEObjective(ObjectiveConfig.from_preset("ibn", positive_threshold=1.0))
    inputs = _batch(task, model)
    _, grads, _ = _reference(task, objective, model, inputs, 4, seed=3)
    monkeypatch.setattr(gradcache.RngState, "restored", lambda self: nullcontext())
    _, cached, _ = _gradcache(task, objective, model, inputs, 4, seed=3)
    assert any(not torch.allclose(cached[n], grads[n], rtol=1e-5, atol=1e-5) for n in grads)


def test_ese_is_refused(model: Embedder) -> None:
    objective = ESEObjective(AnglEObjective(ObjectiveConfig(positive_threshold=1.0)))
    task = PairTask()
    with pytest.raises(ConfigError, match="ese"):
        gradcache_step(task, Services(), objective, model, _batch(task, model), 4, backward=lambda loss: loss.backward())
    with pytest.raises(ConfigError, match="does not combine with ese"):
        TrainConfig.from_dict({"ese": True, "gradcache_chunk_size": 32})


# ------------------------------------------------------------------ through transformers.Trainer


def test_trainer_pieces_that_the_gradcache_training_step_uses() -> None:
    """Pins: AnglETrainer.training_step uses these (documented: training_step is the method to override)."""
    assert list(inspect.signature(Trainer.training_step).parameters) == ["self", "model", "inputs", "num_items_in_batch"]
    assert callable(getattr(Trainer, "_prepare_inputs", None))
    assert callable(getattr(Trainer, "compute_loss_context_manager", None))
    source = inspect.getsource(Trainer.training_step)
    # Trainer divides the loss by the accumulation steps before backward; the GradCache step does the same.
    assert "current_gradient_accumulation_steps" in source and "self.accelerator.backward(loss" in source


def _trainer(embedder: Embedder, pair_file: Path, out: Path, chunk: int | None) -> AnglETrainer:
    task = PairTask()
    tokenized, collator = task.tokenize(read_pairs(pair_file), embedder)
    args = TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=8, use_cpu=True, report_to="none", disable_tqdm=True, gradient_accumulation_steps=2
    )
    objective = AnglEObjective(ObjectiveConfig.from_preset("paper", positive_threshold=4.0))
    trainer = AnglETrainer(
        model=embedder, args=args, train_dataset=tokenized, data_collator=collator, objective=objective, task=task, gradcache_chunk_size=chunk
    )
    trainer.create_optimizer()
    return trainer


def test_training_step_with_gradcache_matches_the_plain_training_step(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    for module in embedder.modules():  # Trainer's step switches to train mode: take dropout away
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    batch = next(iter(_trainer(embedder, pair_file, tmp_path / "a", None).get_train_dataloader()))
    results = []
    for chunk in (None, 5):
        trainer = _trainer(embedder, pair_file, tmp_path / f"run-{chunk}", chunk)
        trainer.current_gradient_accumulation_steps = 2
        embedder.zero_grad(set_to_none=True)
        loss = trainer.training_step(embedder, dict(batch))
        results.append((loss, _grads(embedder), trainer.pairs_trained, dict(trainer._component_counts)))
    (plain_loss, plain, plain_pairs, plain_counts), (cached_loss, cached, cached_pairs, cached_counts) = results
    torch.testing.assert_close(cached_loss, plain_loss, rtol=1e-5, atol=1e-6)
    for name in plain:
        torch.testing.assert_close(cached[name], plain[name], rtol=1e-4, atol=1e-6, msg=name)
    assert cached_pairs == plain_pairs == 8 and cached_counts == plain_counts


def test_train_runs_end_to_end_with_gradcache_and_matryoshka(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    from anglekit.training.run import train

    config = TrainConfig.from_dict({
        "model": str(tiny_bert_dir), "train_data": str(pair_file), "output_dir": str(tmp_path / "run"), "max_steps": 2,
        "batch_size": 8, "gradcache_chunk_size": 4, "matryoshka_dims": [32, 16, 8], "device": "cpu", "quiet": True,
        "positive_threshold": 4.0, "logging_steps": 1,
    })  # fmt: skip
    result = train(config)
    assert result.steps == 2
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert any("loss_ibn@8" in line for line in lines)
