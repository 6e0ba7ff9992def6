"""The paper's data tools, faithfully (issue 20): project-only duplicate links counted by signal and
rejection reason, the 55 shipped repositories, no text in two splits, the per-split long-text share,
and a bounded Retry-After loop."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from anglekit.github_issues.build import build_dataset, normalize_text, text_leaks, token_counter
from anglekit.github_issues.client import GitHubClient, GitHubError, RateLimited
from anglekit.github_issues.collect import collect, read_manifest, read_repo

from fake_github import FakeGitHub, make_fixture

REPO = "acme/faithful"
SHARED_LIST = Path(__file__).resolve().parents[2].parent / "shared" / "paper" / "github_repositories.txt"


def _outsider(body: str, association: str = "NONE") -> dict[str, Any]:
    return {"body": body, "author_association": association, "user": "passer-by"}


def _specs() -> list[dict[str, Any]]:
    issues: list[dict[str, Any]] = []
    for k in range(1, 41):
        issues.append({"number": k, "title": f"Problem number {k}", "body": f"Report {k}: " + "detail " * (k * 3)})
    by = {s["number"]: s for s in issues}
    by[2]["comments"] = ["Duplicate of #1"]  # a member (make_fixture's default author)
    by[4]["comments"] = [_outsider("Duplicate of #3")]
    by[5]["comments"] = [_outsider("dupe of #1", "CONTRIBUTOR")]
    by[6]["comments"] = ["This is not a duplicate of #5"]
    by[8]["comments"] = ["Possibly duplicate of #7?"]
    by[10].update(state_reason="duplicate", comments=[{"body": "Please follow #9", "author_association": "OWNER"}])
    by[12].update(labels=["duplicate"], comments=[{"body": "see #11", "author_association": "COLLABORATOR"}])
    by[14].update(state_reason="not_planned", timeline=[{"event": "marked_as_duplicate", "canonical": {"number": 13}}])
    by[16].update(state_reason="duplicate")
    # equal texts once whitespace is normalised: #20 and #21 must share a split
    by[20].update(title="Same crash", body="boom  boom\n\nboom")
    by[21].update(title="Same crash", body="boom boom boom")
    by[20]["comments"] = ["Duplicate of #19"]
    by[22]["comments"] = ["Duplicate of #21"]
    return issues


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("faithful")
    with FakeGitHub(make_fixture({REPO: _specs()})) as server:
        summary = collect([REPO], out, client=GitHubClient(server.base_url, per_page=50, sleep=lambda s: None), candidates="all")
        assert any(r["path"].endswith("/timeline") for r in server.requests)
    assert not summary.failed
    return out


def test_comments_keep_author_association(collection: Path) -> None:
    details = read_repo(collection, REPO).details
    assert details[4]["comments"][0]["author_association"] == "NONE"
    assert details[2]["comments"][0]["author_association"] == "MEMBER"
    assert details[14]["timeline"][0]["event"] == "marked_as_duplicate"
    assert read_manifest(collection)["duplicate_authors"] == ["OWNER", "MEMBER", "COLLABORATOR"]


def test_links_by_signal_and_rejections_by_reason(collection: Path, tmp_path: Path) -> None:
    result = build_dataset(collection, tmp_path / "ds", seed=1, negative_ratio=1.0, plot=False)
    links = result.stats["links"]
    assert links["found_by_signal"] == {"comment": 3, "label": 1, "reference": 2, "state_reason": 1, "timeline": 1}
    assert links["kept_by_signal"] == links["found_by_signal"]
    assert links["rejected"] == {
        "comment by non-project author": 2,
        "negated comment": 1,
        "speculative comment": 1,
        "flagged without target": 1,
    }
    pairs = {frozenset((m["issue1"], m["issue2"])) for metas in result.meta.values() for m in metas if m["label"] == 1}
    ref = f"{REPO}#"
    assert pairs == {frozenset((ref + str(a), ref + str(b))) for a, b in ((2, 1), (10, 9), (12, 11), (14, 13), (20, 19), (22, 21))}
    on_disk = json.loads((tmp_path / "ds" / "github_issues.json").read_text())
    assert on_disk["links"] == links


def test_any_author_counts_outsiders(collection: Path, tmp_path: Path) -> None:
    result = build_dataset(collection, tmp_path / "ds", seed=1, plot=False, duplicate_authors="any")
    assert result.stats["links"]["found_by_signal"]["comment"] == 5
    assert "comment by non-project author" not in result.stats["links"]["rejected"]


@pytest.mark.parametrize("seed", range(6))
def test_equal_texts_share_a_split(collection: Path, tmp_path: Path, seed: int) -> None:
    result = build_dataset(collection, tmp_path / "ds", seed=seed, negative_ratio=1.0, split_shares=(0.4, 0.3, 0.3), plot=False)
    where = {split for split, metas in result.meta.items() for m in metas if {f"{REPO}#20", f"{REPO}#21"} & {m["issue1"], m["issue2"]}}
    assert len(where) == 1
    assert result.stats["shared_texts"] == {"groups": 1, "issues": 2, "components_merged": 1}
    assert result.stats["texts_in_two_splits"] == 0 and text_leaks(result.splits) == []


def test_text_leak_check() -> None:
    splits = {
        "train": [{"text1": "Crash  on\nstart", "text2": "b", "label": 1}],
        "valid": [{"text1": "c", "text2": "Crash on start ", "label": 0}],
        "test": [{"text1": "d", "text2": "e", "label": 1}],
    }
    assert text_leaks(splits) == ["Crash on start"]
    assert normalize_text("  a\t b\n") == "a b"
    splits["valid"][0]["text2"] = "Crash on start, again"
    assert text_leaks(splits) == []


def test_long_text_share_per_split(collection: Path, tmp_path: Path) -> None:
    result = build_dataset(collection, tmp_path / "ds", seed=2, negative_ratio=1.0, long_threshold=60, plot=False)
    over = result.stats["texts_over_threshold"]
    count, how = token_counter(None)
    assert over["counted_with"] == how and "approximate" in how
    for split, metas in result.meta.items():
        keys = sorted({k for m in metas for k in (m["issue1"], m["issue2"])})
        texts = {r[c] for r in result.splits[split] for c in ("text1", "text2")}
        lengths = count(sorted(texts))
        assert over["per_split"][split]["texts"] == len(keys) == len(texts)
        assert over["per_split"][split]["over"] == sum(n > 60 for n in lengths)
        if keys:
            assert over["per_split"][split]["share"] == pytest.approx(sum(n > 60 for n in lengths) / len(keys))
    assert 0 < sum(v["over"] for v in over["per_split"].values()) < sum(v["texts"] for v in over["per_split"].values())


def test_shipped_paper_list() -> None:
    from anglekit.github_issues.repos import DEFAULT_REPOSITORIES, PAPER_REPOSITORIES, PAPER_REPOSITORY_COUNT, parse_repos

    assert len(PAPER_REPOSITORIES) == PAPER_REPOSITORY_COUNT == 55 == len(set(PAPER_REPOSITORIES))
    assert DEFAULT_REPOSITORIES == PAPER_REPOSITORIES
    assert parse_repos("paper") == list(PAPER_REPOSITORIES)
    assert parse_repos("golang/go,paper,acme/x")[:2] == ["golang/go", "tensorflow/tensorflow"]
    assert parse_repos("golang/go,paper,acme/x")[-1] == "acme/x" and len(parse_repos("paper,acme/x")) == 56
    if not SHARED_LIST.is_file():
        pytest.skip(f"{SHARED_LIST} is not in this checkout")
    shared = [line.strip() for line in SHARED_LIST.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert list(PAPER_REPOSITORIES) == shared


def test_shipped_list_is_package_data() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    assert "github_issues/paper_repositories.txt" in pyproject["tool"]["setuptools"]["package-data"]["anglekit"]


def test_cli_repos_paper_default_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from anglekit.cli import main
    from anglekit.cli.github_issues import _read_repos, add_parser

    parser = argparse.ArgumentParser(prog="anglekit")
    add_parser(parser.add_subparsers(dest="command", required=True))
    for extra in (["--repos", "paper"], []):
        args = parser.parse_args(["github-issues", "collect", "--output-dir", str(tmp_path / "c"), *extra])
        repos = _read_repos(args)
        assert len(repos) == 55 and repos[0] == "tensorflow/tensorflow" and repos[-1] == "golang/go"
    for bad, message in (("papers", "unknown repository list 'papers'"), ("a/b/c", "not a GitHub repository"), ("paper,owner/", "not a GitHub repository")):
        rc = main(["github-issues", "collect", "--repos", bad, "--output-dir", str(tmp_path / "c"), "--base-url", "http://127.0.0.1:9"])
        assert rc == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
    with pytest.raises(SystemExit):
        parser.parse_args(["github-issues", "collect", "--output-dir", "x", "--duplicate-authors", "maintainers"])
    assert "duplicate authors must be" in capsys.readouterr().err


def test_cli_build_prints_links_and_per_split_share(collection: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import main

    assert main(["github-issues", "build", str(collection), "--output-dir", str(tmp_path / "d"), "--no-plot", "--negative-ratio", "1"]) == 0
    out = capsys.readouterr().out
    assert "links rejected: {'comment by non-project author': 2" in out
    assert "over 512 tokens per split: train" in out and "links found by signal" in out


class _Time:
    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_retry_after_loop_is_bounded() -> None:
    fixture = {
        "routes": {"/items": {"items": [{"id": 1}]}},
        "once": {"/items": [{"status": 429, "headers": {"Retry-After": "5"}, "json": {"message": "slow down"}}] * 50},
    }
    t = _Time()
    with FakeGitHub(fixture) as server:
        with pytest.raises(RateLimited, match="still rate limited after 3 waits"):
            GitHubClient(server.base_url, sleep=t.sleep, clock=t.clock, max_rate_limit_waits=3).get("/items")
        assert len(server.requests) == 4
    assert t.sleeps == [5.0, 5.0, 5.0] and issubclass(RateLimited, GitHubError)
    t = _Time()
    with FakeGitHub(fixture) as server, pytest.raises(RateLimited):
        GitHubClient(server.base_url, sleep=t.sleep, clock=t.clock, max_total_wait_s=12.0).get("/items")
    assert t.sleeps == [5.0, 5.0, 2.0]
    reset = {
        "routes": {"/items": {"items": [{"id": 1}]}},
        "once": {
            "/items": [{"status": 403, "headers": {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "0"}, "json": {"message": "API rate limit exceeded"}}]
            * 50
        },
    }
    t = _Time()
    with FakeGitHub(reset) as server, pytest.raises(RateLimited):
        GitHubClient(server.base_url, sleep=t.sleep, clock=t.clock, max_rate_limit_waits=2).get("/items")
    assert len(t.sleeps) == 2


def test_rate_limited_repository_fails_and_resumes(tmp_path: Path) -> None:
    fixture = make_fixture({REPO: _specs()[:5]})
    fixture["once"] = {f"/repos/{REPO}/issues": [{"status": 429, "headers": {"Retry-After": "1"}, "json": {}}] * 3}
    with FakeGitHub(fixture) as server:
        client = GitHubClient(server.base_url, sleep=lambda s: None, max_rate_limit_waits=1)
        first = collect([REPO], tmp_path / "c", client=client)
        assert first.failed and "rate limited" in str(first.failed[0].error)
        second = collect([REPO], tmp_path / "c", client=client)
    assert not second.failed and second.repos[0].phase == "done"


def test_old_collection_without_associations_is_reported(collection: Path, tmp_path: Path) -> None:
    import shutil

    old = tmp_path / "old"
    shutil.copytree(collection, old)
    folder = old / "acme__faithful"
    lines = [json.loads(line) for line in (folder / "details.jsonl").read_text().splitlines()]
    for line in lines:
        for comment in line["comments"]:
            comment.pop("author_association", None)
    (folder / "details.jsonl").write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
    state = json.loads((folder / "state.json").read_text())
    state["details_bytes"] = (folder / "details.jsonl").stat().st_size
    (folder / "state.json").write_text(json.dumps(state))
    result = build_dataset(old, tmp_path / "ds", seed=1, plot=False)
    rejected = Counter(result.stats["links"]["rejected"])
    assert rejected["comment author unknown"] >= 5 and "comment" not in result.stats["links"]["found_by_signal"]
