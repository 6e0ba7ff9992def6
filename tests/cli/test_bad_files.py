"""Every command that reads a file the user gives, fed bad files (issue 26 a): wrong JSON shape,
wrong types, a truncated file, an empty file, binary bytes, text that is not UTF-8, a folder where
a file belongs. Each must end with one line ``anglekit CMD: error: ...`` naming the file, exit 2,
never a traceback (exit 1).

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
    (run / "sts.json").write_text(json.dumps({"columns": ["STS12", "Avg"], "scores": {"STS12": 70.0, "Avg": 70.0},
                                              "model": {"name": "m"}}))
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
    return ["github-issues", "collect", "--repos-file", str(path), "--base-url", "http://127.0.0.1:9",
            "--output-dir", str(tmp / "c")], path


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
    return ["train", ctx["model"], "--config", str(path), "--train-data", str(pairs), "--output-dir", str(tmp / "t"),
            "--max-steps", "1", "--positive-threshold", "2.5", "--device", "cpu"], path


def _train_data(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    pairs = helpers.write_pairs(tmp / "pairs.jsonl", 8, seed=0)
    return ["train", ctx["model"], "--train-data", str(pairs), "--output-dir", str(tmp / "t"), "--max-steps", "1",
            "--positive-threshold", "2.5", "--device", "cpu"], pairs


def _search_index(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    folder = tmp / "index"
    shutil.copytree(ctx["index"], folder)
    return ["search", str(folder), "a dog", "--quiet"], folder / "index.json"


def _index_shards(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
    folder = tmp / "shards"
    shutil.copytree(ctx["shards"], folder)
    return ["index", "build", ctx["model"], "--input", str(folder), "--output-dir", str(tmp / "ix"), "--quiet",
            "--device", "cpu"], folder / "manifest.json"


def _model_file(name: str) -> Reader:
    def reader(tmp: Path, ctx: dict[str, Any]) -> tuple[list[str], Path]:
        folder = tmp / "model"
        shutil.copytree(ctx["model"], folder)
        texts = tmp / "t.txt"
        texts.write_text("a b\nc d\n")
        return ["encode", str(folder), "--input", str(texts), "--output", str(tmp / "v.npy"), "--quiet", "--device", "cpu"], folder / name

    reader.__name__ = f"model_{name}"
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
    "search INDEX_DIR/index.json": (_search_index, False),
    "index build --input SHARDS/manifest.json": (_index_shards, False),
    "MODEL/config.json": (_model_file("config.json"), False),
    "MODEL/tokenizer.json": (_model_file("tokenizer.json"), False),
    "MODEL/tokenizer_config.json": (_model_file("tokenizer_config.json"), False),
}
"""Name -> (reader, text_only: the file is plain text, one item a line)."""


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory, tiny_bert_dir: Path) -> dict[str, Any]:
    """Good inputs made once: a GitHub collection, encode shards and an index of the tiny model."""
    from anglekit.github_issues.client import GitHubClient
    from anglekit.github_issues.collect import collect
    from anglekit.github_issues.fake_server import FakeGitHub, make_fixture

    root = tmp_path_factory.mktemp("good")
    specs = [{"number": k, "title": f"Crash {k}", "body": "trace " * k} for k in range(1, 7)]
    specs[1]["comments"] = ["Duplicate of #1"]
    with FakeGitHub(make_fixture({"acme/bad": specs})) as server:
        summary = collect(["acme/bad"], root / "collection", client=GitHubClient(server.base_url, per_page=50, sleep=lambda s: None),
                          candidates="all")
    assert not summary.failed
    corpus = root / "corpus.txt"
    corpus.write_text("a man plays\na dog runs\ntwo kids ride\nthe sun sets\n")
    assert helpers.run_cli(["encode", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(root / "shards"),
                            "--shard-size", "2", "--quiet", "--device", "cpu"], _NoCapture())[0] == 0
    assert helpers.run_cli(["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(root / "index"),
                            "--quiet", "--device", "cpu"], _NoCapture())[0] == 0
    return {"model": str(tiny_bert_dir), "collection": root / "collection", "shards": root / "shards", "index": root / "index"}


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
        assert code == 2 and _names(err, path) and "no repositories" in err, err
        return
    assert code == 0, err


@pytest.mark.parametrize("kind", list(BAD))
@pytest.mark.parametrize("name", list(READERS))
def test_a_bad_file_is_one_line_exit_2_naming_it(name: str, kind: str, context: dict[str, Any], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    reader, text_only = READERS[name]
    argv, path = reader(tmp_path, context)
    if text_only and kind in TEXT_ONLY:
        content = BAD[kind]
        assert content is not None
        if name == "github-issues collect --repos-file":  # not owner/name: refused, naming the file and line
            _spoil(path, kind)
            code, _, err = helpers.run_cli(argv, capsys)
            assert code == 2 and _names(err, path) and "row 1" in err, err
        return
    _spoil(path, kind)
    code, _, err = helpers.run_cli(argv, capsys)
    if name in EXTRA_KEYS_ALLOWED and kind == "wrong-types":
        assert code == 0, err
        return
    lines = err.strip().splitlines()
    assert code == 2, err
    assert "Traceback" not in err and "unexpected error" not in err, err
    assert lines and lines[-1].startswith(f"anglekit {argv[0]}: error: "), err
    assert _names(lines[-1], path), (str(path), lines[-1])
