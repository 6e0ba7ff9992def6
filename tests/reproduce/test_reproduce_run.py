"""anglekit reproduce end to end on a tiny random BERT and a tiny STS-B-format data root: cells,
resume, a broken cell rerun, the zero-shot cell against an independent Spearman, the re-initialised
start, the CLI's errors."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from anglekit.errors import ConfigError
from anglekit.reproduce import ReproduceConfig, make_protocol, reproduce
from anglekit.reproduce.cells import make_cell, run_cell
from anglekit.reproduce.protocol import Protocol, Start, prepare_start
from anglekit.reproduce.tables import build_tables

import helpers


def _stsb_root(root: Path, identical_every: int = 7) -> Path:
    """An STS-B-format root; every ``identical_every``-th pair (0: none) has two identical texts."""
    rng = random.Random(0)
    folder = root / "stsb"
    folder.mkdir(parents=True)
    for split, n in (("train", 48), ("dev", 8), ("test", 24)):
        lines = []
        for i in range(n):
            a = helpers.random_sentence(rng, 3, 8)
            b = a if identical_every and i % identical_every == 0 else helpers.random_sentence(rng, 3, 8)
            lines.append(f"main-captions\tMSRvid\t2012{split}\t{i:04d}\t{rng.uniform(0, 5):.3f}\t{a}\t{b}")
        (folder / f"sts-{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return _stsb_root(tmp_path_factory.mktemp("data"))


def _config(out: Path, model: Path, root: Path, **kw) -> ReproduceConfig:
    return ReproduceConfig(seeds=(0, 1), output_dir=str(out), model=str(model), data_root=str(root), max_steps=2, batch_size=8, device="cpu", quiet=True, **kw)


def test_cells_resume_and_rerun_a_broken_one(tmp_path, tiny_bert_dir, data_root):
    config = _config(tmp_path / "repro", tiny_bert_dir, data_root)
    first = reproduce(["ibn-duplicates"], config)
    assert (first.ran, first.reused) == (4, 0)
    cells = sorted((tmp_path / "repro" / "cells").glob("*.json"))
    assert len(cells) == 4 and not list((tmp_path / "repro" / "cells").glob("*.run"))  # models deleted once scored
    values = {p.name: json.loads(p.read_text())["metrics"] for p in cells}
    report = first.report.read_text()
    assert "| cosine + ibn + angle, with detection |" in report and "≈-0.18" in report

    again = reproduce(["ibn-duplicates"], config)
    assert (again.ran, again.reused) == (0, 4)
    cells[0].write_text("{cut short")
    third = reproduce(["ibn-duplicates"], config)
    assert (third.ran, third.reused) == (1, 3)
    assert json.loads(cells[0].read_text())["metrics"] == values[cells[0].name]  # the same seed gives the same value

    summary = json.loads((tmp_path / "repro" / "ibn-duplicates.json").read_text())
    assert summary["protocol"]["max_steps"] == 2 and summary["seeds"] == [0, 1]
    only = reproduce(["ibn-duplicates"], ReproduceConfig(**{**config.__dict__, "report_only": True, "seeds": (0, 1, 2)}))
    assert (only.ran, only.missing) == (0, 2)


def test_cells_are_reused_from_a_data_root_elsewhere_and_old_names_follow(tmp_path, tiny_bert_dir, data_root):
    import shutil

    from anglekit.reproduce.cells import spec_key

    config = _config(tmp_path / "repro", tiny_bert_dir, data_root)
    first = reproduce(["ibn-duplicates"], config)
    assert (first.ran, first.reused) == (4, 0)
    cells = tmp_path / "repro" / "cells"
    records = {p.stem: json.loads(p.read_text()) for p in cells.glob("*.json")}
    assert all(r["data_root"] == str(data_root) and str(data_root) in json.dumps(r["spec"]) for r in records.values())
    # the same data in another place (another checkout or machine): every cell is reused
    moved = shutil.copytree(data_root, tmp_path / "elsewhere" / "data")
    again = reproduce(["ibn-duplicates"], ReproduceConfig(**{**config.__dict__, "data_root": str(moved)}))
    assert (again.ran, again.reused) == (0, 4)
    assert {p.stem for p in cells.glob("*.json")} == set(records)
    # records named by the old rule (absolute paths hashed), with an interrupted run, are renamed
    for key, record in records.items():
        legacy = spec_key(record["spec"])
        (cells / f"{key}.json").rename(cells / f"{legacy}.json")
        (cells / f"{legacy}.json").write_text(json.dumps({k: v for k, v in {**record, "cell": legacy}.items() if k != "data_root"}))
    (cells / f"{legacy}.json").unlink()
    (cells / f"{legacy}.run").mkdir()
    (cells / f"{legacy}.run" / "metrics.jsonl").write_text("")
    (cells / f"{key}.dynamics").rename(cells / f"{legacy}.dynamics")  # cut short while being scored
    third = reproduce(["ibn-duplicates"], ReproduceConfig(**{**config.__dict__, "report_only": True}))
    assert (third.reused, third.missing) == (3, 1)
    assert {p.stem for p in cells.glob("*.json")} == set(records) - {key}
    assert (cells / f"{key}.run" / "metrics.jsonl").is_file() and not (cells / f"{legacy}.run").exists()
    assert (cells / f"{key}.dynamics" / "metrics.jsonl").is_file() and not (cells / f"{legacy}.dynamics").exists()
    assert all(json.loads(p.read_text())["data_root"] == str(data_root) for p in cells.glob("*.json"))


def test_zero_shot_cell_equals_an_independent_spearman(tmp_path, tiny_bert_dir):
    from anglekit.data.catalog import load_stsb
    from anglekit.model.embedder import Embedder

    # No identical-text pairs here: their cosine is exactly 1 in theory, so they tie, and the
    # order of a tie is decided by rounding (the cell encodes each unique text once, this
    # reference encodes both sides in different batches: 1.0 vs 0.99999994), which moved the
    # Spearman by 2 points while both sides scored the same vectors.
    data_root = _stsb_root(tmp_path / "data", identical_every=0)
    protocol = make_protocol("cpu", max_length=32)
    table = build_tables(
        {"stsb": str(data_root / "stsb"), "mrpc": "", "nli": "", "nli-pairs": "", "github": None, "unsup": "", "qnli-train": "", "qnli-test": ""}, {}
    )["objectives"]
    zero = next(r for r in table.rows if r.kind == "zero-shot")
    cell = make_cell(zero, table.tasks[0], None, protocol, str(tiny_bert_dir))
    record = run_cell(cell, tmp_path, metric="STS-B test", data_root=str(data_root))
    test = load_stsb(data_root / "stsb", "test")
    model = Embedder.from_pretrained(str(tiny_bert_dir), pooling="last_avg", max_length=32, device="cpu")
    a, b = model.encode(test.text1, 8), model.encode(test.text2, 8)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert record["metrics"]["STS-B test"] == pytest.approx(100 * stats.spearmanr(cos, test.labels).statistic, abs=1e-4)


def test_missing_training_data_is_a_named_skip(tmp_path, tiny_bert_dir, data_root):
    table = build_tables(
        {"stsb": str(data_root / "stsb"), "mrpc": "", "nli": "", "nli-pairs": "", "github": None, "unsup": "", "qnli-train": "", "qnli-test": ""}, {}
    )["non-transfer"]
    github = next(t for t in table.tasks if t.name == "GitHub Issues")
    cell = make_cell(table.rows[1], github, 0, make_protocol("cpu"), str(tiny_bert_dir))
    record = run_cell(cell, tmp_path, metric="GitHub Issues test", data_root=str(data_root))
    assert record["status"] == "skipped" and "GitHub Issues" in record["reason"]
    zero = run_cell(
        make_cell(table.rows[0], github, None, make_protocol("cpu"), str(tiny_bert_dir)), tmp_path, metric="GitHub Issues test", data_root=str(data_root)
    )
    assert zero["status"] == "skipped" and "no test data" in zero["reason"]


def test_reinitialised_start_changes_only_the_top_layers_once(tmp_path, tiny_bert_dir):
    from safetensors.torch import load_file

    start = Start("tiny-reinit", str(tiny_bert_dir), "cls", "test start", reinit_top_layers=1)
    protocol = Protocol(preset="cpu", start=start, max_length=16, batch_size=4, learning_rate=1e-4, epochs=1.0)
    folder = Path(prepare_start(protocol, tmp_path))
    before = load_file(str(next(Path(tiny_bert_dir).glob("*.safetensors"))))
    after = load_file(str(next(folder.rglob("*.safetensors"))))
    top = [k for k in before if "encoder.layer.1." in k and k.endswith("weight") and "LayerNorm" not in k]
    low = [k for k in before if "encoder.layer.0." in k]
    assert top and low
    assert all(not np.allclose(before[k].numpy(), after[k].numpy()) for k in top)
    assert all(np.array_equal(before[k].numpy(), after[k].numpy()) for k in low)
    stamp = folder.stat().st_mtime_ns
    assert Path(prepare_start(protocol, tmp_path)) == folder and folder.stat().st_mtime_ns == stamp
    with pytest.raises(ConfigError, match="re-initialise"):
        prepare_start(Protocol("cpu", Start("x", str(tiny_bert_dir), "cls", "m", reinit_top_layers=5), 16, 4, 1e-4, 1.0), tmp_path / "other")


def test_cli_rejects_bad_tables_and_settings(tmp_path, capsys):
    code, _, err = helpers.run_cli(["reproduce", "table9"], capsys)
    assert code == 2 and "invalid choice" in err
    code, _, err = helpers.run_cli(["reproduce", "pooling", "--seeds", "0", "0", "--output-dir", str(tmp_path)], capsys)
    assert code != 0 and "seeds repeat" in err
    code, _, err = helpers.run_cli(["reproduce", "pooling", "--batch-size", "zero"], capsys)
    assert code == 2 and "--batch-size" in err
    code, _, err = helpers.run_cli(["reproduce", "pooling", "--data-root", str(tmp_path / "missing"), "--output-dir", str(tmp_path / "o")], capsys)
    assert code != 0 and "data-root" in err


@pytest.mark.parametrize("steps", ["0"])
def test_max_steps_zero_is_refused_before_anything_is_written(tmp_path, capsys, steps):
    """0 steps would record the start model's scores as trained rows."""
    out = tmp_path / "o"
    code, _, err = helpers.run_cli(["reproduce", "pooling", "--max-steps", steps, "--output-dir", str(out), "--data-root", str(tmp_path)], capsys)
    assert code == 2 and "max_steps is 0" in err and err.count("\n") == 1 and not out.exists(), err
    code, _, err = helpers.run_cli(["reproduce", "pooling", "--max-steps", "-2", "--output-dir", str(out)], capsys)
    assert code == 2 and "--max-steps" in err and not out.exists(), err


@pytest.mark.parametrize("device", ["tpu", "mps", "cuda:0", "CPU", ""])
def test_a_device_reproduce_cannot_use_is_refused_as_the_flag_is_parsed(tmp_path, capsys, data_root, device):
    """Refused by the parser, before data/ or cells/ exist (it used to fail inside the first cell)."""
    out = tmp_path / "o"
    code, _, err = helpers.run_cli(["reproduce", "pooling", "--device", device, "--output-dir", str(out), "--data-root", str(data_root)], capsys)
    assert code == 2 and "--device" in err and repr(device) in err and not out.exists(), err
    assert "choose from 'auto', 'cpu', 'cuda'" in err


def test_reproduce_help_lists_exactly_the_devices_it_accepts(capsys):
    code, out, _ = helpers.run_cli(["reproduce", "--help"], capsys)
    text = " ".join(out.split())
    assert code == 0 and "--device {auto,cpu,cuda}" in text
    assert "mps" not in text and "cuda:N" not in text


def test_device_cuda_without_a_gpu_is_refused_before_anything_is_written(tmp_path, capsys, data_root, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "o"
    code, _, err = helpers.run_cli(["reproduce", "pooling", "--device", "cuda", "--output-dir", str(out), "--data-root", str(data_root)], capsys)
    assert code == 2 and "--device cuda: no CUDA GPU is available here" in err and err.count("\n") == 1 and not out.exists(), err
    with pytest.raises(ConfigError, match="device"):
        ReproduceConfig(device="mps")


def test_device_auto_is_the_default_device(tmp_path, tiny_bert_dir, data_root):
    """auto is recorded as no device, like the default: cells keyed by it are reused by a rerun with either."""
    for device in (None, "auto"):
        out = tmp_path / str(device)
        config = ReproduceConfig(seeds=(0,), output_dir=str(out), model=str(tiny_bert_dir), data_root=str(data_root), device=device, report_only=True)
        result = reproduce(["pooling"], config)
        assert result.missing > 0 and json.loads((out / "pooling.json").read_text())["protocol"]["device"] is None


def test_max_steps_bounds_in_the_api():
    from anglekit.reproduce.config import ReproduceConfig
    from anglekit.reproduce.protocol import make_protocol

    with pytest.raises(ConfigError, match="max_steps is 0"):
        ReproduceConfig(max_steps=0)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ConfigError, match="max_steps must be >= 1, or -1"):
            make_protocol("cpu", max_steps=bad)
    assert make_protocol("cpu", max_steps=3).max_steps == 3 and make_protocol("cpu", max_steps=-1).max_steps == -1
    assert ReproduceConfig(max_steps=1).max_steps == 1


def test_the_smollm2_start_trains_lora_adapters_with_the_paper_prompt(tmp_path, tiny_llama_dir, data_root):
    """The smollm2 start (here on a tiny random decoder, --model) trains LoRA adapters with the
    paper's prompt and last-token pooling on its own protocol (batch 16, lr 1e-4, max length 96),
    scores each cell with the prompt, and records the saturation probes."""
    from anglekit.model.embedder import Embedder
    from anglekit.reproduce.protocol import STARTS

    start = STARTS["smollm2"]
    protocol = make_protocol("cpu", start="smollm2", model=str(tiny_llama_dir), max_steps=2, device="cpu")
    assert (protocol.batch_size, protocol.learning_rate, protocol.max_length) == (16, 1e-4, 96)
    data = {"stsb": str(data_root / "stsb"), "mrpc": "", "nli": "", "nli-pairs": "", "github": None, "unsup": "", "qnli-train": "", "qnli-test": ""}
    table = build_tables(data, {})["objectives"]
    row = next(r for r in table.rows if r.name == "all: cosine + ibn + angle")
    cell = make_cell(row, table.tasks[0], 0, protocol, str(tiny_llama_dir))
    assert cell.train["lora"] is True and cell.train["prompt"] == "paper" and cell.train["pooling"] == "last_token"
    assert cell.evaluation["prompt"] == "paper"
    record = run_cell(cell, tmp_path, metric=table.metrics[0], data_root=str(data_root), keep_model=True)
    assert record["status"] == "done" and record["training"]["steps"] == 2
    assert record["training"]["precision"] in ("fp32", "bf16") and record["training"]["hardware"].startswith("CPU ")  # what trained it (auto: the CPU decides)
    dynamics = [json.loads(line) for line in (tmp_path / record["dynamics"] / "metrics.jsonl").read_text().splitlines()]
    probes = [r for r in dynamics if "probe_saturated" in r]
    assert probes and all(0.0 <= r["probe_saturated"] <= 1.0 and -1.0 <= r["probe_anisotropy"] <= 1.0 for r in probes)
    assert all(r["probe_grad_cosine"] >= 0.0 and r["probe_grad_angle"] >= 0.0 and r["probe_grad_ibn"] >= 0.0 for r in probes)
    trained = Embedder.from_pretrained(record["model_dir"], device="cpu")
    assert trained.has_lora and trained.config.pooling == "last_token" and start.prompt in ("paper",)
    assert "Summarize sentence" in trained.config.prompt
    zero = next(r for r in table.rows if r.kind == "zero-shot")
    zero_cell = make_cell(zero, table.tasks[0], None, protocol, str(tiny_llama_dir))
    assert zero_cell.evaluation["prompt"] == "paper" and run_cell(zero_cell, tmp_path, metric=table.metrics[0], data_root=str(data_root))["status"] == "done"
    # other starts' cells are unchanged by the new fields (their finished cells stay valid)
    minilm = make_cell(row, table.tasks[0], 0, make_protocol("cpu"), "m")
    assert "prompt" not in minilm.evaluation and "lora" not in minilm.train


def _objectives_cell(model: Path, root: Path, steps: int):
    data = {"stsb": str(root / "stsb"), "mrpc": "", "nli": "", "nli-pairs": "", "github": None, "unsup": "", "qnli-train": "", "qnli-test": ""}
    table = build_tables(data, {})["objectives"]
    row = next(r for r in table.rows if r.name == "all: cosine + ibn + angle")
    protocol = Protocol("cpu", Start("tiny", str(model), "cls", "test start"), 32, 8, 1e-4, 1.0, max_steps=steps, device="cpu")
    return make_cell(row, table.tasks[0], 0, protocol, str(model)), table.metrics[0]


def test_a_cell_cut_short_in_training_continues_from_its_checkpoint(tmp_path, tiny_bert_dir, data_root, monkeypatch):
    """Killed after step 3 of 4 (checkpoints every 2 steps), the cell's next run trains steps 3-4 from
    checkpoint-2 and scores what an uninterrupted run scores."""
    from anglekit.training.trainer import AnglETrainer

    cell, metric = _objectives_cell(tiny_bert_dir, data_root, 4)
    whole = run_cell(cell, tmp_path / "whole", metric=metric, data_root=str(data_root), checkpoint_steps=2)
    assert "resumed_from_step" not in whole["training"] and not (tmp_path / "whole" / f"{cell.key()}.run").exists()

    real_step, calls = AnglETrainer.training_step, []

    def dying_step(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the machine goes away mid-step
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(AnglETrainer, "training_step", dying_step)
    with pytest.raises(KeyboardInterrupt):
        run_cell(cell, tmp_path / "cut", metric=metric, data_root=str(data_root), checkpoint_steps=2)
    assert not (tmp_path / "cut" / f"{cell.key()}.json").exists()  # nothing written as if finished
    monkeypatch.setattr(AnglETrainer, "training_step", real_step)
    resumed = run_cell(cell, tmp_path / "cut", metric=metric, data_root=str(data_root), checkpoint_steps=2)
    assert resumed["training"]["resumed_from_step"] == 2 and resumed["training"]["steps"] == 4
    assert resumed["metrics"] == pytest.approx(whole["metrics"], abs=1e-6)


def test_a_cell_cut_short_in_scoring_is_scored_without_training_again(tmp_path, tiny_bert_dir, data_root, monkeypatch):
    import anglekit.reproduce.scoring as scoring
    from anglekit.training.trainer import AnglETrainer

    cell, metric = _objectives_cell(tiny_bert_dir, data_root, 2)
    real_score = scoring.score

    def dying_score(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(scoring, "score", dying_score)
    with pytest.raises(KeyboardInterrupt):
        run_cell(cell, tmp_path, metric=metric, data_root=str(data_root), checkpoint_steps=2)
    assert not (tmp_path / f"{cell.key()}.json").exists() and (tmp_path / f"{cell.key()}.run" / "model").is_dir()
    monkeypatch.setattr(scoring, "score", real_score)

    def no_training(self, *args, **kwargs):
        raise AssertionError("the finished training ran again")

    monkeypatch.setattr(AnglETrainer, "train", no_training)
    record = run_cell(cell, tmp_path, metric=metric, data_root=str(data_root), checkpoint_steps=2)
    assert record["status"] == "done" and record["training"]["resumed_from_step"] == 2 and record["training"]["steps"] == 2
    assert not (tmp_path / f"{cell.key()}.run").exists()  # deleted once scored


def test_checkpoint_steps_is_a_checked_setting(tmp_path):
    assert ReproduceConfig(output_dir=str(tmp_path)).checkpoint_steps == 25
    for bad in (0, -3, "ten", 2.5, None):
        with pytest.raises(ConfigError, match="checkpoint_steps"):
            ReproduceConfig(output_dir=str(tmp_path), checkpoint_steps=bad)
