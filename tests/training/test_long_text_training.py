"""Training with ``long_text`` chunking: whole texts in the batch, windows embedded, their vectors
pooled back to one per text (differentiably) before the objective; the same vectors as inference,
GradCache over the windows, and an end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor

from anglekit.losses import AnglEObjective, ObjectiveConfig
from anglekit.model.embedder import Embedder
from anglekit.model.long_text import ChunkPlan, RowChunks, combine_chunks, pool_rows
from anglekit.model.padding import pad_token_ids
from anglekit.training.config import TrainConfig
from anglekit.training.gradcache import gradcache_step
from anglekit.training.tasks import PairTask

import helpers
from helpers import words

LONG = [words(200), words(9, 2), words(150, 7), words(30, 3)]


Services = helpers.SoloServices


@pytest.mark.parametrize("mode", ["chunk-mean", "chunk-max"])
def test_pool_rows_equals_the_inference_combination_and_carries_gradients(mode: str) -> None:
    torch.manual_seed(0)
    vectors = torch.randn(7, 5, dtype=torch.float64, requires_grad=True)
    owner, weight = np.array([0, 0, 1, 2, 2, 2, 3]), np.array([3.0, 1.0, 2.0, 4.0, 4.0, 1.0, 2.0], dtype=np.float32)
    windows = RowChunks({}, torch.as_tensor(owner), torch.as_tensor(weight), 4)
    pooled = pool_rows(vectors, windows, mode)
    expected = combine_chunks(vectors.detach().float().numpy(), ChunkPlan([[]] * 7, owner, weight, 4), "mean" if mode == "chunk-mean" else "max")
    np.testing.assert_allclose(pooled.detach().numpy(), expected, rtol=1e-6, atol=1e-6)
    layered = pool_rows(torch.stack([vectors, 2 * vectors]), windows, mode)  # an ESE layer stack keeps its axis
    torch.testing.assert_close(layered[1], pool_rows(2 * vectors, windows, mode))
    pooled.sum().backward()
    assert vectors.grad is not None and torch.count_nonzero(vectors.grad) > 0


@pytest.fixture
def chunked(tiny_bert_dir: Path) -> Embedder:
    return Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", long_text="chunk-mean", long_text_window=32, device="cpu")


def _pair_batch(task: PairTask, model: Embedder) -> dict[str, Tensor]:
    ids = task.text_tokenizer(model)(LONG)
    assert max(len(seq) for seq in ids) > 128  # whole texts, beyond the tiny model's 128 positions
    padded = pad_token_ids(ids, model.tokenizer.pad_token_id)
    return {**padded, "labels": torch.tensor([1.0, 0.0]), "text_ids": torch.arange(4)}


def test_training_rows_embed_like_inference(chunked: Embedder) -> None:
    task = PairTask()
    inputs = _pair_batch(task, chunked)
    chunked.eval()
    with torch.no_grad():
        rows, windows = task.embedding_rows(chunked, inputs)
        assert windows is not None and rows["input_ids"].shape[1] <= 32 and rows["input_ids"].shape[0] > 4
        vectors = task.pool(chunked, chunked(**rows), windows)
    np.testing.assert_allclose(vectors.numpy(), chunked.encode(LONG, normalize=False), atol=1e-5)
    plain = Embedder.from_pretrained(chunked.source, pooling="last_avg", device="cpu")
    assert PairTask.text_tokenizer(plain) == plain.tokenize_unpadded  # truncate: the batch is cut at max_length


def test_gradcache_over_windows_equals_the_plain_step(chunked: Embedder) -> None:
    chunked.double().eval()  # no dropout: one forward over every window is the reference
    task = PairTask()
    objective = AnglEObjective(ObjectiveConfig(positive_threshold=1.0))
    inputs = _pair_batch(task, chunked)
    chunked.zero_grad(set_to_none=True)
    _, out, _ = task.loss(Services(), objective, chunked, inputs)
    out.loss.backward()
    plain = {n: p.grad.clone() for n, p in chunked.named_parameters() if p.grad is not None}
    chunked.zero_grad(set_to_none=True)
    _, cached_out, _ = gradcache_step(task, Services(), objective, chunked, inputs, 3, backward=lambda loss: loss.backward())
    torch.testing.assert_close(cached_out.loss, out.loss.detach())
    for name, p in chunked.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(p.grad, plain[name], rtol=1e-4, atol=1e-5)  # GradCache caches float32 vectors


def test_train_end_to_end_on_long_texts(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.training.run import train

    start = Embedder.from_pretrained(tiny_bert_dir, long_text="chunk-max", long_text_window=32, device="cpu").save_pretrained(tmp_path / "start")
    data = tmp_path / "pairs.jsonl"
    rows: list[dict[str, Any]] = [{"text1": words(120 + 10 * i, i), "text2": words(90 + 7 * i, 2 * i), "label": float(i % 2)} for i in range(8)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = TrainConfig.from_dict({
        "model": str(start), "train_data": str(data), "output_dir": str(tmp_path / "run"), "max_steps": 2, "batch_size": 4,
        "device": "cpu", "quiet": True, "objective": "cosine",
    })  # fmt: skip
    result = train(config)
    assert result.steps == 2
    trained = Embedder.from_pretrained(result.model_dir, device="cpu")
    assert (trained.config.long_text, trained.config.long_text_window) == ("chunk-max", 32)
