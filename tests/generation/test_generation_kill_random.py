"""kill -9 at random moments during ``anglekit generate``, then rerun: the output equals an
uninterrupted run's; only requests in flight at a kill (at most --concurrency) are asked again. Slow."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import helpers
from test_generation_fakeserver import FakeOpenAIServer, Reply

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", [1, 2])
def test_random_kills_then_rerun_equal_an_uninterrupted_run(tmp_path: Path, seed: int) -> None:
    sentences = [f"Sentence number {i} talks about topic {i % 7} and item {i}." for i in range(40)]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(sentences) + "\n")

    def slow(body: dict[str, Any], n: int) -> Reply:
        return Reply(delay=0.1)  # a run lasts ~4 s of requests: longer than the kill window, so the kills land

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    outputs = {}
    with FakeOpenAIServer(slow) as server:
        for name, kills in (("whole", 0), ("cut", 3)):
            out = tmp_path / f"{name}.jsonl"
            command = [sys.executable, "-m", "anglekit", "generate", "--input", str(source), "--output", str(out), "--quiet",
                       "--concurrency", "2", "--backoff-base", "0.01", "--llm", f"openai:fake@{server.url}"]  # fmt: skip
            server.log.clear()
            runs = helpers.kill_at_random_moments(command, seed=seed, kills=kills, window=(0.8, 3.0), env=env, cwd=tmp_path)
            assert runs[-1]["returncode"] == 0, runs[-1]["stderr"]
            asked = [(r.text, r.kind) for r in server.ok()]
            assert len(set(asked)) == 2 * len(sentences), name  # nothing skipped
            # Only the requests in flight when a kill landed (answered but not yet cached) are asked again.
            assert len(asked) - len(set(asked)) <= 2 * sum(r["killed"] for r in runs), (name, runs)
            outputs[name] = out.read_text(encoding="utf-8")
            if kills:
                assert sum(r["killed"] for r in runs) >= 2, runs
                print(json.dumps({"seed": seed, "runs": [{k: v for k, v in r.items() if k != "stderr"} for r in runs]}))
    assert outputs["cut"] == outputs["whole"]
