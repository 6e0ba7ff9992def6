"""``anglekit train --quiet`` prints the result table and nothing of the Trainer's own (no log dicts,
no ``{'train_runtime': ...}``); without --quiet the bar replaces those dicts too."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import read_jsonl, run_cli


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "progress"])
def test_train_prints_no_trainer_dicts(quiet: bool, tmp_path: Path, tiny_bert_dir: Path, pair_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = [
        "train",
        str(tiny_bert_dir),
        "--train-data",
        str(pair_file),
        "--output-dir",
        str(out),
        "--max-steps",
        "2",
        "--batch-size",
        "4",
        "--logging-steps",
        "1",
        "--positive-threshold",
        "2.5",
        "--device",
        "cpu",
    ]
    code, stdout, stderr = run_cli(argv + (["--quiet"] if quiet else []), capsys)
    assert code == 0, stderr
    for text in (stdout, stderr):
        assert "train_runtime" not in text and "{'loss'" not in text and "{'" not in text
    assert "model saved to" in stdout
    if quiet:
        assert stderr.strip() == ""
    # The records still reach metrics.jsonl (nothing lost by not printing them).
    records = read_jsonl(out / "metrics.jsonl")
    assert any("train_runtime" in r for r in records) and sum("loss" in r for r in records) == 2
