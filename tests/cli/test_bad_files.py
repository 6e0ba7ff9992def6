"""Every command that reads a file the user gives, fed bad files (issue 26 a): wrong JSON shape,
wrong types, a truncated file, an empty file, binary bytes, text that is not UTF-8, a folder where
a file belongs. Each must end with one line ``anglekit CMD: error: ...`` naming the file, exit 1
for a data file and 2 for a configuration file or a model folder's file (docs/cli.md), never a
traceback (exit 70).

A reader is a function that builds a good input in ``tmp_path`` (checked to pass), and returns the
command line and the one file of it that each bad content then replaces."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import helpers

BAD = {
    "empty": b"",
    "binary": bytes(range(256)) * 4,
    "not-utf8": "caf\u00e9 cr\u00e8me\n".encode("latin-1"),
    "truncated": b'{"text1": "a", "scores": [1, 2',
    "wrong-shape": b"[1, 2, 3]\n",
    "wrong-types": b'{"text1": 5, "columns": "x", "scores": [], "step": "two", "repos": 7, "format": 3}\n',
    "folder": None,
}
"""Bad contents; None: a folder in place of the file."""

TEXT_ONLY = {"truncated", "wrong-shape", "wrong-types"}
"""Contents a plain-text reader (one item a line) may take as text."""

EXTRA_KEYS_ALLOWED = {"MODEL/tokenizer_config.json"}
"""Files that are keyword arguments by design (transformers passes unknown keys on): an object of
other keys is accepted, so "wrong-types" (an object of unknown keys) is not bad for them."""


def _spoil(path: Path, kind: str) -> None:
    """Put bad content ``kind`` in place of ``path``."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    content = BAD[kind]
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)


def _names(err: str, path: Path) -> bool:
    """The message names ``path``: in full, or as its folder and its name."""
    return str(path) in err or (str(path.parent) in err and path.name in err)


# ------------------------------------------------------------------ the readers (good inputs)

Reader = Callable[[Path, dict[str, Any]], tuple[list[str], Path]]


def _report(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    run = tmp / "run"
    run.mkdir()
    (run / "sts.json").write_text(json.dumps({"columns": ["STS12", "Avg"], "scores": {"STS12": 70.0, "Avg": 70.0}, "model": {"name": "m"}}))
    return ["report", str(run), "--no-published"], run / "sts.json"


def _plot(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    run = tmp / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.9}\n{"step": 2, "loss": 0.7, "probe_alignment": 0.5}\n')
    return ["plot-dynamics", str(run), "--output", str(tmp / "fig.png"), "--quiet"], run / "metrics.jsonl"


def _collection(tmp: Path, ctx: dict[str, Any], name: str) -> tuple[list[str], Path]:
    folder = tmp / "collection"
    shutil.copytree(ctx["collection"], folder)
    return ["github-issues", "build", str(folder), "--output-dir", str(tmp / "ds"), "--no-plot", "--quiet"], folder / name


def _build_manifest(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    return _collection(tmp, ctx, "collection.json")


def _build_state(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    return _collection(tmp, ctx, "acme__bad/state.json")


def _build_issues(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    return _collection(tmp, ctx, "acme__bad/issues.jsonl")


def _build_details(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    return _collection(tmp, ctx, "acme__bad/details.jsonl")


def _repos_file(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    path = tmp / "repos.txt"
    path.write_text("# none reachable: the test only reads this file\n")
    return ["github-issues", "collect", "--repos-file", str(path), "--base-url", "http://127.0.0.1:9", "--output-dir", str(tmp / "c")], path


def _eval_data(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    path = helpers.write_pairs(tmp / "pairs.jsonl", 8, seed=0)
    return ["eval", ctx["model"], "--data", str(path), "--quiet", "--device", "cpu"], path


def _encode_input(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    path = tmp / "texts.jsonl"
    path.write_text('{"text": "a man plays"}\n{"text": "a dog runs"}\n')
    return ["encode", ctx["model"], "--input", str(path), "--output", str(tmp / "v.npy"), "--quiet", "--device", "cpu"], path


def _train_config(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    path = tmp / "train.yaml"
    path.write_text("seed: 1\n")
    pairs = helpers.write_pairs(tmp / "pairs.jsonl", 8, seed=0)
    return [
        "train",
        ctx["model"],
        "--config",
        str(path),
        "--train-data",
        str(pairs),
        "--output-dir",
        str(tmp / "t"),
        "--max-steps",
        "1",
        "--positive-threshold",
        "2.5",
        "--device",
        "cpu",
    ], path


def _train_data(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    pairs = helpers.write_pairs(tmp / "pairs.jsonl", 8, seed=0)
    return [
        "train",
        ctx["model"],
        "--train-data",
        str(pairs),
        "--output-dir",
        str(tmp / "t"),
        "--max-steps",
        "1",
        "--positive-threshold",
        "2.5",
        "--device",
        "cpu",
    ], pairs


def _train_dev_data(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    pairs = helpers.write_pairs(tmp / "pairs.jsonl", 8, seed=0)
    dev = helpers.write_pairs(tmp / "dev.jsonl", 8, seed=1)
    return [
        "train",
        ctx["model"],
        "--train-data",
        str(pairs),
        "--dev-data",
        str(dev),
        "--output-dir",
        str(tmp / "t"),
        "--max-steps",
        "1",
        "--positive-threshold",
        "2.5",
        "--device",
        "cpu",
    ], dev


def _search_index(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    folder = tmp / "index"
    shutil.copytree(ctx["index"], folder)
    return ["search", str(folder), "a dog", "--quiet"], folder / "index.json"


def _index_shards(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    folder = tmp / "shards"
    shutil.copytree(ctx["shards"], folder)
    return ["index", "build", ctx["model"], "--input", str(folder), "--output-dir", str(tmp / "ix"), "--quiet", "--device", "cpu"], folder / "manifest.json"


def _model_file(name: str) -> Reader:
    def reader(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
        folder = tmp / "model"
        shutil.copytree(ctx["model"], folder)
        texts = tmp / "t.txt"
        texts.write_text("a b\nc d\n")
        return ["encode", str(folder), "--input", str(texts), "--output", str(tmp / "v.npy"), "--quiet", "--device", "cpu"], folder / name

    reader.__name__ = f"model_{name}"
    return reader


def _adapter_file(name: str) -> Reader:
    def reader(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
        folder = tmp / "adapters"
        shutil.copytree(ctx["adapters"], folder)
        return ["merge-lora", str(folder), "--output-dir", str(tmp / "merged"), "--quiet"], folder / name

    reader.__name__ = f"adapters_{name}"
    return reader


READERS: dict[str, tuple[Reader, bool]] = {
    "report RUN_DIR/sts.json": (_report, False),
    "plot-dynamics RUN_DIR/metrics.jsonl": (_plot, False),
    "github-issues build collection.json": (_build_manifest, False),
    "github-issues build state.json": (_build_state, False),
    "github-issues build issues.jsonl": (_build_issues, False),
    "github-issues build details.jsonl": (_build_details, False),
    "github-issues collect --repos-file": (_repos_file, True),
    "eval --data": (_eval_data, False),
    "encode --input (jsonl)": (_encode_input, False),
    "train --config": (_train_config, False),
    "train --train-data": (_train_data, False),
    "train --dev-data": (_train_dev_data, False),
    "search INDEX_DIR/index.json": (_search_index, False),
    "index build --input SHARDS/manifest.json": (_index_shards, False),
    "MODEL/config.json": (_model_file("config.json"), False),
    "MODEL/tokenizer.json": (_model_file("tokenizer.json"), False),
    "MODEL/tokenizer_config.json": (_model_file("tokenizer_config.json"), False),
    "merge-lora ADAPTERS/adapter_config.json": (_adapter_file("adapter_config.json"), False),
    "merge-lora ADAPTERS/adapter_model.safetensors": (_adapter_file("adapter_model.safetensors"), False),
    "merge-lora ADAPTERS/anglekit_config.json": (_adapter_file("anglekit_config.json"), False),
}
"""Name -> (reader, text_only: the file is plain text, one item a line)."""

SETUP_FILES = {name for name in READERS if name == "train --config" or name.startswith(("MODEL/", "merge-lora "))}
"""The readers of a configuration or a model, not data: a bad one is a usage error (exit 2), a bad
data file a data error (exit 1)."""

FLAG_FILES = {"github-issues collect --repos-file", "encode --input (jsonl)"}
"""The readers whose flag takes a file and no folder: a folder there is a wrong command (exit 2).
A folder in place of a file inside a run folder is a broken input (1), and so is one given to
``--data``/``--train-data``/``--dev-data``, which take a folder too (a saved Hugging Face dataset)."""


def _expected_status(name: str, kind: str) -> int:
    return 2 if name in SETUP_FILES or (kind == "folder" and name in FLAG_FILES) else 1


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory, tiny_bert_dir: Path) -> dict[str, Any]:
    """Good inputs made once: a GitHub collection, encode shards and an index of the tiny model."""
    from anglekit.github_issues.client import GitHubClient
    from anglekit.github_issues.collect import collect

    from fake_github import FakeGitHub, make_fixture

    root = tmp_path_factory.mktemp("good")
    specs = [{"number": k, "title": f"Crash {k}", "body": "trace " * k} for k in range(1, 7)]
    specs[1]["comments"] = ["Duplicate of #1"]
    with FakeGitHub(make_fixture({"acme/bad": specs})) as server:
        summary = collect(["acme/bad"], root / "collection", client=GitHubClient(server.base_url, per_page=50, sleep=lambda s: None), candidates="all")
    assert not summary.failed
    corpus = root / "corpus.txt"
    corpus.write_text("a man plays\na dog runs\ntwo kids ride\nthe sun sets\n")
    assert (
        helpers.run_cli(
            ["encode", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(root / "shards"), "--shard-size", "2", "--quiet", "--device", "cpu"],
            _NoCapture(),
        )[0]
        == 0
    )
    assert (
        helpers.run_cli(
            ["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(root / "index"), "--quiet", "--device", "cpu"], _NoCapture()
        )[0]
        == 0
    )
    from anglekit.model.embedder import Embedder

    Embedder.from_pretrained(tiny_bert_dir, device="cpu").add_lora(rank=4, alpha=8, dropout=0.0).save_pretrained(root / "adapters")
    return {"model": str(tiny_bert_dir), "collection": root / "collection", "shards": root / "shards", "index": root / "index", "adapters": root / "adapters"}


class _NoCapture:
    """capsys's readouterr for a module fixture (output is left to pytest's own capture)."""

    def readouterr(self) -> tuple[str, str]:
        return "", ""


@pytest.mark.parametrize("name", list(READERS))
def test_the_good_input_passes(name: str, context: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reader's good input is read without complaint (so the bad cases fail for their content)."""
    reader, _ = READERS[name]
    argv, path = reader(tmp_path, context)
    code, _, err = helpers.run_cli(argv, capsys)
    if name == "github-issues collect --repos-file":  # a file of comments only names no repository
        assert code == 1 and _names(err, path) and "no repositories" in err, err
        return
    assert code == 0, err


@pytest.mark.parametrize("kind", list(BAD))
@pytest.mark.parametrize("name", list(READERS))
def test_a_bad_file_is_one_line_exit_1_or_2_naming_it(
    name: str, kind: str, context: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reader, text_only = READERS[name]
    argv, path = reader(tmp_path, context)
    if text_only and kind in TEXT_ONLY:
        content = BAD[kind]
        assert content is not None
        if name == "github-issues collect --repos-file":  # not owner/name: refused, naming the file and line
            _spoil(path, kind)
            code, _, err = helpers.run_cli(argv, capsys)
            assert code == 1 and _names(err, path) and "row 1" in err, err
        return
    _spoil(path, kind)
    code, _, err = helpers.run_cli(argv, capsys)
    if name in EXTRA_KEYS_ALLOWED and kind == "wrong-types":
        assert code == 0, err
        return
    lines = err.strip().splitlines()
    assert code == _expected_status(name, kind), err
    assert "Traceback" not in err and "unexpected error" not in err, err
    assert lines and lines[-1].startswith(f"anglekit {argv[0]}: error: "), err
    assert _names(lines[-1], path), (str(path), lines[-1])


# ------------------------------------------------------------------ the issue's cases, and more of each class


def _run_ok_or_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, _, err = helpers.run_cli(argv, capsys)
    assert "Traceback" not in err and "unexpected error" not in err, err
    return code, err.strip()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ({"model": "m", "datasets": {"stsb:test": {"spearman": 80.0}}}, "no 'columns' or 'scores' key"),  # eval --data --output's JSON
        ({"columns": ["STS12"], "scores": {"STS12": "80.1"}}, "field 'scores.STS12': expected a number or null, got a string"),
        ({"columns": "STS12", "scores": {}}, "field 'columns': expected a list of column names"),
        ({"columns": ["STS12"], "scores": [80.1]}, "field 'scores'"),
        ({"columns": ["STS12"], "scores": {"STS12": 1.0}, "model": "m"}, "field 'model': expected an object"),
    ],
)
def test_report_on_a_scores_file_of_another_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: Any, needle: str) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "sts.json").write_text(json.dumps(content))
    code, err = _run_ok_or_error(["report", str(tmp_path / "run")], capsys)
    assert code == 1 and str(tmp_path / "run" / "sts.json") in err and needle in err, err


def test_report_given_the_json_file_instead_of_its_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "scores.json"
    path.write_text(json.dumps({"model": "m", "datasets": {}}))
    code, err = _run_ok_or_error(["report", str(path)], capsys)
    assert code == 2 and str(path) in err and "is a file; expected a folder" in err, err  # the command is wrong


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        ('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": "0.4"}\n', "row 2, field 'loss': expected a number (or null), got a string"),
        ('{"step": "two", "loss": 0.5}\n', "row 1, field 'step': expected the step as a number"),
        ('{"step": 1, "probe_alignment": [0.1]}\n', "row 1, field 'probe_alignment'"),
        ('{"step": 1, "loss": true}\n', "field 'loss': expected a number (or null), got a boolean"),
        ('{"loss": 0.5}\n', "row 1: no 'step' key"),
        ('{"step": 1, "loss": 0.5}\n{"step": 2, "lo\n', "row 2: malformed JSON"),
    ],
)
def test_plot_dynamics_on_non_numeric_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: str, needle: str) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text(lines)
    code, err = _run_ok_or_error(["plot-dynamics", str(tmp_path / "run"), "--output", str(tmp_path / "f.png")], capsys)
    assert code == 1 and str(tmp_path / "run" / "metrics.jsonl") in err and needle in err, err
    assert not (tmp_path / "f.png").exists()


def _edit_jsonl(path: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    """Rewrite each record of a collection file and the committed byte count of its state."""
    state_path = path.parent / "state.json"
    state = json.loads(state_path.read_text())
    text = "".join(json.dumps(change(json.loads(line))) + "\n" for line in path.read_text().splitlines())
    path.write_text(text)
    state[path.stem + "_bytes"] = len(text.encode())
    state_path.write_text(json.dumps(state))


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("issues cut short", "state.json records"),
        ("issues deleted", "holds 0 bytes but state.json records"),
        ("number not an integer", "row 1, field 'number': expected an issue number"),
        ("title a list", "row 1, field 'title': expected text or null"),
        ("comments not a list", "field 'comments': expected a list of objects"),
        ("byte count a string", "field 'issues_bytes': expected a count"),
        ("repos not a list", "field 'repos': expected a list of owner/name strings"),
        ("unknown phase", "field 'phase': expected one of"),
    ],
)
def test_github_issues_build_on_a_corrupt_or_incomplete_collection(
    case: str, needle: str, context: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, _ = _collection(tmp_path, context, "collection.json")
    repo = tmp_path / "collection" / "acme__bad"
    state = json.loads((repo / "state.json").read_text())
    if case == "issues cut short":
        data = (repo / "issues.jsonl").read_bytes()
        (repo / "issues.jsonl").write_bytes(data[: len(data) // 2])
    elif case == "issues deleted":
        (repo / "issues.jsonl").unlink()
    elif case == "number not an integer":
        _edit_jsonl(repo / "issues.jsonl", lambda r: {**r, "number": str(r["number"])})
    elif case == "title a list":
        _edit_jsonl(repo / "issues.jsonl", lambda r: {**r, "title": [r["title"]]})
    elif case == "comments not a list":
        _edit_jsonl(repo / "details.jsonl", lambda r: {**r, "comments": "Duplicate of #1"})
    elif case == "byte count a string":
        (repo / "state.json").write_text(json.dumps({**state, "issues_bytes": str(state["issues_bytes"])}))
    elif case == "repos not a list":
        (tmp_path / "collection" / "collection.json").write_text(json.dumps({"repos": "acme/bad"}))
    else:
        (repo / "state.json").write_text(json.dumps({**state, "phase": "finished"}))
    code, err = _run_ok_or_error(argv, capsys)
    assert code == 1 and needle in err and str(tmp_path / "collection") in err, err
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        ("transfer.seed=abc", "option transfer.seed: expected an integer, got str 'abc'"),
        ("transfer.c_grid=[1, x]", "option transfer.c_grid[1]: expected a number, got str 'x'"),
        ("sts.check_counts=1", "option sts.check_counts: expected true or false, got int 1"),
        ("sts.tasks=[STS12, 5]", "option sts.tasks[1]: expected a string, got int 5"),
        ("geometry.plot=[1]", "option geometry.plot: expected true or false, got list"),
        ("retrieval.split=[test]", "option retrieval.split: expected a string"),
        ("sts.variant=[a", "cannot read the value as YAML"),
    ],
)
def test_eval_option_values_of_the_wrong_type_fail_before_the_model_loads(option: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = option.split(".")[0]
    missing_model = str(tmp_path / "no-model-here")  # loading it would fail: the option is checked first
    code, err = _run_ok_or_error(["eval", missing_model, "--suite", suite, "--option", option, "--output-dir", str(tmp_path / "o")], capsys)
    assert code == 2 and needle in err and "no-model-here" not in err, err
    assert len(err.splitlines()) == 1


def test_eval_options_of_the_right_type_are_converted() -> None:
    from anglekit.cli.eval import parse_options

    options = parse_options(
        ["transfer.seed=3", "geometry.positive_threshold=4", "sts.tasks=STS12", "transfer.blas_threads=null", "retrieval.ks=[1, 5]"],
        ["transfer", "geometry", "sts", "retrieval"],
    )
    assert options == {
        "transfer": {"seed": 3, "blas_threads": None},
        "geometry": {"positive_threshold": 4.0},
        "sts": {"tasks": ("STS12",)},
        "retrieval": {"ks": (1, 5)},
    }
    assert isinstance(options["geometry"]["positive_threshold"], float)


# ------------------------------------------------------------------ b. an undefined score names its data


def _pairs(path: Path, labels: list[float]) -> Path:
    path.write_text("".join(json.dumps({"text1": f"first {i}", "text2": f"second {i}", "label": y}) + "\n" for i, y in enumerate(labels)))
    return path


@pytest.mark.parametrize(("labels", "needle"), [([3.0], "at least 2 pairs, got 1"), ([2.0, 2.0, 2.0], "all 3 gold labels equal 2")])
def test_eval_data_on_one_pair_or_constant_labels_names_the_file(labels: list[float], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _pairs(tmp_path / "few.jsonl", labels)
    code, err = _run_ok_or_error(["eval", str(tmp_path / "no-model-here"), "--data", str(path)], capsys)
    assert code == 1 and f"--data {path}" in err and needle in err, err  # found before the (missing) model loads


@pytest.mark.parametrize("flag", ["--dev-data", "--test-data"])
@pytest.mark.parametrize(("labels", "needle"), [([3.0], "at least 2 pairs"), ([1.0, 1.0], "all 2 gold labels equal 1")])
def test_train_dev_and_test_data_with_an_undefined_score_name_the_file_before_training(
    flag: str,
    labels: list[float],
    needle: str,
    tiny_bert_dir: Path,
    pair_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _pairs(tmp_path / "dev.jsonl", labels)
    out = tmp_path / "run"
    code, err = _run_ok_or_error(
        [
            "train",
            str(tiny_bert_dir),
            "--train-data",
            str(pair_file),
            flag,
            str(path),
            "--output-dir",
            str(out),
            "--max-steps",
            "1",
            "--positive-threshold",
            "2.5",
            "--device",
            "cpu",
        ],
        capsys,
    )
    assert code == 1 and f"{flag} {path}" in err and needle in err, err
    assert not (out / "metrics.jsonl").exists() and not (out / "model").exists()  # no step was trained


def test_evaluate_pairs_finds_an_undefined_score_before_encoding() -> None:
    import numpy as np

    from anglekit.errors import UndefinedScoreError
    from anglekit.metrics.similarity import evaluate_pairs

    def encode(texts: Any) -> Any:
        raise AssertionError("encoded although the score is undefined")

    with pytest.raises(UndefinedScoreError, match=r"^data/dev\.tsv: the correlation is undefined: all 2 gold labels equal 4"):
        evaluate_pairs(encode, ["a", "b"], ["c", "d"], np.array([4.0, 4.0]), source="data/dev.tsv")
    with pytest.raises(UndefinedScoreError, match=r"^a correlation needs at least 2 pairs, got 1$"):
        evaluate_pairs(encode, ["a"], ["c"], np.array([4.0]))


@pytest.mark.parametrize("kind", ["empty", "binary", "not-utf8", "truncated", "wrong-shape", "folder"])
def test_a_bad_embedding_cache_metadata_file_names_it(kind: str, tmp_path: Path) -> None:
    from anglekit.errors import DataError
    from anglekit.evaluation.cache import EmbeddingCache

    cache = EmbeddingCache(tmp_path / "cache", fingerprint="f" * 16, max_length=32)
    cache.directory.mkdir(parents=True)
    _spoil(cache.directory / "meta.json", kind)
    with pytest.raises(DataError) as info:
        cache.lookup(["a"])
    assert str(cache.directory / "meta.json") in str(info.value)


@pytest.mark.parametrize("kind", list(BAD))
def test_a_bad_github_issues_split_file_names_it(kind: str, tmp_path: Path) -> None:
    """The dataset ``github-issues build`` writes, read back (eval --data, reproduce --github-issues)."""
    from anglekit.data.github_issues import load_github_issues
    from anglekit.errors import DataError

    path = tmp_path / "test.jsonl"
    _spoil(path, kind)
    with pytest.raises(DataError) as info:
        load_github_issues(tmp_path, "test")
    assert str(path) in str(info.value)
