"""The objective registry: a family registered from this file alone (a pure-tensor loss, its typed
config with one knob, one preset) gets its preset, its flag and YAML key, and trains through
``anglekit train``; knobs of another family and unknown presets are ConfigErrors listing the valid ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from anglekit.config import setting
from anglekit.errors import ConfigError
from anglekit.losses import ObjectiveOutput
from anglekit.losses.registry import (
    FAMILIES,
    ObjectiveFamily,
    Term,
    all_presets,
    get_objective,
    knob_overrides,
    objective_knobs,
    register_objective_family,
    unregister_objective_family,
)
from anglekit.training.config import TrainConfig

from helpers import run_cli


@dataclass(frozen=True)
class ToyConfig:
    """One knob: ``scale`` (flag ``--toy-scale``, YAML ``toy_scale``)."""

    scale: float = setting(1.0, key="toy_scale", minimum=0, exclusive_minimum=True, help="Toy objective: the scale of the cosine.")


BUILT: list[ToyLoss] = []
"""Every ToyLoss built, so a test can see which settings reached the loss."""


class ToyLoss(nn.Module):
    """Squared error between ``scale * cos(x, y)`` and the labels read as 0-5 scores."""

    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.config = config
        self.calls = 0
        BUILT.append(self)

    def forward(self, x: Tensor, y: Tensor, labels: Tensor, ids1: Tensor | None = None, ids2: Tensor | None = None) -> ObjectiveOutput:
        self.calls += 1
        loss = (self.config.scale * F.cosine_similarity(x, y, dim=-1) - labels / 5.0).pow(2).mean()
        return ObjectiveOutput(loss=loss, components={"toy": loss})


TOY = ObjectiveFamily(name="toy", config_cls=ToyConfig, presets={"toy-cos": ToyConfig()}, build=ToyLoss, batch_kind="pairs")


@pytest.fixture
def toy() -> Iterator[ObjectiveFamily]:
    """The toy family, registered for one test (and removed after it)."""
    BUILT.clear()
    yield register_objective_family(TOY)
    unregister_objective_family(TOY.name)


def test_a_registered_family_has_its_preset_knob_and_builder(toy: ObjectiveFamily) -> None:
    assert all_presets()["toy-cos"] == "pairs" and all_presets()["paper"] == "pairs"
    knob = next(s for s in objective_knobs() if s.key == "toy_scale")
    assert (knob.name, knob.flags, knob.default, knob.base) == ("scale", ("--toy-scale",), None, float)
    assert knob_overrides("toy-cos", {"toy_scale": 2.5, "angle_weight": None}) == {"scale": 2.5}
    loss = get_objective("toy-cos", scale=2.5)
    assert isinstance(loss, ToyLoss) and loss.config.scale == 2.5
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    assert list(loss(x, y, torch.tensor([0.0, 1.0, 4.0, 5.0])).components) == ["toy"]


@pytest.mark.parametrize(
    ("preset", "knobs", "match"),
    [
        (
            "toy-cos",
            {"angle_weight": 1.0},
            r"--angle-weight applies to the AnglE pair objectives .*not to the objective 'toy-cos' \(its settings: --toy-scale\)",
        ),
        ("paper", {"toy_scale": 2.0}, r"--toy-scale applies to the toy objectives \(toy-cos\), not to the objective 'paper' \(its settings: --cosine-weight"),
        ("simcse-unsup", {"toy_scale": 2.0, "margin_degrees": 5.0}, r"--toy-scale applies to the toy objectives"),
        ("toy-cos", {"made_up": 1}, r"--made-up is not a setting of the objective 'toy-cos' \(its settings: --toy-scale\)"),
        ("toy", {}, r"unknown objective preset 'toy'; valid presets: .*toy-cos"),
    ],
)
def test_knobs_of_another_family_and_unknown_presets_are_errors(toy: ObjectiveFamily, preset: str, knobs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        knob_overrides(preset, knobs)


def test_a_preset_belongs_to_one_family(toy: ObjectiveFamily) -> None:
    with pytest.raises(ConfigError, match=r"preset\(s\) \['paper'\] already belong to 'angle'"):
        register_objective_family(ObjectiveFamily(name="copy", config_cls=ToyConfig, presets={"paper": ToyConfig()}, build=ToyLoss, batch_kind="pairs"))
    with pytest.raises(ConfigError, match="not ToyConfig instances"):
        ObjectiveFamily(name="bad", config_cls=ToyConfig, presets={"bad": object()}, build=ToyLoss, batch_kind="pairs")
    assert "copy" not in FAMILIES


def test_knobs_are_yaml_keys_and_flat_keys(toy: ObjectiveFamily, tmp_path: Path) -> None:
    config = TrainConfig.from_dict({"objective": "toy-cos", "toy_scale": 2.0})
    assert config.objective.knobs == {"toy_scale": 2.0} and config.flat()["toy_scale"] == 2.0
    assert TrainConfig.from_dict(config.to_dict()) == config == TrainConfig.from_dict(config.flat())
    path = tmp_path / "run.yaml"
    path.write_text("objective: {name: toy-cos, toy_scale: 3.0}\n")
    assert TrainConfig.from_yaml(path).objective.knobs == {"toy_scale": 3.0}
    with pytest.raises(ConfigError, match="toy_scale must be > 0"):
        TrainConfig.from_dict({"objective": "toy-cos", "toy_scale": 0.0})


def test_an_unregistered_knob_is_an_unknown_setting() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) \['toy_scale'\]"):
        TrainConfig.from_dict({"toy_scale": 2.0})


GIVEN = {
    "cosine_tau": 0.1,
    "ibn_tau": 0.1,
    "ibn_similarity": "angle",
    "ibn_detect_duplicates": False,
    "angle_tau": 0.5,
    "angle_variant": "phase",
    "hard_negative_weight": 2.0,
}
"""A non-default value of each knob that acts through one term only."""

COSINE, IBN, ANGLE = ["cosine_tau"], ["ibn_tau", "ibn_similarity", "ibn_detect_duplicates"], ["angle_tau", "angle_variant"]
INERT = {
    "paper": [],
    "paper-phase": [],
    "official-defaults": COSINE,
    "cosine": IBN + ANGLE,
    "angle": COSINE + IBN,
    "angle-phase": COSINE + IBN,
    "ibn": COSINE + ANGLE,
    "simcse-unsup": ["hard_negative_weight"],
    "simace-unsup": ["hard_negative_weight"],
    "simcse-sup": [],
    "simace-sup": [],
}
"""Per built-in preset, the knobs whose only term is off there (written out from the presets' weights)."""


@pytest.mark.parametrize("preset", sorted(INERT))
def test_a_knob_of_a_term_that_is_off_warns_once_each(preset: str, caplog: pytest.LogCaptureFixture) -> None:
    family = next(f for f in FAMILIES.values() if preset in f.presets)
    given = {key: value for key, value in GIVEN.items() if key in family.knobs}
    with caplog.at_level("WARNING", logger="anglekit.losses.registry"):
        overrides = knob_overrides(preset, given)
    assert overrides == {family.knobs[key].name: value for key, value in given.items()}  # still applied: legal, just inert
    messages = [r.getMessage() for r in caplog.records]
    flags = ["--" + key.replace("_", "-") for key in INERT[preset]]
    assert len(messages) == len(flags), messages
    for flag, message in zip(flags, messages, strict=False):
        assert message.startswith(f"{flag} ") and f"does nothing: in the objective {preset!r}" in message, message
    if preset == "angle":
        assert messages[0] == "--cosine-tau 0.1 does nothing: in the objective 'angle' the cosine term weighs 0 (cosine_weight 0)"
    if preset == "simcse-unsup":
        assert "the batches are sentences, which have no hard negatives" in messages[0]


def test_a_weight_given_with_its_settings_turns_them_on(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="anglekit.losses.registry"):
        knob_overrides("angle", {"cosine_weight": 0.5, "cosine_tau": 0.1})
        knob_overrides("paper", {"angle_weight": 0.0, "angle_tau": 0.5, "ibn_tau": 0.1})
    assert [r.getMessage() for r in caplog.records] == ["--angle-tau 0.5 does nothing: in the objective 'paper' the angle term weighs 0 (angle_weight 0)"]


def test_terms_name_fields_of_their_config() -> None:
    with pytest.raises(ConfigError, match=r"term 'toy' names fields \['tau'\] that ToyConfig lacks"):
        ObjectiveFamily(
            name="bad", config_cls=ToyConfig, presets={"b": ToyConfig()}, build=ToyLoss, batch_kind="pairs", terms=(Term("toy", ("tau",), weight="scale"),)
        )
    with pytest.raises(ConfigError, match="a weight field or an active condition"):
        Term("toy", ("scale",))
    family = ObjectiveFamily(
        name="toy2", config_cls=ToyConfig, presets={"toy2-small": ToyConfig(scale=0.5)}, build=ToyLoss, batch_kind="pairs",
        terms=(Term("big", ("scale",), active=lambda c: c.scale > 1, off="the scale is small"),),
    )  # fmt: skip
    assert family.terms[0].why_off(ToyConfig(scale=0.5)) == "the scale is small" and family.terms[0].why_off(ToyConfig(scale=2)) is None


def test_anglekit_train_trains_a_registered_family(
    toy: ObjectiveFamily, tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = [
        "train", str(tiny_bert_dir), "--train-data", str(pair_file), "--output-dir", str(out),
        "--objective", "toy-cos", "--toy-scale", "3.5",
        "--max-steps", "2", "--batch-size", "4", "--logging-steps", "1", "--device", "cpu", "--precision", "fp32", "--quiet",
    ]  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    (loss,) = BUILT
    assert loss.config.scale == 3.5 and loss.calls >= 2
    assert json.loads((out / "results.json").read_text())["steps"] == 2
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["objective"] == {"scale": 3.5} and saved["batch_kind"] == "pairs" and saved["train"]["toy_scale"] == 3.5
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("loss_toy" in record for record in logged)


def test_objective_help_lists_the_registered_presets(toy: ObjectiveFamily) -> None:
    """--objective's help is read from the registry as the parser is built: a plugin's preset is
    there while its family is registered, and gone after."""
    from anglekit.cli import build_parser

    def objective_help() -> str:
        train = build_parser()._subparsers._group_actions[0].choices["train"]  # type: ignore[union-attr]
        return next(a.help for a in train._actions if a.dest == "objective" and "--objective" in a.option_strings)

    text = objective_help()
    for preset, kind in all_presets().items():
        assert preset in text and kind in text
    assert "toy-cos" in text
    unregister_objective_family(TOY.name)
    try:
        assert "toy-cos" not in objective_help() and "simcse-sup" in objective_help()
    finally:
        register_objective_family(TOY)
