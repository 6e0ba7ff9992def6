"""Cells: one row x task x seed, trained and scored once, stored as one JSON file.

A cell's file name carries a hash of everything that decides its result (the full training
settings, the scoring, the seed), so a rerun reuses a finished cell, two tables sharing a cell
(the objectives' "all" row and the pooling ablation's last_avg row) compute it once, and a change
of protocol never reuses a stale cell. Datasets under the data root are hashed by their place in it
(``$DATA/stsb:test``), not by where the root lies, so finished cells are reused from another checkout
or machine; the record keeps the absolute paths that ran and the root (``data_root``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, DataError
from anglekit.io.atomic import atomic_write_json
from anglekit.reproduce import scoring
from anglekit.reproduce.protocol import Protocol
from anglekit.reproduce.tables import Row, Task

logger = logging.getLogger(__name__)

CELL_VERSION = 1


@dataclass(frozen=True)
class Cell:
    """What one cell runs. ``seed`` is None for rows that do not train."""

    row: Row
    task: Task
    seed: int | None
    train: dict[str, Any] | None
    evaluation: dict[str, Any]
    data_root: str | None = None
    """The data folder the spec's dataset paths lie under (left out of the key, see :func:`spec_key`)."""

    def spec(self) -> dict[str, Any]:
        return {"version": CELL_VERSION, "kind": self.row.kind, "train": self.train, "evaluation": self.evaluation, "seed": self.seed}

    def key(self) -> str:
        """``<kind>-s<seed>-<hash>``: the same for every row (of any table) that runs the same spec, and
        wherever the data root lies."""
        return spec_key(self.spec(), self.data_root)

    def legacy_key(self) -> str:
        """The key before the data root was left out (it hashed the absolute dataset paths)."""
        return spec_key(self.spec())


EXECUTION_SETTINGS = frozenset({"gradient_checkpointing", "checkpoint_every"})
"""Training settings that change a run's speed and memory but not its model (activation checkpointing
recomputes the same operations with the same random state: a test pins the trained weights bitwise),
so they are left out of a cell's key; the record's spec still says how the cell ran."""


SETTINGS_ADDED_LATER: dict[str, Any] = {"ese_target": "angle-emb"}
"""Training settings added after cells were recorded, with the value every earlier cell ran with
(``ese_target`` came with the unit target on 2026-11-30; before, every ESE cell ran angle-emb's).
At that value a setting is left out of the key, so a row that names it keeps the key, and the
cells, recorded before the setting existed."""

_ABSENT = object()


DATA_ROOT_MARK = "$DATA"
"""What stands for the data root in the hashed form of a spec (:func:`spec_key`)."""


def root_relative(value: Any, data_root: str) -> Any:
    """``value`` (a spec or any part of it) with every string path under ``data_root`` written from
    :data:`DATA_ROOT_MARK` instead (``/data/stsb:test`` -> ``$DATA/stsb:test``); other values as they are."""
    root = data_root.rstrip("/" + os.sep) or data_root
    if isinstance(value, str):
        if value == root or value.startswith((root + "/", root + os.sep)):
            return DATA_ROOT_MARK + value[len(root) :]
        return value
    if isinstance(value, dict):
        return {k: root_relative(v, data_root) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [root_relative(v, data_root) for v in value]
    return value


def spec_key(spec: dict[str, Any], data_root: str | None = None) -> str:
    """The key of a cell with ``spec`` (:meth:`Cell.spec`): its kind, seed and a hash of the spec
    without the :data:`EXECUTION_SETTINGS` nor the :data:`SETTINGS_ADDED_LATER` at their old value,
    its paths under ``data_root`` hashed relative to it (:func:`root_relative`; without
    ``data_root``, the absolute paths: the key before 2026-11-30)."""
    train = spec.get("train")
    decisive = spec
    if isinstance(train, dict):
        kept = {k: v for k, v in train.items() if k not in EXECUTION_SETTINGS and SETTINGS_ADDED_LATER.get(k, _ABSENT) != v}
        decisive = {**spec, "train": kept}
    if data_root:
        decisive = root_relative(decisive, data_root)
    digest = hashlib.sha256(json.dumps(decisive, sort_keys=True, default=str).encode()).hexdigest()[:16]
    seed = "" if spec.get("seed") is None else f"-s{spec['seed']}"
    return f"{spec['kind']}{seed}-{digest}"


def rename_to_current_keys(folder: Path, data_root: str | None = None) -> list[tuple[str, str]]:
    """Finished cells in ``folder`` whose file name is not their spec's key under the current rule (a
    key once hashed an execution setting, and until 2026-11-30 the data root's absolute path) get that
    name, with their dynamics; returns (old, new) pairs. A record without ``data_root`` whose spec
    names paths under ``data_root`` (the root of the run now) is taken to have run there and gains
    it. A cell whose current name is already taken, or whose record does not parse, is left alone."""
    renamed = []
    for path in sorted(folder.glob("*.json")):
        record = read_cell(path)
        spec = record.get("spec") if record else None
        if not isinstance(spec, dict) or "kind" not in spec:
            continue
        assert record is not None
        root = record.get("data_root")
        if not isinstance(root, str):
            root = data_root if data_root and root_relative(spec, data_root) != spec else None
        old, new = path.stem, spec_key(spec, root)
        if new == old or (folder / f"{new}.json").exists():
            continue
        updated = {**record, "cell": new, **({"data_root": root} if root else {})}
        dynamics = folder / f"{old}.dynamics"
        if record.get("dynamics") == dynamics.name and dynamics.is_dir() and not (folder / f"{new}.dynamics").exists():
            dynamics.rename(folder / f"{new}.dynamics")
            updated["dynamics"] = f"{new}.dynamics"
        atomic_write_json(folder / f"{new}.json", updated)
        path.unlink()
        renamed.append((old, new))
        logger.info("cell %s is now %s (its key follows the current rule)", old, new)
    if renamed:  # records that name a renamed cell (shared trainings, dynamics) follow it
        names = dict(renamed)
        for path in sorted(folder.glob("*.json")):
            record = read_cell(path)
            if not record:
                continue
            changed = dict(record)
            training = record.get("training")
            if isinstance(training, dict) and training.get("shared_with") in names:
                changed["training"] = {**training, "shared_with": names[training["shared_with"]]}
            dynamics = record.get("dynamics")
            if isinstance(dynamics, str) and dynamics.removesuffix(".dynamics") in names:
                changed["dynamics"] = f"{names[dynamics.removesuffix('.dynamics')]}.dynamics"
            if changed != record:
                atomic_write_json(path, changed)
    return renamed


def training_identity(cell: Cell) -> str | None:
    """What decides the model a training cell trains: every training setting (defaults filled in) with
    the objective's knobs resolved into its family's typed config, and the seed; None for a cell that
    does not train (or is skipped for lacking data). Cells of one identity (say the angle-weight table's w3 = 1, scored on the STS suite,
    and the objectives table's "all" row, which leaves the weight at the preset's 1, scored on STS-B)
    train one model between them; only their scoring differs. Not part of the cell key: it only groups
    the cells one run trains at once."""
    if cell.row.kind != "train" or _lacking(cell):
        return None
    from anglekit.losses.registry import objective_knobs, resolve_objective
    from anglekit.training.config import TrainConfig

    config = TrainConfig.from_dict(dict(cell.train), source=f"cell {cell.key()}")
    knobs = {knob.key for knob in objective_knobs()}
    settings = {key: value for key, value in config.flat().items() if key not in knobs and key != "objective"}
    resolved = resolve_objective(config.objective.name, config.objective.knobs)
    settings["objective"] = {"family": resolved.family.name, "config": dataclasses.asdict(resolved.config)}
    return hashlib.sha256(json.dumps({"train": settings, "seed": cell.seed}, sort_keys=True, default=str).encode()).hexdigest()[:16]


def make_cell(row: Row, task: Task, seed: int | None, protocol: Protocol, model: str, data_root: str | None = None) -> Cell:
    """The cell of ``row`` on ``task`` (``seed`` for a trained row), over the protocol's settings;
    ``data_root``: the folder its datasets are read from (hashed relative to it, :func:`spec_key`)."""
    settings = {k: v for k, v in row.settings.items() if not k.startswith("_") and v is not None}
    pooling = settings.pop("pooling", None) or protocol.start.pooling
    train: dict[str, Any] | None = None
    max_length = protocol.max_length  # every row of a table is scored at one length (a row may train at another)
    if row.kind == "train":
        if task.train is None:
            train = None
        else:
            # No test_data: train() would score the start too; the cell scores the trained model once.
            train = {**protocol.train_settings(), "model": model, "pooling": pooling, "train_data": task.train, "seed": seed, **settings}
            if (
                task.positive_threshold is not None
                and "positive_threshold" not in settings
                and str(settings.get("objective", "paper")).startswith(("paper", "ibn", "official"))
            ):
                train["positive_threshold"] = task.positive_threshold
    evaluation = {
        "kind": task.evaluation,
        "test": task.test,
        "max_length": max_length,
        "model": model if row.kind == "zero-shot" else None,
        "pooling": pooling,
        "batch_size": protocol.eval_batch_size,
        "device": protocol.device,
        **({"prompt": protocol.start.prompt} if protocol.start.prompt is not None else {}),
        **({"nested": list(task.nested)} if task.nested else {}),
    }
    return Cell(row, task, seed if row.kind == "train" else None, train, evaluation, data_root)


def read_cell(path: Path) -> dict[str, Any] | None:
    """A finished cell's record, or None when absent or unreadable (then it is run again)."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        logger.warning("cell %s cannot be read (%s); it runs again", path.name, exc)
        return None
    if not isinstance(record, dict) or record.get("status") not in ("done", "skipped") or not isinstance(record.get("metrics"), dict):
        logger.warning("cell %s is incomplete; it runs again", path.name)
        return None
    return record


def probe_steps(log: Path) -> dict[Any, dict[str, float]]:
    """Each logged step's probes (``probe_<name>``: the gradient norms per term, saturation,
    anisotropy, angles, ...) as ``{step: {"<name>": value}}``, in the log's order. A step logged twice
    (a resumed run redoing steps an interrupted one had logged) counts once, as last logged; lines
    that are not JSON, and values that are not finite numbers or lie outside what the probe can take
    (:func:`anglekit.training.dynamics.valid_range`, as ``plot-dynamics`` draws them), are skipped,
    with one warning that counts them."""
    from anglekit.training.dynamics import finite_number, within_range

    by_step: dict[Any, dict[str, float]] = {}
    bad_lines = bad_values = 0
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            bad_lines += bool(line.strip())
            continue
        logged = [(key, value) for key, value in (entry.items() if isinstance(entry, dict) else ()) if key.startswith("probe_") and value is not None]
        probes = {key[len("probe_") :]: float(value) for key, value in logged if finite_number(value) and within_range(key, value)}
        bad_values += len(logged) - len(probes)
        if probes:
            by_step.setdefault(entry.get("step"), {}).update(probes)
    if bad_lines or bad_values:
        logger.warning(
            "%s: skipped %d line(s) that are not JSON and %d probe value(s) that are not finite numbers in their range",
            log, bad_lines, bad_values,
        )  # fmt: skip
    return by_step


def gradient_steps(log: Path) -> dict[Any, dict[str, float]]:
    """The gradient probes of :func:`probe_steps` (``{step: {"grad_<term>": norm}}``): each objective
    term's gradient norm with respect to the pooled embeddings."""
    out = {}
    for step, probes in probe_steps(log).items():
        grads = {key: value for key, value in probes.items() if key.startswith("grad_")}
        if grads:
            out[step] = grads
    return out


def gradient_summary(log: Path) -> dict[str, float]:
    """Mean of each ``probe_grad_<term>`` over a run's probe records (:func:`gradient_steps`), as
    ``grad_<term>``; empty when the run logged none."""
    sums: dict[str, list[float]] = {}
    for probes in gradient_steps(log).values():
        for key, value in probes.items():
            sums.setdefault(key, []).append(value)
    return {key: sum(values) / len(values) for key, values in sums.items()}


def resume_step(run_dir: Path) -> int | None:
    """The step an interrupted cell's training continues from: its last complete checkpoint's (its last
    step when training finished and only the scoring was cut short); None when it starts afresh."""
    from anglekit.training.run import last_complete_checkpoint

    last = last_complete_checkpoint(run_dir) if run_dir.is_dir() else None
    return None if last is None else int(last.name.removeprefix("checkpoint-"))


def training_finished(run_dir: Path) -> bool:
    """Whether the training in ``run_dir`` finished (as ``train`` judges it when resumed: results and
    model saved, no checkpoint past them missing), so only the scoring of its cells is left."""
    from anglekit.training.run import finished_result

    return run_dir.is_dir() and finished_result(run_dir) is not None


def _lacking(cell: Cell) -> str | None:
    """What a cell lacks to run ("training" or "test" data), or None."""
    if cell.row.kind == "train" and cell.train is None:
        return "training"
    return "test" if cell.task.evaluation == "pairs" and cell.task.test is None else None


def _check_metrics(cell: Cell, metrics: dict[str, Any]) -> None:
    for name, value in metrics.items():
        if not isinstance(value, float) or value != value:
            raise DataError(f"cell {cell.key()}: metric {name} is not a number ({value!r})")


def _header(cell: Cell) -> dict[str, Any]:
    root = {"data_root": cell.data_root} if cell.data_root else {}
    return {"cell": cell.key(), "row": cell.row.name, "task": cell.task.name, "seed": cell.seed, "spec": cell.spec(), **root}


def adopt_legacy_run(cell: Cell, folder: Path) -> bool:
    """Give an interrupted run kept under ``cell``'s key before 2026-11-30 (:meth:`Cell.legacy_key`)
    its current name, so that it continues, with the dynamics it copied out if it was cut short while
    being scored; True when one was renamed."""
    legacy, key = cell.legacy_key(), cell.key()
    old, new = folder / f"{legacy}.run", folder / f"{key}.run"
    if legacy == key or not old.is_dir() or new.exists():
        return False
    old.rename(new)
    dynamics = folder / f"{legacy}.dynamics"
    if dynamics.is_dir() and not (folder / f"{legacy}.json").exists() and not (folder / f"{key}.dynamics").exists():
        dynamics.rename(folder / f"{key}.dynamics")
    logger.info("the interrupted run of cell %s is now %s", old.name, new.name)
    return True


def run_cell(
    cell: Cell,
    folder: Path,
    *,
    metric: str,
    data_root: str | None,
    keep_model: bool = False,
    quiet: bool = True,
    checkpoint_steps: int = 25,
    sharing: Sequence[tuple[Cell, str]] = (),
) -> dict[str, Any]:
    """Train (if the row trains) and score ``cell``; write and return its record.

    Training checkpoints every ``checkpoint_steps`` steps into ``<cell>.run``, so a cell cut short
    (in training or in scoring) continues from its last checkpoint when run again; the folder is
    deleted once the cell is scored unless ``keep_model``. ``sharing``: other cells (with their
    metric) of the same :func:`training_identity`, scored on this cell's model and written with it
    (their records name this cell in ``training.shared_with``); no record is written before every
    one is scored, so a cut-short run leaves the trained model to score them all again."""
    record: dict[str, Any] = _header(cell)
    started = time.perf_counter()
    lacking = _lacking(cell)
    if sharing and (cell.row.kind != "train" or lacking):
        raise ConfigError(f"cell {cell.key()} trains nothing, so no cell can share its training")
    if lacking:
        record.update(status="skipped", metrics={}, reason=f"no {lacking} data for {cell.task.name} (see the table's note and --help)")
        atomic_write_json(folder / f"{cell.key()}.json", record)
        return record
    if cell.row.kind == "glove":
        from anglekit.evaluation.baselines import GloveEncoder

        metrics = scoring.score(GloveEncoder(), cell.task, cell.evaluation, data_root, metric)
    elif cell.row.kind == "zero-shot":
        embedder, record["model_fingerprint"] = scoring.load_identified(cell.evaluation["model"], cell.evaluation)
        if cell.task.evaluation == "nested":
            memo = scoring.TextMemo(embedder, cell.evaluation["batch_size"])
            metrics = scoring.score_nested(cell.evaluation["model"], cell.task, cell.evaluation, data_root, memo)
        else:
            metrics = scoring.score(lambda t: embedder.encode(t, cell.evaluation["batch_size"]), cell.task, cell.evaluation, data_root, metric)
    else:
        return _run_training(cell, folder, metric=metric, data_root=data_root, keep_model=keep_model, quiet=quiet,
                             checkpoint_steps=checkpoint_steps, sharing=sharing, started=started)  # fmt: skip
    _check_metrics(cell, metrics)
    record.update(status="done", metrics=metrics, seconds=round(time.perf_counter() - started, 1))
    atomic_write_json(folder / f"{cell.key()}.json", record)
    return record


def _run_training(
    cell: Cell, folder: Path, *, metric: str, data_root: str | None, keep_model: bool, quiet: bool, checkpoint_steps: int,
    sharing: Sequence[tuple[Cell, str]], started: float,
) -> dict[str, Any]:  # fmt: skip
    from anglekit.training.card import hardware
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    identity = training_identity(cell)
    for other, _ in sharing:
        if other.key() == cell.key() or training_identity(other) != identity:
            raise ConfigError(f"cell {other.key()} does not train what cell {cell.key()} trains, so it cannot share its model")
    run_dir = folder / f"{cell.key()}.run"
    resumed = resume_step(run_dir)  # the folder's name is the spec's hash: its checkpoints are this cell's
    if resumed is not None:
        logger.info("cell %s continues from step %d of its interrupted run", cell.key(), resumed)
    if cell.train is None:  # run_cell skips a training row without training data before this
        raise ConfigError(f"cell {cell.key()} has no training data")
    config = TrainConfig.from_dict(
        {
            **cell.train,
            "output_dir": str(run_dir),
            **({"resume": True} if resumed is not None else {"overwrite_output_dir": True}),
            "save_steps": checkpoint_steps,
            "save_total_limit": 1,
            "quiet": quiet,
        },
        source=f"cell {cell.key()}",
    )
    with contextlib.redirect_stdout(sys.stderr):
        result = train(config)
    training: dict[str, Any] = {
        "steps": result.steps,
        "train_seconds": result.train_seconds,
        "rows_per_second": result.pairs_per_second,
        "unit": result.unit,
        "threads": result.threads,
        "peak_memory_mb": result.peak_memory_mb,
        "precision": result.precision,
        "hardware": hardware(),  # where the training finished (a resumed one may have begun elsewhere)
        **({"resumed_from_step": resumed} if resumed is not None else {}),
    }
    shared: dict[str, Any] = {}
    log = run_dir / "metrics.jsonl"
    if log.is_file():  # the training dynamics stay (plot-dynamics FOLDER/<cell>.dynamics)
        gradients = gradient_summary(log)
        if gradients:
            shared["gradients"] = gradients
        (folder / f"{cell.key()}.dynamics").mkdir(exist_ok=True)
        shutil.copyfile(log, folder / f"{cell.key()}.dynamics" / "metrics.jsonl")
        shared["dynamics"] = f"{cell.key()}.dynamics"
    if keep_model:
        shared["model_dir"] = str(result.model_dir)
    if cell.train.get("lora"):  # cells scored before this field was written ran their adapters unmerged
        shared["scoring"] = {"lora": "merged"}
    records, scorer = [], scoring.ModelScorer(str(result.model_dir), store=run_dir / "scoring")  # a cut-short scoring resumes
    for member, member_metric in [(cell, metric), *sharing]:
        scored_from = time.perf_counter()
        metrics = scorer(member.task, member.evaluation, data_root, member_metric)
        _check_metrics(member, metrics)
        own = member.key() == cell.key()
        seconds = time.perf_counter() - (started if own else scored_from)
        records.append({**_header(member), "training": training if own else {**training, "shared_with": cell.key()}, **shared,
                        "model_fingerprint": scorer.fingerprint(member.evaluation), "status": "done", "metrics": metrics,
                        "seconds": round(seconds, 1)})  # fmt: skip
    for member_record in records:  # written once every member is scored
        atomic_write_json(folder / f"{member_record['cell']}.json", member_record)
    for member, _ in sharing:  # an interrupted run of a member's own is the same training: not needed now
        shutil.rmtree(folder / f"{member.key()}.run", ignore_errors=True)
    if not keep_model:
        shutil.rmtree(run_dir, ignore_errors=True)
    return records[0]
