"""kill -9 at random points of ``anglekit github-issues collect`` (a request the fake server holds),
then rerun: the collection equals an uninterrupted one, byte for byte. Slow."""

from __future__ import annotations

import json
import os
import random
import sys
import threading
from pathlib import Path

import pytest

import helpers
from fake_github import write_fixture
from holding import HoldingGitHub

pytestmark = pytest.mark.slow
REPO = "acme/widgets"


@pytest.mark.parametrize("seed", [1, 2])
def test_random_kills_then_rerun_equal_an_uninterrupted_collection(tmp_path: Path, seed: int) -> None:
    from test_github_collect import fixture

    fx_path = write_fixture(tmp_path / "fixture.json", fixture(150))
    env = {**os.environ, "GITHUB_TOKEN": ""}
    rng = random.Random(seed)
    with HoldingGitHub(fx_path) as server:

        def arm(attempt: int | None) -> helpers.Hold | None:
            server.reached = threading.Event()
            # a held run stops at a random request a few pages on; every run has many more pages to fetch
            server.hold_at = None if attempt is None else len(server.requests) + rng.randint(2, 25)
            return None if attempt is None else helpers.Hold(server.reached.is_set, point=server.hold_at)

        for name, kills in (("whole", 0), ("cut", 3)):
            command = [sys.executable, "-m", "anglekit", "github-issues", "collect", "--repos", REPO, "--output-dir",
                       str(tmp_path / name), "--base-url", server.base_url, "--per-page", "3", "--quiet"]  # fmt: skip
            runs = helpers.kill_when_held(command, kills=kills, arm=arm, env=env, cwd=tmp_path)
            assert runs[-1]["returncode"] == 0, runs[-1]["stderr"]
            assert all(r["killed"] for r in runs[:-1]), runs  # every kill landed mid-run
            if kills:
                print(json.dumps({"seed": seed, "runs": [{k: v for k, v in r.items() if k != "stderr"} for r in runs]}))
    folder = REPO.replace("/", "__")
    for file in ("issues.jsonl", "details.jsonl", "originals.jsonl"):
        assert (tmp_path / "cut" / folder / file).read_bytes() == (tmp_path / "whole" / folder / file).read_bytes(), file
