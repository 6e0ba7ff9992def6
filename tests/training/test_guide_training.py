"""``--guide`` through training: GradCache's loss and gradient equal the full batch's with a guide
on (a frozen guide's table and the student as its own guide, pairs, triplets and n-tuples), the
guide's table against the guide model's own embeddings, ``anglekit train --guide`` end to end on a
tiny random BERT (with GradCache and a token budget; a guide of another tokenizer and width), what
it records (train_config.json, the card, metrics.jsonl, results.json), and bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from anglekit.data.triplets import read_triplets
from anglekit.losses import AnglEObjective, ContrastiveObjective, ObjectiveConfig
from anglekit.losses.configs import ContrastiveConfig
from anglekit.losses.distill import DistillObjective
from anglekit.losses.distill_configs import DistillConfig
from anglekit.losses.guide import GuideTable
from anglekit.model.embedder import Embedder
from anglekit.training.gradcache import gradcache_step
from anglekit.training.guide import Guide, guide_table
from anglekit.training.tasks import DistillTask, PairTask, TripletTask

import helpers
from helpers import run_cli

TEXTS = [
    "a man plays a guitar", "the dog runs", "two dogs run in the park", "wow", "a woman is cooking",
    "the cat sleeps on the sofa", "a child rides a bike", "people walk in the rain", "the sun is hot",
    "a man plays the piano", "the dog sleeps", "a bird sings",
]  # fmt: skip


class Services(helpers.SoloServices):
    pass


@pytest.fixture
def model(tiny_bert_dir: Path) -> Embedder:
    embedder = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", device="cpu").double()
    embedder.train()  # dropout on
    return embedder


def _grads(module: nn.Module) -> dict[str, Tensor]:
    return {name: p.grad.detach().clone() for name, p in module.named_parameters() if p.grad is not None}


def _table(rows: int, columns: int, seed: int = 0) -> GuideTable:
    """A guide of width 5 whose texts are the batch's texts in its layout (cell (r, c) is text c * rows + r)."""
    vectors = torch.randn(rows * columns, 5, generator=torch.Generator().manual_seed(seed))
    cells = torch.stack([torch.arange(rows) + c * rows for c in range(columns)], dim=1)
    return GuideTable(vectors, cells)


def _pair_batch(model: Embedder) -> dict[str, Tensor]:
    padded = model.tokenize(TEXTS)
    return {**padded, "labels": torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0]), "text_ids": torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 11]),
            "rows": torch.arange(6)}  # fmt: skip


def _triplet_batch(model: Embedder) -> dict[str, Tensor]:
    return {**model.tokenize(TEXTS), "text_ids": torch.arange(12), "parts": torch.tensor(3), "rows": torch.arange(4)}


def _ntuple_batch(model: Embedder) -> dict[str, Tensor]:
    """3 rows: anchors 0-2, positives 3-5, negatives: row 0 two, row 1 none, row 2 one (padding -1)."""
    padded = model.tokenize(TEXTS[:9])
    return {**padded, "text_ids": torch.arange(9), "negative_index": torch.tensor([[0, 1], [-1, -1], [2, -1]]), "rows": torch.arange(3)}


def _scored_batch(model: Embedder) -> dict[str, Tensor]:
    """:func:`_ntuple_batch` with a teacher's scores of each row's positive and negatives."""
    scores = torch.tensor([[0.9, 0.2, 0.4], [0.8, 0.0, 0.0], [0.7, 0.5, 0.0]])
    return {**_ntuple_batch(model), "teacher_scores": scores}


def _ntuple_table() -> GuideTable:
    vectors = torch.randn(9, 5, generator=torch.Generator().manual_seed(3))
    return GuideTable(vectors, torch.tensor([[0, 3, 6, 7], [1, 4, -1, -1], [2, 5, 8, -1]]))


CASES = {
    "ibn-table": (PairTask(), lambda: AnglEObjective(ObjectiveConfig(positive_threshold=1.0, guide="g")), _pair_batch, lambda: _table(6, 2)),
    "ibn-self": (PairTask(), lambda: AnglEObjective(ObjectiveConfig(positive_threshold=1.0, guide="g")), _pair_batch, lambda: None),
    "simcse-sup-table": (
        TripletTask(),
        lambda: ContrastiveObjective(ContrastiveConfig(batch_kind="triplets", guide="g", guide_margin=0.05)),
        _triplet_batch,
        lambda: _table(4, 3),
    ),
    "simcse-sup-self": (TripletTask(), lambda: ContrastiveObjective(ContrastiveConfig(batch_kind="triplets", guide="g")), _triplet_batch, lambda: None),
    "ntuple-pairs-table": (
        PairTask(),
        lambda: AnglEObjective(ObjectiveConfig.from_preset("ibn", positive_threshold=1.0, guide="g")),
        _ntuple_batch,
        _ntuple_table,
    ),
    "ntuple-simcse-table": (TripletTask(), lambda: ContrastiveObjective(ContrastiveConfig(batch_kind="triplets", guide="g")), _ntuple_batch, _ntuple_table),
    "scored-table": (
        DistillTask(),
        lambda: DistillObjective(DistillConfig(margin_mse_weight=1.0, ibn_weight=1.0, guide="g", guide_margin=0.1)),
        _scored_batch,
        _ntuple_table,
    ),
    "scored-self": (DistillTask(), lambda: DistillObjective(DistillConfig(margin_mse_weight=1.0, ibn_weight=1.0, guide="g")), _scored_batch, lambda: None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_gradcache_with_a_guide_equals_the_full_batch(model: Embedder, case: str) -> None:
    task, make, batch, table = CASES[case]
    objective = make()
    objective.guide = Guide("g", table())
    inputs = batch(model)
    chunk = 4
    model.zero_grad(set_to_none=True)
    torch.manual_seed(5)
    rows = task.model_inputs(inputs)
    n = rows["input_ids"].shape[0]
    parts = [model(**{k: v[s : s + chunk] for k, v in rows.items()}) for s in range(0, n, chunk)]
    _, out, _ = task.loss_from_vectors(Services(), objective, torch.cat(parts), inputs)
    out.loss.backward()
    full = _grads(model)
    model.zero_grad(set_to_none=True)
    torch.manual_seed(5)
    _, cached_out, _ = gradcache_step(task, Services(), objective, model, inputs, chunk, backward=lambda loss: loss.backward())
    torch.testing.assert_close(cached_out.loss.detach(), out.loss.detach(), rtol=1e-10, atol=1e-10)
    assert float(cached_out.stats["guide_masked"]) == pytest.approx(float(out.stats["guide_masked"]))
    cached = _grads(model)
    assert cached.keys() == full.keys() and cached
    for name in full:
        torch.testing.assert_close(cached[name], full[name], rtol=1e-5, atol=1e-5, msg=name)
    unguided = make()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(5)
    parts = [model(**{k: v[s : s + chunk] for k, v in rows.items()}) for s in range(0, n, chunk)]
    _, plain, _ = task.loss_from_vectors(Services(), unguided, torch.cat(parts), inputs)
    if float(out.stats["guide_masked"]) > 0:
        assert float(plain.loss.detach()) != pytest.approx(float(out.loss.detach()), rel=1e-9)  # the guide changed the loss
    assert "guide_masked" not in plain.stats


def _triplets(path: Path, rows: int = 16, seed: int = 0) -> Path:
    rng = random.Random(seed)
    with path.open("w") as handle:
        for _ in range(rows):
            record = {"anchor": helpers.random_sentence(rng), "positive": helpers.random_sentence(rng), "negative": helpers.random_sentence(rng)}
            handle.write(json.dumps(record) + "\n")
    return path


def _other_guide(directory: Path) -> Path:
    """A random BERT of width 48 with its own tokenizer: the same words in another order (other ids), lower-case off."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    directory.mkdir(parents=True)
    vocab = list(reversed(helpers.vocabulary()))
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(2)
    config = BertConfig(vocab_size=len(vocab), hidden_size=48, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(directory)
    BertTokenizerFast(str(directory / "vocab.txt"), do_lower_case=True, model_max_length=64).save_pretrained(directory)
    return directory


def test_the_table_holds_the_guide_models_own_embeddings(tmp_path: Path) -> None:
    guide = _other_guide(tmp_path / "guide")
    data = read_triplets(_triplets(tmp_path / "t.jsonl", 6))
    table = guide_table(str(guide), data)
    own = Embedder.from_pretrained(guide, device="cpu")
    looked = table.lookup(torch.tensor([4, 1])).numpy()  # anchors 4, 1; positives 4, 1; negatives 4, 1
    np.testing.assert_allclose(looked[0], own.encode_query([data.anchor[4]])[0], atol=1e-5)
    np.testing.assert_allclose(looked[3], own.encode_document([data.positive[1]])[0], atol=1e-5)
    np.testing.assert_allclose(looked[4], own.encode_document([data.negative[4]])[0], atol=1e-5)
    assert looked.shape == (6, 48)


COMMON = ["--device", "cpu", "--batch-size", "4", "--max-steps", "3", "--logging-steps", "1", "--precision", "fp32", "--quiet"]


def _metrics(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]


def test_cli_trains_with_a_guide_of_another_tokenizer_with_gradcache_and_a_token_budget(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = _other_guide(tmp_path / "guide")
    data = _triplets(tmp_path / "t.jsonl")
    out = tmp_path / "run"
    argv = ["train", str(tiny_bert_dir), "--train-data", str(data), "--objective", "simcse-sup", "--guide", str(guide), "--guide-margin", "0.05",
            "--gradcache-chunk-size", "3", "--max-batch-tokens", "512", "--output-dir", str(out), *COMMON]  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    logged = _metrics(out)
    assert len(logged) == 3 and all(0.0 <= r["guide_masked"] <= 1.0 for r in logged)
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["objective"]["guide"] == str(guide) and saved["objective"]["guide_margin"] == 0.05
    results = json.loads((out / "results.json").read_text())
    assert results["guide_masked"] == pytest.approx(np.mean([r["guide_masked"] for r in logged]))
    assert str(guide) in (out / "model" / "README.md").read_text()
    from anglekit.training.run import TrainResult

    assert f"the guide left out {100 * results['guide_masked']:.2f}% of the in-batch negatives" in TrainResult.from_dict(results).table()


def test_the_student_as_its_own_guide_is_allowed_and_said(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from anglekit.training.run import train

    config = helpers.train_config(tiny_bert_dir, pair_file, tmp_path / "run", device="cpu", batch_size=8, max_steps=2, logging_steps=1,
                                  objective="ibn", guide=str(tiny_bert_dir), precision="fp32", positive_threshold=4.0)  # fmt: skip
    result = train(config)
    assert "is the student model itself" in caplog.text and str(tiny_bert_dir) in caplog.text
    assert result.guide_masked is not None and 0.0 <= result.guide_masked <= 1.0
    assert all("guide_masked" in r for r in _metrics(tmp_path / "run"))


def test_without_a_guide_nothing_is_counted(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code, _, err = run_cli(["train", str(tiny_bert_dir), "--train-data", str(_triplets(tmp_path / "t.jsonl")), "--objective", "simcse-sup",
                            "--output-dir", str(out), *COMMON], capsys)  # fmt: skip
    assert code == 0, err
    assert all("guide_masked" not in r for r in _metrics(out))
    assert json.loads((out / "results.json").read_text())["guide_masked"] is None
    assert json.loads((out / "train_config.json").read_text())["objective"]["guide"] is None


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--objective", "simcse-sup", "--guide", "{missing}"], "--guide {missing}: no such file or folder"),
        (["--objective", "simcse-sup", "--guide", "pypi:no-such-model"], "--guide pypi:no-such-model: cannot load the model: unknown packaged model"),
        (["--objective", "cosine", "--guide", "{student}"], "--guide {student} needs the in-batch-negative term, and in the objective 'cosine'"),
        (["--objective", "simcse-unsup", "--guide", "{student}"], "in the objective 'simcse-unsup' its batches are sentences"),
    ],
)
def test_bad_guides_are_one_line(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str) -> None:
    names = {"missing": str(tmp_path / "no-such-guide"), "student": str(tiny_bert_dir)}
    data = _triplets(tmp_path / "t.jsonl")
    out = tmp_path / "run"
    argv = ["train", str(tiny_bert_dir), "--train-data", str(data), "--output-dir", str(out), *[e.format(**names) for e in extra], *COMMON]
    code, _, err = run_cli(argv, capsys)
    assert code == 2 and "Traceback" not in err, err
    assert expected.format(**names) in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (out / "model").exists()


def test_an_unknown_margin_strategy_is_a_usage_error(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", str(tiny_bert_dir), "--train-data", str(_triplets(tmp_path / "t.jsonl")), "--objective", "simcse-sup", "--guide", str(tiny_bert_dir),
            "--guide-margin-strategy", "both", "--output-dir", str(tmp_path / "run"), *COMMON]  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert code == 2 and err.strip().splitlines()[-1].endswith("argument --guide-margin-strategy: invalid choice: 'both' (choose from 'absolute', 'relative')")


def _mined(path: Path, rows: int = 12, seed: int = 0) -> Path:
    """A mined n-tuple file with a teacher's scores (anchor, positive, negative_1..2, *_score)."""
    rng = random.Random(seed)
    with path.open("w") as handle:
        for _ in range(rows):
            record: dict[str, Any] = {"anchor": helpers.random_sentence(rng), "positive": helpers.random_sentence(rng)}
            record.update({f"negative_{k}": helpers.random_sentence(rng) for k in (1, 2)})
            record.update({"positive_score": 0.6 + 0.3 * rng.random(), "negative_1_score": 0.5 * rng.random(), "negative_2_score": 0.5 * rng.random()})
            handle.write(json.dumps(record) + "\n")
    return path


def test_distillation_with_the_in_batch_term_takes_a_guide(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    guide = _other_guide(tmp_path / "guide")
    out = tmp_path / "run"
    argv = ["train", str(tiny_bert_dir), "--train-data", str(_mined(tmp_path / "m.jsonl")), "--objective", "margin-mse", "--ibn-weight", "1",
            "--guide", str(guide), "--gradcache-chunk-size", "5", "--output-dir", str(out), *COMMON]  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    assert all({"loss_margin_mse", "loss_ibn", "guide_masked"} <= set(r) for r in _metrics(out))


def test_in_a_multi_dataset_run_the_guide_goes_where_there_are_in_batch_negatives(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.errors import ConfigError
    from anglekit.training.run import train

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"text1": f"a cat {i}", "text2": f"a dog {i}", "label": i % 2}) + "\n" for i in range(8)))
    triplets = _triplets(tmp_path / "t.jsonl", 8)
    out = tmp_path / "run"
    config = helpers.train_config(tiny_bert_dir, None, out, device="cpu", batch_size=4, max_steps=4, logging_steps=1, dataset_order="round_robin",
                                  objective="cosine", guide=str(tiny_bert_dir), precision="fp32",
                                  train_data=[f"{pairs};name=sts", f"{triplets};objective=simcse-sup;name=nli"])  # fmt: skip
    result = train(config)
    assert result.guide_masked is not None
    logged = _metrics(out)
    assert [("loss_sts/cosine" in r, "guide_masked" in r) for r in logged] == [(True, False), (False, True)] * 2
    saved = json.loads((out / "train_config.json").read_text())["objective"]
    assert "guide=None" in saved["sts"] and f"guide='{tiny_bert_dir}'" in saved["nli"]  # several datasets: each config's repr
    alone = helpers.train_config(tiny_bert_dir, None, tmp_path / "no", device="cpu", batch_size=4, max_steps=1, objective="cosine", guide=str(tiny_bert_dir),
                                 train_data=[f"{pairs};name=a", f"{pairs};name=b"])  # fmt: skip
    with pytest.raises(ConfigError, match="--guide applies to none of the objectives of train_data"):
        train(alone)
