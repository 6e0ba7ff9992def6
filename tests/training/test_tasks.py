"""Training tasks: one per batch kind, registered once; overrides checked against the task."""

from __future__ import annotations

from typing import Any

import pytest

from anglekit.errors import ConfigError
from anglekit.losses import all_presets
from anglekit.training.config import TrainConfig
from anglekit.training.tasks import TASKS, PairTask, SentenceTask, TrainingTask, TripletTask, register_task, resolve, task_for


def test_every_objective_preset_has_its_task() -> None:
    for preset, kind in all_presets().items():
        assert task_for(preset).kind == kind
    assert isinstance(TASKS["pairs"], PairTask) and isinstance(TASKS["sentences"], SentenceTask) and isinstance(TASKS["triplets"], TripletTask)


def test_register_task_replaces_the_task_of_a_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    class MyPairs(PairTask):
        pass

    monkeypatch.setitem(TASKS, "pairs", TASKS["pairs"])
    mine = register_task(MyPairs())
    assert task_for("paper") is mine


def test_a_task_needs_every_part() -> None:
    class Half(TrainingTask):
        kind = "half"

    with pytest.raises(TypeError):
        Half()  # type: ignore[abstract]


def _overrides(**settings: Any) -> dict[str, Any]:
    config = TrainConfig.from_dict(settings)
    return dict(resolve(config.objective, config.data.text_column)[1].overrides)


def test_overrides_are_named_as_the_objective_config_names_them() -> None:
    assert _overrides(objective="paper", angle_weight=0.5, ibn_similarity="angle") == {"angle_weight": 0.5, "ibn_similarity": "angle"}
    assert _overrides(objective="simace-unsup", contrastive_tau=0.1, margin_degrees=5.0) == {"tau": 0.1, "margin_degrees": 5.0}


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"objective": "paper", "margin_degrees": 5.0}, "--margin-degrees applies to the contrastive objectives"),
        ({"objective": "simace-sup", "angle_weight": 1.0, "cosine_tau": 0.1}, "--angle-weight, --cosine-tau apply to the AnglE pair"),
        ({"objective": "simcse-sup", "text_column": "text"}, "--text-column applies to sentence data"),
        ({"objective": "cosine", "text_column": "text"}, "--text-column applies to sentence data"),
    ],
)
def test_settings_of_another_task_are_errors(settings: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _overrides(**settings)
