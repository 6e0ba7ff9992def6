"""Training data at scale: train() on a datasets.Dataset / IterableDataset, a column mapping
(``--columns``), Arrow/Parquet read in record batches with the same checks as whole files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from anglekit.data.readers import read_pairs
from anglekit.errors import ConfigError, DataError
from anglekit.training import TrainConfig, train

import helpers
from helpers import train_config

datasets = pytest.importorskip("datasets")


def _config(model: Path, out: Path, **kwargs: Any) -> TrainConfig:
    return train_config(model, None, out, **{"max_steps": 2, "batch_size": 4, "positive_threshold": 4.0, "device": "cpu", "precision": "fp32", **kwargs})


def _renamed_pairs(n: int = 16) -> dict[str, list[Any]]:
    rows = helpers.make_pairs(n, seed=4)
    return {"q": [r["text1"] for r in rows], "d": [r["text2"] for r in rows], "y": [r["label"] for r in rows]}


@pytest.mark.parametrize("iterable", [False, True])
def test_train_on_a_dataset_object_with_a_column_mapping(tiny_bert_dir: Path, tmp_path: Path, iterable: bool) -> None:
    ds = datasets.Dataset.from_dict(_renamed_pairs())
    if iterable:
        ds = ds.to_iterable_dataset()
    result = train(_config(tiny_bert_dir, tmp_path / "run", columns="text1=q,text2=d,label=y"), train_dataset=ds)
    assert result.steps == 2 and (tmp_path / "run" / "model").is_dir()
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert saved["train"]["train_data"] == "<datasets.Dataset>" and saved["train"]["columns"] == "text1=q,text2=d,label=y"
    assert "<datasets.Dataset>): 16 pairs" in saved["train_data"]


def test_sentences_and_triplets_from_dataset_objects(tiny_bert_dir: Path, tmp_path: Path) -> None:
    pairs = _renamed_pairs()
    sentences = datasets.Dataset.from_dict({"body": pairs["q"]})
    result = train(_config(tiny_bert_dir, tmp_path / "s", objective="simcse-unsup", columns="text=body"), train_dataset=sentences)
    assert result.unit == "sentences" and result.steps == 2
    triplets = datasets.Dataset.from_dict({"a": pairs["q"], "p": pairs["d"], "n": pairs["q"][::-1]})
    result = train(_config(tiny_bert_dir, tmp_path / "t", objective="simcse-sup", columns="anchor=a,positive=p,negative=n"),
                   train_dataset=triplets.to_iterable_dataset())  # fmt: skip
    assert result.unit == "triplets" and result.steps == 2


def test_a_bad_row_of_a_dataset_is_named_as_in_a_file(tiny_bert_dir: Path, tmp_path: Path) -> None:
    data = _renamed_pairs(8)
    data["y"][5] = float("nan")
    with pytest.raises(DataError, match=r"<datasets.Dataset>, row 6, field 'y': label nan is not finite"):
        train(_config(tiny_bert_dir, tmp_path / "run", columns="text1=q,text2=d,label=y"), train_dataset=datasets.Dataset.from_dict(data))
    data = _renamed_pairs(8)
    data["d"][2] = "  "
    with pytest.raises(DataError, match=r"row 3, field 'd': text is blank"):
        train(_config(tiny_bert_dir, tmp_path / "run", columns="text1=q,text2=d,label=y"), train_dataset=datasets.Dataset.from_dict(data).to_iterable_dataset())
    with pytest.raises(DataError, match="missing column 'text1'"):
        train(_config(tiny_bert_dir, tmp_path / "run"), train_dataset=datasets.Dataset.from_dict(_renamed_pairs(8)))
    with pytest.raises(ConfigError, match="not both"):
        train(_config(tiny_bert_dir, tmp_path / "run", train_data="x.jsonl"), train_dataset=datasets.Dataset.from_dict(_renamed_pairs(8)))
    with pytest.raises(ConfigError, match="unknown key"):
        train(_config(tiny_bert_dir, tmp_path / "run", columns="sentence1=q"), train_dataset=datasets.Dataset.from_dict(_renamed_pairs(8)))
    assert not (tmp_path / "run" / "model").exists()


@pytest.mark.parametrize("bad", ["text1", "text1=", "=q", "text1=q,text1=d", " "])
def test_columns_syntax_is_checked_with_the_settings(bad: str) -> None:
    with pytest.raises(ConfigError, match="columns"):
        TrainConfig.from_dict({"columns": bad})


def test_columns_flag_on_the_command_line(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _renamed_pairs()
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"q": q, "d": d, "y": y}) + "\n" for q, d, y in zip(data["q"], data["d"], data["y"], strict=False)))
    argv = ["train", str(tiny_bert_dir), "--train-data", str(path), "--columns", "text1=q,text2=d,label=y", "--output-dir", str(tmp_path / "run"),
            "--max-steps", "2", "--batch-size", "4", "--positive-threshold", "4.0", "--device", "cpu", "--quiet"]  # fmt: skip
    code, out, err = helpers.run_cli(argv, capsys)
    assert code == 0 and "steps 2" in out, err
    code, _, err = helpers.run_cli([*argv[:4], "--output-dir", str(tmp_path / "run2"), "--quiet"], capsys)
    assert code == 1 and "missing column 'text1'" in err
    code, _, err = helpers.run_cli(
        ["train", str(tiny_bert_dir), "--train-data", "stsb:train", "--columns", "text1=q", "--output-dir", str(tmp_path / "r3")], capsys
    )
    assert code == 2 and "not to a known dataset name" in err


def test_parquet_and_saved_datasets_are_read_in_record_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import anglekit.data.sources as sources

    monkeypatch.setattr(sources, "BATCH_ROWS", 3)  # several batches: rows are numbered across them
    data = _renamed_pairs(10)
    path = tmp_path / "pairs.parquet"
    pq.write_table(pa.table(data), path, row_group_size=4)
    read = read_pairs(path, columns={"text1": "q", "text2": "d", "label": "y"})
    assert read.text1 == data["q"] and read.labels.tolist() == data["y"]
    saved = tmp_path / "saved"
    datasets.Dataset.from_dict(data).save_to_disk(str(saved))
    assert read_pairs(saved, columns={"text1": "q", "text2": "d", "label": "y"}).text2 == data["d"]
    data["q"][7] = None
    pq.write_table(pa.table(data), path, row_group_size=4)
    with pytest.raises(DataError, match=r"pairs.parquet, row 8, field 'q': text is missing"):
        read_pairs(path, columns={"text1": "q", "text2": "d", "label": "y"})
    lenient = read_pairs(path, columns={"text1": "q", "text2": "d", "label": "y"}, lenient=True)
    assert len(lenient) == 9 and lenient.skipped == {"empty text": 1}


@pytest.mark.parametrize(
    ("objective", "label", "threshold", "refused"),
    [
        ("cosine", 3.0, None, "the cosine term rank"),
        ("angle", 1.0, None, "the angle term rank"),
        ("paper", 0.0, 1.0, "the cosine and angle terms rank pairs by label, and one label leaves nothing to rank; the in-batch-negative term needs positives (label >= 1)"),
        ("ibn", 2.0, 4.0, "the in-batch-negative term needs positives (label >= 4)"),
        ("ibn", 5.0, 4.0, None),  # every pair a positive: the in-batch negatives still train
        ("paper", 1.0, 1.0, None),
    ],
)  # fmt: skip
def test_labels_all_equal_are_refused_before_the_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objective: str, label: float, threshold: float | None, refused: str | None
) -> None:
    import anglekit.training.run as run

    path = tmp_path / "same.jsonl"
    rows = helpers.make_pairs(12, seed=1)
    path.write_text("".join(json.dumps({**r, "label": label}) + "\n" for r in rows), encoding="utf-8")

    class Loaded(Exception):
        pass

    def load_embedder(*args: Any, **kwargs: Any) -> None:
        raise Loaded

    monkeypatch.setattr(run, "load_embedder", load_embedder)
    config = TrainConfig.from_dict({"model": "unused-model", "output_dir": str(tmp_path / "run"), "train_data": str(path), "objective": objective,
                                    "positive_threshold": threshold, "device": "cpu", "quiet": True})  # fmt: skip
    monkeypatch.setattr(run, "check", run.dataset_plans)  # no model files to inspect
    if refused is None:
        with pytest.raises(Loaded):
            train(config)
        return
    with pytest.raises(DataError, match=f"every one of the 12 labels is {label:g}, so the objective '{objective}' would train at loss 0") as exc:
        train(config)
    assert refused in str(exc.value) and str(path) in str(exc.value) and exc.value.field == "label"
    assert not (tmp_path / "run" / "train_config.json").exists()


@pytest.mark.parametrize(
    ("objective", "negatives", "refused"),
    [
        ("paper", 2, None),  # rows expand to pairs labelled 1 and 0: something to rank
        ("ibn", 0, None),  # anchor/positive rows only: every pair a positive, the in-batch negatives train
        ("cosine", 0, "every one of the 12 labels is 1, so the objective 'cosine' would train at loss 0"),
    ],
)
def test_ntuple_rows_pass_the_label_check_as_their_expanded_pairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objective: str, negatives: int, refused: str | None
) -> None:
    """Mined n-tuples (and anchor/positive rows) are not refused for lacking a label column."""
    import anglekit.training.run as run

    path = tmp_path / "mined.jsonl"
    rows = [{"anchor": f"anchor {i}", "positive": f"positive {i}", **{f"negative_{k + 1}": f"negative {i} {k}" for k in range(negatives)}} for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    class Loaded(Exception):
        pass

    def load_embedder(*args: Any, **kwargs: Any) -> None:
        raise Loaded

    monkeypatch.setattr(run, "load_embedder", load_embedder)
    monkeypatch.setattr(run, "check", run.dataset_plans)  # no model files to inspect
    config = TrainConfig.from_dict({"model": "unused-model", "output_dir": str(tmp_path / "run"), "train_data": str(path), "objective": objective,
                                    "device": "cpu", "quiet": True})  # fmt: skip
    if refused is None:
        with pytest.raises(Loaded):
            train(config)
        return
    with pytest.raises(DataError, match=refused):
        train(config)
