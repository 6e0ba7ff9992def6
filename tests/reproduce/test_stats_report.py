"""Statistics and the report of anglekit.reproduce against independent references (numpy, scipy)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from anglekit.errors import ConfigError
from anglekit.reproduce import ReproduceConfig, expand_tables, make_protocol, mean_std, paired
from anglekit.reproduce.cells import make_cell, read_cell
from anglekit.reproduce.report import published_values, render_report, render_table, table_summary
from anglekit.reproduce.tables import build_tables

DATA = {
    "stsb": "/d/stsb",
    "mrpc": "/d/mrpc",
    "nli": "snli:dev",
    "nli-pairs": "/d/nli.jsonl",
    "github": None,
    "unsup": "mr:train",
    "qnli-train": "/d/q1.jsonl",
    "qnli-test": "/d/q2.jsonl",
}


def test_mean_std_and_paired_match_numpy_and_scipy():
    values = [85.61, 85.48, 85.07]
    m, sd = mean_std(values)
    assert m == pytest.approx(np.mean(values)) and sd == pytest.approx(np.std(values, ddof=1))
    assert mean_std([1.0]) == (1.0, None)
    with pytest.raises(ValueError):
        mean_std([])
    row, ref = {0: 85.0, 1: 84.1, 2: 84.9, 7: 1.0}, {0: 85.6, 1: 85.5, 2: 85.1}
    result = paired(row, ref)
    expected = stats.ttest_rel([85.0, 84.1, 84.9], [85.6, 85.5, 85.1])
    assert result.seeds == (0, 1, 2)
    assert result.t == pytest.approx(expected.statistic) and result.p == pytest.approx(expected.pvalue)
    assert result.mean_diff == pytest.approx(np.mean([-0.6, -1.4, -0.2]))
    assert paired({0: 1.0}, {1: 1.0}) is None
    assert paired({0: 1.0, 1: 2.0}, {0: 1.0, 1: 2.0}).verdict() == "identical on every seed"
    assert paired({0: 1.0}, {0: 2.0}).verdict() == "one seed: no test"
    consistent = paired({0: 80.0, 1: 80.1, 2: 79.9, 3: 80.05}, {0: 85.0, 1: 85.05, 2: 85.0, 3: 85.1})
    assert not consistent.within_noise and consistent.verdict().startswith("lower")
    noisy = paired({0: 85.0, 1: 86.0, 2: 84.0}, {0: 85.2, 1: 85.0, 2: 85.1})
    assert noisy.within_noise and noisy.verdict().startswith("within noise")


def test_tables_and_config_checks():
    assert expand_tables(["all"])[0] == "objectives" and len(expand_tables(["all", "pooling"])) == 9
    assert expand_tables(["pooling", "objectives", "pooling"]) == ["pooling", "objectives"]
    for bad in ([], ["table9"]):
        with pytest.raises(ConfigError):
            expand_tables(bad)
    for kwargs in (
        {"seeds": ()},
        {"seeds": (0, 0)},
        {"seeds": (-1,)},
        {"seeds": ("a",)},
        {"preset": "gpu"},
        {"max_steps": -2},
        {"llm_sentences": 0},
        {"start": "roberta"},
    ):
        with pytest.raises(ConfigError):
            ReproduceConfig(**kwargs)
    with pytest.raises(ConfigError, match="preset"):
        make_protocol("huge")
    with pytest.raises(ConfigError, match="start"):
        make_protocol("cpu", start="nothing")
    with pytest.raises(ConfigError, match="unknown protocol"):
        make_protocol("cpu", warmup=3)
    p = make_protocol("paper")
    assert (p.model_name(), p.start.pooling, p.max_length) == ("bert-base-uncased", "cls", 128)


def test_cells_are_shared_between_tables_and_differ_by_what_decides_them():
    tables = build_tables(DATA, {})
    protocol = make_protocol("cpu")

    def key(table, row, seed=0, proto=protocol):
        spec = tables[table]
        r = next(x for x in spec.rows if x.name == row)
        return make_cell(r, spec.tasks[0], seed, proto, "m").key()

    shared = key("objectives", "all: cosine + ibn + angle")
    assert shared == key("pooling", "last_avg") == key("ibn-duplicates", "cosine + ibn + angle, with detection")
    assert shared != key("pooling", "cls") and shared != key("objectives", "all: cosine + ibn + angle", seed=1)
    assert shared != key("ibn-duplicates", "cosine + ibn + angle, without detection")
    assert shared != key("objectives", "all: cosine + ibn + angle", proto=make_protocol("cpu", max_length=32))
    zero = next(x for x in tables["objectives"].rows if x.kind == "zero-shot")
    assert make_cell(zero, tables["objectives"].tasks[0], 5, protocol, "m").seed is None


def test_read_cell_reruns_broken_files(tmp_path):
    assert read_cell(tmp_path / "none.json") is None
    (tmp_path / "a.json").write_text("{not json")
    (tmp_path / "b.json").write_text('{"status": "running", "metrics": {}}')
    (tmp_path / "c.json").write_text('{"status": "done", "metrics": {"STS-B test": 80.0}}')
    (tmp_path / "d.json").write_bytes(b"\xff\xfe")
    assert read_cell(tmp_path / "a.json") is None and read_cell(tmp_path / "b.json") is None
    assert read_cell(tmp_path / "d.json") is None
    assert read_cell(tmp_path / "c.json")["metrics"] == {"STS-B test": 80.0}


def _records(table, values):
    return [
        {"row": row, "seed": seed, "status": "done", "metrics": {table.primary: v}, "cell": f"{row}-{seed}"}
        for row, per_seed in values.items()
        for seed, v in per_seed.items()
    ]


def test_summary_and_markdown_put_each_number_in_its_column():
    table = build_tables(DATA, {})["pooling"]
    values = {"cls": {0: 80.0, 1: 81.0, 2: 82.0}, "last_avg": {0: 85.0, 1: 85.5, 2: 86.5}, "last_max": {0: 79.0}}
    summary = table_summary(table, _records(table, values))
    rows = {r["row"]: r for r in summary["rows"]}
    assert rows["cls"]["metrics"]["STS-B test"]["mean"] == pytest.approx(81.0)
    assert rows["cls"]["metrics"]["STS-B test"]["std"] == pytest.approx(1.0)
    assert rows["last_avg"]["paired"]["mean_diff"] == pytest.approx(np.mean([5.0, 4.5, 4.5]))
    assert rows["last_avg"]["published"] == {"STS-B test": 84.15}
    assert rows["last_avg"]["published_diff"] == pytest.approx(84.15 - 86.26)
    assert rows["cls_avg"]["metrics"] == {} and rows["last_max"]["paired"]["verdict"] == "one seed: no test"
    text = render_table(summary)
    line = next(x for x in text.splitlines() if x.startswith("| last_avg "))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1].startswith("85.67 ± 0.76") and cells[2] == "85.00, 85.50, 86.50"
    assert cells[3].startswith("+4.67 ± 0.29") and cells[4] == "84.15" and cells[5] == "-2.11"
    report = render_report([summary], make_protocol("cpu"), (0, 1, 2), "anglekit reproduce pooling")
    assert "Scale:" in report and "already trained" in report and "anglekit reproduce pooling" in report


def test_a_table_whose_cells_trained_in_different_precisions_says_so():
    table = build_tables(DATA, {})["pooling"]
    records = _records(table, {"cls": {0: 80.0, 1: 81.0, 2: 82.0}, "last_avg": {0: 85.0, 1: 85.5, 2: 86.5}})
    same = [{**r, "training": {"precision": "fp32"}} for r in records]
    summary = table_summary(table, same)
    assert summary["precisions"] == {"fp32": 6} and "precisions differ" not in render_table(summary)
    assert table_summary(table, records)["precisions"] == {}  # zero-shot-like records: no training, nothing counted
    mixed = [{**r, "training": {"precision": "bf16"} if r["seed"] == 1 else {"steps": 10}} for r in records]
    mixed.append({**records[0], "status": "failed", "training": {"precision": "fp16"}})  # not finished: not counted
    summary = table_summary(table, mixed)
    assert summary["precisions"] == {"bf16": 2, "unrecorded": 4}
    assert "- The trained cells' recorded precisions differ (bf16 2, unrecorded 4)" in render_table(summary)


def test_multi_column_table_averages_measured_columns_and_marks_skips():
    table = build_tables(DATA, {})["non-transfer"]
    records = (
        [{"row": "AnglE: cosine + ibn + angle", "seed": s, "status": "done", "metrics": {"MRPC test": 40.0 + s}} for s in (0, 1)]
        + [{"row": "AnglE: cosine + ibn + angle", "seed": s, "status": "done", "metrics": {"STS-B test": 80.0}} for s in (0, 1)]
        + [{"row": "AnglE: cosine + ibn + angle", "seed": 0, "status": "skipped", "metrics": {}, "reason": "no GitHub data"}]
    )
    summary = table_summary(table, records)
    angle = next(r for r in summary["rows"] if r["row"].startswith("AnglE"))
    assert angle["metrics"]["Avg"]["values"] == {0: 60.0, 1: 60.5}
    assert angle["skipped"] == ["no GitHub data"]
    assert published_values(table.rows[1].published)["GitHub Issues test"] == 70.55
    text = render_table(summary)
    line = next(x for x in text.splitlines() if x.startswith("| AnglE"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1].startswith("40.50 ± 0.71") and cells[4] == "skipped" and cells[5].startswith("60.25")
    assert "- AnglE: cosine + ibn + angle: skipped: no GitHub data" in text


def test_a_row_sharing_the_reference_paper_row_has_no_paper_difference():
    table = build_tables(DATA, {})["objectives"]
    values = {"all: cosine + ibn + angle": {0: 85.0, 1: 85.2}, "all, phase angle": {0: 85.1, 1: 85.0}, "without ibn": {0: 84.0, 1: 84.1}}
    rows = {r["row"]: r for r in table_summary(table, _records(table, values))["rows"]}
    assert rows["all, phase angle"]["published_diff"] is None
    assert rows["without ibn"]["published_diff"] == pytest.approx(86.00 - 86.26)
