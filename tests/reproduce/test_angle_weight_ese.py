"""The angle-weight and ese tables (issue 42): their rows, the nested scoring against an independent
Spearman, the gradient probes a cell keeps, and the paired comparisons on extra metrics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from anglekit.reproduce import ReproduceConfig, make_protocol, reproduce
from anglekit.reproduce import tables as tables_module
from anglekit.reproduce.cells import gradient_summary, make_cell, run_cell
from anglekit.reproduce.report import render_table, table_summary
from anglekit.reproduce.tables import ANGLE_WEIGHTS, Task, build_tables, nested_metrics

import helpers

DATA = {"stsb": "STSB", "mrpc": "MRPC", "nli-pairs": None, "nli": None, "qnli-train": None, "qnli-test": None, "github": None, "unsup": "U"}


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return helpers.write_stsb_root(tmp_path_factory.mktemp("data"), seed=1)


def test_angle_weight_rows_differ_only_in_the_weight_and_probe_gradients():
    table = build_tables(DATA, {})["angle-weight"]
    weights = [row.settings["angle_weight"] for row in table.rows]
    assert weights == list(ANGLE_WEIGHTS) == [0.0, 1.0, 5.0, 20.0, 35.0]
    assert all({k: v for k, v in row.settings.items() if k != "angle_weight"} == {"objective": "paper", "probe_steps": 10} for row in table.rows)
    assert table.reference == table.rows[0].name and table.gradient_share and "SICK-R" in table.compare and "Avg" in table.compare
    assert [t.evaluation for t in table.tasks] == ["sts-suite"] and table.tasks[0].train == "STSB:train"


def test_gradient_summary_means_each_terms_probe_and_skips_other_records(tmp_path):
    log = tmp_path / "metrics.jsonl"
    rows = [
        {"step": 10, "probe_grad_cosine": 2.0, "probe_grad_angle": 0.1, "loss": 3.0},
        {"step": 10, "loss": 2.0},
        "not json",
        {"step": 20, "probe_grad_cosine": 4.0, "probe_grad_angle": 0.3, "probe_grad_ibn": float("nan")},
    ]
    log.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    assert gradient_summary(log) == {"grad_cosine": 3.0, "grad_angle": pytest.approx(0.2)}


def _records(table, values, grads=None):
    out = []
    for row, per_seed in zip(table.rows, values, strict=True):
        for seed, metrics in enumerate(per_seed):
            record = {"row": row.name, "seed": seed, "status": "done", "metrics": metrics}
            if grads:
                record["gradients"] = grads
            out.append(record)
    return out


def test_paired_comparisons_on_extra_metrics_and_the_gradient_share():
    table = build_tables(DATA, {})["angle-weight"]
    rng = np.random.default_rng(0)
    values = []
    for i, _ in enumerate(table.rows):
        values.append([{m: 80.0 + i + rng.normal(0, 0.01) if m == "SICK-R" else 70.0 + rng.normal() for m in table.metrics} for _ in range(3)])
    summary = table_summary(table, _records(table, values, {"grad_cosine": 2.0, "grad_angle": 0.5}))
    by_name = {r["row"]: r for r in summary["rows"]}
    top = by_name[table.rows[-1].name]
    # SICK-R rises by exactly the row index (4) over the reference: an independent paired t-test agrees.
    ref = [v["SICK-R"] for v in values[0]]
    mine = [v["SICK-R"] for v in values[-1]]
    expected = stats.ttest_rel(mine, ref)
    assert top["paired_other"]["SICK-R"]["mean_diff"] == pytest.approx(np.mean(np.subtract(mine, ref)))
    assert top["paired_other"]["SICK-R"]["p"] == pytest.approx(expected.pvalue)
    assert not top["paired_other"]["SICK-R"]["within_noise"]
    # w3 * ||g_angle|| / (w1 * ||g_cos||) with w1 = 1: 35 * 0.5 / 2
    assert top["gradient_share"]["mean"] == pytest.approx(35 * 0.25)
    assert by_name[table.reference]["paired_other"] == {} and by_name[table.reference]["gradient_share"]["mean"] == 0.0
    text = render_table(summary)
    assert "Δ SICK-R" in text and "angle/cosine gradient" in text and "8.750" in text


def test_a_probed_cell_records_the_terms_gradients(tmp_path, tiny_bert_dir, data_root):
    protocol = make_protocol("cpu", model=str(tiny_bert_dir), max_steps=3, batch_size=8, device="cpu")
    table = build_tables({**DATA, "stsb": str(data_root / "stsb")}, {})["angle-weight"]
    row = table.rows[2]  # w3 = 5
    task = Task("STS-B", f"{data_root / 'stsb'}:train", f"{data_root / 'stsb'}:test", "pairs")
    cell = make_cell(row, task, 0, protocol, str(tiny_bert_dir))
    record = run_cell(cell, tmp_path, metric="STS-B test", data_root=str(data_root))
    grads = record["gradients"]
    assert grads["grad_cosine"] > 0 and grads["grad_angle"] > 0
    share = table_summary(table, [record])["rows"][2]["gradient_share"]
    assert share["mean"] == pytest.approx(5 * grads["grad_angle"] / grads["grad_cosine"])


def test_ese_table_scores_cut_and_middle_layer_vectors_like_an_independent_spearman(tmp_path, tiny_bert_dir, data_root, monkeypatch):
    from anglekit.data.catalog import load_stsb
    from anglekit.model.embedder import Embedder

    monkeypatch.setattr(tables_module, "NESTED_DIMS", (16, 8))  # the tiny BERT has 32 dimensions
    config = ReproduceConfig(
        seeds=(0,), output_dir=str(tmp_path / "r"), model=str(tiny_bert_dir), data_root=str(data_root), max_steps=2, batch_size=8, device="cpu", quiet=True
    )
    result = reproduce(["ese"], config)
    assert result.ran == 4  # zero-shot, without ESE, with ESE (angle-emb's target and the unit one)
    summary = json.loads((tmp_path / "r" / "ese.json").read_text())
    assert summary["metrics"] == list(nested_metrics((16, 8))) and summary["primary"] == "STS-B test @8"
    zero = next(r for r in summary["rows"] if r["kind"] == "zero-shot")["metrics"]
    test = load_stsb(data_root / "stsb", "test")

    def spearman(embedder, dim=None):
        a, b = (embedder.encode(list(t), 64) for t in (test.text1, test.text2))
        if dim is not None:
            a, b = a[:, :dim], b[:, :dim]
        cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        return 100 * stats.spearmanr(cos, test.labels).statistic

    full = Embedder.from_pretrained(tiny_bert_dir, device="cpu", pooling="last_avg", max_length=64)
    assert zero["STS-B test"]["mean"] == pytest.approx(spearman(full), abs=1e-3)
    assert zero["STS-B test @8"]["mean"] == pytest.approx(spearman(full, 8), abs=1e-3)
    middle = Embedder.from_pretrained(tiny_bert_dir, device="cpu", pooling="last_avg", max_length=64, layer=1)  # 2 layers: the middle is 1
    assert zero["STS-B test, middle layer"]["mean"] == pytest.approx(spearman(middle), abs=1e-3)
    cells = [json.loads(p.read_text()) for p in (tmp_path / "r" / "cells").glob("train-*.json")]
    targets = sorted((c["spec"]["train"].get("ese", False), c["spec"]["train"].get("ese_target", "")) for c in cells)
    assert targets == [(False, ""), (True, "angle-emb"), (True, "unit")]
    assert all(c["spec"]["evaluation"]["nested"] == [16, 8] for c in cells)
    assert "Δ STS-B test, middle layer" in (tmp_path / "r" / "ese.md").read_text()


def test_gradient_summary_counts_a_step_logged_twice_once_as_last_logged(tmp_path):
    log = tmp_path / "metrics.jsonl"
    rows = [
        {"step": 10, "probe_grad_cosine": 2.0, "probe_grad_angle": 0.1},
        {"step": 20, "probe_grad_cosine": 100.0, "probe_grad_angle": 100.0},  # the interrupted run's
        {"event": "train_begin", "step": 15},
        {"step": 20, "probe_grad_cosine": 4.0, "probe_grad_angle": 0.3},
    ]
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert gradient_summary(log) == {"grad_cosine": 3.0, "grad_angle": pytest.approx(0.2)}
