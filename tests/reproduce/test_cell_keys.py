"""A cell's key hashes what decides its result and nothing else: gradient checkpointing (an execution
setting) is left out, because it never changes the trained weights (pinned here bitwise); cells whose
file names hashed it are renamed in place, with their dynamics and the records that name them."""

from __future__ import annotations

import glob
import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from anglekit.reproduce.cells import EXECUTION_SETTINGS, read_cell, rename_to_current_keys, root_relative, spec_key
from anglekit.training.config import TrainConfig
from anglekit.training.run import train

ROOT = Path(__file__).resolve().parents[2]


def _train_weights(model: Path, pairs: Path, out: Path, lora: bool, **execution) -> dict[str, torch.Tensor]:
    settings = {"model": str(model), "train_data": str(pairs), "output_dir": str(out), "max_steps": 3, "batch_size": 8, "precision": "fp32",
                "probe_steps": 2, "logging_steps": 2, "quiet": True, "seed": 0, "overwrite_output_dir": True, "positive_threshold": 4.0, **execution}  # fmt: skip
    if lora:
        settings.update(lora=True, lora_rank=8, lora_dropout=0.1, pooling="last_token", prompt="paper")
    result = train(TrainConfig.from_dict(settings))
    weights: dict[str, torch.Tensor] = {}
    for file in sorted(Path(result.model_dir).rglob("*.safetensors")):
        weights.update({f"{file.name}:{k}": v for k, v in load_file(file).items()})
    return weights


@pytest.mark.parametrize("lora", [True, False], ids=["llama-lora", "bert-full"])
def test_gradient_checkpointing_never_changes_the_trained_weights(tmp_path, tiny_llama_dir, tiny_bert_dir, pair_file, lora):
    model = tiny_llama_dir if lora else tiny_bert_dir
    plain = _train_weights(model, pair_file, tmp_path / "plain", lora)
    for i, execution in enumerate(({"gradient_checkpointing": True}, {"gradient_checkpointing": True, "checkpoint_every": 2})):
        checkpointed = _train_weights(model, pair_file, tmp_path / f"ckpt{i}", lora, **execution)
        assert checkpointed.keys() == plain.keys() and len(plain) > 0
        assert all(torch.equal(checkpointed[k], plain[k]) for k in plain), execution  # bitwise: dropout masks replayed
    assert set(EXECUTION_SETTINGS) == {"gradient_checkpointing", "checkpoint_every"}


def _legacy_key(spec: dict) -> str:
    """The rule before execution settings were left out: a hash of the whole spec."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{spec['kind']}-s{spec['seed']}-{digest}"


def _spec(lr: float = 1e-4, **train) -> dict:
    return {"version": 1, "kind": "train", "seed": 0, "evaluation": {"kind": "pairs"}, "train": {"learning_rate": lr, "lora": True, **train}}


def test_the_key_leaves_out_execution_settings_only():
    assert spec_key(_spec(gradient_checkpointing=True)) == spec_key(_spec()) == spec_key(_spec(gradient_checkpointing=False, checkpoint_every=2))
    assert spec_key(_spec(lr=2e-4)) != spec_key(_spec())
    assert spec_key(_spec(probe_steps=10)) != spec_key(_spec())
    assert spec_key(_spec()) == _legacy_key(_spec())  # a spec without them keeps its old key
    zero = {"version": 1, "kind": "zero-shot", "seed": None, "train": None, "evaluation": {"kind": "pairs"}}
    assert spec_key(zero).startswith("zero-shot-") and "-s" not in spec_key(zero).removeprefix("zero-shot")


def test_a_setting_added_later_at_the_value_older_cells_ran_with_keeps_their_key():
    """The ese table's angle-emb row names ``ese_target: angle-emb``; its cells, recorded before the
    setting existed, keep their keys. Any other value is a different cell."""
    ese = {"ese": True, "ese_compression_size": 128}
    assert spec_key(_spec(**ese, ese_target="angle-emb")) == spec_key(_spec(**ese))
    assert spec_key(_spec(**ese, ese_target="unit")) != spec_key(_spec(**ese))


def test_every_committed_cell_is_named_by_its_key():
    found = 0
    for path in glob.glob(str(ROOT / "benchmarks" / "results" / "**" / "cells" / "*.json"), recursive=True):
        record = json.loads(Path(path).read_text())
        if isinstance(record.get("spec"), dict):
            found += 1
            assert spec_key(record["spec"], record.get("data_root")) == Path(path).stem == record["cell"], path
            assert isinstance(record.get("data_root"), str), f"{path}: no data_root (run 'anglekit reproduce' on it to rename it)"
    assert found >= 60


def _write(folder: Path, spec: dict, **extra) -> str:
    key = _legacy_key(spec)
    record = {"cell": key, "row": "r", "task": "t", "seed": 0, "spec": spec, "status": "done", "metrics": {"STS-B": 80.0}, **extra}
    (folder / f"{key}.json").write_text(json.dumps(record))
    return key


def test_cells_named_by_the_old_rule_are_renamed_with_their_dynamics_and_followers(tmp_path):
    lead_spec = _spec(gradient_checkpointing=True)
    old = _legacy_key(lead_spec)
    (tmp_path / f"{old}.dynamics").mkdir()
    (tmp_path / f"{old}.dynamics" / "metrics.jsonl").write_text('{"step": 10}\n')
    _write(tmp_path, lead_spec, dynamics=f"{old}.dynamics", training={"steps": 200})
    follower_spec = {**_spec(gradient_checkpointing=True), "evaluation": {"kind": "nested"}}
    old_follower = _write(tmp_path, follower_spec, dynamics=f"{old}.dynamics", training={"steps": 200, "shared_with": old})
    untouched = _write(tmp_path, _spec(lr=3e-4))  # no execution setting: its name is its key already
    (tmp_path / "broken.json").write_text("{cut short")

    renamed = dict(rename_to_current_keys(tmp_path))
    new, new_follower = spec_key(lead_spec), spec_key(follower_spec)
    assert renamed == {old: new, old_follower: new_follower}
    lead = read_cell(tmp_path / f"{new}.json")
    follower = read_cell(tmp_path / f"{new_follower}.json")
    assert lead["cell"] == new and lead["dynamics"] == f"{new}.dynamics" and lead["metrics"] == {"STS-B": 80.0} and lead["spec"] == lead_spec
    assert (tmp_path / f"{new}.dynamics" / "metrics.jsonl").read_text() == '{"step": 10}\n'
    assert follower["training"]["shared_with"] == new and follower["dynamics"] == f"{new}.dynamics"
    assert not (tmp_path / f"{old}.json").exists() and not (tmp_path / f"{old}.dynamics").exists()
    assert (tmp_path / f"{untouched}.json").exists() and (tmp_path / "broken.json").read_text() == "{cut short"
    assert rename_to_current_keys(tmp_path) == []  # idempotent


def test_a_cell_whose_new_name_is_taken_is_left_alone(tmp_path):
    spec = _spec(gradient_checkpointing=True)
    old = _write(tmp_path, spec)
    taken = tmp_path / f"{spec_key(spec)}.json"
    taken.write_text(json.dumps({"cell": spec_key(spec), "spec": _spec(), "status": "done", "metrics": {"STS-B": 81.0}}))
    assert rename_to_current_keys(tmp_path) == []
    assert (tmp_path / f"{old}.json").exists() and json.loads(taken.read_text())["metrics"] == {"STS-B": 81.0}


def _data_spec(root: str, test: str = "stsb:test") -> dict:
    spec = _spec(train_data=f"{root}/stsb:train")
    return {**spec, "evaluation": {"kind": "pairs", "test": f"{root}/{test}", "model": "/models/m"}}


def test_the_key_names_data_by_its_place_under_the_data_root():
    assert spec_key(_data_spec("/a/data"), "/a/data") == spec_key(_data_spec("/b/x/data"), "/b/x/data/")
    assert spec_key(_data_spec("/a/data"), "/a/data") != spec_key(_data_spec("/a/data", "stsb:dev"), "/a/data")
    assert spec_key(_data_spec("/a/data")) != spec_key(_data_spec("/b/data"))  # the old rule: absolute paths
    assert spec_key(_data_spec("/a/data")) != spec_key(_data_spec("/a/data"), "/a/data")
    portable = root_relative(_data_spec("/a/data"), "/a/data")
    assert portable["train"]["train_data"] == "$DATA/stsb:train" and portable["evaluation"]["test"] == "$DATA/stsb:test"
    assert portable["evaluation"]["model"] == "/models/m"  # outside the root: as it is
    assert root_relative(["/a/data2/x", "/a/data", 3, None], "/a/data") == ["/a/data2/x", "$DATA", 3, None]


def test_old_records_under_the_root_of_the_run_gain_it_and_others_stay(tmp_path):
    here, there = _data_spec("/a/data"), _data_spec("/b/data", "stsb:dev")
    old_here, old_there = _write(tmp_path, here), _write(tmp_path, there)
    renamed = dict(rename_to_current_keys(tmp_path, "/a/data"))
    new = spec_key(here, "/a/data")
    assert renamed == {old_here: new}
    record = read_cell(tmp_path / f"{new}.json")
    assert record["data_root"] == "/a/data" and record["spec"] == here and record["metrics"] == {"STS-B": 80.0}
    assert (tmp_path / f"{old_there}.json").exists()  # ran under another root: renamed when run from there
    assert rename_to_current_keys(tmp_path, "/a/data") == []
    assert dict(rename_to_current_keys(tmp_path, "/b/data")) == {old_there: spec_key(there, "/b/data")}
