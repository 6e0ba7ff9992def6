"""kill -9 at random moments during ``anglekit github-issues collect``, then rerun: the collection
equals an uninterrupted one, byte for byte. Slow."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import helpers
from anglekit.github_issues.fake_server import FakeGitHub, write_fixture

pytestmark = pytest.mark.slow
REPO = "acme/widgets"


@pytest.mark.parametrize("seed", [1, 2])
def test_random_kills_then_rerun_equal_an_uninterrupted_collection(tmp_path: Path, seed: int) -> None:
    from test_github_collect import fixture

    fx_path = write_fixture(tmp_path / "fixture.json", fixture(150))
    env = {**os.environ, "GITHUB_TOKEN": ""}
    with FakeGitHub(fx_path, delay_s=0.03) as server:
        for name, kills in (("whole", 0), ("cut", 3)):
            command = [sys.executable, "-m", "anglekit", "github-issues", "collect", "--repos", REPO, "--output-dir",
                       str(tmp_path / name), "--base-url", server.base_url, "--per-page", "3", "--quiet"]  # fmt: skip
            runs = helpers.kill_at_random_moments(command, seed=seed, kills=kills, window=(0.8, 2.0), env=env, cwd=tmp_path)
            assert runs[-1]["returncode"] == 0, runs[-1]["stderr"]
            if kills:
                assert sum(r["killed"] for r in runs) >= 2, runs
                print(json.dumps({"seed": seed, "runs": [{k: v for k, v in r.items() if k != "stderr"} for r in runs]}))
    folder = REPO.replace("/", "__")
    for file in ("issues.jsonl", "details.jsonl", "originals.jsonl"):
        assert (tmp_path / "cut" / folder / file).read_bytes() == (tmp_path / "whole" / folder / file).read_bytes(), file
