"""Training tasks: one per batch kind, registered here once (see :mod:`.base`)."""

from __future__ import annotations

from anglekit.errors import ConfigError
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
    from anglekit.losses.registry import preset_batch_kind

    kind = preset_batch_kind(objective)
    if kind not in TASKS:
        raise ConfigError(f"no training task for batch kind {kind!r} (objective {objective!r}); known: {', '.join(TASKS)}")
    return TASKS[kind]


def objective_overrides(task: TrainingTask, objective: object, text_column: str | None) -> dict[str, object]:
    """The objective settings given (``objective`` is an ObjectiveSection), named as the
    objective's config names them. A setting of another task (``--margin-degrees`` with
    ``paper``) or ``text_column`` where the task reads no column is a ConfigError naming the flag."""
    own = {target: getattr(objective, name) for name, target in task.override_names.items() if getattr(objective, name) is not None}
    wrong: list[tuple[str, str]] = []
    for other in TASKS.values():
        for name in other.override_names:
            if name not in task.override_names and getattr(objective, name) is not None and name not in dict(wrong):
                wrong.append((name, other.family))
    if text_column is not None and not task.reads_text_column:
        wrong.append(("text_column", "sentence data (simcse-unsup, simace-unsup)"))
    if wrong:
        flags = ", ".join("--" + name.replace("_", "-") for name, _ in wrong)
        verb = "applies" if len(wrong) == 1 else "apply"
        raise ConfigError(f"{flags} {verb} to {wrong[0][1]}, not to the objective {getattr(objective, 'name')!r}")
    return own


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
