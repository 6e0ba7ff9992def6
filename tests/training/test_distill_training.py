"""Distillation through training: the scored task's loss against an independent computation, and
``anglekit train`` on a mined n-tuple file with teacher scores (margin-mse alone, distill-kl with
the AnglE terms, a multi-dataset run, embed-distill from a teacher of another width) and bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from anglekit.errors import ConfigError, DataError
from anglekit.losses.distill import DistillConfig, DistillObjective, margin_mse_loss, student_scores
from anglekit.model.embedder import Embedder
from anglekit.training.run import train
from anglekit.training.tasks import DistillTask, task_for
from anglekit.training.tasks.distill import ScoredCollator, ScoredTuples, teacher_table

import helpers
from helpers import run_cli, train_config


def _mined(path: Path, rows: int = 12, *, scores: bool = True, seed: int = 0) -> Path:
    """A mined n-tuple file (anchor, positive, negative_1..2 and, with ``scores``, *_score)."""
    rng = random.Random(seed)
    with path.open("w") as handle:
        for _ in range(rows):
            record: dict[str, Any] = {"anchor": helpers.random_sentence(rng), "positive": helpers.random_sentence(rng)}
            record.update({f"negative_{k}": helpers.random_sentence(rng) for k in (1, 2)})
            if scores:
                record.update({"positive_score": 0.6 + 0.3 * rng.random(), "negative_1_score": 0.5 * rng.random(), "negative_2_score": 0.5 * rng.random()})
            handle.write(json.dumps(record) + "\n")
    return path


def _wide_bert(directory: Path) -> Path:
    """A random BERT of hidden size 48 (the tiny student's is 32) on the same vocabulary: a teacher of another width."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    directory.mkdir(parents=True)
    (directory / "vocab.txt").write_text("\n".join(helpers.vocabulary()) + "\n")
    torch.manual_seed(1)
    config = BertConfig(
        vocab_size=len(helpers.vocabulary()), hidden_size=48, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, max_position_embeddings=128
    )
    BertModel(config).save_pretrained(directory)
    BertTokenizerFast(str(directory / "vocab.txt"), do_lower_case=True, model_max_length=128).save_pretrained(directory)
    return directory


def test_task_loss_is_margin_mse_of_the_batch(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.data.triplets import read_triplets

    data = read_triplets(_mined(tmp_path / "m.jsonl", 3), scores=True)
    model = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", device="cpu").double()
    model.eval()
    tokenized = ScoredTuples.build_scored(data, model.tokenize_unpadded)
    inputs = ScoredCollator(model.tokenizer.pad_token_id, negatives_per_row=2)([tokenized[i] for i in range(3)])
    assert inputs["rows"].tolist() == [0, 1, 2] and np.allclose(inputs["teacher_scores"].numpy(), data.scores, atol=1e-6)
    vectors = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    _, out, size = DistillTask().loss_from_vectors(helpers.SoloServices(), DistillObjective(DistillConfig(margin_mse_weight=1.0)), vectors, inputs)
    # independent: each text embedded on its own, scores by hand
    embed = {t: torch.from_numpy(np.asarray(model.encode([t], batch_size=1)[0], dtype=np.float64)) for r in data for t in (r.anchor, r.positive, *r.negatives)}
    anchors = torch.stack([embed[t] for t in data.anchor])
    positives = torch.stack([embed[t] for t in data.positive])
    negatives = torch.stack([torch.stack([embed[t] for t in row]) for row in data.negatives])
    expected = margin_mse_loss(student_scores(anchors, positives, negatives), torch.tensor(data.scores, dtype=torch.float64))
    assert size == 3 and out.loss.item() == pytest.approx(expected.item(), rel=1e-4)


def _metrics(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]


COMMON = ["--device", "cpu", "--batch-size", "4", "--max-steps", "3", "--logging-steps", "1", "--precision", "fp32", "--quiet"]


def test_cli_trains_margin_mse_alone_and_distill_kl_with_the_angle_terms(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mined = _mined(tmp_path / "mined.jsonl")
    out = tmp_path / "mm"
    code, _, err = run_cli(["train", str(tiny_bert_dir), "--train-data", str(mined), "--objective", "margin-mse", "--output-dir", str(out), *COMMON], capsys)
    assert code == 0, err
    logged = _metrics(out)
    assert len(logged) == 3 and all(set(r) >= {"loss_margin_mse"} and r["loss"] == pytest.approx(r["loss_margin_mse"], rel=1e-5) for r in logged)
    assert (out / "model" / "model.safetensors").is_file()
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["batch_kind"] == "scored"
    out = tmp_path / "kl"
    argv = ["train", str(tiny_bert_dir), "--train-data", str(mined), "--objective", "distill-kl", "--ibn-weight", "1", "--angle-weight", "0.5",
            "--distill-temperature", "0.1", "--output-dir", str(out), *COMMON]  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    for r in _metrics(out):
        assert r["loss"] == pytest.approx(r["loss_distill_kl"] + r["loss_ibn"] + 0.5 * r["loss_angle"], rel=1e-5)


def test_each_dataset_of_a_multi_dataset_run_has_its_objective(tiny_bert_dir: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"text1": f"a cat {i}", "text2": f"a dog {i}", "label": i % 2}) + "\n" for i in range(8)))
    out = tmp_path / "run"
    config = train_config(tiny_bert_dir, None, out, device="cpu", batch_size=4, max_steps=4, logging_steps=1, objective="cosine", dataset_order="round_robin",
                          train_data=[f"{pairs};name=sts", f"{_mined(tmp_path / 'mined.jsonl')};objective=margin-mse;weight=0.5;name=mined"])  # fmt: skip
    assert train(config).steps == 4
    logged = _metrics(out)
    assert [("loss_sts/cosine" in r, "loss_mined/margin_mse" in r) for r in logged] == [(True, False), (False, True)] * 2
    assert all(r["loss/mined"] == pytest.approx(0.5 * r["loss_mined/margin_mse"], rel=1e-5) for r in logged if "loss/mined" in r)
    assert json.loads((out / "train_config.json").read_text())["batch_kind"] == {"sts": "pairs", "mined": "scored"}


def test_embed_distill_learns_from_a_teacher_of_another_width(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.data.triplets import read_triplets

    teacher = _wide_bert(tmp_path / "teacher")
    mined = _mined(tmp_path / "mined.jsonl", 8)
    data = read_triplets(mined, scores=True)
    table = teacher_table(str(teacher), data)
    wide = Embedder.from_pretrained(teacher, device="cpu")
    distinct = len(set(data.anchor)) + len({*data.positive, *(t for row in data.negatives for t in row)})
    assert table.vectors.shape == (distinct, 48) and table.negatives.shape == (8, 2)
    looked = table.lookup(torch.zeros(2, 3), torch.tensor([3, 5]), torch.device("cpu"))
    np.testing.assert_allclose(looked.negatives[0, 1].numpy(), wide.encode_document([data.negatives[3][1]])[0], atol=1e-5)
    np.testing.assert_allclose(looked.anchors[1].numpy(), wide.encode_query([data.anchor[5]])[0], atol=1e-5)
    np.testing.assert_allclose(looked.positives[1].numpy(), wide.encode_document([data.positive[5]])[0], atol=1e-5)
    out = tmp_path / "run"
    argv = ["train", str(tiny_bert_dir), "--train-data", str(mined), "--objective", "embed-distill", "--distill-teacher", str(teacher),
            "--margin-mse-weight", "1", "--output-dir", str(out), *COMMON]  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    assert all({"loss_embed_distill", "loss_margin_mse"} <= set(r) for r in _metrics(out))
    code, _, err = run_cli(
        ["train", str(tiny_bert_dir), "--train-data", str(mined), "--objective", "embed-distill", "--output-dir", str(tmp_path / "no"), *COMMON], capsys
    )
    assert code == 2 and "needs --distill-teacher MODEL" in err and len(err.strip().splitlines()) == 1


def test_bad_data_is_one_line_naming_file_columns_row_and_objective(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unscored = _mined(tmp_path / "unscored.jsonl", scores=False)
    out = tmp_path / "run"
    code, _, err = run_cli(["train", str(tiny_bert_dir), "--train-data", str(unscored), "--objective", "margin-mse", "--output-dir", str(out), *COMMON], capsys)
    line = err.strip()
    assert code == 2 and len(line.splitlines()) == 1 and "Traceback" not in err  # the CLI gives 2 for every anglekit error
    assert str(unscored) in line and "'margin-mse'" in line and "positive_score, negative_1_score, negative_2_score" in line
    assert not (out / "model").exists()
    rows = [json.loads(x) for x in _mined(tmp_path / "m.jsonl").read_text().splitlines()]
    rows[4]["negative_1_score"] = float("nan")
    nan = tmp_path / "nan.jsonl"
    nan.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run_cli(["train", str(tiny_bert_dir), "--train-data", str(nan), "--objective", "distill-kl", "--output-dir", str(out), *COMMON], capsys)
    assert code == 2 and f"{nan}, row 5, field 'negative_1_score'" in err and "not a finite number" in err and len(err.strip().splitlines()) == 1
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"text1": "a", "text2": "b", "label": 1}) + "\n")
    with pytest.raises(DataError, match="learns a teacher's scores of n-tuples"):
        train(train_config(tiny_bert_dir, _triplets(tmp_path / "t.jsonl"), out, objective="distill-kl", device="cpu"))
    with pytest.raises(ConfigError, match="without --stream-data"):
        train(train_config(tiny_bert_dir, nan, out, objective="margin-mse", device="cpu", stream_data=True))
    assert task_for("margin-mse").kind == "scored"


def _triplets(path: Path) -> Path:
    path.write_text("".join(json.dumps({"anchor": f"q {i}", "positive": f"p {i}", "negative": f"n {i}"}) + "\n" for i in range(4)))
    return path


def test_gradcache_gives_the_full_batch_gradient(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """Distillation with the in-batch-negative term through GradCache: the loss and every gradient of
    the batch embedded at once (dropout on, the same seed)."""
    from anglekit.data.triplets import read_triplets
    from anglekit.training.gradcache import gradcache_step

    model = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", device="cpu").double()
    model.train()
    data = read_triplets(_mined(tmp_path / "m.jsonl", 4), scores=True)
    tokenized = ScoredTuples.build_scored(data, model.tokenize_unpadded)
    inputs = ScoredCollator(model.tokenizer.pad_token_id, negatives_per_row=2)([tokenized[i] for i in range(4)])
    objective = DistillObjective(DistillConfig(margin_mse_weight=1.0, distill_kl_weight=1.0, ibn_weight=1.0))
    task, chunk = DistillTask(), 5

    def grads() -> dict[str, torch.Tensor]:
        return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}

    torch.manual_seed(3)
    rows = task.model_inputs(inputs)
    parts = [model(**{k: v[s : s + chunk] for k, v in rows.items()}) for s in range(0, rows["input_ids"].shape[0], chunk)]
    _, out, _ = task.loss_from_vectors(helpers.SoloServices(), objective, torch.cat(parts), inputs)
    out.loss.backward()
    loss, full = out.loss.detach(), grads()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(3)
    _, cached, _ = gradcache_step(task, helpers.SoloServices(), objective, model, inputs, chunk, backward=lambda value: value.backward())
    torch.testing.assert_close(cached.loss.detach(), loss)
    chunked = grads()
    assert full.keys() == chunked.keys() and full
    for name in full:
        torch.testing.assert_close(chunked[name], full[name], rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("config", [DistillConfig(margin_mse_weight=1.0), DistillConfig(distill_kl_weight=1.0)], ids=["margin-mse", "distill-kl"])
def test_the_student_moves_towards_the_teacher(tiny_bert_dir: Path, tmp_path: Path, config: DistillConfig) -> None:
    """Trained through the task on the same 8 rows (dropout off: on a random tiny BERT its noise
    hides the small differences between cosines), the term falls far below where it started."""
    from anglekit.data.triplets import read_triplets

    torch.manual_seed(0)
    model = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", device="cpu")
    model.eval()
    data = read_triplets(_mined(tmp_path / "m.jsonl", 8, seed=3), scores=True)
    tokenized = ScoredTuples.build_scored(data, model.tokenize_unpadded)
    inputs = ScoredCollator(model.tokenizer.pad_token_id, negatives_per_row=2)([tokenized[i] for i in range(8)])
    objective, optimizer = DistillObjective(config), torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(40):
        _, out, _ = DistillTask().loss(helpers.SoloServices(), objective, model, inputs)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        losses.append(out.loss.item())
    assert losses[-1] < 0.3 * losses[0], losses
