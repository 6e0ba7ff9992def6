"""benchmarks/bench_adapt.py: its documents, rows, verdicts and flag errors; ``slow``: the smoke mode end
to end (SmolLM2 writes queries for 12 captions, the teacher filters and scores them, a few rows train
2 steps and are scored by ``anglekit eval`` on Flickr30k test and STS-B: minutes on 2 cores)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from helpers import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("bench_adapt")


def _captions(images: int) -> list[list[str]]:
    return [[f"image {i} caption {k}" for k in range(5)] for i in range(images)]


def test_documents_are_caption_one_of_the_images_the_labelled_recipe_draws(bench: ModuleType) -> None:
    captions = _captions(60)
    docs = bench.sample_documents(captions, 20, seed=3)
    assert docs == bench.sample_documents(captions, 20, seed=3) != bench.sample_documents(captions, 20, seed=4)
    assert all(d.endswith("caption 0") for d in docs) and len(set(docs)) == 20
    images = {p["anchor"].split(" caption")[0] for p in bench.brt.sample_pairs(captions, 20, seed=3)}
    assert {d.split(" caption")[0] for d in docs} == images  # the reference row trains on the same images, as labelled pairs
    with pytest.raises(bench.BenchError, match="--docs 61"):
        bench.sample_documents(captions, 61, seed=0)


def test_the_rows_are_the_issues(bench: ModuleType) -> None:
    names = [r.name for r in bench.ROWS]
    assert len(set(names)) == len(names) and len({r.stem for r in bench.ROWS}) == len(names)
    for needed in ("zero-shot:student", "zero-shot:teacher", "anglekit:paper:generated", "anglekit:margin-mse:generated", "anglekit:distill-kl:generated",
                   "anglekit:ibn+guide:generated", bench.COMBINATION, bench.REFERENCE, "sentence-transformers:mnrl:generated",
                   "sentence-transformers:margin-mse:generated", "sentence-transformers:gist:generated"):  # fmt: skip
        assert needed in names
    merges = [r for r in bench.ROWS if r.peer == "merge"]
    assert sorted((r.base, r.weight) for r in merges) == sorted((b, w) for b in (bench.COMBINATION, bench.REFERENCE) for w in (0.25, 0.5, 0.75))
    assert all(a in names and b in names for a, b in bench.SAME_LOSS)
    assert set(bench.SMOKE_ROWS) <= set(names)


def _runs(ndcg: list[float], pps: float = 10.0, stsb: float = 82.0) -> list[dict[str, float]]:
    return [{"seed": s, "ndcg@10": v, "R@1": 0.0, "strict@5": 0.0, "stsb_spearman": stsb, "train_pairs_per_s": pps} for s, v in enumerate(ndcg)]


def test_verdicts_from_runs(bench: ModuleType) -> None:
    runs = {
        "zero-shot:student": _runs([64.0, 64.0, 64.0]),
        "zero-shot:teacher": _runs([70.0, 70.0, 70.0]),
        bench.COMBINATION: _runs([66.5, 67.5, 67.0], stsb=81.8),
        "anglekit:ibn:generated": _runs([66.0, 66.0, 66.0], pps=26.0),
        "sentence-transformers:mnrl:generated": _runs([65.0, 65.0, 65.0], pps=10.0),
        bench.REFERENCE: _runs([67.2, 67.2, 67.2]),
    }
    table = bench.summarise(runs, {"stsb_spearman": 82.0})
    v = bench.verdicts(runs, table)
    assert v["best_no_label"] == bench.COMBINATION
    assert v["half_gap"]["threshold"] == pytest.approx(67.0) and v["half_gap"]["met"] and v["half_gap"]["short_by"] == 0.0
    assert v["against_labelled"]["ndcg_delta_per_seed"] == pytest.approx([-0.7, 0.3, -0.2]) and not v["against_labelled"]["beats"]
    assert v["stsb_cost"]["cost"] == pytest.approx(0.2) and v["stsb_cost"]["met"] and v["quality_target_met"]
    ratio = v["speed"]["anglekit:ibn:generated / sentence-transformers:mnrl:generated"]
    assert ratio["per_seed"] == pytest.approx([2.6] * 3) and ratio["met"]
    runs[bench.COMBINATION] = _runs([66.0, 66.2, 66.1], stsb=81.0)
    v = bench.verdicts(runs, bench.summarise(runs, {"stsb_spearman": 82.0}))
    assert v["half_gap"]["short_by"] == pytest.approx(0.9) and not v["quality_target_met"] and not v["stsb_cost"]["met"]


@pytest.mark.parametrize(("argv", "needle"), [(["--docs", "0"], "--docs 0"), (["--only", "nope"], "nope: no such row")])
def test_bad_flags_exit_2(argv: list[str], needle: str) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_adapt.py"), *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and needle in proc.stderr


@pytest.mark.slow
def test_smoke_mode_end_to_end(tmp_path: Path) -> None:
    argv = [sys.executable, str(ROOT / "benchmarks" / "bench_adapt.py"), "--smoke", "--threads", "2", "--work-dir", str(tmp_path / "work"),
            "--results-dir", str(tmp_path / "results")]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(next((tmp_path / "results").glob("bench_adapt-*-smoke.json")).read_text(encoding="utf-8"))
    load_benchmark("bench_adapt")
    assert summary["smoke"] and [r["row"] for r in summary["rows"]] == list(sys.modules["bench_adapt"].SMOKE_ROWS)
    assert summary["stages"]["generate"]["kept"] > 0 and summary["stages"]["mine_generated"]["rows"] > 0
    cells = sorted(p.name for p in (tmp_path / "results" / "runs").glob("*.json"))
    assert len(cells) == len(summary["rows"])
    again = subprocess.run(argv, capture_output=True, text=True, timeout=600)  # every cell and stage reused
    assert again.returncode == 0 and again.stderr.count("reusing") == len(cells) + 3
