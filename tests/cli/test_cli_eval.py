"""`anglekit eval --suite` and `anglekit report` end to end on the tiny BERT and tiny data roots."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from anglekit.cli import main

_EVALUATION_TESTS = str(Path(__file__).resolve().parents[1] / "evaluation")  # tests/evaluation: the tiny data roots
if _EVALUATION_TESTS not in sys.path:
    sys.path.insert(0, _EVALUATION_TESTS)

from test_eval_sts import write_sts_root  # noqa: E402
from test_eval_suites import write_nontransfer_root  # noqa: E402


def test_eval_sts_suite_writes_results_and_caches(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_sts_root(tmp_path / "data")
    out = tmp_path / "eval"
    args = [
        "eval",
        str(tiny_bert_dir),
        "--suite",
        "sts",
        "--data-root",
        str(root),
        "--output-dir",
        str(out),
        "--cache",
        str(tmp_path / "cache"),
        "--option",
        "sts.check_counts=false",
        "--quiet",
    ]
    assert main(args) == 0
    first = json.loads((out / "sts.json").read_text())
    assert "STS12" in capsys.readouterr().out
    assert (out / "sts.md").is_file()
    assert first["model"]["cache"]["misses"] > 0
    assert main(args) == 0  # the second run encodes nothing: every text comes from the cache
    second = json.loads((out / "sts.json").read_text())
    assert second["model"]["cache"]["misses"] == 0 and second["model"]["cache"]["hits"] > 0


def test_eval_data_and_suite_together_and_report(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_nontransfer_root(tmp_path / "data")
    out = tmp_path / "eval"
    scores = tmp_path / "scores.json"
    code = main(
        [
            "eval",
            str(tiny_bert_dir),
            "--suite",
            "non-transfer",
            "--data",
            str(root / "stsb") + ":test",
            "--output",
            str(scores),
            "--data-root",
            str(root),
            "--output-dir",
            str(out),
            "--no-cache",
            "--quiet",
        ]
    )
    assert code == 0
    assert json.loads(scores.read_text())["datasets"]
    assert (out / "non-transfer.json").is_file()
    capsys.readouterr()
    report_file = tmp_path / "report.md"
    assert main(["report", str(out), str(out), "--output", str(report_file)]) == 0
    text = capsys.readouterr().out
    assert "MRPC" in text and text.strip() == report_file.read_text().strip()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--suite", "nope"], "unknown suite"),
        (["--suite", "sts", "--option", "sts.nope=1"], "unknown option"),
        (["--suite", "sts", "--option", "geometry.plot=false"], "not being run"),
        (["--suite", "sts", "--option", "variant=original"], "SUITE.KEY=VALUE"),
        ([], "--data DATASET or --suite"),
    ],
)
def test_eval_bad_suite_arguments(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    assert main(["eval", str(tiny_bert_dir), "--output-dir", str(tmp_path / "o"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_eval_suite_with_missing_data_names_the_file(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    code = main(
        [
            "eval",
            str(tiny_bert_dir),
            "--suite",
            "retrieval",
            "--data-root",
            str(tmp_path / "empty"),
            "--output-dir",
            str(tmp_path / "o"),
            "--no-cache",
            "--quiet",
        ]
    )
    assert code == 1  # the data root lacks the suite's data
    assert "flickr30k" in capsys.readouterr().err


def test_report_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 1  # a folder without results: the data
    assert "empty" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["report"])
    assert exit_info.value.code == 2
