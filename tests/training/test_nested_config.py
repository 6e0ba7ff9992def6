"""Settings of nested dimensions (Matryoshka, ESE) and GradCache: checked when the config is built,
from YAML keys and from flags, and against the model's dimension before anything is loaded."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from anglekit.cli.fields import add_settings, overrides
from anglekit.errors import ConfigError
from anglekit.training.config import TrainConfig


def _parse(argv: list[str]) -> TrainConfig:
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    settings = add_settings(parser, TrainConfig)
    return TrainConfig.from_dict(overrides(parser.parse_args(argv), settings), source="flags")


def test_flags_take_lists() -> None:
    config = _parse(["--matryoshka-dims", "384", "256", "128", "64", "32", "--matryoshka-weights", "1", "1", "0.5", "0.5", "0.25"])
    assert config.objective.matryoshka_dims == (384, 256, 128, 64, 32)
    assert config.objective.matryoshka_weights == (1.0, 1.0, 0.5, 0.5, 0.25)
    config = _parse(["--ese", "--ese-compression-size", "128", "--ese-kl-temperature", "1.0"])
    assert config.objective.ese and config.objective.ese_config().compression_size == 128
    assert config.objective.ese_config().target == "unit"  # the default since issue 42
    config = _parse(["--ese", "--ese-target", "angle-emb"])
    assert config.objective.ese_config().target == "angle-emb" and TrainConfig.from_dict(config.to_dict()) == config
    config = _parse(["--gradcache-chunk-size", "32", "--objective", "simcse-unsup"])
    assert config.trainer.gradcache_chunk_size == 32
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_nesting_records_the_wrapper_with_its_defaults_filled_in() -> None:
    """What train_config.json and the card record: the settings that ran, JSON-ready, or None."""
    assert _parse(["--matryoshka-dims", "64", "32"]).objective.nesting() == {"kind": "matryoshka", "dims": [64, 32], "weights": [1.0, 1.0]}
    assert _parse(["--ese"]).objective.nesting() == {"kind": "ese", "compression_size": 128, "kl_temperature": 1.0, "target": "unit"}
    assert _parse(["--ese", "--ese-kl-temperature", "0.5"]).objective.nesting()["kl_temperature"] == 0.5
    assert _parse([]).objective.nesting() is None


@pytest.mark.parametrize("argv", [["--matryoshka-dims", "0"], ["--matryoshka-dims", "a"], ["--gradcache-chunk-size", "0"], ["--matryoshka-dims"]])
def test_bad_flags_fail_as_they_are_parsed(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        _parse(argv)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"matryoshka_dims": [64, 128]}, "strictly decreasing"),
        ({"matryoshka_dims": [128, 64], "matryoshka_weights": [1.0]}, "one weight per dimension"),
        ({"matryoshka_weights": [1.0]}, "needs matryoshka_dims"),
        ({"matryoshka_dims": 64}, "list"),
        ({"matryoshka_dims": []}, "empty"),
        ({"matryoshka_dims": [64, -1]}, ">= 1"),
        ({"ese_compression_size": 64}, "only apply with ese"),
        ({"ese": True, "objective": "simcse-unsup"}, "AnglE pair objectives"),
        ({"ese": True, "matryoshka_dims": [64, 32]}, "alternatives"),
        ({"ese": True, "mlp_head": True}, "mlp_head"),
        ({"ese": True, "ese_kl_temperature": 0}, "ese_kl_temperature"),
        ({"ese_target": "unit"}, "only apply with ese"),
        ({"ese": True, "ese_target": "pca"}, "ese_target"),
        ({"ese": True, "ese_target": 1}, "ese_target"),
        ({"ese": True, "gradcache_chunk_size": 8}, "does not combine with ese"),
    ],
)
def test_bad_nested_settings_are_config_errors(values: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        TrainConfig.from_dict(values)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"matryoshka_dims": [64, 32]}, "64 is larger than the model's embedding dimension 32"),
        ({"ese": True, "ese_compression_size": 48}, "48 is larger than the model's embedding dimension 32"),
        ({"matryoshka_dims": [32, 15]}, "must be even"),
    ],
)
def test_sizes_are_checked_against_the_model_before_loading(tiny_bert_dir: Path, tmp_path: Path, values: dict[str, Any], match: str) -> None:
    from anglekit.training.run import check

    config = TrainConfig.from_dict({"model": str(tiny_bert_dir), "train_data": "x.jsonl", "output_dir": str(tmp_path / "o"), **values})
    with pytest.raises(ConfigError, match=match):
        check(config)
    odd_ok = TrainConfig.from_dict(
        {"model": str(tiny_bert_dir), "train_data": "x", "output_dir": str(tmp_path / "o"), "objective": "ibn", "matryoshka_dims": [32, 15]}
    )
    check(odd_ok)  # no angle term: any size


def test_train_runs_end_to_end_with_ese(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    from anglekit.model.embedder import Embedder
    from anglekit.training.run import train

    config = TrainConfig.from_dict({
        "model": str(tiny_bert_dir), "train_data": str(pair_file), "output_dir": str(tmp_path / "run"), "max_steps": 2,
        "batch_size": 8, "ese": True, "ese_compression_size": 16, "device": "cpu", "quiet": True, "positive_threshold": 4.0,
        "logging_steps": 1,
    })  # fmt: skip
    result = train(config)
    assert result.steps == 2
    assert "loss_ese_layers" in (tmp_path / "run" / "metrics.jsonl").read_text()
    shallow = Embedder.from_pretrained(result.model_dir, layer=1, truncate_dim=16, device="cpu")
    assert shallow.encode(["a dog", "a cat"]).shape == (2, 16)
    # every layer was trained: the saved model says so (the server then accepts a per-request layer)
    assert shallow.config.early_exit is True
    plain = train(TrainConfig.from_dict({**config.flat(), "ese": False, "ese_compression_size": None, "output_dir": str(tmp_path / "plain")}))
    assert Embedder.from_pretrained(plain.model_dir, device="cpu").config.early_exit is False
    pooled = train(TrainConfig.from_dict({**config.flat(), "ese_target": "angle-emb", "output_dir": str(tmp_path / "pooled")}))
    assert pooled.steps == 2 and "loss_ese_compression" in (tmp_path / "pooled" / "metrics.jsonl").read_text()
    # what ran is on record with its defaults filled in (the target left unset included), and nothing without ESE
    recorded = {name: json.loads((tmp_path / name / "train_config.json").read_text())["nesting"] for name in ("run", "pooled", "plain")}
    assert recorded["run"] == {"kind": "ese", "compression_size": 16, "kl_temperature": 1.0, "target": "unit"}
    assert recorded["pooled"]["target"] == "angle-emb" and recorded["plain"] is None
    card = (pooled.model_dir / "README.md").read_text()
    assert "| ese_target | angle-emb |" in card and "| ese_compression_size | 16 |" in card  # named as the settings are
    assert "ese_" not in (plain.model_dir / "README.md").read_text()


def test_each_dataset_objective_is_resolved_once_and_handed_down(tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """check() resolves each dataset's preset once; the plans it returns carry the config the registry made."""
    from anglekit.losses import registry
    from anglekit.training import tasks
    from anglekit.training.run import check

    calls: list[str] = []
    real = registry.resolve_objective

    def counting(name: str, knobs: Any) -> Any:
        calls.append(name)
        return real(name, knobs)

    monkeypatch.setattr(tasks, "resolve_objective", counting)
    config = TrainConfig.from_dict(
        {
            "model": str(tiny_bert_dir),
            "train_data": ["a.jsonl", "b.jsonl;objective=simcse-sup"],
            "objective": "paper",
            "angle_tau": 0.05,
            "output_dir": str(tmp_path / "o"),
        }  # fmt: skip
    )
    plans = check(config)
    assert calls == ["paper", "simcse-sup"]
    assert [p.resolved.config for p in plans] == [registry.objective_config("paper", angle_tau=0.05), registry.objective_config("simcse-sup")]
    assert [p.resolved.batch_kind for p in plans] == ["pairs", "triplets"]


def test_a_family_size_check_is_its_own_hook(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """The even split belongs to the angle term: with it off the odd sizes pass; a plugin family's
    own size check refuses the model's hidden size before anything is loaded."""
    from dataclasses import dataclass

    from anglekit.losses.configs import ObjectiveConfig
    from anglekit.losses.registry import ObjectiveFamily, register_objective_family, resolve_objective, unregister_objective_family
    from anglekit.training.run import check

    angle = resolve_objective("paper", {})
    assert angle.size_problem([32, 15], "size") is not None and "15 is not" in str(angle.size_problem([32, 15], "size"))
    assert angle.size_problem([32, 16], "size") is None
    assert resolve_objective("paper", {"angle_weight": 0.0}).size_problem([15], "size") is None
    assert resolve_objective("simcse-sup", {}).size_problem([15], "size") is None
    config = TrainConfig.from_dict({"model": str(tiny_bert_dir), "train_data": "x.jsonl", "output_dir": str(tmp_path / "o"),
                                    "matryoshka_dims": [32, 15], "angle_weight": 0.0})  # fmt: skip
    check(config)  # no angle term: an odd nested size is fine

    @dataclass(frozen=True)
    class Wide(ObjectiveConfig):
        pass

    def wide_only(config: Any, sizes: Any, what: str) -> str | None:
        return None if min(sizes) >= 64 else f"every {what} must be at least 64"

    register_objective_family(
        ObjectiveFamily(name="wide", config_cls=Wide, presets={"wide": Wide()}, build=lambda c: None, batch_kind="pairs", check_sizes=wide_only)
    )
    try:
        config = TrainConfig.from_dict({"model": str(tiny_bert_dir), "train_data": "x.jsonl", "output_dir": str(tmp_path / "o"), "objective": "wide"})
        with pytest.raises(ConfigError, match="hidden size is 32: every hidden size must be at least 64"):
            check(config)
    finally:
        unregister_objective_family("wide")


@pytest.mark.parametrize(
    ("recorded", "given", "outcome"),
    [
        ({"train": {"ese": True, "ese_target": None}}, None, "error"),  # before 2026-11-30: an unset target ran angle-emb's
        ({"train": {"ese": True, "ese_target": None}}, "angle-emb", "ok"),
        ({"train": {"ese": True, "ese_target": "unit"}}, None, "ok"),
        ({"train": {"ese": True}, "nesting": {"kind": "ese", "target": "angle-emb"}}, None, "error"),
        ({"train": {"ese": True}, "nesting": {"kind": "ese", "target": "unit"}}, None, "ok"),
        ({"train": {"ese": True}, "nesting": {"kind": "ese", "target": "angle-emb"}}, "unit", "warn"),
        ({"train": {"ese": False}}, None, "ok"),  # began without ESE: nothing to compare
        ({"train": ["not", "a", "mapping"]}, None, "ok"),
        ("{not json", None, "ok"),
    ],
)
def test_resuming_an_ese_run_keeps_the_target_it_began_with(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, recorded: Any, given: str | None, outcome: str
) -> None:
    """The ESE target's default changed; a resumed run does not switch target silently (ConfigError
    naming the flag), nor when the target is given (a warning)."""
    from anglekit.training.run import _check_resumed_ese_target

    (tmp_path / "train_config.json").write_text(recorded if isinstance(recorded, str) else json.dumps(recorded))
    config = TrainConfig.from_dict({"ese": True, "output_dir": str(tmp_path), **({"ese_target": given} if given else {})})
    if outcome == "error":
        with pytest.raises(ConfigError, match="began with ESE's compression target 'angle-emb'.*--ese-target angle-emb"):
            _check_resumed_ese_target(tmp_path, config)
        return
    with caplog.at_level("WARNING", logger="anglekit.training.run"):
        _check_resumed_ese_target(tmp_path, config)
    assert ("resumes with 'unit' as given" in caplog.text) == (outcome == "warn")


def test_train_refuses_to_resume_an_old_ese_run_with_the_new_default(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    """Wired into train(): the check runs before the model loads, and changes nothing on disk."""
    from anglekit.training.run import train

    out = tmp_path / "run"
    (out / "checkpoint-4").mkdir(parents=True)
    (out / "checkpoint-4" / "model.safetensors").write_bytes(b"weights")
    (out / "checkpoint-4" / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
    legacy = json.dumps({"train": {"ese": True, "ese_target": None}})
    (out / "train_config.json").write_text(legacy)
    config = TrainConfig.from_dict(
        {
            "model": str(tiny_bert_dir),
            "train_data": str(pair_file),
            "ese": True,
            "ese_compression_size": 16,
            "output_dir": str(out),
            "resume": True,
            "device": "cpu",
        }
    )
    with pytest.raises(ConfigError, match="--ese-target angle-emb"):
        train(config)
    assert (out / "train_config.json").read_text() == legacy and (out / "checkpoint-4" / "model.safetensors").exists()
