"""Training on streamed rows (``stream_data``): the same batches, losses and weights as training on
the in-memory rows, for pairs, sentences and triplets; the command line's --stream-data."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from anglekit.model.embedder import Embedder
from anglekit.training.config import TrainConfig
from anglekit.training.run import train

import helpers


def _run(model: Path, data: Path, out: Path, stream: bool, **extra: Any) -> Any:
    config = TrainConfig.from_dict({
        "model": str(model), "train_data": str(data), "output_dir": str(out), "max_steps": 3, "batch_size": 8,
        "device": "cpu", "quiet": True, "seed": 0, "stream_data": stream, "logging_steps": 1, **extra,
    })  # fmt: skip
    return train(config)


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in Embedder.from_pretrained(folder, device="cpu").state_dict().items()}


def _losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]


def _same_training_streamed(model: Path, data: Path, tmp_path: Path, **settings: Any) -> str:
    """Train on ``data`` in memory (``tmp_path/plain``) and streamed (``tmp_path/streamed``); assert the
    same 3 steps, losses and weights; return the streamed run's data summary."""
    plain = _run(model, data, tmp_path / "plain", False, **settings)
    streamed = _run(model, data, tmp_path / "streamed", True, **settings)
    assert plain.steps == streamed.steps == 3
    assert _losses(tmp_path / "streamed") == pytest.approx(_losses(tmp_path / "plain"), rel=1e-5)
    a, b = _weights(plain.model_dir), _weights(streamed.model_dir)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6, msg=name)
    return str(json.loads((tmp_path / "streamed" / "train_config.json").read_text())["train_data"])


@pytest.mark.parametrize(("objective", "kind"), [("paper", "pairs"), ("simcse-unsup", "sentences"), ("simcse-sup", "triplets")])
def test_streamed_training_equals_in_memory_training(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, objective: str, kind: str) -> None:
    if kind == "pairs":
        data, extra = pair_file, {"positive_threshold": 4.0}
    elif kind == "sentences":
        data = tmp_path / "s.txt"
        data.write_text("\n".join(helpers.random_sentence(random.Random(i), 3, 20) for i in range(40)) + "\n", encoding="utf-8")
        extra = {}
    else:
        rows = [json.loads(line) for line in pair_file.read_text().splitlines()][:40]
        data = tmp_path / "t.jsonl"
        data.write_text("".join(json.dumps({"anchor": r["text1"], "positive": r["text2"], "negative": rows[(i + 7) % 40]["text2"]}) + "\n"
                                for i, r in enumerate(rows)), encoding="utf-8")  # fmt: skip
        extra = {}
    summary = _same_training_streamed(tiny_bert_dir, data, tmp_path, objective=objective, **extra)
    assert "streamed from rows.arrow" in summary
    assert "streamed from" not in json.loads((tmp_path / "plain" / "train_config.json").read_text())["train_data"]


def test_stream_data_on_the_command_line(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "--model", str(tiny_bert_dir), "--train-data", str(pair_file), "--output-dir", str(tmp_path / "run"), "--max-steps", "1",
            "--batch-size", "8", "--device", "cpu", "--quiet", "--positive-threshold", "4", "--stream-data"]  # fmt: skip
    code, _, err = helpers.run_cli(argv, capsys)
    assert code == 0, err
    code, stdout, _ = helpers.run_cli(["train", "--help"], capsys)
    assert "--stream-data" in stdout


PROMPTS = {"query": "query: ", "document": "passage: "}


def _tuples(pair_file: Path, path: Path, negatives: int, short_every: int = 0) -> Path:
    """(anchor, positive, negative_1..n) rows from the pair file; every ``short_every``-th row one negative."""
    rows = [json.loads(line) for line in pair_file.read_text().splitlines()][:40]
    out = []
    for i, r in enumerate(rows):
        k = 1 if short_every and i % short_every == 0 else negatives
        out.append({"anchor": r["text1"], "positive": r["text2"], **{f"negative_{j + 1}": rows[(i + 7 + 5 * j) % 40]["text2"] for j in range(k)}})
    if negatives == 1 and not short_every:
        out = [{"anchor": r["anchor"], "positive": r["positive"], "negative": r["negative_1"]} for r in out]
    path.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("objective", "negatives", "extra"),
    [
        ("paper", 3, {}),  # the pair objective on mined n-tuples (issue 41's retrieval rows)
        ("paper", 1, {}),  # ... on plain triplets
        ("paper", 3, {"pad_negatives": True, "short_every": 4}),
        ("simcse-sup", 3, {}),
        ("simcse-sup", 3, {"prompts": PROMPTS}),  # the default roles: anchor query, positive and negatives document
        ("paper", 3, {"prompts": PROMPTS, "column_roles": {"positive": "none"}}),
    ],
)
def test_streamed_tuples_and_roles_equal_in_memory_training(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, objective: str, negatives: int,
                                                            extra: dict[str, Any]) -> None:  # fmt: skip
    extra = dict(extra)
    data = _tuples(pair_file, tmp_path / "t.jsonl", negatives, extra.pop("short_every", 0))
    summary = _same_training_streamed(tiny_bert_dir, data, tmp_path, objective=objective, **extra)
    assert "streamed from rows.arrow" in summary and (negatives == 1 or "n-tuples" in summary)


def test_roles_change_what_streamed_tuples_train_on(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    """The roles reach streamed rows: with the query and document prompts the run differs from one
    whose columns all take the general prompt (the equality above is not two unprompted runs)."""
    data = _tuples(pair_file, tmp_path / "t.jsonl", 2)
    roled = _run(tiny_bert_dir, data, tmp_path / "roled", True, objective="paper", prompts=PROMPTS)
    none = {"anchor": "none", "positive": "none", "negative": "none"}
    plain = _run(tiny_bert_dir, data, tmp_path / "plain", True, objective="paper", prompts=PROMPTS, column_roles=none)
    assert roled.steps == plain.steps == 3
    assert _losses(tmp_path / "roled") != pytest.approx(_losses(tmp_path / "plain"), rel=1e-4)


def test_streamed_lengths_are_each_rows_longest_text(tmp_path: Path) -> None:
    """The lengths length-grouped batches read: per row, its longest text, the negatives of an
    n-tuple row included (rows padded to fewer negatives, and a slice boundary, included)."""
    from anglekit.data.stream import spooling
    from anglekit.data.triplets import read_triplets
    from anglekit.training.tasks import streamed

    rows = [{"anchor": "a" * (i % 11 + 1), "positive": "b" * (i % 4 + 1), "negative_1": "c" * (i % 5 + 1),
             **({"negative_2": "d" * (i % 13 + 1)} if i % 3 else {})} for i in range(1, 40)]  # fmt: skip
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with spooling():
        data = read_triplets(path, pad_negatives=True)
    by_chars = streamed.StreamedRows(data, ["anchor", "positive", "negatives"], lambda texts: [[0] * len(t) for t in texts], lambda ids, t, i: ids)
    old, streamed.LENGTH_SLICE = streamed.LENGTH_SLICE, 7
    try:
        assert by_chars.lengths() == [max(len(t) for t in by_chars.texts(i)) for i in range(len(rows))]
    finally:
        streamed.LENGTH_SLICE = old
