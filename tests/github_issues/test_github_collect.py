"""Resumable collection against the fake GitHub API: data, 404 repository, rate limits, SIGKILL + resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from anglekit.github_issues.client import GitHubClient
from anglekit.github_issues.collect import collect, read_collection, read_repo

from fake_github import FakeGitHub, make_fixture, write_fixture
from holding import HoldingGitHub

REPO = "acme/widgets"
OTHER = "acme/upstream"


def repo_specs(n: int = 30) -> dict[str, list[dict[str, Any]]]:
    """``n`` closed issues; every 4th a duplicate by some signal; a PR; an open original; a cross-repo original."""
    issues: list[dict[str, Any]] = []
    for k in range(1, n + 1):
        spec: dict[str, Any] = {"number": k, "title": f"Widget {k} fails", "body": f"Steps for {k}:\n```py\nrun({k})\n```"}
        if k % 4 == 0:
            kind = (k // 4) % 4
            if kind == 0:
                spec.update(state_reason="duplicate", comments=[f"Duplicate of #{k - 1}"])
            elif kind == 1:
                spec.update(labels=["duplicate"], comments=[f"Thanks, closing as a duplicate of #{k - 2}"])
            elif kind == 2:
                spec.update(
                    state_reason="not_planned",
                    timeline=[{"event": "marked_as_duplicate", "canonical": {"number": k - 3, "repository_url": f"https://api.github.com/repos/{REPO}"}}],
                )
            else:
                spec.update(state_reason="duplicate", comments=["Same thing as #1000, please follow there"])
        issues.append(spec)
    issues.append({"number": n + 1, "title": "A pull request", "body": "diff", "pull_request": True})
    issues.append({"number": n + 2, "title": "dup of cross", "body": "crash again", "state_reason": "duplicate", "comments": [f"Duplicate of {OTHER}#5"]})
    issues.append({"number": 1000, "title": "Still open original", "body": "the original report", "open": True})
    return {REPO: issues, OTHER: [{"number": 5, "title": "Upstream crash", "body": "upstream", "open": True}]}


def fixture(n: int = 30) -> dict[str, Any]:
    return make_fixture(repo_specs(n), missing=["ghost/repo"])


def _client(server: FakeGitHub, per_page: int = 5, **kwargs: Any) -> GitHubClient:
    return GitHubClient(server.base_url, per_page=per_page, sleep=lambda s: None, **kwargs)


def test_collect_issues_details_originals(tmp_path: Path) -> None:
    lines: list[str] = []
    with FakeGitHub(fixture()) as server:
        summary = collect([REPO, "ghost/repo"], tmp_path / "c", client=_client(server), progress=lines.append)
    by_repo = {r.repo: r for r in summary.repos}
    assert by_repo[REPO].phase == "done" and by_repo[REPO].error is None
    assert by_repo["ghost/repo"].phase == "missing"
    assert not summary.failed
    data = read_repo(tmp_path / "c", REPO)
    assert sorted(data.issues) == list(range(1, 31)) + [32]  # PR 31 excluded, open 1000 not listed
    assert all(set(i) >= {"title", "body", "labels", "state_reason"} for i in data.issues.values())
    # candidates: duplicate/not_planned/label issues only
    assert sorted(data.details) == [k for k in range(4, 31, 4)] + [32]
    assert set(data.originals) == {f"{REPO}#1000", f"{OTHER}#5"}
    assert any("issues page" in line for line in lines) and any("not found" in line for line in lines)
    assert [r.repo for r in read_collection(tmp_path / "c")] == [REPO]
    # every request asked for closed issues, per_page, never a pull endpoint
    issue_lists = [r for r in server.requests if r["path"] == f"/repos/{REPO}/issues"]
    assert all(r["query"]["state"] == "closed" and r["query"]["per_page"] == "5" for r in issue_lists)


def test_max_issues_cap(tmp_path: Path) -> None:
    with FakeGitHub(fixture()) as server:
        collect([REPO], tmp_path / "c", client=_client(server), max_issues=7, fetch_originals=False)
        assert len([r for r in server.requests if r["path"] == f"/repos/{REPO}/issues"]) == 2
    assert sorted(read_repo(tmp_path / "c", REPO).issues) == list(range(1, 8))


def test_rate_limited_and_malformed_pages_are_waited_out(tmp_path: Path) -> None:
    fx = fixture()
    fx["once"] = {
        f"/repos/{REPO}/issues?page=2": [
            {"status": 429, "headers": {"Retry-After": "3"}, "json": {"message": "slow"}},
            {"status": 200, "text": '[{"number": '},
        ],
        f"/repos/{REPO}/issues/4/comments": [{"status": 403, "headers": {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "0"}, "json": {}}],
    }
    sleeps: list[float] = []
    with FakeGitHub(fx) as server:
        client = GitHubClient(server.base_url, per_page=5, sleep=sleeps.append)
        collect([REPO], tmp_path / "c", client=client)
    with FakeGitHub(fixture()) as server:
        collect([REPO], tmp_path / "clean", client=_client(server))
    assert 3.0 in sleeps and len(sleeps) == 3
    for name in ("issues.jsonl", "details.jsonl", "originals.jsonl"):
        assert (tmp_path / "c" / "acme__widgets" / name).read_bytes() == (tmp_path / "clean" / "acme__widgets" / name).read_bytes()


def test_persistent_failure_is_reported_and_resumable(tmp_path: Path) -> None:
    fx = fixture()
    fx["once"] = {f"/repos/{REPO}/issues?page=3": [{"status": 500, "json": {}}] * 3}
    with FakeGitHub(fx) as server:
        first = collect([REPO], tmp_path / "c", client=_client(server, max_retries=1))
        assert first.failed and first.repos[0].phase == "issues"
        server.requests.clear()
        second = collect([REPO], tmp_path / "c", client=_client(server, max_retries=1))
        assert not second.failed and second.repos[0].phase == "done"
        pages = [int(r["query"].get("page", 1)) for r in server.requests if r["path"] == f"/repos/{REPO}/issues"]
        assert min(pages) == 3  # pages 1-2 were not fetched again


def _issue_pages(requests: list[dict[str, Any]]) -> list[int]:
    return [int(r["query"].get("page", 1)) for r in requests if r["path"] == f"/repos/{REPO}/issues"]


def test_sigkill_then_resume_gives_the_same_data(tmp_path: Path) -> None:
    fx_path = write_fixture(tmp_path / "fixture.json", fixture(60))
    with FakeGitHub(fx_path) as server:
        collect([REPO], tmp_path / "clean", client=_client(server, per_page=3))
    with HoldingGitHub(fx_path) as server:
        server.hold_at = 6  # the 7th request (issue page 7) is never answered: the run is held there until killed
        env = {**os.environ, "GITHUB_TOKEN": ""}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "anglekit.cli",
                "github-issues",
                "collect",
                "--repos",
                REPO,
                "--out",
                str(tmp_path / "killed"),
                "--base-url",
                server.base_url,
                "--per-page",
                "3",
                "--quiet",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        while not server.reached.is_set() and proc.poll() is None:
            assert time.monotonic() < deadline, "the collector never reached its 7th request"  # only a guard against a hang
            time.sleep(0.01)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert _issue_pages(server.requests)  # some issue pages done, the run held on a later one
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        state = json.loads((tmp_path / "killed" / "acme__widgets" / "state.json").read_text())
        assert state["phase"] == "issues" and state["pages_done"] >= 1
        pages_before = _issue_pages(server.requests)
        server.requests.clear()
        server.hold_at = None
        summary = collect([REPO], tmp_path / "killed", client=_client(server, per_page=3))
        assert summary.repos[0].phase == "done"
        pages_after = _issue_pages(server.requests)
    # completed pages are not fetched again; at most the page in flight is repeated
    assert min(pages_after) == state["pages_done"] + 1
    assert len(set(pages_before) & set(pages_after)) <= 1
    assert sorted(set(pages_before) | set(pages_after)) == list(range(1, 22))
    for name in ("issues.jsonl", "details.jsonl", "originals.jsonl"):
        assert (tmp_path / "killed" / "acme__widgets" / name).read_bytes() == (tmp_path / "clean" / "acme__widgets" / name).read_bytes()


def test_resume_cuts_uncommitted_lines(tmp_path: Path) -> None:
    with FakeGitHub(fixture()) as server:
        collect([REPO], tmp_path / "c", client=_client(server), max_issues=5, fetch_originals=False)
    folder = tmp_path / "c" / "acme__widgets"
    state = json.loads((folder / "state.json").read_text())
    # simulate a crash between the append and the state update: garbage after the committed bytes
    with open(folder / "issues.jsonl", "ab") as handle:
        handle.write(b'{"number": 999, "tit')
    assert len(read_repo(tmp_path / "c", REPO).issues) == 5
    state.update(phase="issues", next_url=None, pages_done=0, issues_count=0, issues_bytes=0)
    (folder / "state.json").write_text(json.dumps(state))
    with FakeGitHub(fixture()) as server:
        collect([REPO], tmp_path / "c", client=_client(server), max_issues=5, fetch_originals=False)
    assert b"999" not in (folder / "issues.jsonl").read_bytes()


@pytest.mark.parametrize("bad", ["nope", "a/b/c", "/x", "a b/c"])
def test_bad_repository_names(tmp_path: Path, bad: str) -> None:
    from anglekit.errors import ConfigError

    with pytest.raises(ConfigError):
        collect([bad], tmp_path / "c", client=GitHubClient("http://127.0.0.1:9"))
