"""metrics.jsonl across a resume: a resumed run drops what the interrupted run logged past the
checkpoint it resumes from, so every step is in the file once; nothing else is touched."""

from __future__ import annotations

import json

from transformers import TrainerState

from anglekit.training.callbacks import JsonlMetricsCallback


def _state(step: int) -> TrainerState:
    state = TrainerState()
    state.global_step = step
    return state


def _lines(path) -> list:
    return [json.loads(line) if line.startswith("{") else line for line in path.read_text().splitlines()]


def test_a_resumed_run_drops_the_records_past_its_checkpoint(tmp_path):
    log = tmp_path / "metrics.jsonl"
    records = [
        {"event": "train_begin", "step": 0, "precision": "fp32"},
        {"step": 10, "loss": 3.0},
        {"step": 20, "probe_grad_cosine": 1.0},
        {"step": 20, "loss": 2.0},
        {"step": 30, "loss": 1.5},  # logged by the interrupted run after checkpoint-25
        {"step": 30, "probe_grad_cosine": 9.0},
        {"step": True, "note": "a bool is not a step"},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    callback = JsonlMetricsCallback(log, {"precision": "fp32"})
    callback.on_train_begin(None, _state(25), None)
    assert _lines(log) == [*records[:4], records[6], "not json", {"event": "train_begin", "step": 25, "precision": "fp32"}]
    callback.on_log(None, _state(30), None, logs={"loss": 1.4})
    assert _lines(log)[-1] == {"step": 30, "epoch": 0, "loss": 1.4}


def test_a_fresh_run_or_a_missing_file_loses_nothing(tmp_path):
    log = tmp_path / "metrics.jsonl"
    JsonlMetricsCallback(log).on_train_begin(None, _state(25), None)  # nothing to resume, no facts: no file
    assert not log.exists()
    log.write_text(json.dumps({"step": 30, "loss": 1.0}) + "\n")
    JsonlMetricsCallback(log, {"precision": "bf16"}).on_train_begin(None, _state(0), None)
    assert _lines(log) == [{"step": 30, "loss": 1.0}, {"event": "train_begin", "step": 0, "precision": "bf16"}]


def test_a_last_line_the_kill_cut_short_is_dropped_and_the_next_record_starts_its_own_line(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text(json.dumps({"step": 10, "loss": 3.0}) + "\n" + '{"step": 20, "lo')
    callback = JsonlMetricsCallback(log)
    callback.on_train_begin(None, _state(20), None)
    callback.on_log(None, _state(21), None, logs={"loss": 1.0})
    assert _lines(log) == [{"step": 10, "loss": 3.0}, {"step": 21, "epoch": 0, "loss": 1.0}]


def test_a_whole_last_record_without_its_newline_is_kept_and_ended(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text(json.dumps({"step": 10, "loss": 3.0}) + "\n" + json.dumps({"step": 20, "loss": 2.0}))
    callback = JsonlMetricsCallback(log)
    callback.on_train_begin(None, _state(20), None)
    callback.on_log(None, _state(21), None, logs={"loss": 1.0})
    assert _lines(log) == [{"step": 10, "loss": 3.0}, {"step": 20, "loss": 2.0}, {"step": 21, "epoch": 0, "loss": 1.0}]
