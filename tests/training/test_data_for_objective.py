"""Training data of the wrong kind for the objective, through ``anglekit train`` (issue 60): a
sentences file (.txt, .text, no extension) given to a pair or triplet objective is refused before
anything is created, in the command line's words (the objective, what it trains on, the columns it
reads, the sentence objectives), not the Python reader's ``pass format=``; premise/hypothesis rows
without ``label`` name the missing NLI label, not the anchor columns; a ``--positive-threshold`` no
pair reaches (4 on n-tuple rows) is refused instead of training the in-batch term at 0. Each: one
line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import helpers

SENTENCES = "a man plays the guitar\nthe dog runs in the park\na woman is cooking\ntwo kids ride bikes\n"


class Loaded(BaseException):  # past the command line's error boundary, which catches every Exception
    """Raised where the model would load: the data passed every check before it."""


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import anglekit.training.run as run

    def load_embedder(*args: Any, **kwargs: Any) -> None:
        raise Loaded

    monkeypatch.setattr(run, "load_embedder", load_embedder)


def _train(capsys: pytest.CaptureFixture[str], model: Path, data: Path, out: Path, *flags: str) -> tuple[int, str]:
    code, _, err = helpers.run_cli(["train", "--model", str(model), "--train-data", str(data), "--output-dir", str(out), "--device", "cpu", *flags], capsys)
    return code, err


@pytest.mark.parametrize("name", ["sentences.txt", "sentences.TEXT", "sentences"])
@pytest.mark.parametrize(("objective", "kind", "columns"), [("simcse-sup", "triplets", "anchor and positive columns"), ("simace-sup", "triplets", "premise, hypothesis and label"), ("paper", "pairs", "text1, text2 and label columns")])  # fmt: skip
def test_a_sentences_file_for_a_pair_or_triplet_objective_is_refused_before_anything_is_written(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None, name: str, objective: str, kind: str, columns: str
) -> None:
    data = tmp_path / name
    data.write_text(SENTENCES, encoding="utf-8")
    out = tmp_path / "run"
    code, err = _train(capsys, tiny_bert_dir, data, out, "--objective", objective)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"anglekit train: error: {data}: ")
    assert f"is read as sentences, one a line, but the objective {objective!r} trains on {kind}" in err
    assert columns in err and "simcse-unsup" in err and "simace-unsup" in err
    assert "format=" not in err  # a Python parameter, not a flag
    assert not out.exists()


def test_the_same_file_passes_for_a_sentence_objective(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None) -> None:
    data = tmp_path / "sentences.txt"
    data.write_text(SENTENCES, encoding="utf-8")
    with pytest.raises(Loaded):
        _train(capsys, tiny_bert_dir, data, tmp_path / "run", "--objective", "simcse-unsup")


def test_a_sentences_file_among_several_datasets_is_named_with_its_objective(
    tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None
) -> None:
    data = tmp_path / "sentences.txt"
    data.write_text(SENTENCES, encoding="utf-8")
    out = tmp_path / "run"
    argv = ["train", "--model", str(tiny_bert_dir), "--train-data", str(pair_file), "--train-data", f"{data};objective=simcse-sup", "--output-dir", str(out)]
    code, _, err = helpers.run_cli(argv, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"{data}: a .txt file is read as sentences, one a line, but the objective 'simcse-sup' trains on triplets" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("columns", "missing"),
    [(("premise", "hypothesis"), "'label'"), (("premise", "label"), "'hypothesis'"), (("hypothesis", "label", "id"), "'premise'")],
)
@pytest.mark.parametrize("objective", ["simcse-sup", "simace-sup"])
def test_nli_rows_without_a_column_name_the_missing_nli_column(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None, columns: tuple[str, ...], missing: str, objective: str
) -> None:
    data = tmp_path / "nli.jsonl"
    values = {"premise": "a man plays", "hypothesis": "a man is playing", "label": "entailment", "id": "7"}
    data.write_text("".join(json.dumps({c: values[c] for c in columns}) + "\n" for _ in range(4)), encoding="utf-8")
    code, err = _train(capsys, tiny_bert_dir, data, tmp_path / "run", "--objective", objective)
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err  # the file lacks a column: the data
    assert err.startswith(f"anglekit train: error: {data}, field {missing}: ")
    assert f"columns make an NLI set, which also needs {missing} to pair its rows into triplets" in err
    assert "anchor" not in err.split("columns make")[0] and "missing column 'anchor'" not in err
    assert ("anchor=premise,positive=hypothesis" in err) == ({"premise", "hypothesis"} <= set(columns))


def test_premise_and_hypothesis_mapped_as_anchor_and_positive_train(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None
) -> None:
    """The way out the message gives works: mapped columns are read as (anchor, positive) rows."""
    data = tmp_path / "nli.jsonl"
    data.write_text("".join(json.dumps({"premise": f"premise {i}", "hypothesis": f"hypothesis {i}"}) + "\n" for i in range(4)), encoding="utf-8")
    with pytest.raises(Loaded):
        _train(capsys, tiny_bert_dir, data, tmp_path / "run", "--objective", "simcse-sup", "--columns", "anchor=premise,positive=hypothesis")


def test_rows_that_are_not_nli_still_name_the_anchor(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"text": "a", "label": 1}) + "\n" for _ in range(4)), encoding="utf-8")
    code, err = _train(capsys, tiny_bert_dir, data, tmp_path / "run", "--objective", "simcse-sup")
    assert code == 1 and "field 'anchor': missing column 'anchor' or 'query' or 'sent0'" in err and "NLI" not in err


def test_an_unknown_extension_is_named_in_command_line_words(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None) -> None:
    data = tmp_path / "rows.dat"
    data.write_text("anchor,positive\na,b\n", encoding="utf-8")
    code, err = _train(capsys, tiny_bert_dir, data, tmp_path / "run", "--objective", "simcse-sup")
    assert code == 2 and err.count("\n") == 1, err
    assert f"cannot infer the format of {str(data)!r} from its extension '.dat'" in err
    assert "give the file one of those extensions (or, in Python, pass format=" in err


# ------------------------------------------------------------------ a threshold that leaves no positive


def _ntuples(path: Path) -> Path:
    rows = [{"anchor": f"anchor {i}", "positive": f"positive {i}", "negative_1": f"negative {i} a", "negative_2": f"negative {i} b"} for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _pairs(path: Path, labels: list[float]) -> Path:
    rows = helpers.make_pairs(len(labels), seed=3)
    path.write_text("".join(json.dumps({**r, "label": label}) + "\n" for r, label in zip(rows, labels, strict=True)), encoding="utf-8")
    return path


LOW_LABELS = [0, 1, 2, 3, 2.5, 0.5] * 2
"""Scores that vary (the cosine and angle terms train) but none reaches 4."""


@pytest.mark.parametrize(
    ("data", "flags", "pairs", "highest"),
    [
        ("ntuples", ["--objective", "paper", "--positive-threshold", "4"], "its n-tuple rows are pairs labelled 1 and 0", "1"),
        ("ntuples", ["--objective", "ibn", "--positive-threshold", "1.5"], "its n-tuple rows are pairs labelled 1 and 0", "1"),
        ("pairs", ["--objective", "paper", "--positive-threshold", "4"], "its highest label is 3", "3"),
        ("pairs", ["--objective", "paper", "--positive-threshold", "3.01"], "its highest label is 3", "3"),
    ],
)
def test_a_threshold_that_leaves_the_in_batch_term_without_a_positive_is_refused(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None, data: str, flags: list[str], pairs: str, highest: str
) -> None:
    path = _ntuples(tmp_path / "mined.jsonl") if data == "ntuples" else _pairs(tmp_path / "low.jsonl", LOW_LABELS)
    out = tmp_path / "run"
    code, err = _train(capsys, tiny_bert_dir, path, out, *flags)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    threshold, objective = flags[3], flags[1]
    assert err == (
        f"anglekit train: error: --positive-threshold {float(threshold):g} leaves the in-batch-negative term of the objective {objective!r} "
        f"without a positive pair in {path} ({pairs}), so the term would be 0 on every step; give a threshold of at most {highest} "
        "with --positive-threshold, or turn the term off with --ibn-weight 0\n"
    )
    assert not (out / "train_config.json").exists()


@pytest.mark.parametrize(
    ("data", "flags"),
    [
        ("ntuples", ["--objective", "paper", "--positive-threshold", "1"]),
        ("ntuples", ["--objective", "paper"]),  # the default for n-tuples: 1
        ("pairs", ["--objective", "paper", "--positive-threshold", "3"]),
        ("pairs", ["--objective", "paper", "--positive-threshold", "4", "--ibn-weight", "0"]),  # the term is off: nothing to refuse
        ("pairs", ["--objective", "cosine", "--positive-threshold", "4"]),  # no in-batch term
    ],
)
def test_a_threshold_some_pair_reaches_trains(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None, data: str, flags: list[str]
) -> None:
    path = _ntuples(tmp_path / "mined.jsonl") if data == "ntuples" else _pairs(tmp_path / "low.jsonl", LOW_LABELS)
    with pytest.raises(Loaded):
        _train(capsys, tiny_bert_dir, path, tmp_path / "run", *flags)


def test_the_default_threshold_of_a_label_range_no_pair_reaches_is_refused_too() -> None:
    """Scores 0-5 that never reach 4 (80% up the range): the default rule leaves no positive either."""
    from anglekit.data.records import PairDataset
    from anglekit.errors import ConfigError
    from anglekit.losses.registry import resolve_objective
    from anglekit.training.tasks import PairTask

    low = PairDataset([f"a {i}" for i in range(12)], [f"b {i}" for i in range(12)], LOW_LABELS, name="low", source="low.tsv", label_range=(0.0, 5.0))
    with pytest.raises(
        ConfigError,
        match=r"^the default positive threshold 4 leaves the in-batch-negative term of the objective 'paper' without a positive pair in low.tsv \(its highest label is 3\)",
    ):
        PairTask().build_objective(resolve_objective("paper", {}), low, None)
    reached = PairDataset(low.text1, low.text2, [*LOW_LABELS[:-1], 4.0], source="ok.tsv", label_range=(0.0, 5.0))
    _, config = PairTask().build_objective(resolve_objective("paper", {}), reached, None)
    assert config.positive_threshold == 4.0
