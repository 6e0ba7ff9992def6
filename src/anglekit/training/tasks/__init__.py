"""Training tasks: one per batch kind, registered here once (see :mod:`.base`)."""

from __future__ import annotations

from typing import Any

from anglekit.errors import ConfigError
from anglekit.losses.registry import all_presets, knob_overrides, preset_batch_kind
from anglekit.training.tasks.base import BatchServices, TrainingTask
from anglekit.training.tasks.contrastive import SentenceTask, TripletTask, dropout_views
from anglekit.training.tasks.pairs import PairTask, default_positive_threshold

TASKS: dict[str, TrainingTask] = {}
"""Batch kind -> its task."""


def register_task(task: TrainingTask) -> TrainingTask:
    """Make ``task`` the one that trains objectives of its batch kind; returns it."""
    TASKS[task.kind] = task
    return task


for _task in (PairTask(), SentenceTask(), TripletTask()):
    register_task(_task)


def task_for(objective: str) -> TrainingTask:
    """The task that trains objective preset ``objective`` (by the preset's batch kind)."""
    kind = preset_batch_kind(objective)
    if kind not in TASKS:
        raise ConfigError(f"no training task for batch kind {kind!r} (objective {objective!r}); known: {', '.join(TASKS)}")
    return TASKS[kind]


def objective_overrides(task: TrainingTask, objective: Any, text_column: str | None) -> dict[str, Any]:
    """The objective config's overrides from the knobs given (``objective`` is an ObjectiveSection),
    checked by the objective registry (a knob of another family is a ConfigError naming its flag);
    ``text_column`` where ``task`` reads no column is a ConfigError too."""
    overrides = knob_overrides(objective.name, objective.knobs)
    if text_column is not None and not task.reads_text_column:
        readers = [preset for preset, kind in all_presets().items() if kind in TASKS and TASKS[kind].reads_text_column]
        raise ConfigError(f"--text-column applies to sentence data ({', '.join(readers)}), not to the objective {objective.name!r}")
    return overrides


__all__ = [
    "TASKS",
    "BatchServices",
    "PairTask",
    "SentenceTask",
    "TrainingTask",
    "TripletTask",
    "default_positive_threshold",
    "dropout_views",
    "objective_overrides",
    "register_task",
    "task_for",
]
