"""A table's chart (reproduce/charts.py): each panel draws the summary's own numbers (the paired
differences, filled only where significant; the gradient share per step against a hand-computed
ratio), and the runner writes it beside the table, or says why not."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from anglekit.reproduce import make_protocol
from anglekit.reproduce.cells import gradient_steps, probe_steps
from anglekit.reproduce.charts import chart_figure, chart_panels, render_chart
from anglekit.reproduce.report import table_summary
from anglekit.reproduce.runner import write_table
from anglekit.reproduce.tables import build_tables

pytest.importorskip("matplotlib")

DATA = {"stsb": "STSB", "mrpc": "MRPC", "nli-pairs": None, "nli": None, "qnli-train": None, "qnli-test": None, "github": None, "unsup": "U"}
# Per seed: the cosine and angle terms' gradient norms at steps 10 and 20 (seeds differ, so the
# chart's mean over seeds is not any one seed's value).
GRADS = {seed: {10: {"grad_cosine": 2.0 + seed, "grad_angle": 0.5}, 20: {"grad_cosine": 4.0, "grad_angle": 0.2 * (seed + 1)}} for seed in range(3)}
# ... and the share of saturated pairs, which falls over training (seed 2 never logged it).
SATURATED = {0: {10: 0.3, 20: 0.1}, 1: {10: 0.5, 20: 0.0}}


def _probes(seed: int) -> dict[int, dict[str, float]]:
    extra = lambda step: {"saturated": SATURATED[seed][step], "anisotropy": 0.9 - step / 100} if seed in SATURATED else {}  # noqa: E731
    return {step: {**grads, **extra(step)} for step, grads in GRADS[seed].items()}


def _angle_weight_records(with_steps: bool = True) -> tuple[object, list[dict]]:
    table = build_tables(DATA, {})["angle-weight"]
    rng = np.random.default_rng(0)
    records = []
    for i, row in enumerate(table.rows):
        for seed in range(3):
            # SICK-R rises by the row's index with almost no noise (significant); the rest is noise.
            metrics = {m: 80.0 + i + rng.normal(0, 0.01) if m == "SICK-R" else 70.0 + rng.normal() for m in table.metrics}
            record = {"row": row.name, "seed": seed, "status": "done", "metrics": metrics, "gradients": {"grad_cosine": 3.0, "grad_angle": 0.4}}
            if with_steps:
                record["probe_steps"] = _probes(seed)
            records.append(record)
    return table, records


def _axis(fig, title_start: str):
    (ax,) = [ax for ax in fig.axes if ax.get_title().startswith(title_start)]
    return ax


def _points(ax) -> list[tuple[float, float, bool]]:
    """(x, y, filled) of each errorbar's marker."""
    out = []
    for container in ax.containers:
        line = container.lines[0]
        for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True):
            out.append((float(x), float(y), line.get_markerfacecolor() != "white"))
    return out


def test_the_delta_panel_draws_each_paired_difference_filled_only_where_significant():
    table, records = _angle_weight_records()
    summary = table_summary(table, records)
    fig = chart_figure(summary)
    assert chart_panels(summary) == ["scores", "delta", "share", "share_steps", "saturation"] and len(fig.axes) == 5
    drawn = sorted((y, filled) for _, y, filled in _points(_axis(fig, "Δ vs")))
    expected = []
    for row in summary["rows"]:
        pairs = {**({summary["primary"]: row["paired"]} if row["paired"] else {}), **row["paired_other"]}
        expected += [(pair["mean_diff"], pair["p"] is not None and pair["p"] < 0.05) for pair in pairs.values()]
    assert len(drawn) == len(expected) == 4 * 8  # four trained rows against w3 = 0, eight columns each
    assert [d[1] for d in drawn] == [e[1] for e in sorted(expected)]
    assert [d[0] for d in drawn] == pytest.approx([e[0] for e in sorted(expected)])
    sick = [pair for row in summary["rows"] for m, pair in row["paired_other"].items() if m == "SICK-R"]
    assert len(sick) == 4 and all(p["p"] < 0.05 for p in sick)  # the panel has filled points to draw


def test_the_share_panels_draw_w3_times_the_angle_gradient_over_the_cosine_gradient():
    table, records = _angle_weight_records()
    summary = table_summary(table, records)
    fig = chart_figure(summary)
    lines = {line.get_label(): line for line in _axis(fig, "the angle term's share over training").get_lines()}
    for row in table.rows:
        w3 = row.settings["angle_weight"]
        line = lines[f"{row.name} (3 seeds)"]
        assert list(line.get_xdata()) == [10.0, 20.0]
        expected = [np.mean([w3 * GRADS[s][step]["grad_angle"] / GRADS[s][step]["grad_cosine"] for s in range(3)]) for step in (10, 20)]
        assert list(line.get_ydata()) == pytest.approx(expected)
    bars = _axis(fig, "the angle term's share of the update").patches
    assert sorted(bar.get_width() for bar in bars) == pytest.approx(sorted(r.settings["angle_weight"] * 0.4 / 3.0 for r in table.rows))
    saturation = {line.get_label(): line for line in _axis(fig, "saturation").get_lines()}
    assert list(saturation[f"{table.rows[3].name} (2 seeds)"].get_ydata()) == pytest.approx([0.4, 0.05])  # the seeds that logged it
    dashed = [line for line in _axis(fig, "saturation").get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == len(table.rows) and all(list(line.get_ydata()) == pytest.approx([0.8, 0.7]) for line in dashed)
    # Without per-step probes (cells from before they were kept) the over-training panels are left out.
    assert chart_panels(table_summary(table, _angle_weight_records(with_steps=False)[1])) == ["scores", "delta", "share"]


def test_a_one_column_table_draws_rows_against_their_scores():
    table = build_tables(DATA, {})["objectives"]
    trained = [r for r in table.rows if r.kind == "train"][:3]
    records = [
        {"row": row.name, "seed": seed, "status": "done", "metrics": {table.primary: 80.0 + i + 0.1 * seed}}
        for i, row in enumerate(trained)
        for seed in range(3)
    ]
    summary = table_summary(table, records)
    fig = chart_figure(summary)
    assert chart_panels(summary) == ["scores", "delta"]
    scores = _axis(fig, "scores")
    assert [t.get_text() for t in scores.get_yticklabels()] == [r.name for r in table.rows][::-1]
    means = sorted(x for x, _, _ in _points(scores))
    assert means == pytest.approx([80.1, 81.1, 82.1])  # each row's mean over seeds 0.0, 0.1, 0.2
    deltas = {round(x, 6) for x, _, _ in _points(_axis(fig, "Δ vs"))}
    reference = next(i for i, r in enumerate(trained) if r.name == table.reference)
    assert deltas == {round(float(i - reference), 6) for i in range(3) if i != reference}


def test_a_row_keeps_its_colour_in_every_panel_when_an_earlier_row_has_no_data():
    table = build_tables(DATA, {})["ese"]  # zero-shot first: left without a cell here
    trained = [r for r in table.rows if r.kind == "train"]
    records = [{"row": row.name, "seed": seed, "status": "done", "metrics": {m: 80.0 + i + 0.1 * seed + 0.01 * j for j, m in enumerate(table.metrics)}}
               for i, row in enumerate(trained) for seed in range(3)]  # fmt: skip
    summary = table_summary(table, records)
    fig = chart_figure(summary)
    scores = {c.get_label(): c.lines[0].get_color() for c in _axis(fig, "scores").containers}
    deltas = {c.get_label(): c.lines[0].get_color() for c in _axis(fig, "Δ vs").containers if not c.get_label().startswith("_")}
    compared = [r.name for r in trained if r.name != table.reference]
    assert set(scores) == {r.name for r in trained} and list(deltas) == compared
    assert all(deltas[name] == scores[name] for name in compared)


def test_no_finished_cell_draws_nothing():
    table = build_tables(DATA, {})["ese"]
    summary = table_summary(table, [{"row": table.rows[1].name, "seed": 0, "status": "skipped", "reason": "no data", "metrics": {}}])
    assert chart_panels(summary) == [] and chart_figure(summary) is None and render_chart(summary) is None


def _cells_with_dynamics(tmp_path: Path) -> tuple[object, list[dict], Path]:
    table, records = _angle_weight_records(with_steps=False)
    cells_dir = tmp_path / "cells"
    for r in records:
        r["cell"] = f"train-s{r['seed']}-{abs(hash(r['row'])) % 10**8:08d}"
        r["dynamics"] = f"{r['cell']}.dynamics"
        log = cells_dir / r["dynamics"] / "metrics.jsonl"
        log.parent.mkdir(parents=True, exist_ok=True)
        probes = _probes(r["seed"])
        lines = [{"step": step, "loss": 1.0, **{f"probe_{k}": v for k, v in values.items()}} for step, values in probes.items()]
        stale = {"probe_grad_cosine": 99.0, **({"probe_saturated": 0.9} if r["seed"] in SATURATED else {})}
        lines.insert(1, {"step": 10, **stale})  # step 10 logged before an interruption (each probe counts as last logged)...
        lines.insert(2, {"step": 10, **{f"probe_{k}": v for k, v in probes[10].items()}})  # ...and logged last like this
        log.write_text(
            "\n".join(map(json.dumps, lines))
            + "\nnot json\n"
            + json.dumps({"step": 30, "probe_grad_cosine": True})
            + "\n"
            + json.dumps({"step": 40, "probe_saturated": 1.5, "probe_anisotropy": -1.2, "probe_grad_angle": -0.1})
            + "\n"
        )  # out of range: skipped
    records[0]["dynamics"] = "gone.dynamics"  # a cell whose log is missing has no steps, and is still summarised
    return table, records, cells_dir


def test_write_table_writes_the_chart_and_the_steps_from_each_cells_dynamics(tmp_path, caplog):
    table, records, cells_dir = _cells_with_dynamics(tmp_path)
    log = cells_dir / records[1]["dynamics"] / "metrics.jsonl"
    with caplog.at_level("WARNING", logger="anglekit.reproduce.cells"):
        assert gradient_steps(log) == GRADS[1] and probe_steps(log) == _probes(1)
    assert f"{log}: skipped 1 line(s) that are not JSON and 4 probe value(s)" in caplog.text
    protocol = make_protocol("cpu")
    summary = write_table(tmp_path, table, records, protocol, (0, 1, 2), cells_dir)
    document = json.loads((tmp_path / "angle-weight.json").read_text())
    w3_1 = next(r for r in document["rows"] if r["row"] == table.rows[1].name)["gradient_share"]["steps"]
    assert w3_1 == {str(s): [[10, pytest.approx(0.5 / (2.0 + s))], [20, pytest.approx(0.2 * (s + 1) / 4.0)]] for s in range(3)}
    assert "0" not in document["rows"][0]["gradient_share"]["steps"] and summary["rows"][0]["metrics"]
    assert document["rows"][1]["saturation"] == {"0": [[10, 0.3], [20, 0.1]], "1": [[10, 0.5], [20, 0.0]]}
    with Image.open(tmp_path / "angle-weight.png") as image:
        assert image.format == "PNG" and image.size[0] > 600
    assert (tmp_path / "angle-weight.md").read_text().startswith("## The angle term's weight")


def test_write_table_without_matplotlib_writes_the_rest_and_says_so(tmp_path, monkeypatch, capsys):
    table, records, cells_dir = _cells_with_dynamics(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    write_table(tmp_path, table, records, make_protocol("cpu"), (0, 1, 2), cells_dir)
    assert "no chart: matplotlib is missing (pip install 'anglekit[eval]')" in capsys.readouterr().err
    assert not (tmp_path / "angle-weight.png").exists()
    assert json.loads((tmp_path / "angle-weight.json").read_text())["rows"][1]["gradient_share"]["steps"]
