"""``reproduce()``: prepare the data a table needs, run its missing cells, write the reports."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import logging
import math
import os
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError
from anglekit.io.atomic import atomic_path, atomic_write_json, atomic_write_text
from anglekit.reproduce.cells import (
    Cell,
    adopt_legacy_run,
    make_cell,
    probe_steps,
    read_cell,
    rename_to_current_keys,
    resume_step,
    run_cell,
    training_finished,
    training_identity,
)
from anglekit.reproduce.charts import render_chart
from anglekit.reproduce.config import ReproduceConfig, expand_tables
from anglekit.reproduce.protocol import Protocol, make_protocol, prepare_start
from anglekit.reproduce.report import render_report, render_table, table_summary
from anglekit.reproduce.tables import TableSpec, build_tables, row_tasks

logger = logging.getLogger(__name__)


@dataclass
class ReproduceResult:
    """What a call did: the tables' summaries, the report's path, cells run and reused."""

    output_dir: Path
    report: Path
    summaries: list[dict[str, Any]]
    ran: int
    reused: int
    missing: int
    pending: list[Pending] = dataclasses.field(default_factory=list)
    """With ``report_only``: what a run would do, one entry per training (or untrained cell), in order."""


@dataclass(frozen=True)
class Pending:
    """Work a run has left: one training and every unfinished cell scored on it (the cell that trains
    first), or one cell that trains nothing."""

    cells: tuple[str, ...]
    """``table: row / task / seed N`` of each cell, the one that trains first."""
    keys: tuple[str, ...]
    trains: bool
    resume_step: int | None
    """The step its interrupted run continues from (None: from the start)."""
    trained: bool
    """Its training finished (results and model saved); only the scoring is left."""
    retrains: str | None
    """A finished cell of the same training: only the cells of one run share a training, so it trains again."""

    def describe(self) -> str:
        """One line: what runs, from where."""
        what = f"{self.cells[0]} ({self.keys[0]})"
        if len(self.cells) > 1:
            what += f", also scoring {'; '.join(self.cells[1:])}"
        if not self.trains:
            return f"{what}: trains nothing"
        if self.trained:
            state = "trained; its scoring continues"
        elif self.resume_step is not None:
            state = f"continues from step {self.resume_step}"
        else:
            state = "trains from the start"
        return f"{what}: {state}" + (
            f"; finished cell {self.retrains} trained the same model (only the cells of one run share a training)" if self.retrains else ""
        )


def data_root(given: str | None) -> Path:
    """The offline data folder by anglekit's one rule (:mod:`anglekit.data.root`): ``given``
    (``--data-root``), else ``$ANGLEKIT_DATA``, else the per-user data folder; never relative to
    the current directory."""
    from anglekit.data.root import explicit_or_default_root, missing_data_root

    if given is not None and not str(given).strip():
        raise ConfigError("--data-root is empty: give the folder holding stsb/, mrpc/, senteval/")
    try:
        found = explicit_or_default_root(given)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("data_root ", "--data-root ", 1)) from None
    if found is None:
        raise ConfigError(missing_data_root("anglekit reproduce", "--data-root"))
    return found.resolve()


@contextlib.contextmanager
def _data_env(root: Path) -> Iterator[None]:
    """Dataset names inside cells (snli:dev, mr+subj+flickr30k:train) resolve under ``root``."""
    from anglekit.data.root import DATA_ENV_VAR

    old = os.environ.get(DATA_ENV_VAR)
    os.environ[DATA_ENV_VAR] = str(root)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(DATA_ENV_VAR, None)
        else:
            os.environ[DATA_ENV_VAR] = old


def _write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _qnli_halves(root: Path, folder: Path) -> tuple[str, str]:
    """GLUE QNLI dev split by question into two halves (seed 0): train / test JSONL files."""
    train, test = folder / "qnli-dev-half-train.jsonl", folder / "qnli-dev-half-test.jsonl"
    if not (train.is_file() and test.is_file()):
        from anglekit.evaluation.nontransfer import load_qnli

        data = load_qnli(root / "qnli" / "dev.tsv")
        questions = sorted(set(data.text1))
        random.Random(0).shuffle(questions)
        first = set(questions[: len(questions) // 2])
        rows = [{"text1": a, "text2": b, "label": float(y)} for a, b, y in zip(data.text1, data.text2, data.labels, strict=True)]
        _write_jsonl(train, [r for r in rows if r["text1"] in first])
        _write_jsonl(test, [r for r in rows if r["text1"] not in first])
    return str(train), str(test)


def _nli_pairs(spec: str, root: Path, folder: Path) -> str:
    """NLI triplets as labelled pairs: (anchor, entailment, 1) and (anchor, contradiction, 0)."""
    from anglekit.data.training_data import resolve_triplets

    safe = "".join(c if c.isalnum() else "-" for c in spec)
    path = folder / f"nli-pairs-{safe}.jsonl"
    if not path.is_file():
        triplets = resolve_triplets(spec, data_root=root)
        if triplets.negative is None:
            raise ConfigError(f"--nli-data {spec!r} has no hard negatives; the AnglE row needs contradictions")
        rows = []
        for a, p, n in zip(triplets.anchor, triplets.positive, triplets.negative, strict=True):
            rows += [{"text1": a, "text2": p, "label": 1.0}, {"text1": a, "text2": n, "label": 0.0}]
        _write_jsonl(path, rows)
    return str(path)


def _llm_pairs(config: ReproduceConfig, protocol: Protocol, root: Path, folder: Path) -> tuple[str, str, int] | None:
    """STS-B train sentence1 texts labelled by the LLM (cached): pairs file, sentences file, pair count
    (None with --report-only when nothing was generated yet)."""
    from anglekit.data.catalog import load_stsb
    from anglekit.generation.pipeline import GenerationConfig, generate_pairs

    sentences = list(dict.fromkeys(load_stsb(root / "stsb", "train").text1))[: config.llm_sentences]
    sentence_file = folder / f"stsb-train-s1-first{len(sentences)}.txt"
    atomic_write_text(sentence_file, "\n".join(sentences) + "\n")
    pairs = folder / f"stsb-train-s1-first{len(sentences)}.pairs.jsonl"
    if not pairs.is_file():
        if config.report_only:
            return None
        generation = GenerationConfig(llms=[config.llm], device=protocol.device, progress=not config.quiet, cache_dir=str(folder / "generation-cache"))
        generate_pairs(sentences, pairs, generation)
    n = sum(1 for line in pairs.read_text(encoding="utf-8").splitlines() if line.strip())
    if n == 0:
        raise ConfigError(f"the LLM produced no pairs ({pairs}); see the generation summary")
    return str(pairs), str(sentence_file), n


def prepare_data(names: Sequence[str], config: ReproduceConfig, protocol: Protocol, root: Path, folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Data specs and table options for the tables in ``names`` (files written once under ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "stsb": str(root / "stsb"),
        "mrpc": str(root / "mrpc"),
        "nli": config.nli_data,
        "github": config.github_issues,
        "unsup": config.unsup_corpus,
        "qnli-train": None,
        "qnli-test": None,
        "nli-pairs": None,
    }
    options: dict[str, Any] = {"unsup_steps": config.unsup_steps}
    if "non-transfer" in names:
        data["qnli-train"], data["qnli-test"] = _qnli_halves(root, folder)
    if "transfer-sts" in names:
        data["nli-pairs"] = _nli_pairs(config.nli_data, root, folder)
    llm = _llm_pairs(config, protocol, root, folder) if "llm-supervised" in names else None
    if llm is not None:
        data["llm-pairs"], data["llm-sentences"], n = llm
        options["llm_steps"] = math.ceil(n / protocol.batch_size) * max(1, math.ceil(protocol.epochs)) if protocol.max_steps < 0 else protocol.max_steps
    return data, options


def plan_cells(table: TableSpec, seeds: Sequence[int], protocol: Protocol, model: str, data_root: str | None = None) -> list[tuple[Cell, str]]:
    """Every (cell, metric name) of ``table``; untrained rows once per distinct test; ``data_root``:
    the folder the table's data was taken from (:func:`~anglekit.reproduce.cells.make_cell`)."""
    out: list[tuple[Cell, str]] = []
    for row in table.rows:
        seen: set[tuple[str, str | None]] = set()
        for task in row_tasks(table, row):
            metric = task.metric_prefix or table.metrics[0]
            if row.kind != "train":
                if (task.evaluation, task.test) in seen:
                    continue
                seen.add((task.evaluation, task.test))
                out.append((make_cell(row, task, None, protocol, model, data_root), metric))
                continue
            for seed in seeds:
                out.append((make_cell(row, task, seed, protocol, model, data_root), metric))
    return out


def _training_groups(todo: Iterable[Cell]) -> dict[str, list[Cell]]:
    """Unfinished cell key -> every unfinished cell (itself included, in plan order) that trains the
    same model (:func:`~anglekit.reproduce.cells.training_identity`); cells that train nothing are absent."""
    by_identity: dict[str, list[Cell]] = {}
    for cell in todo:
        identity = training_identity(cell)
        if identity is not None:
            by_identity.setdefault(identity, []).append(cell)
    return {cell.key(): members for members in by_identity.values() for cell in members}


def _finished_trainings(planned: Sequence[tuple[str, list[tuple[Cell, str]]]], todo: dict[str, Cell]) -> dict[str, str]:
    """Training identity -> the first finished cell of the plan that trained it (or was scored on it)."""
    out: dict[str, str] = {}
    for _, cells in planned:
        for cell, _ in cells:
            identity = None if cell.key() in todo else training_identity(cell)
            if identity is not None:
                out.setdefault(identity, cell.key())
    return out


def pending_work(planned: Sequence[tuple[str, list[tuple[Cell, str]]]], todo: dict[str, Cell], cells_dir: Path) -> list[Pending]:
    """What a run of ``planned`` would do with its unfinished cells ``todo``, in the order it would."""
    tables = {}
    for name, cells in planned:
        for cell, _ in cells:
            tables.setdefault(cell.key(), name)
    groups, finished = _training_groups(todo.values()), _finished_trainings(planned, todo)
    out: list[Pending] = []
    seen: set[str] = set()
    for _, cells in planned:
        for cell, _ in cells:
            if cell.key() not in todo or cell.key() in seen:
                continue
            members = groups.get(cell.key(), [cell])
            seen.update(c.key() for c in members)
            lead = _lead(members, cells_dir)
            ordered = [lead, *(c for c in members if c.key() != lead.key())]
            identity = training_identity(lead)
            run_dir = cells_dir / f"{lead.key()}.run"
            out.append(Pending(
                cells=tuple(f"{tables[c.key()]}: {c.row.name} / {c.task.name}" + (f" / seed {c.seed}" if c.seed is not None else "") for c in ordered),
                keys=tuple(c.key() for c in ordered), trains=identity is not None,
                resume_step=resume_step(run_dir) if identity is not None else None,
                trained=identity is not None and training_finished(run_dir),
                retrains=finished.get(identity) if identity is not None else None,
            ))  # fmt: skip
    return out


def _lead(members: Sequence[Cell], cells_dir: Path) -> Cell:
    """The member whose interrupted run is furthest on (the first one when none is) trains for all."""
    steps = [resume_step(cells_dir / f"{c.key()}.run") for c in members]
    best = max(range(len(members)), key=lambda i: (-1 if steps[i] is None else steps[i], -i))
    return members[best]


def _lock(cells_dir: Path, name: str) -> Any:
    """The file lock ``cells_dir/.locks/<name>.lock`` that the processes sharing ``cells_dir`` take."""
    from filelock import FileLock

    (cells_dir / ".locks").mkdir(exist_ok=True)
    return FileLock(cells_dir / ".locks" / f"{name}.lock")


def _preparing(cells_dir: Path) -> Any:
    """The lock under which a process prepares what every process of ``cells_dir`` shares (blocking)."""
    return _lock(cells_dir, "prepare")


class _Work:
    """The missing cells of one call: each runs with the others of its training (trained once), with
    progress on stderr; ``ran`` holds the keys run so far.

    Several processes may work on one output folder at once: each training (or cell that trains
    nothing) is run under a lock (``cells/.locks/``, an OS file lock, released when its process ends
    however it ends), a process passes over what another holds and takes the next, and at the end
    waits for what it passed over, running it itself if the holder stopped before finishing it."""

    def __init__(self, planned: Sequence[tuple[str, list[tuple[Cell, str]]]], todo: dict[str, Cell], cells_dir: Path, config: ReproduceConfig,
                 root: str, *, groups: bool) -> None:  # fmt: skip
        self.metrics: dict[str, str] = {}
        for _, cells in planned:  # a cell planned by two tables is scored under the first one's metric name
            for cell, metric in cells:
                self.metrics.setdefault(cell.key(), metric)
        self.groups = _training_groups(todo.values()) if groups else {}
        self.finished = _finished_trainings(planned, todo) if groups else {}
        self.cells_dir, self.config, self.root, self.todo = cells_dir, config, root, todo
        self.ran: set[str] = set()
        self.timed: dict[bool, list[float]] = {True: [], False: []}
        """Seconds of each call of this run that trained (True) and of each that only scored (False)."""

    def run(self, cell: Cell, table: str) -> dict[str, Any]:
        """Run ``cell`` (with the unfinished cells of its training) and return its record."""
        members = [c for c in self.groups.get(cell.key(), [cell]) if c.key() not in self.ran and not self._done(c)]  # another process may have scored some
        lead = _lead(members, self.cells_dir)
        sharing = [(c, self.metrics[c.key()]) for c in members if c.key() != lead.key()]
        self._announce(table, lead, sharing, len(members))
        config = self.config
        trains = training_identity(lead) is not None and not training_finished(self.cells_dir / f"{lead.key()}.run")
        started = time.perf_counter()
        run_cell(lead, self.cells_dir, metric=self.metrics[lead.key()], data_root=self.root, keep_model=config.keep_models, quiet=config.quiet,
                 checkpoint_steps=config.checkpoint_steps, sharing=sharing)  # fmt: skip
        self.timed[trains].append(time.perf_counter() - started)
        self.ran.update(c.key() for c in members)
        record = read_cell(self.cells_dir / f"{cell.key()}.json")
        if record is None:
            raise ConfigError(f"cell {cell.key()} was run but its record cannot be read back from {self.cells_dir}")
        return record

    def run_all(self, planned: Sequence[tuple[str, list[tuple[Cell, str]]]], done: Callable[[str, list[tuple[Cell, str]]], None], *,
                run: bool = True) -> None:  # fmt: skip
        """Run every missing cell of ``planned`` in its order (none unless ``run``), passing over those
        another process holds, and call ``done`` for each table once its cells are done; then wait for
        the cells passed over (running any its holder left unfinished) and finish their tables."""
        held: dict[str, list[Cell]] = {}
        for name, cells in planned:
            for cell, _ in cells:
                if run and cell.key() in self.todo and not self._take(cell, name, wait=False):
                    held.setdefault(name, []).append(cell)
            if name not in held:
                done(name, cells)
        for name, cells in planned:
            for cell in held.get(name, []):
                if not self._done(cell):
                    print(f"[reproduce {name}] waiting for cell {cell.key()} ({cell.row.name}), which another process is running", file=sys.stderr, flush=True)
                    self._take(cell, name, wait=True)
            if name in held:
                done(name, cells)

    def _take(self, cell: Cell, table: str, *, wait: bool) -> bool:
        """Run ``cell`` (with its training's other cells) under its training's lock unless it is done;
        False when another process holds the lock and ``wait`` is off."""
        from filelock import Timeout

        if cell.key() in self.ran or self._done(cell):
            return True
        lock = self.lock(cell)
        try:
            lock.acquire(timeout=-1 if wait else 0)
        except Timeout:
            return False
        try:
            if not self._done(cell):  # another process may have finished it before the lock was ours
                self.run(cell, table)
        finally:
            lock.release()
        return True

    def lock(self, cell: Cell) -> Any:
        """The lock of ``cell``'s training (of the cell itself when it trains nothing): one file per
        training in ``cells/.locks/``, so processes planning different tables still train it once."""
        return _lock(self.cells_dir, hashlib.sha256((training_identity(cell) or cell.key()).encode()).hexdigest()[:20])

    def _done(self, cell: Cell) -> bool:
        return read_cell(self.cells_dir / f"{cell.key()}.json") is not None

    def _announce(self, table: str, lead: Cell, sharing: Sequence[tuple[Cell, str]], count: int) -> None:
        done = len(self.ran)
        left = [training_identity(c) for c in self.todo.values() if c.key() not in self.ran and not (self.cells_dir / f"{c.key()}.json").is_file()]
        trainings = len({i for i in left if i is not None}) if self.groups else sum(i is not None for i in left)
        eta = time_left(trainings, sum(i is None for i in left), self.timed)
        also = f"; its training also scores {', '.join(f'{c.row.name} / {c.task.name}' for c, _ in sharing)}" if sharing else ""
        again = self.finished.get(training_identity(lead) or "")
        if again is not None:
            also += f"; finished cell {again} trained the same model, trained again here (only the cells of one run share a training)"
        span = f"{done + 1}" if count == 1 else f"{done + 1}-{done + count}"
        seed = f" / seed {lead.seed}" if lead.seed is not None else ""
        print(f"[reproduce {table}] cell {span}/{len(self.todo)}: {lead.row.name} / {lead.task.name}{seed}{also}{eta}", file=sys.stderr, flush=True)


def time_left(trainings: int, others: int, timed: dict[bool, list[float]]) -> str:
    """The progress line's estimate of what is left (``trainings``, and ``others`` cells that train
    nothing), from the mean time of each kind this run has timed (``timed[True]``: the calls that
    trained, ``timed[False]``: those that only scored); a kind not timed yet is named instead of
    guessed, since a training takes hundreds of times a zero-shot scoring."""
    if not (timed[True] or timed[False]):
        return ""
    untimed = [
        what for what, count, kind in ((f"{trainings} training(s)", trainings, True), (f"{others} scoring(s)", others, False)) if count and not timed[kind]
    ]
    if untimed:
        return f", time left known once a cell of each kind has run ({' and '.join(untimed)} left, not timed yet)"
    seconds = sum(count * sum(timed[kind]) / len(timed[kind]) for count, kind in ((trainings, True), (others, False)) if count)
    return f", about {seconds / 60:.0f} min left"


def write_table(out: Path, table: TableSpec, records: Sequence[dict[str, Any]], protocol: Protocol, seeds: Sequence[int], cells_dir: Path) -> dict[str, Any]:
    """Summarise one table's finished cells and write ``<table>.json``, ``<table>.md`` and its chart
    ``<table>.png`` (left out, with a note, without matplotlib); returns the summary. Each cell's
    probes per step (gradient shares, saturation) are read from its kept dynamics log."""
    records = [{**r, "probe_steps": _probe_steps(cells_dir, r)} for r in records]
    summary = table_summary(table, records)
    document = {**summary, "protocol": protocol.describe(), "seeds": list(seeds), "cells": [r["cell"] for r in records]}
    atomic_write_json(out / f"{table.name}.json", document)
    atomic_write_text(out / f"{table.name}.md", render_table(summary))
    if importlib.util.find_spec("matplotlib") is None:
        print(f"[reproduce {table.name}] no chart: matplotlib is missing (pip install 'anglekit[eval]')", file=sys.stderr)
        return summary
    chart = render_chart(summary)
    if chart is not None:
        with atomic_path(out / f"{table.name}.png") as tmp:
            tmp.write_bytes(chart)
    return summary


def _probe_steps(cells_dir: Path, record: dict[str, Any]) -> dict[Any, dict[str, float]]:
    """A cell's probes per step, from ``<cells>/<its dynamics>/metrics.jsonl`` ({} without one)."""
    dynamics = record.get("dynamics")
    log = cells_dir / dynamics / "metrics.jsonl" if isinstance(dynamics, str) and dynamics else None
    return probe_steps(log) if log is not None and log.is_file() else {}


def reproduce(tables: Sequence[str], config: ReproduceConfig | None = None, *, command: str | None = None) -> ReproduceResult:
    """Run (or resume) the cells of ``tables`` and write ``<output_dir>/report.md``, one markdown and one
    JSON summary per table, and one JSON per cell under ``cells/``."""
    config = config or ReproduceConfig()
    names = expand_tables(list(tables))
    device = None if config.device in (None, "auto") else config.device  # auto: the cells' default (None keeps cell keys)
    if device is not None and not config.report_only:
        from anglekit.model.devices import check_device

        try:
            check_device(device)  # before any folder is made
        except ConfigError as exc:
            raise ConfigError(str(exc).replace(f"device {device!r}", f"--device {device}", 1)) from None
    protocol = make_protocol(
        config.preset,
        start=config.start,
        model=config.model,
        max_length=config.max_length,
        batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        epochs=config.epochs,
        max_steps=config.max_steps,
        device=device,
    )
    root = data_root(config.data_root)  # before anything is written
    out = Path(config.output_dir)
    cells_dir = out / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    with _preparing(cells_dir):  # one process at a time renames, prepares the data and the start
        for old, new in rename_to_current_keys(cells_dir, str(root)):
            print(
                f"[reproduce] cell {old} is now {new} (its key follows the current rule: no execution settings, data paths from the data root)", file=sys.stderr
            )
        data, options = prepare_data(names, config, protocol, root, out / "data")
    specs = build_tables(data, options)
    reused = 0
    summaries: dict[str, dict[str, Any]] = {}
    with _data_env(root):
        with _preparing(cells_dir):  # and adopts legacy runs
            model = protocol.model_name() if config.report_only else prepare_start(protocol, out)
            planned = [(name, plan_cells(specs[name], config.seeds, protocol, model, str(root))) for name in names]
            for _, cells in planned:
                for cell, _ in cells:
                    adopt_legacy_run(cell, cells_dir)
        todo = {c.key(): c for _, cells in planned for c, _ in cells if read_cell(cells_dir / f"{c.key()}.json") is None}
        pending = pending_work(planned, todo, cells_dir) if config.report_only else []
        missing = len(todo) if config.report_only else 0
        work = _Work(planned, todo, cells_dir, config, str(root), groups=not config.report_only)

        def summarise(name: str, cells: list[tuple[Cell, str]]) -> None:  # as soon as a table's cells are done
            nonlocal reused
            records, found = _table_records(cells, cells_dir, work.ran, required=not config.report_only)
            reused += found
            summaries[name] = write_table(out, specs[name], records, protocol, config.seeds, cells_dir)

        work.run_all(planned, summarise, run=not config.report_only)
    command = command or f"anglekit reproduce {' '.join(names)} --seeds {' '.join(map(str, config.seeds))} --output-dir {out}"
    report = out / "report.md"
    ordered = [summaries[name] for name in names]
    atomic_write_text(report, render_report(ordered, protocol, config.seeds, command))
    return ReproduceResult(out, report, ordered, len(work.ran), reused, missing, pending)


def _table_records(cells: list[tuple[Cell, str]], cells_dir: Path, ran: set[str], *, required: bool) -> tuple[list[dict[str, Any]], int]:
    """A table's finished cells' records, each named by its row and task here (a cell shared with
    another row or table), and how many of them this call did not run; a missing one is a
    ConfigError when ``required`` (every cell has run)."""
    records, reused = [], 0
    for cell, _metric in cells:
        record = read_cell(cells_dir / f"{cell.key()}.json")
        if record is None and required:
            raise ConfigError(f"cell {cell.key()} was run but its record cannot be read back from {cells_dir}")
        if record is not None:
            reused += cell.key() not in ran
            records.append({**record, "row": cell.row.name, "task": cell.task.name})
    return records, reused
