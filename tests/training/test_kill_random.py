"""kill -9 at random steps of training (held there by a test hook, so the kill lands by
construction), then --resume: the final model and the logged losses equal an uninterrupted run's.
Slow: several real subprocess runs."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest

import helpers

pytestmark = pytest.mark.slow


def _argv(model: Path, data: Path, out: Path) -> list[str]:
    return ["train", str(model), "--train-data", str(data), "--output-dir", str(out), "--max-steps", "12", "--save-steps", "2",
            "--save-total-limit", "2", "--batch-size", "4", "--logging-steps", "1", "--learning-rate", "1e-3",
            "--positive-threshold", "4.0", "--device", "cpu", "--precision", "fp32", "--quiet"]  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2])
def test_random_kills_then_resume_equal_an_uninterrupted_run(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, seed: int) -> None:
    from anglekit.model.embedder import Embedder

    env = {**os.environ, "ANGLEKIT_TEST_STEP_SLEEP": "0", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    slow = [sys.executable, str(Path(helpers.__file__)), "slow-cli"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    plain = helpers.kill_when_held([*slow, *_argv(tiny_bert_dir, pair_file, whole)], kills=0, arm=lambda attempt: None, env=env, cwd=tmp_path)
    assert plain[-1]["returncode"] == 0, plain[-1]["stderr"]
    # Each killed run is held before a random step (checkpoints every 2 steps): a later run resumes
    # at or before it, so the next point, chosen after it, is always reached; the last is before 12.
    rng = random.Random(seed)
    points = sorted(rng.sample(range(2, 12), 3))

    def arm(attempt: int | None) -> helpers.Hold | None:
        if attempt is None:
            return None
        marker = tmp_path / f"held-{attempt}"
        return helpers.Hold(helpers.held_file(marker), {"ANGLEKIT_TEST_HOLD_AT_STEP": str(points[attempt]), "ANGLEKIT_TEST_HOLD_FILE": str(marker)},
                            point=points[attempt])  # fmt: skip

    runs = helpers.kill_when_held([*slow, *_argv(tiny_bert_dir, pair_file, cut)], kills=3, arm=arm, resume_flag="--resume", env=env, cwd=tmp_path)
    assert runs[-1]["returncode"] == 0, (runs, runs[-1]["stderr"])
    assert all(r["killed"] for r in runs[:-1]), runs  # every kill landed mid-run, at its step
    print(json.dumps({"seed": seed, "runs": [{k: v for k, v in r.items() if k != "stderr"} for r in runs]}))
    losses = lambda run: [(r["step"], r["loss"]) for r in helpers.read_jsonl(run / "metrics.jsonl") if "loss" in r]  # noqa: E731
    assert [s for s, _ in losses(cut)] == list(range(1, 13))
    np.testing.assert_allclose([v for _, v in losses(cut)], [v for _, v in losses(whole)], rtol=1e-5)
    texts = ["a man is playing the guitar .", "the dog runs", "two kids ride bikes"]
    a = Embedder.from_pretrained(whole / "model", device="cpu").encode(texts)
    b = Embedder.from_pretrained(cut / "model", device="cpu").encode(texts)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
