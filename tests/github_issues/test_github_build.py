"""Building pairs from a collection: signals, no issue in two splits, negatives, determinism, stats, plot; loader; CLI."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from anglekit.data.github_issues import load_github_issues
from anglekit.github_issues.build import PAPER_NEGATIVE_RATIO, build_dataset, issue_text
from anglekit.github_issues.client import GitHubClient
from anglekit.github_issues.collect import collect

from fake_github import FakeGitHub, make_fixture

REPOS = ("acme/a", "acme/b")


def _specs() -> dict[str, list[dict[str, Any]]]:
    """Per repository: 80 closed issues; chains of duplicates (components of 2-3 issues) and singletons."""
    out: dict[str, list[dict[str, Any]]] = {}
    for _r, repo in enumerate(REPOS):
        issues = []
        for k in range(1, 81):
            body = f"{repo} report {k}. " + ("word " * (k * 12)) + f"\n```\ntrace {k}\n```"
            spec: dict[str, Any] = {"number": k, "title": f"{repo} problem {k}", "body": body}
            if k % 5 == 2:
                spec.update(state_reason="duplicate", comments=[f"Duplicate of #{k - 1}"])
            elif k % 5 == 3:
                spec.update(labels=["duplicate"], comments=[f"closing as a duplicate of #{k - 2}"])
            elif k % 10 == 4:
                spec.update(state_reason="not_planned", timeline=[{"event": "marked_as_duplicate", "canonical": {"number": k - 1}}])
            issues.append(spec)
        out[repo] = issues
    return out


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("collection")
    with FakeGitHub(make_fixture(_specs())) as server:
        summary = collect(list(REPOS), out, client=GitHubClient(server.base_url, per_page=50, sleep=lambda s: None))
    assert not summary.failed
    return out


@pytest.fixture(scope="module")
def built(collection: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_dataset(collection, tmp_path_factory.mktemp("dataset"), seed=3, split_shares=(0.6, 0.2, 0.2))


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_pairs_and_signals(built: Any) -> None:
    stats = built.stats
    positives = sum(v["positive"] for v in stats["pairs"].values())
    assert positives == 2 * (16 + 16 + 8)  # per repo: k%5==2, k%5==3, k%10==4
    assert stats["signals"]["comment"] == 2 * 32 and stats["signals"]["timeline"] == 2 * 8
    assert stats["signals"]["state_reason"] == 2 * 16 and stats["signals"]["label"] == 2 * 16
    for split, rows in built.splits.items():
        assert set(rows[0]) == {"text1", "text2", "label"}
        assert {r["label"] for r in rows} <= {0, 1}
        metas = built.meta[split]
        assert [m["label"] for m in metas] == [r["label"] for r in rows]


def test_no_issue_in_two_splits(built: Any) -> None:
    seen: dict[str, str] = {}
    for split, metas in built.meta.items():
        for m in metas:
            for key in (m["issue1"], m["issue2"]):
                assert seen.setdefault(key, split) == split, f"{key} in {seen[key]} and {split}"
    texts = {split: {t for r in rows for t in (r["text1"], r["text2"])} for split, rows in built.splits.items()}
    assert not texts["train"] & texts["test"] and not texts["train"] & texts["valid"] and not texts["valid"] & texts["test"]
    assert built.stats["issues_in_two_splits"] == 0
    assert all(built.stats["pairs"][s]["positive"] > 0 for s in ("train", "valid", "test"))


def test_negatives_same_repository_and_ratio(built: Any) -> None:
    for _split, metas in built.meta.items():
        pos = sum(1 for m in metas if m["label"] == 1)
        neg = [m for m in metas if m["label"] == 0]
        assert len(neg) == round(PAPER_NEGATIVE_RATIO * pos)
        for m in neg:
            assert m["issue1"].split("#")[0] == m["issue2"].split("#")[0] == m["repo"]
    pairs = [frozenset((m["issue1"], m["issue2"])) for metas in built.meta.values() for m in metas]
    assert len(pairs) == len(set(pairs))


def test_deterministic_with_seed(collection: Path, built: Any, tmp_path: Path) -> None:
    again = build_dataset(collection, tmp_path / "again", seed=3, split_shares=(0.6, 0.2, 0.2), plot=False)
    assert again.splits == built.splits
    other = build_dataset(collection, tmp_path / "other", seed=4, split_shares=(0.6, 0.2, 0.2), plot=False)
    assert other.splits != built.splits


def test_stats_files_and_plot(built: Any) -> None:
    out = built.out
    for name in ("train.jsonl", "valid.jsonl", "test.jsonl", "github_issues.json", "length_distribution.png"):
        assert (out / name).is_file()
    assert (out / "length_distribution.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    stats = json.loads((out / "github_issues.json").read_text())
    over = stats["texts_over_threshold"]
    assert 0.0 < over["share"] < 1.0 and over["threshold"] == 512
    assert stats["pairs"]["train"]["total"] == len(_rows(out / "train.jsonl"))


def test_text_is_title_and_body_capped() -> None:
    issue = {"title": "Crash", "body": "```py\nx = 1\n```"}
    assert issue_text(issue) == "Crash\n\n```py\nx = 1\n```"
    assert issue_text(issue, max_chars=5) == "Crash"
    assert issue_text({"title": "Only title", "body": None}) == "Only title"


def test_token_stats_with_a_tokenizer(collection: Path, tiny_bert_dir: Path, tmp_path: Path) -> None:
    result = build_dataset(collection, tmp_path / "ds", seed=3, tokenizer=str(tiny_bert_dir), long_threshold=128, plot=False)
    over = result.stats["texts_over_threshold"]
    assert over["counted_with"].startswith("tokenizer") and 0.0 < over["share"] < 1.0


def test_loader_reads_built_and_hub_snapshot_layouts(built: Any, tmp_path: Path) -> None:
    train = load_github_issues(built.out, "train")
    assert len(train) == built.stats["pairs"]["train"]["total"] and train.label_range == (0.0, 1.0)
    assert len(load_github_issues(built.out, "dev")) == built.stats["pairs"]["valid"]["total"]
    import pandas as pd

    snapshot = tmp_path / "hub" / "data"
    snapshot.mkdir(parents=True)
    pd.DataFrame(_rows(built.out / "test.jsonl")).to_parquet(snapshot / "test-00000-of-00001.parquet")
    test = load_github_issues(tmp_path / "hub", "test")
    assert test.text1 == [r["text1"] for r in _rows(built.out / "test.jsonl")]
    single = load_github_issues(built.out / "valid.jsonl", None)
    assert len(single) == built.stats["pairs"]["valid"]["total"]
    from anglekit.errors import ConfigError, DataError

    with pytest.raises(ConfigError):
        load_github_issues(built.out, "bogus")
    with pytest.raises(DataError):
        load_github_issues(tmp_path / "hub", "train")


def test_catalogue_registration(built: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from anglekit.data import catalog

    assert len(catalog.resolve_dataset(f"{built.out}:train")) == built.stats["pairs"]["train"]["total"]
    root = tmp_path / "data"
    (root / "github-issues").mkdir(parents=True)
    for name in ("test.jsonl", "github_issues.json"):
        (root / "github-issues" / name).write_bytes((built.out / name).read_bytes())
    monkeypatch.setenv(catalog.DATA_ENV_VAR, str(root))
    assert len(catalog.resolve_dataset("github-issues:test")) == built.stats["pairs"]["test"]["total"]


def _parser() -> argparse.ArgumentParser:
    from anglekit.cli.github_issues import add_parser as add_github_parser

    parser = argparse.ArgumentParser(prog="anglekit")
    commands = parser.add_subparsers(dest="command", required=True)
    add_github_parser(commands)
    return parser


def test_cli_collect_and_build(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from anglekit.cli.github_issues import run as run_github

    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    parser = _parser()
    with FakeGitHub(make_fixture(_specs(), missing=["ghost/x"])) as server:
        args = parser.parse_args(
            [
                "github-issues",
                "collect",
                "--repos",
                "acme/a,ghost/x",
                "--output-dir",
                str(tmp_path / "c"),
                "--base-url",
                server.base_url,
                "--per-page",
                "40",
                "--max-issues",
                "60",
            ]
        )
        assert run_github(args) == 0
    captured = capsys.readouterr()
    assert "[1/2] acme/a: issues page 1" in captured.err and "not found" in captured.err
    assert "collected 1/2 repositories (1 not found, 0 failed)" in captured.out
    args = parser.parse_args(
        [
            "github-issues",
            "build",
            str(tmp_path / "c"),
            "--output-dir",
            str(tmp_path / "d"),
            "--negative-ratio",
            "1",
            "--split-shares",
            "0.5,0.25,0.25",
            "--no-plot",
        ]
    )
    assert run_github(args) == 0
    out = capsys.readouterr().out
    assert "train:" in out and "over 512 tokens" in out
    assert not (tmp_path / "d" / "length_distribution.png").exists()
    stats = json.loads((tmp_path / "d" / "github_issues.json").read_text())
    assert all(v["negative"] == v["positive"] for v in stats["pairs"].values())
    with pytest.raises(SystemExit):
        parser.parse_args(["github-issues", "collect", "--output-dir", "x", "--token", "abc"])


def test_cli_default_repositories_and_failure_status(tmp_path: Path) -> None:
    from anglekit.cli import main
    from anglekit.github_issues.repos import DEFAULT_REPOSITORIES

    assert "golang/go" in DEFAULT_REPOSITORIES and "pytorch/pytorch" in DEFAULT_REPOSITORIES
    fixture = make_fixture({"acme/a": _specs()["acme/a"][:5]})
    fixture["once"] = {"/repos/acme/a/issues": [{"status": 500, "json": {}}] * 3}
    with FakeGitHub(fixture) as server:
        rc = main(
            [
                "github-issues",
                "collect",
                "--repos",
                "acme/a",
                "--output-dir",
                str(tmp_path / "c"),
                "--base-url",
                server.base_url,
                "--max-retries",
                "0",
                "--quiet",
            ]
        )
    assert rc == 3
    assert main(["github-issues", "build", str(tmp_path / "nothing"), "--output-dir", str(tmp_path / "d")]) == 2


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_unfinished_collection_is_refused_with_the_command_resuming_it(
    built: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shlex

    from anglekit.cli import main

    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    fixture = make_fixture(_specs())
    fixture["once"] = {"/repos/acme/a/issues?page=2": [{"status": 500, "json": {}}]}
    out = tmp_path / "c"
    with FakeGitHub(fixture) as server:
        first = collect(list(REPOS), out, client=GitHubClient(server.base_url, per_page=50, sleep=lambda s: None, max_retries=0))
        assert [(r.repo, r.phase) for r in first.failed] == [("acme/a", "issues")]
        assert (
            main(["github-issues", "build", str(out), "--output-dir", str(tmp_path / "d"), "--seed", "3", "--split-shares", "0.6,0.2,0.2"]) == 1
        )  # an unfinished collection: the data
        err = _error_line(capsys)
        assert "the collection is unfinished (1 of 2 repositories): acme/a stopped in phase 'issues'" in err
        assert not (tmp_path / "d").exists()  # nothing written
        command = shlex.split(err.split("resume it with: ", 1)[1])
        assert command[:3] == ["anglekit", "github-issues", "collect"] and command[command.index("--repos") + 1] == "acme/a"
        assert command[command.index("--base-url") + 1] == server.base_url and "--max-issues" not in command
        # The printed command resumes it; the dataset is then the one of an uninterrupted collection.
        assert main([*command[1:], "--quiet"]) == 0
    capsys.readouterr()
    assert main(["github-issues", "build", str(out), "--output-dir", str(tmp_path / "d"), "--seed", "3", "--split-shares", "0.6,0.2,0.2"]) == 0
    for split in ("train", "valid", "test"):
        assert (tmp_path / "d" / f"{split}.jsonl").read_bytes() == (built.out / f"{split}.jsonl").read_bytes()


def test_missing_or_unstarted_repository_folder_is_refused(collection: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from anglekit.cli import main
    from anglekit.errors import DataError

    broken = tmp_path / "c"
    shutil.copytree(collection, broken)
    shutil.rmtree(broken / "acme__b")
    target = tmp_path / "d"
    target.mkdir()
    (target / "train.jsonl").write_text("earlier\n")
    assert main(["github-issues", "build", str(broken), "--output-dir", str(target)]) == 1
    err = _error_line(capsys)
    assert f"error: {broken}: the collection is unfinished (1 of 2 repositories): acme/b has no folder acme__b;" in err
    assert err.endswith(f"resume it with: anglekit github-issues collect --output-dir {broken} --repos acme/b --base-url {_manifest_url(broken)}")
    assert sorted(p.name for p in target.iterdir()) == ["train.jsonl"] and (target / "train.jsonl").read_text() == "earlier\n"
    (broken / "acme__b").mkdir()  # created by collect before its first page was committed
    with pytest.raises(DataError, match=r"acme/b was not started \(acme__b/state.json is absent\)"):
        build_dataset(broken, tmp_path / "e")
    assert not (tmp_path / "e").exists()


def _manifest_url(collection: Path) -> str:
    return json.loads((collection / "collection.json").read_text())["base_url"]


def test_resume_command_keeps_the_recorded_options_and_counts_the_rest(collection: Path, tmp_path: Path) -> None:
    import shutil

    from anglekit.errors import DataError
    from anglekit.github_issues.collect import resume_command

    options = {"base_url": "https://api.github.com", "max_issues": 60, "candidates": "all", "duplicate_authors": ["OWNER"]}
    assert resume_command("my issues", ["o/a", "o/b"], options) == (
        "anglekit github-issues collect --output-dir 'my issues' --repos o/a,o/b --max-issues 60 --candidates all --duplicate-authors OWNER"
    )
    defaults = {"base_url": "https://api.github.com", "max_issues": None, "candidates": "signals", "duplicate_authors": ["OWNER", "MEMBER", "COLLABORATOR"]}
    assert resume_command("c", ["o/a"], defaults) == "anglekit github-issues collect --output-dir c --repos o/a"
    many = tmp_path / "c"
    shutil.copytree(collection, many)
    manifest = json.loads((many / "collection.json").read_text())
    manifest["repos"] += ["acme/c", "acme/d", "acme/e"]
    (many / "collection.json").write_text(json.dumps(manifest))
    state = json.loads((many / "acme__a" / "state.json").read_text())
    (many / "acme__a" / "state.json").write_text(json.dumps({**state, "phase": "originals"}))
    with pytest.raises(DataError) as error:
        build_dataset(many, tmp_path / "d")
    message = str(error.value)
    assert "(4 of 5 repositories): acme/a stopped in phase 'originals'; acme/c has no folder acme__c; acme/d has no folder acme__d; and 1 more;" in message
    assert "--repos acme/a,acme/c,acme/d,acme/e" in message and "\n" not in message
    assert not (tmp_path / "d").exists()
