"""Cells that train the same model (one training identity) train it once: the angle-weight table's
w3 = 1, the objectives table's "all" row and the ese table's AnglE row differ only in their scoring.
A shared cell's scores equal those of the cell trained on its own; a run cut short while scoring
leaves the model to score every member again without training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import anglekit.training.run as training_run
from anglekit.errors import ConfigError
from anglekit.reproduce import ReproduceConfig, make_protocol, reproduce, scoring
from anglekit.reproduce import runner as runner_module
from anglekit.reproduce import tables as tables_module
from anglekit.reproduce.cells import make_cell, run_cell, training_identity
from anglekit.reproduce.tables import Task, build_tables, row_tasks

import helpers

DATA = {"stsb": "STSB", "mrpc": "MRPC", "nli-pairs": None, "nli": None, "qnli-train": None, "qnli-test": None, "github": None, "unsup": "U"}


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return helpers.write_stsb_root(tmp_path_factory.mktemp("data"), seed=2, train=40)


def _cells(model: str, data: dict, seed: int = 0, **protocol_kw):
    protocol = make_protocol("cpu", model=model, max_steps=2, batch_size=8, device="cpu", **protocol_kw)
    tables = build_tables(data, {})
    found = {}
    for name, table in tables.items():
        if name not in ("angle-weight", "objectives", "ese"):
            continue
        for row in table.rows:
            for task in row_tasks(table, row):
                found[(name, row.name)] = (make_cell(row, task, seed if row.kind == "train" else None, protocol, model), task.metric_prefix or table.metrics[0])
    return found


def test_identity_names_one_training_whatever_scores_it():
    cells = _cells("some/model", DATA, start="smollm2")  # its every cell probes the gradients: the angle-weight table's do everywhere
    w1, all_, ese = (
        cells[k][0] for k in (("angle-weight", "w3 = 1 (paper)"), ("objectives", "all: cosine + ibn + angle"), ("ese", "AnglE (cosine + ibn + angle)"))
    )
    assert w1.train["angle_weight"] == 1.0 and "angle_weight" not in all_.train  # the preset's default, given or not
    assert len({w1.key(), all_.key(), ese.key()}) == 3  # scored differently: three cells
    assert training_identity(w1) == training_identity(all_) == training_identity(ese) is not None
    w0, without = cells[("angle-weight", "w3 = 0 (without angle)")][0], cells[("objectives", "without angle")][0]
    assert training_identity(w0) == training_identity(without) != training_identity(w1)
    assert training_identity(cells[("angle-weight", "w3 = 5")][0]) not in (training_identity(w0), training_identity(w1))
    assert training_identity(cells[("ese", "AnglE + ESE (k = 128, T = 1.0)")][0]) != training_identity(ese)
    w1_of = lambda **kw: training_identity(_cells(kw.pop("model", "some/model"), DATA, **{"start": "smollm2", **kw})[("angle-weight", "w3 = 1 (paper)")][0])  # noqa: E731
    assert w1_of() == training_identity(w1)
    assert w1_of(seed=1) != training_identity(w1) and w1_of(model="other/model") != training_identity(w1)
    assert w1_of(learning_rate=3e-5) != training_identity(w1)
    minilm = _cells("some/model", DATA)  # probing every 10 steps is part of a training (the probes are computed on its batches)
    assert training_identity(minilm[("angle-weight", "w3 = 1 (paper)")][0]) != training_identity(minilm[("objectives", "all: cosine + ibn + angle")][0])
    assert training_identity(cells[("objectives", "zero-shot (no training)")][0]) is None
    no_test = make_cell(all_.row, Task("STS-B", "STSB:train", None, "pairs"), 0, make_protocol("cpu", model="some/model"), "some/model")
    assert training_identity(no_test) is None  # skipped for lacking test data: it trains nothing


def _count_trainings(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = training_run.train

    def counting(config, *args, **kwargs):
        calls.append(config.flat()["output_dir"])
        return real(config, *args, **kwargs)

    monkeypatch.setattr(training_run, "train", counting)
    return calls


def _shared_pair(tiny_bert_dir, data_root, monkeypatch):
    monkeypatch.setattr(tables_module, "NESTED_DIMS", (16, 8))  # the tiny BERT has 32 dimensions
    cells = _cells(str(tiny_bert_dir), {**DATA, "stsb": str(data_root / "stsb")})
    return cells[("objectives", "all: cosine + ibn + angle")], cells[("ese", "AnglE (cosine + ibn + angle)")]


def test_a_shared_training_scores_each_member_like_its_own_training(tmp_path, tiny_bert_dir, data_root, monkeypatch):
    (lead, lead_metric), (other, other_metric) = _shared_pair(tiny_bert_dir, data_root, monkeypatch)
    alone = run_cell(other, tmp_path / "alone", metric=other_metric, data_root=str(data_root))
    calls = _count_trainings(monkeypatch)
    record = run_cell(lead, tmp_path / "shared", metric=lead_metric, data_root=str(data_root), sharing=[(other, other_metric)])
    assert len(calls) == 1 and calls[0].endswith(f"{lead.key()}.run")
    shared = json.loads((tmp_path / "shared" / f"{other.key()}.json").read_text())
    assert shared["status"] == "done" and shared["spec"] == other.spec() and shared["cell"] == other.key()
    assert shared["metrics"].keys() == alone["metrics"].keys()
    assert shared["metrics"] == pytest.approx(alone["metrics"], abs=1e-6)  # the same seed trains the same model
    assert shared["training"]["shared_with"] == lead.key() and "shared_with" not in record["training"]
    assert shared["training"]["steps"] == record["training"]["steps"] == 2
    assert shared["dynamics"] == record["dynamics"] == f"{lead.key()}.dynamics"
    assert not list((tmp_path / "shared").glob("*.run"))  # the one model is deleted once both are scored


def test_a_run_cut_short_while_scoring_a_member_scores_them_all_without_training(tmp_path, tiny_bert_dir, data_root, monkeypatch):
    (lead, lead_metric), (other, other_metric) = _shared_pair(tiny_bert_dir, data_root, monkeypatch)
    real = scoring.score_nested

    def dying(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(scoring, "score_nested", dying)
    with pytest.raises(KeyboardInterrupt):
        run_cell(lead, tmp_path, metric=lead_metric, data_root=str(data_root), sharing=[(other, other_metric)])
    assert not list(tmp_path.glob("*.json"))  # the lead was scored, but nothing is written before every member is
    assert (tmp_path / f"{lead.key()}.run" / "model").is_dir()
    monkeypatch.setattr(scoring, "score_nested", real)
    calls = _count_trainings(monkeypatch)
    first = run_cell(lead, tmp_path, metric=lead_metric, data_root=str(data_root), sharing=[(other, other_metric)])
    assert first["training"]["resumed_from_step"] == 2  # the finished training, scored again
    assert json.loads((tmp_path / f"{other.key()}.json").read_text())["status"] == "done"
    assert not list(tmp_path.glob("*.run")) and len(calls) == 1  # train() only reloads the finished run


def test_sharing_refuses_a_cell_of_another_training_or_a_cell_that_trains_nothing(tmp_path, tiny_bert_dir, data_root, monkeypatch):
    cells = _cells(str(tiny_bert_dir), {**DATA, "stsb": str(data_root / "stsb")})
    lead, metric = cells[("objectives", "all: cosine + ibn + angle")]
    calls = _count_trainings(monkeypatch)
    for other in (cells[("objectives", "without angle")][0], lead):
        with pytest.raises(ConfigError, match="does not train what"):
            run_cell(lead, tmp_path, metric=metric, data_root=str(data_root), sharing=[(other, metric)])
    zero, zero_metric = cells[("objectives", "zero-shot (no training)")]
    with pytest.raises(ConfigError, match="trains nothing"):
        run_cell(zero, tmp_path, metric=zero_metric, data_root=str(data_root), sharing=[(lead, metric)])
    assert calls == [] and not list(tmp_path.iterdir())


def test_reproduce_trains_each_identity_once_across_tables(tmp_path, tiny_bert_dir, data_root, monkeypatch, capsys):
    monkeypatch.setattr(tables_module, "NESTED_DIMS", (16, 8))
    calls = _count_trainings(monkeypatch)
    events: list[tuple[str, str]] = []
    real_run, real_write = runner_module._Work.run, runner_module.write_table
    monkeypatch.setattr(runner_module._Work, "run", lambda self, cell, table: events.append(("run", table)) or real_run(self, cell, table))
    monkeypatch.setattr(runner_module, "write_table", lambda out, table, *a: events.append(("table", table.name)) or real_write(out, table, *a))
    config = ReproduceConfig(seeds=(0,), output_dir=str(tmp_path / "r"), model=str(tiny_bert_dir), data_root=str(data_root), max_steps=2, batch_size=8,
                             device="cpu", quiet=True)  # fmt: skip
    result = reproduce(["objectives", "ese"], config)
    # each table's summary is written as soon as its cells are done, before the next table runs
    assert events == [*[("run", "objectives")] * 10, ("table", "objectives"), *[("run", "ese")] * 3, ("table", "ese")]
    cells = [json.loads(p.read_text()) for p in (tmp_path / "r" / "cells").glob("*.json")]
    trained = [c for c in cells if c["cell"].startswith("train-")]
    # objectives: 9 training rows; ese: AnglE shares "all"'s training, ESE trains (two targets); two zero-shot cells
    assert len(trained) == 12 and len(cells) == 14 and len(calls) == 11
    assert (result.ran, result.reused) == (14, 0)
    shared = [c for c in trained if "shared_with" in c["training"]]
    assert len(shared) == 1 and shared[0]["row"] == "AnglE (cosine + ibn + angle)"
    assert next(c for c in trained if c["cell"] == shared[0]["training"]["shared_with"])["row"] == "all: cosine + ibn + angle"
    err = capsys.readouterr().err
    assert "its training also scores AnglE (cosine + ibn + angle) / STS-B" in err and "/14:" in err
    # after the zero-shot cell, the trainings are not guessed from it; once one has trained, minutes
    progress = [line for line in err.splitlines() if line.startswith("[reproduce")]
    assert "time left known once a cell of each kind has run (11 training(s) left, not timed yet)" in progress[1], progress
    assert all(line.endswith("min left") for line in progress[2:]), progress
    again = reproduce(["objectives", "ese"], config)
    assert (again.ran, again.reused) == (0, 14) and len(calls) == 11


def test_the_member_furthest_on_leads(tmp_path, monkeypatch):
    cells = _cells("some/model", DATA)
    members = [
        cells[("angle-weight", "w3 = 1 (paper)")][0],
        cells[("objectives", "all: cosine + ibn + angle")][0],
        cells[("ese", "AnglE (cosine + ibn + angle)")][0],
    ]
    steps = {members[0].key(): None, members[1].key(): 50, members[2].key(): 25}
    monkeypatch.setattr(runner_module, "resume_step", lambda run_dir: steps[run_dir.name.removesuffix(".run")])
    assert runner_module._lead(members, tmp_path) is members[1]
    steps.update({k: None for k in steps})
    assert runner_module._lead(members, tmp_path) is members[0]  # none started: plan order


def test_text_memo_encodes_each_text_once_and_cuts_like_the_embedder(tiny_bert_dir):
    import numpy as np

    from anglekit.model.embedder import Embedder
    from anglekit.reproduce.scoring import TextMemo

    embedder = Embedder.from_pretrained(tiny_bert_dir, device="cpu", pooling="last_avg", max_length=32)
    asked: list[list[str]] = []
    real = embedder.encode

    def counting(texts, *args, **kwargs):
        asked.append(list(texts))
        return real(texts, *args, **kwargs)

    embedder.encode = counting
    memo = TextMemo(embedder, 4)
    texts = ["a red fox", "the dog runs", "a red fox", "green hills far away"]
    first = memo(texts)
    assert asked == [["a red fox", "the dog runs", "green hills far away"]]
    np.testing.assert_allclose(first, real(texts, 4), atol=1e-6)
    cut = memo(["green hills far away", "the dog runs", "a new one"], truncate_dim=8)
    assert asked[1:] == [["a new one"]]
    np.testing.assert_allclose(cut, real(["green hills far away", "the dog runs", "a new one"], 4, truncate_dim=8), atol=1e-6)
    assert memo([]).shape == (0, embedder.output_dim) and len(asked) == 2
    unit = Embedder.from_pretrained(tiny_bert_dir, device="cpu", pooling="last_avg", max_length=32, normalize=True)
    cut = TextMemo(unit, 4)(texts, truncate_dim=8)
    np.testing.assert_allclose(cut, unit.encode(texts, 4, truncate_dim=8), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(cut, axis=1), 1.0, atol=1e-6)  # normalised after the cut


def test_a_stored_memo_saves_each_chunk_and_a_new_one_continues_from_them(tmp_path, tiny_bert_dir):
    import numpy as np

    from anglekit.model.embedder import Embedder
    from anglekit.reproduce.scoring import TextMemo

    embedder = Embedder.from_pretrained(tiny_bert_dir, device="cpu", pooling="last_avg", max_length=32)
    real = embedder.encode
    texts = [f"sentence number {i} about {w}" for i, w in enumerate(["cats", "dogs", "hills", "rivers", "trains", "boats", "fog"])]
    asked: list[list[str]] = []

    def dies_on_the_third_chunk(part, *args, **kwargs):
        asked.append(list(part))
        if len(asked) == 3:
            raise KeyboardInterrupt  # cut short while scoring
        return real(part, *args, **kwargs)

    embedder.encode = dies_on_the_third_chunk
    with pytest.raises(KeyboardInterrupt):
        TextMemo(embedder, 4, store=tmp_path / "memo", chunk=3)(texts)
    (folder,) = (tmp_path / "memo").iterdir()  # one cache for this model and max length
    shards = sorted(p.name for p in folder.iterdir() if p.name != "meta.json")
    assert len(shards) == 2 and all(name.startswith("shard-") and name.endswith(".npz") for name in shards)  # two chunks kept, no partial file
    saved = {t for chunk in asked[:2] for t in chunk}
    assert len(saved) == 6 and asked[2] == [t for t in texts if t not in saved]

    (folder / "shard-9-cut-short.npz").write_bytes(b"cut short")  # an unreadable shard: its texts are encoded again
    asked.clear()
    embedder.encode = lambda part, *a, **k: asked.append(list(part)) or real(part, *a, **k)
    again = TextMemo(embedder, 4, store=tmp_path / "memo", chunk=3)
    with pytest.warns(UserWarning, match="unreadable shard"):
        vectors = again(texts)
    assert asked == [[t for t in texts if t not in saved]]  # only the chunk that was cut short
    np.testing.assert_allclose(vectors, real(texts, 4), atol=1e-6)
    third = TextMemo(embedder, 4, store=tmp_path / "memo", chunk=3)
    asked.clear()
    with pytest.warns(UserWarning, match="unreadable shard"):
        np.testing.assert_allclose(third(list(reversed(texts))), real(list(reversed(texts)), 4), atol=1e-6)
    assert asked == []


def test_report_only_lists_what_a_run_has_left_in_its_order(tmp_path, tiny_bert_dir, data_root, monkeypatch, capsys):
    monkeypatch.setattr(tables_module, "NESTED_DIMS", (16, 8))
    out = tmp_path / "r"
    argv = ["--seeds", "0", "--output-dir", str(out), "--model", str(tiny_bert_dir), "--data-root", str(data_root), "--max-steps", "2",
            "--batch-size", "8", "--device", "cpu", "--quiet"]  # fmt: skip
    config = ReproduceConfig(seeds=(0,), output_dir=str(out), model=str(tiny_bert_dir), data_root=str(data_root), max_steps=2, batch_size=8,
                             device="cpu", quiet=True)  # fmt: skip
    first = reproduce(["ese"], config)  # zero-shot, AnglE, AnglE + ESE (two targets)
    assert (first.ran, first.pending) == (4, [])
    angle = next(json.loads(p.read_text()) for p in (out / "cells").glob("train-*.json") if json.loads(p.read_text())["row"].startswith("AnglE ("))
    real = scoring.ModelScorer.__call__

    def dying(*args, **kwargs):  # the objectives table's first training is cut short while scored
        raise KeyboardInterrupt

    monkeypatch.setattr(scoring.ModelScorer, "__call__", dying)
    with pytest.raises(KeyboardInterrupt):
        reproduce(["objectives"], config)
    monkeypatch.setattr(scoring.ModelScorer, "__call__", real)
    calls = _count_trainings(monkeypatch)
    code, _, err = helpers.run_cli(["reproduce", "objectives", "ese", *argv, "--report-only"], capsys)
    assert code == 0 and calls == []
    lines = err.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("not run yet:")))
    listed = [line.strip() for line in lines[start + 1 :] if line.startswith("  ")]
    # the zero-shot cell was scored before the cut; 9 training rows, "all" trains the model of ese's finished AnglE cell
    assert lines[start] == "not run yet: 9 cells: 9 trainings, in the order a run takes them:"
    assert len(listed) == 9 and all(line.startswith("objectives: ") for line in listed)
    assert listed[0].startswith("objectives: all: cosine + ibn + angle / STS-B / seed 0 (train-s0-")
    assert listed[0].endswith(
        f"trained; its scoring continues; finished cell {angle['cell']} trained the same model (only the cells of one run share a training)"
    )
    assert all(line.endswith("trains from the start") for line in listed[1:])
    result = reproduce(["objectives", "ese"], ReproduceConfig(**{**config.__dict__, "report_only": True}))
    assert [p.keys[0] for p in result.pending][0] == listed[0].split("(")[-2].split(")")[0]
    assert sum(p.trains for p in result.pending) == 9 and result.pending[0].resume_step == 2 and result.pending[0].trained
    assert not any(p.trained or p.resume_step is not None for p in result.pending[1:])
    assert calls == []
    second = reproduce(["objectives", "ese"], config)  # the announcement says the same
    assert second.ran == 9 and len(calls) == 9
    cut = json.loads((out / "cells" / f"{result.pending[0].keys[0]}.json").read_text())
    assert cut["training"]["resumed_from_step"] == 2  # train() only reloaded its finished run
    assert f"finished cell {angle['cell']} trained the same model, trained again here" in capsys.readouterr().err
    records = {(r["task"], r["row"]): r for r in (json.loads(p.read_text()) for p in (out / "cells").glob("*.json"))}
    again = records[("STS-B", "all: cosine + ibn + angle")]
    # trained in two runs, the same model: every record names the fingerprint of the model it scored
    assert again["model_fingerprint"] == angle["model_fingerprint"] and again["model_fingerprint"].startswith("v2-")
    assert records[("STS-B", "without angle")]["model_fingerprint"] not in (None, angle["model_fingerprint"])
    zero = records[("STS-B", "zero-shot (no training)")]
    evaluation = zero["spec"]["evaluation"]
    assert zero["model_fingerprint"] == scoring.load_embedder(evaluation["model"], evaluation).fingerprint() != angle["model_fingerprint"]


def test_time_left_counts_each_kind_at_its_own_pace():
    from anglekit.reproduce.runner import time_left

    assert time_left(3, 1, {True: [], False: []}) == ""  # nothing timed yet
    assert time_left(3, 1, {True: [], False: [300.0]}) == ", time left known once a cell of each kind has run (3 training(s) left, not timed yet)"
    assert time_left(2, 1, {True: [1200.0, 1800.0], False: []}) == ", time left known once a cell of each kind has run (1 scoring(s) left, not timed yet)"
    assert time_left(2, 0, {True: [1200.0, 1800.0], False: []}) == ", about 50 min left"
    assert time_left(2, 3, {True: [1200.0, 1800.0], False: [60.0, 120.0]}) == ", about 54 min left"
