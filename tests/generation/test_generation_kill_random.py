"""kill -9 at random points of ``anglekit generate`` (a request the fake server holds), then rerun:
the output equals an uninterrupted run's; only requests in flight at a kill (at most
--concurrency) are asked again. Slow."""

from __future__ import annotations

import json
import os
import random
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_generation_fakeserver import FakeOpenAIServer, Reply

import helpers

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", [1, 2])
def test_random_kills_then_rerun_equal_an_uninterrupted_run(tmp_path: Path, seed: int) -> None:
    """Each killed run is held by the fake server at a random request (never answered), so the kill
    lands mid-run by construction, whatever the machine's speed."""
    sentences = [f"Sentence number {i} talks about topic {i % 7} and item {i}." for i in range(40)]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(sentences) + "\n")
    rng = random.Random(seed)
    hold: dict[str, Any] = {"at": None, "reached": threading.Event()}

    def script(body: dict[str, Any], n: int) -> Reply:
        if hold["at"] is not None and n >= hold["at"]:
            hold["reached"].set()
            return Reply(hang=True)  # held until the server stops: the run cannot finish, the test kills it
        return Reply()

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    outputs = {}
    with FakeOpenAIServer(script) as server:

        def arm(attempt: int | None) -> helpers.Hold | None:
            hold["reached"] = threading.Event()
            # 80 requests in all; at most 3 x 20 are used up by the holds, so every held run has work left
            hold["at"] = None if attempt is None else len(server.log) + rng.randint(3, 20)
            return None if attempt is None else helpers.Hold(hold["reached"].is_set, point=hold["at"])

        for name, kills in (("whole", 0), ("cut", 3)):
            out = tmp_path / f"{name}.jsonl"
            command = [sys.executable, "-m", "anglekit", "generate", "--input", str(source), "--output", str(out), "--quiet",
                       "--concurrency", "2", "--backoff-base", "0.01", "--llm", f"openai:fake@{server.url}"]  # fmt: skip
            server.log.clear()
            runs = helpers.kill_when_held(command, kills=kills, arm=arm, env=env, cwd=tmp_path)
            assert runs[-1]["returncode"] == 0, runs[-1]["stderr"]
            asked = [(r.text, r.kind) for r in server.ok()]
            assert len(set(asked)) == 2 * len(sentences), name  # nothing skipped
            # Only the requests in flight when a kill landed (answered but not yet cached) are asked again.
            assert len(asked) - len(set(asked)) <= 2 * kills, (name, runs)
            outputs[name] = out.read_text(encoding="utf-8")
            assert all(r["killed"] for r in runs[:-1]), runs  # every kill landed mid-run
            print(json.dumps({"seed": seed, "runs": [{k: v for k, v in r.items() if k != "stderr"} for r in runs]}))
    assert outputs["cut"] == outputs["whole"]
