"""The ``anglekit`` command line, run in-process through ``anglekit.cli.main`` (the kill/resume test
in test_training.py runs it as a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anglekit.cli import main

import helpers

SENTENCES = [
    "a man is playing the guitar .",
    "dog",
    "the old woman walks her small white dog in the park every morning .",
    "two kids ride bikes",
    "i can not eat bread today !",
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return helpers.run_cli(argv, capsys)


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ------------------------------------------------------------------ help and argument errors


def test_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--help"], capsys)
    assert code == 0
    for command in ("train", "eval", "encode", "--verbose"):
        assert command in out


@pytest.mark.parametrize(
    ("command", "options"),
    [
        (
            "train",
            ["--config", "--model", "--train-data", "--dev-data", "--pooling", "--prompt", "--max-steps", "--save-steps",
             "--batch-size", "--resume", "--overwrite-output-dir", "--positive-threshold", "--quiet", "--objective"],
        ),
        ("eval", ["--data", "--output", "--batch-size", "--max-length", "--pooling", "--quiet"]),
        ("encode", ["--input", "--output", "--column", "--normalize", "--no-normalize", "--batch-size", "--pooling"]),
    ],
)  # fmt: skip
def test_command_help(command: str, options: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([command, "--help"], capsys)
    assert code == 0
    for option in options:
        assert option in out, option


def test_train_help_shows_field_docs_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(["train", "--help"], capsys)
    flat = " ".join(out.split())
    assert "Continue from the last checkpoint in output_dir" in flat
    assert "(default: 32)" in flat  # batch size


def test_help_does_not_import_torch() -> None:
    code = "import sys\nfrom anglekit.cli import build_parser\nbuild_parser()\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("argv", "bad"),
    [
        (["train", "--bogus-flag", "1"], "--bogus-flag"),
        (["train", "--model", "m", "--batchsize", "4"], "--batchsize"),
        (["eval", "model", "--data", "x", "--frobnicate"], "--frobnicate"),
        (["encode", "model", "--input", "a.txt", "--output", "a.npy", "--colunm", "text"], "--colunm"),
        (["--nope", "train"], "--nope"),
    ],
)
def test_unknown_flag_exits_2_and_names_it(argv: list[str], bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(argv, capsys)
    assert code == 2
    assert "unrecognized arguments" in err and bad in err


def test_unknown_command_and_missing_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["fit"], capsys)
    assert code == 2 and "fit" in err
    code, _, err = _run([], capsys)
    assert code == 2 and "COMMAND" in err


def test_flag_of_wrong_type_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["train", "--batch-size", "eight"], capsys)
    assert code == 2 and "--batch-size" in err and "eight" in err


def test_encode_requires_input_and_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["encode", "model", "--output", "x.npy"], capsys)
    assert code == 2 and "--input" in err


# ------------------------------------------------------------------ train


def test_train_yaml_with_unknown_key_names_key_and_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "run-config.yaml"
    config.write_text("model: m\ntrain_data: d.jsonl\nlearning_rat: 0.001\n")
    code, _, err = _run(["train", "--config", str(config)], capsys)
    assert code == 2
    assert "learning_rat" in err and str(config) in err
    assert err.startswith("anglekit train: error:")
    assert not (tmp_path / "runs").exists()


def test_train_yaml_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    code, _, err = _run(["train", "--config", str(empty)], capsys)
    assert code == 2 and "empty.yaml" in err and "empty" in err
    code, _, err = _run(["train", "--config", str(tmp_path / "missing.yaml")], capsys)
    assert code == 2 and "missing.yaml" in err


def test_train_without_model_is_a_clear_error(tmp_path: Path, pair_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["train", "--train-data", str(pair_file), "--output-dir", str(tmp_path / "run")], capsys)
    assert code == 2
    assert "missing required setting(s): model" in err
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_train_runs_from_yaml_with_flag_overrides(tmp_path: Path, tiny_bert_dir: Path, pair_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    config = tmp_path / "config.yaml"
    config.write_text(
        f"model: {tiny_bert_dir}\ntrain-data: {pair_file}\noutput_dir: {out}\nbatch_size: 2\nmax_steps: 3\n"
        "positive_threshold: 4.0\ndevice: cpu\nquiet: true\nlogging_steps: 1\n"
    )
    code, stdout, err = _run(["train", "--config", str(config), "--batch-size", "4", "--max-steps", "2"], capsys)
    assert code == 0, err
    assert "steps 2" in stdout and f"model saved to {out / 'model'}" in stdout
    saved = json.loads((out / "train_config.json").read_text())["train"]
    assert saved["batch_size"] == 4 and saved["max_steps"] == 2  # flags win over the YAML
    assert saved["positive_threshold"] == 4.0 and saved["logging_steps"] == 1  # the rest from the YAML
    assert json.loads((out / "results.json").read_text())["steps"] == 2


# ------------------------------------------------------------------ encode


@pytest.fixture
def texts_file(tmp_path: Path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


def test_encode_writes_npy_equal_to_embedder_encode(tmp_path: Path, tiny_bert_dir: Path, texts_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.model.embedder import Embedder

    output = tmp_path / "vectors.npy"
    code, stdout, err = _run(["encode", str(tiny_bert_dir), "--input", str(texts_file), "--output", str(output), "--batch-size", "2", "--quiet"], capsys)
    assert code == 0, err
    assert f"wrote {len(SENTENCES)} x 32 vectors" in stdout
    vectors = np.load(output)
    assert vectors.shape == (len(SENTENCES), 32) and vectors.dtype == np.float32
    expected = Embedder.from_pretrained(tiny_bert_dir).encode(SENTENCES)
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-5)
    assert _listing(tmp_path) == ["texts.txt", "vectors.npy"]


def test_encode_options(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.model.embedder import Embedder

    table = tmp_path / "texts.csv"
    table.write_text("id,sentence\n1,dog\n2,a man is playing the guitar .\n3,two kids ride bikes\n", encoding="utf-8")
    output = tmp_path / "out" / "vectors.npy"  # the folder is created
    argv = ["encode", str(tiny_bert_dir), "--input", str(table), "--column", "sentence", "--output", str(output)]
    code, _, err = _run([*argv, "--normalize", "--pooling", "last_avg", "--max-length", "4", "--quiet"], capsys)
    assert code == 0, err
    vectors = np.load(output)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    model = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", max_length=4)
    expected = model.encode(["dog", "a man is playing the guitar .", "two kids ride bikes"], normalize=True)
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("content", "suffix", "match"),
    [
        (b"", ".txt", "empty"),
        (b"\n\n", ".txt", "empty"),
        (b"dog\n\ncat\n", ".txt", "row 2"),
        (b"dog\ncat\n   \n", ".txt", "row 3"),
        (b"\x00\x01\x02binary\x00stuff\xff", ".txt", "binary"),
        (b"dog\ncaf\xe9 au lait\n", ".txt", "row 2"),
        (b"id,other\n1,x\n", ".csv", "column"),
    ],
    ids=["empty", "only-newlines", "blank-line", "whitespace-line", "binary", "latin1", "no-text-column"],
)
def test_encode_bad_input_exits_1_and_writes_nothing(
    tmp_path: Path, tiny_bert_dir: Path, content: bytes, suffix: str, match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / f"input{suffix}"
    source.write_bytes(content)
    output = tmp_path / "vectors.npy"
    code, _, err = _run(["encode", str(tiny_bert_dir), "--input", str(source), "--output", str(output), "--quiet"], capsys)
    assert code == 1  # the data is wrong, not the command
    assert err.startswith("anglekit encode: error:")
    assert str(source) in err and match in err, err
    assert "Traceback" not in err
    assert _listing(tmp_path) == [source.name]  # no output, no temporary file


def test_encode_missing_input(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "vectors.npy"
    code, _, err = _run(["encode", str(tiny_bert_dir), "--input", str(tmp_path / "nope.txt"), "--output", str(output)], capsys)
    assert code == 2 and "nope.txt" in err and "no such file" in err
    assert _listing(tmp_path) == []


@pytest.mark.parametrize("name", ["vectors.npz", "vectors", "vectors.npy.txt", "vectors.NPY"])
def test_encode_output_must_end_in_npy(tmp_path: Path, tiny_bert_dir: Path, texts_file: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["encode", str(tiny_bert_dir), "--input", str(texts_file), "--output", str(tmp_path / name)], capsys)
    assert code == 2 and ".npy" in err and name in err
    assert _listing(tmp_path) == ["texts.txt"]


def test_encode_refuses_to_overwrite_its_input(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "data.npy"
    source.write_text("dog\ncat\n")
    code, _, err = _run(["encode", str(tiny_bert_dir), "--input", str(source), "--output", str(source)], capsys)
    assert code == 2 and "overwrite" in err
    assert source.read_text() == "dog\ncat\n"


def test_encode_bad_model_exits_2_and_keeps_an_existing_output(tmp_path: Path, texts_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "vectors.npy"
    np.save(output, np.ones((2, 3), dtype=np.float32))
    code, _, err = _run(["encode", str(tmp_path / "no-model"), "--input", str(texts_file), "--output", str(output)], capsys)
    assert code == 2 and "not a model directory" in err
    np.testing.assert_array_equal(np.load(output), np.ones((2, 3), dtype=np.float32))
    assert _listing(tmp_path) == ["texts.txt", "vectors.npy"]


@pytest.mark.parametrize("command", ["encode", "eval"])
def test_non_positive_batch_size_exits_2(
    command: str, tmp_path: Path, tiny_bert_dir: Path, texts_file: Path, dev_pair_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if command == "encode":
        argv = ["encode", str(tiny_bert_dir), "--input", str(texts_file), "--output", str(tmp_path / "v.npy")]
    else:
        argv = ["eval", str(tiny_bert_dir), "--data", str(dev_pair_file)]
    code, _, err = _run([*argv, "--batch-size", "0", "--quiet"], capsys)
    assert code == 2 and "batch" in err
    assert not (tmp_path / "v.npy").exists()


def test_unloadable_hub_model_exits_2(tmp_path: Path, texts_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # HF_HUB_OFFLINE=1 (conftest): nothing is downloaded, the name is simply not in the cache.
    name = "anglekit-tests/no-such-model"
    code, _, err = _run(["encode", name, "--input", str(texts_file), "--output", str(tmp_path / "v.npy")], capsys)
    assert code == 2 and name in err
    assert not (tmp_path / "v.npy").exists()


# ------------------------------------------------------------------ eval


def test_eval_prints_scores_and_writes_json(
    tmp_path: Path, tiny_bert_dir: Path, pair_file: Path, dev_pair_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from anglekit.data.catalog import resolve_dataset
    from anglekit.metrics.similarity import evaluate_pairs
    from anglekit.model.embedder import Embedder

    output = tmp_path / "scores.json"
    code, stdout, err = _run(["eval", str(tiny_bert_dir), "--data", str(pair_file), "--data", str(dev_pair_file), "--output", str(output), "--quiet"], capsys)
    assert code == 0, err
    assert "spearman" in stdout and "pearson" in stdout
    results = json.loads(output.read_text())
    assert results["model"] == str(tiny_bert_dir)
    assert sorted(results["datasets"]) == sorted([str(pair_file), str(dev_pair_file)])
    model = Embedder.from_pretrained(tiny_bert_dir)
    for spec, n_pairs in ((str(pair_file), 64), (str(dev_pair_file), 24)):
        got = results["datasets"][spec]
        data = resolve_dataset(spec)
        expected = evaluate_pairs(model.encode, data.text1, data.text2, data.labels)
        assert got["n_pairs"] == n_pairs
        assert got["spearman"] == pytest.approx(expected.spearman, abs=1e-3)
        assert got["pearson"] == pytest.approx(expected.pearson, abs=1e-3)
        row = next(line for line in stdout.splitlines() if line.startswith(spec))
        assert f"{expected.spearman:.2f}" in row and str(n_pairs) in row


def test_eval_without_output_writes_nothing(
    tmp_path: Path, tiny_bert_dir: Path, dev_pair_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, stdout, _ = _run(["eval", str(tiny_bert_dir), "--data", str(dev_pair_file), "--quiet"], capsys)
    assert code == 0 and "spearman" in stdout
    assert _listing(tmp_path) == []


@pytest.mark.parametrize(
    ("lines", "row"),
    [
        (['{"text1": "a dog", "text2": "a cat", "label": 1.0}', '{"text1": "x", "text2": "y", "label": "high"}'], 2),
        (['{"text1": "a dog", "text2": "a cat", "label": 1.0}', '{"text1": "a", "text2": "b", "label": 2}', '{"text1": "", "text2": "b", "label": 2}'], 3),
        (['{"text1": "a dog", "text2": "a cat", "label": 1.0}', "{not json"], 2),
    ],
    ids=["bad-label", "empty-text", "bad-json"],
)  # fmt: skip
def test_eval_malformed_data_exits_1_naming_file_and_row(
    tmp_path: Path, tiny_bert_dir: Path, lines: list[str], row: int, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "broken.jsonl"
    data.write_text("\n".join(lines) + "\n")
    output = tmp_path / "scores.json"
    code, _, err = _run(["eval", str(tiny_bert_dir), "--data", str(data), "--output", str(output), "--quiet"], capsys)
    assert code == 1
    assert err.startswith("anglekit eval: error:")
    assert str(data) in err and f"row {row}" in err, err
    assert not output.exists()


def test_eval_malformed_tsv_names_the_row(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "broken.tsv"
    data.write_text("text1\ttext2\tlabel\na dog\ta cat\t1.0\na man\ta woman\tnan\n")
    code, _, err = _run(["eval", str(tiny_bert_dir), "--data", str(data), "--quiet"], capsys)
    assert code == 1 and str(data) in err and "row 2" in err


def test_eval_needs_data_and_an_existing_dataset(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["eval", str(tiny_bert_dir)], capsys)
    assert code == 2 and "--data" in err
    code, _, err = _run(["eval", str(tiny_bert_dir), "--data", str(tmp_path / "missing.jsonl")], capsys)
    assert code == 2 and "missing.jsonl" in err


def test_cli_results_do_not_depend_on_cwd(
    tmp_path: Path, tiny_bert_dir: Path, texts_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative --input/--output paths resolve against the working directory."""
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(["encode", str(tiny_bert_dir), "--input", "texts.txt", "--output", "v.npy", "--quiet"], capsys)
    assert code == 0, err
    assert np.load(tmp_path / "v.npy").shape == (len(SENTENCES), 32)


def test_helpers_pair_file_is_valid(pair_file: Path) -> None:
    rows = helpers.read_jsonl(pair_file)
    assert len(rows) == 64 and all(0.0 <= float(r["label"]) <= 5.0 for r in rows)  # type: ignore[arg-type]


def test_generate_is_wired_and_reports_a_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pairs.jsonl"
    code = main(["generate", "--input", str(tmp_path / "missing.txt"), "--output", str(out), "--llm", "openai:m@http://127.0.0.1:9/v1"])
    assert code == 2
    assert "missing.txt" in capsys.readouterr().err
    assert not out.exists()


def test_github_issues_is_wired_and_reports_a_missing_collection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dataset"
    code = main(["github-issues", "build", str(tmp_path / "no-collection"), "--output-dir", str(out), "--no-plot"])
    assert code == 2
    assert "no-collection" in capsys.readouterr().err
    assert not out.exists()


def test_github_issues_is_a_known_dataset_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from anglekit.data.catalog import resolve_dataset
    from anglekit.github_issues.build import MANIFEST

    folder = tmp_path / "github-issues"  # as written by `anglekit github-issues build`
    folder.mkdir()
    (folder / MANIFEST).write_text("{}")
    (folder / "test.jsonl").write_text('{"text1": "a bug", "text2": "the same bug", "label": 1}\n{"text1": "x", "text2": "y", "label": 0}\n')
    monkeypatch.setenv("ANGLEKIT_DATA", str(tmp_path))
    dataset = resolve_dataset("github-issues:test")
    assert len(dataset) == 2 and list(dataset.labels) == [1.0, 0.0]
