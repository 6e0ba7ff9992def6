"""Training tasks: one per batch kind, registered here once (see :mod:`.base`)."""

from __future__ import annotations

from typing import Any

from anglekit.errors import ConfigError
from anglekit.losses.registry import ResolvedObjective, all_presets, preset_batch_kind, resolve_objective
from anglekit.training.tasks.base import BatchServices, TrainingTask
from anglekit.training.tasks.contrastive import SentenceTask, TripletTask, dropout_views
from anglekit.training.tasks.distill import DistillTask
from anglekit.training.tasks.pairs import PairTask, default_positive_threshold

TASKS: dict[str, TrainingTask] = {}
"""Batch kind -> its task."""


def register_task(task: TrainingTask) -> TrainingTask:
    """Make ``task`` the one that trains objectives of its batch kind; returns it."""
    TASKS[task.kind] = task
    return task


for _task in (PairTask(), SentenceTask(), TripletTask(), DistillTask()):
    register_task(_task)


NO_TASK = "no training task for batch kind {kind!r} (objective {name!r}); known: {known}"
"""The error for an objective whose batch kind no task trains."""


def task_for(objective: str | ResolvedObjective) -> TrainingTask:
    """The task that trains ``objective`` (a preset name, or a resolved one) by its batch kind."""
    name, kind = (objective.name, objective.batch_kind) if isinstance(objective, ResolvedObjective) else (objective, preset_batch_kind(objective))
    if kind not in TASKS:
        raise ConfigError(NO_TASK.format(kind=kind, name=name, known=", ".join(TASKS)))
    return TASKS[kind]


def resolve(section: Any, text_column: str | None) -> tuple[TrainingTask, ResolvedObjective]:
    """(task, resolved objective) of an ObjectiveSection, resolved once by the objective registry
    (a knob of another family is a ConfigError naming its flag); ``text_column`` where the task
    reads no column is a ConfigError too."""
    objective = resolve_objective(section.name, section.knobs)
    task = TASKS.get(objective.batch_kind)  # looked up here, so that resolving goes down to the registry once
    if task is None:
        raise ConfigError(NO_TASK.format(kind=objective.batch_kind, name=objective.name, known=", ".join(TASKS)))
    if text_column is not None and not task.reads_text_column:
        readers = [preset for preset, kind in all_presets().items() if kind in TASKS and TASKS[kind].reads_text_column]
        raise ConfigError(f"--text-column applies to sentence data ({', '.join(readers)}), not to the objective {section.name!r}")
    return task, objective


__all__ = [
    "TASKS",
    "BatchServices",
    "DistillTask",
    "PairTask",
    "ResolvedObjective",
    "SentenceTask",
    "TrainingTask",
    "TripletTask",
    "default_positive_threshold",
    "dropout_views",
    "register_task",
    "resolve",
    "task_for",
]
