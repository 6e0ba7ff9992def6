"""Contrastive training on the tiny BERT: dropout views, the MLP head, probes, the CLI end to end,
supervised triplets, configuration errors and the dynamics plot."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.training.config import TrainConfig
from anglekit.training.heads import MLPHead, TrainingModel
from anglekit.training.probes import ProbeAccumulator, alignment, batch_probes, dataset_probes, uniformity
from anglekit.training.run import train
from anglekit.training.tasks import dropout_views

import helpers
from helpers import train_config


@pytest.fixture(scope="module")
def sentence_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(3)
    path = tmp_path_factory.mktemp("sentences") / "sentences.txt"
    path.write_text("".join(helpers.random_sentence(rng) + "\n" for _ in range(48)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def triplet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(4)
    path = tmp_path_factory.mktemp("triplets") / "triplets.jsonl"
    rows = [{"anchor": helpers.random_sentence(rng), "positive": helpers.random_sentence(rng), "negative": helpers.random_sentence(rng)} for _ in range(24)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _config(model: Path, data: Path | str, out: Path, **kwargs: Any) -> TrainConfig:
    return train_config(
        model,
        data,
        out,
        **{
            "objective": "simace-unsup",
            "max_steps": 4,
            "batch_size": 8,
            "logging_steps": 1,
            "probe_steps": 2,
            "learning_rate": 1e-3,
            "device": "cpu",
            "precision": "fp32",
            **kwargs,
        },
    )


# ====================================================================== dropout views


def test_dropout_views_differ_in_training_mode_and_coincide_in_eval_mode(load_bert: Any) -> None:
    model = load_bert()
    batch = model.tokenize(["a man is playing the guitar .", "the dog runs in the park", "hi"])
    torch.manual_seed(0)
    model.train()
    first, second = dropout_views(model, batch["input_ids"], batch["attention_mask"])
    assert first.shape == second.shape == (3, 32)
    assert not torch.allclose(first, second)  # two dropout masks
    model.eval()
    with torch.no_grad():
        first, second = dropout_views(model, batch["input_ids"], batch["attention_mask"])
        single = model(**batch)
    torch.testing.assert_close(first, second)
    torch.testing.assert_close(first, single, rtol=1e-5, atol=1e-6)  # same as one plain pass


def test_mlp_head_is_used_in_training_mode_only(load_bert: Any) -> None:
    embedder = load_bert()
    torch.manual_seed(0)
    head = MLPHead(embedder.dim)
    assert torch.count_nonzero(head.dense.bias) == 0 and abs(float(head.dense.weight.detach().std()) - 0.02) < 0.005
    wrapped = TrainingModel(embedder, head)
    batch = embedder.tokenize(["a man is playing ."])
    wrapped.eval()
    with torch.no_grad():
        torch.testing.assert_close(wrapped(**batch), embedder(**batch))
        assert np.allclose(wrapped.encode(["a man is playing ."]), embedder.encode(["a man is playing ."]))
        wrapped.train()
        embedder.eval()  # the head alone (dropout off in the backbone)
        out = wrapped.head(embedder(**batch))
    assert out.abs().max() <= 1.0 and not torch.allclose(out, embedder(**batch).detach())


def test_mlp_head_model_encodes_queries_and_documents_with_the_embedder_s_prompts(load_bert: Any) -> None:
    """What the dev retrieval metric calls during training with an MLP head: the role prompts, not the general one."""
    embedder = load_bert(prompts={"query": "find: ", "document": "text about "})
    wrapped = TrainingModel(embedder, MLPHead(embedder.dim))
    texts = ["a man is playing .", "two dogs run"]
    np.testing.assert_allclose(wrapped.encode_query(texts), embedder.encode(texts, role="query"), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(wrapped.encode_document(texts), embedder.encode(texts, role="document"), rtol=1e-5, atol=1e-6)
    assert not np.allclose(wrapped.encode_query(texts), embedder.encode(texts), atol=1e-4)


# ====================================================================== probes


def test_saturation_and_anisotropy_against_direct_formulas() -> None:
    from anglekit.training.probes import anisotropy, saturated_share

    g = torch.Generator().manual_seed(1)
    a = torch.randn(6, 8, generator=g, dtype=torch.float64)
    near = a + 1e-3 * torch.randn(6, 8, generator=g, dtype=torch.float64)  # |cos| ~ 1: saturated
    far = torch.randn(6, 8, generator=g, dtype=torch.float64)
    mixed = torch.cat([near[:4], far[4:]])
    unit = lambda t: t / t.norm(dim=1, keepdim=True)  # noqa: E731
    cos = (unit(a) * unit(mixed)).sum(1)
    assert saturated_share(a, mixed) == pytest.approx(float((cos.abs() > 0.99).double().mean()))
    assert saturated_share(a, near) == 1.0 and saturated_share(a, -near) == 1.0 and saturated_share(a, far) < 0.5
    gram = unit(a) @ unit(a).T
    off = [float(gram[i, j]) for i in range(6) for j in range(6) if i != j]
    assert anisotropy(a) == pytest.approx(sum(off) / len(off))
    shifted = a + 50.0  # every vector points along (1, ..., 1): highly anisotropic, as raw LLM embeddings
    assert anisotropy(shifted) > 0.99 and abs(anisotropy(a)) < 0.5 and math.isnan(anisotropy(a[:1]))
    values = batch_probes(a, mixed)
    assert values["saturated"] == pytest.approx(4 / 6) and values["anisotropy"] == pytest.approx(anisotropy(torch.cat([a, mixed])))


def test_batch_probes_against_direct_formulas() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(5, 6, generator=g, dtype=torch.float64)
    p = a + 0.3 * torch.randn(5, 6, generator=g, dtype=torch.float64)
    values = batch_probes(a, p)
    unit = lambda t: t / t.norm(dim=1, keepdim=True)  # noqa: E731
    cos = unit(a) @ unit(p).T
    deg = torch.rad2deg(torch.arccos(cos))
    assert values["angle_pos"] == pytest.approx(float(deg.diagonal().mean()))
    off = [float(deg[i, j]) for i in range(5) for j in range(5) if i != j]
    assert values["angle_neg"] == pytest.approx(sum(off) / len(off))
    assert values["alignment"] == pytest.approx(float(((unit(a) - unit(p)) ** 2).sum(1).mean()))
    pair_terms = [math.exp(-2 * float(((unit(a)[i] - unit(a)[j]) ** 2).sum())) for i in range(5) for j in range(i + 1, 5)]
    assert values["uniformity"] == pytest.approx(math.log(sum(pair_terms) / len(pair_terms)))
    assert values["angle_pos"] < values["angle_neg"]
    assert "angle_hard_neg" in batch_probes(a, p, torch.randn(5, 6, generator=g, dtype=torch.float64))
    # Identical views: alignment 0, angle 0; one row: no negatives, no uniformity (left out of means).
    assert alignment(a, 2 * a) == pytest.approx(0.0, abs=1e-12) and batch_probes(a, a)["angle_pos"] < 1e-4
    assert math.isnan(uniformity(a[:1]))
    acc = ProbeAccumulator()
    acc.add({"x": 1.0, "y": float("nan")})
    acc.add({"x": 3.0, "y": 2.0})
    assert acc.flush() == {"x": 2.0, "y": 2.0} and acc.flush() == {}


def test_dataset_probes() -> None:
    vectors = {"a": [1.0, 0.0], "b": [1.0, 0.0], "c": [0.0, 1.0], "d": [-1.0, 0.0]}
    encode = lambda texts: np.array([vectors[t] for t in texts])  # noqa: E731
    out = dataset_probes(encode, ["a", "c"], ["b", "d"], np.array([5.0, 4.5]), 4.0)
    assert out["angle_pos"] == pytest.approx(45.0)  # 0 and 90 degrees
    assert out["alignment"] == pytest.approx(1.0)  # 0 and 2
    assert out["angle_neg"] == pytest.approx((180.0 + 90.0) / 2)  # a-d and c-b


# ====================================================================== end to end


def test_cli_trains_simace_unsup_on_a_sentence_file(tiny_bert_dir: Path, sentence_file: Path, dev_pair_file: Path, tmp_path: Path) -> None:
    from anglekit.cli import main
    from anglekit.model.embedder import Embedder

    out = tmp_path / "run"
    rc = main(
        [
            "train",
            "--model",
            str(tiny_bert_dir),
            "--objective",
            "simace-unsup",
            "--train-data",
            str(sentence_file),
            "--output-dir",
            str(out),
            "--max-steps",
            "4",
            "--batch-size",
            "8",
            "--logging-steps",
            "1",
            "--probe-steps",
            "2",
            "--probe-data",
            str(dev_pair_file),
            "--positive-threshold",
            "3.0",
            "--mlp-head",
            "--device",
            "cpu",
            "--precision",
            "fp32",
            "--quiet",
            "--learning-rate",
            "1e-3",
        ]
    )
    assert rc == 0
    records = helpers.read_jsonl(out / "metrics.jsonl")
    losses = [r for r in records if "loss" in r]
    assert [r["step"] for r in losses] == [1, 2, 3, 4]
    for r in losses:
        assert math.isfinite(r["loss_simace"]) and r["loss"] == pytest.approx(r["loss_simace"], rel=1e-5)
        assert "loss_cosine" not in r
    probes = [r for r in records if any(k.startswith("probe_") for k in r)]
    assert [r["step"] for r in probes] == [0, 2, 4]  # dev probes before training, then every 2 steps
    for r in probes[1:]:
        for key in (
            "probe_angle_pos",
            "probe_angle_neg",
            "probe_alignment",
            "probe_uniformity",
            "probe_dev_angle_pos",
            "probe_dev_angle_neg",
            "probe_dev_alignment",
            "probe_dev_uniformity",
        ):
            assert math.isfinite(r[key]), key
        assert 0 <= r["probe_angle_pos"] <= 180 and r["probe_alignment"] >= 0 and r["probe_uniformity"] <= 0
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["batch_kind"] == "sentences" and saved["objective"]["margin_degrees"] == 10.0
    assert saved["objective"]["similarity"] == "angle" and saved["train"]["mlp_head"] is True
    # The saved model is the plain embedder: no head weights; the checkpoint has them (for resume).
    from safetensors import safe_open

    with safe_open(str(out / "model" / "model.safetensors"), "pt") as handle:
        assert not any("head" in key or key == "dense.weight" for key in handle.keys())  # noqa: SIM118 - safe_open has keys() and is not iterable
    checkpoint = sorted(out.glob("checkpoint-*"))[-1]
    with safe_open(str(checkpoint / "model.safetensors"), "pt") as handle:
        assert "head.dense.weight" in set(handle.keys())
    model = Embedder.from_pretrained(out / "model", device="cpu")
    vectors = model.encode(["a man is playing the guitar .", "dog"])
    start = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode(["a man is playing the guitar .", "dog"])
    assert vectors.shape == (2, 32) and np.isfinite(vectors).all() and not np.allclose(vectors, start, atol=1e-5)

    # The dynamics plot reads the run.
    figure = tmp_path / "dyn.png"
    assert main(["plot-dynamics", str(out), "--output", str(figure), "--label", "simace"]) == 0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simcse_unsup_from_a_csv_column_without_head(tiny_bert_dir: Path, tmp_path: Path) -> None:
    rng = random.Random(5)
    path = tmp_path / "corpus.csv"
    path.write_text("id,body\n" + "".join(f"{i},{helpers.random_sentence(rng).replace(',', '')}\n" for i in range(20)), encoding="utf-8")
    result = train(_config(tiny_bert_dir, path, tmp_path / "run", objective="simcse-unsup", text_column="body", max_steps=2))
    assert result.steps == 2
    records = helpers.read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert all("loss_simcse" in r for r in records if "loss" in r)
    assert any("probe_angle_neg" in r for r in records)


def test_simcse_sup_on_triplets(tiny_bert_dir: Path, triplet_file: Path, tmp_path: Path) -> None:
    result = train(_config(tiny_bert_dir, triplet_file, tmp_path / "run", objective="simcse-sup", hard_negative_weight=2.0))
    assert result.steps == 4
    records = helpers.read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert all(math.isfinite(r["loss_simcse"]) for r in records if "loss" in r)
    assert any("probe_angle_hard_neg" in r for r in records)
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert saved["batch_kind"] == "triplets" and saved["objective"]["hard_negative_weight"] == 2.0


def test_pair_objective_with_angle_ibn_trains(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    result = train(
        _config(tiny_bert_dir, pair_file, tmp_path / "run", objective="paper", ibn_similarity="angle", positive_threshold=4.0, max_steps=2, probe_steps=None)
    )
    assert result.steps == 2
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert saved["objective"]["ibn_similarity"] == "angle" and saved["batch_kind"] == "pairs"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"objective": "paper", "margin_degrees": 5.0}, "--margin-degrees applies to the contrastive"),
        ({"objective": "simace-unsup", "angle_weight": 1.0}, "--angle-weight applies to the AnglE pair"),
        ({"objective": "simcse-unsup", "margin_degrees": 5.0}, "similarity='angle'"),
        ({"objective": "simcse-sup", "text_column": "x"}, "--text-column"),
        ({"objective": "simace", "margin_degrees": 5.0}, "simace-unsup"),
        ({"objective": "simace-unsup", "batch_size": 1}, "batch_size >= 2"),
    ],
)
def test_contrastive_config_errors_before_any_output(tiny_bert_dir: Path, sentence_file: Path, tmp_path: Path, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):  # an unknown preset already fails when the config is built
        train(_config(tiny_bert_dir, sentence_file, tmp_path / "run", **kwargs))
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_nli_pairing_is_validated() -> None:
    with pytest.raises(ConfigError, match="nli_pairing"):
        TrainConfig.from_dict(dict(nli_pairing="random"))
    with pytest.raises(ConfigError, match="probe_steps"):
        TrainConfig.from_dict(dict(probe_steps=0))


def test_trainer_averages_gradient_accumulation_steps(load_bert: Any) -> None:
    """The Trainer must divide each micro-batch loss by the accumulation steps (our losses are means)."""
    from transformers import TrainingArguments

    from anglekit.losses import get_objective
    from anglekit.training.trainer import AnglETrainer

    args = TrainingArguments(output_dir="unused", report_to="none", use_cpu=True, max_steps=1)
    trainer = AnglETrainer(model=load_bert(), args=args, objective=get_objective("simcse-unsup"))
    assert trainer.model_accepts_loss_kwargs is False


def test_resume_restores_the_mlp_head_and_equals_an_uninterrupted_run(tiny_bert_dir: Path, sentence_file: Path, tmp_path: Path) -> None:
    import shutil

    from anglekit.model.embedder import Embedder

    full = tmp_path / "full"
    train(_config(tiny_bert_dir, sentence_file, full, mlp_head=True, save_steps=2, save_total_limit=3))
    cut = tmp_path / "cut"
    shutil.copytree(full, cut)
    shutil.rmtree(cut / "checkpoint-4")
    shutil.rmtree(cut / "model")
    train(_config(tiny_bert_dir, sentence_file, cut, mlp_head=True, save_steps=2, save_total_limit=3, resume=True))
    texts = ["a man is playing the guitar .", "the dog runs"]
    a = Embedder.from_pretrained(full / "model", device="cpu").encode(texts)
    b = Embedder.from_pretrained(cut / "model", device="cpu").encode(texts)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    losses = lambda run: [r["loss"] for r in helpers.read_jsonl(run / "metrics.jsonl") if "loss" in r]  # noqa: E731
    np.testing.assert_allclose(losses(full), losses(cut), rtol=1e-5)
