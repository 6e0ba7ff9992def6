"""Several processes on one reproduce output folder: each training (or cell that trains nothing) runs
under a lock, a process passes over what another holds and waits for it at the end, so every cell is
run once and each process ends with the whole report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from anglekit.reproduce import ReproduceConfig, make_protocol
from anglekit.reproduce import runner as runner_module
from anglekit.reproduce.cells import make_cell
from anglekit.reproduce.tables import build_tables, row_tasks

import helpers

DATA = {"stsb": "STSB", "mrpc": "MRPC", "nli-pairs": None, "nli": None, "qnli-train": None, "qnli-test": None, "github": None, "unsup": "U"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return helpers.write_stsb_root(tmp_path_factory.mktemp("data"), seed=3, train=40)


def _ese_cells():
    protocol = make_protocol("cpu", model="some/model", max_steps=2, batch_size=8, device="cpu")
    table = build_tables(DATA, {})["ese"]
    return [(make_cell(row, task, 0 if row.kind == "train" else None, protocol, "some/model"), task.metric_prefix or table.metrics[0])
            for row in table.rows for task in row_tasks(table, row)]  # fmt: skip


def test_a_cell_whose_lock_another_process_holds_is_passed_over_and_a_done_one_is_not_run(tmp_path, monkeypatch):
    cells = _ese_cells()
    todo = {c.key(): c for c, _ in cells}
    work = runner_module._Work([("ese", cells)], todo, tmp_path, ReproduceConfig(), str(tmp_path), groups=True)
    ran: list[str] = []
    monkeypatch.setattr(runner_module._Work, "run", lambda self, cell, table: ran.append(cell.key()))
    trained, other = cells[1][0], cells[2][0]
    holder = FileLock(work.lock(trained).lock_file)  # another open file of the same lock: held as by another process
    holder.acquire()
    try:
        assert work._take(trained, "ese", wait=False) is False and ran == []
    finally:
        holder.release()
    assert work._take(trained, "ese", wait=False) is True and ran == [trained.key()]
    (tmp_path / f"{other.key()}.json").write_text(json.dumps({"status": "done", "metrics": {"x": 1.0}}))
    assert work._take(other, "ese", wait=True) is True and ran == [trained.key()]  # finished elsewhere: not run again
    assert work.lock(trained).lock_file != work.lock(other).lock_file


def test_two_processes_on_one_folder_run_every_cell_once_and_both_end_with_the_whole_report(tmp_path, tiny_bert_dir, data_root):
    out = tmp_path / "r"
    argv = [sys.executable, "-m", "anglekit", "reproduce", "objectives", "--seeds", "0", "--output-dir", str(out), "--model", str(tiny_bert_dir),
            "--data-root", str(data_root), "--max-steps", "2", "--batch-size", "8", "--device", "cpu", "--quiet"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    workers = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [w.communicate(timeout=600) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], [err[-2000:] for _, err in outputs]
    announced = [line for _, err in outputs for line in err.splitlines() if line.startswith("[reproduce objectives] cell")]
    assert len(announced) == 10, announced  # zero-shot and 9 trainings: each run by one process only
    records = [json.loads(p.read_text()) for p in (out / "cells").glob("*.json")]
    assert len(records) == 10 and all(r["status"] == "done" for r in records)
    assert len(json.loads((out / "objectives.json").read_text())["rows"]) == 10
    assert not list((out / "cells").glob("*.run"))
