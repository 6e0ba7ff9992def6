"""One training run end to end: load, read data, evaluate, train, save, report."""

from __future__ import annotations

import json
import logging
import resource
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from anglekit.errors import ConfigError
from anglekit.io.atomic import atomic_write_json, check_writable
from anglekit.training.config import TrainConfig, TrainerSection
from anglekit.training.precision import describe, resolve_precision
from anglekit.training.roles import NO_ROLE, apply_column_roles, check_roles_used
from anglekit.training.tasks import ResolvedObjective, TrainingTask, default_positive_threshold, resolve

if TYPE_CHECKING:  # pragma: no cover
    from transformers import TrainerCallback

logger = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What a run did. ``pairs_per_second`` counts training rows of the task's ``unit`` (pairs,
    sentences or triplets) per second of the training loop (``train_seconds``; the tokenizing
    before it is ``tokenize_seconds``); the name stays for the files written before units."""

    output_dir: Path
    model_dir: Path
    steps: int
    train_seconds: float
    pairs_per_second: float
    peak_memory_mb: float
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    best_checkpoint: str | None = None
    unit: str = "pairs"
    threads: int | None = None
    """CPU threads torch used (``torch.get_num_threads()``)."""
    tokenize_seconds: float | None = None
    """Seconds spent tokenizing the training data before the training loop (not in ``train_seconds``);
    None in results written before it was measured."""
    already_complete: bool = False
    """True when ``--resume`` found the run finished and changed nothing."""
    precision: str | None = None
    """The arithmetic the run used (fp32, bf16, fp16; what ``auto`` chose); None in older results."""
    peak_gpu_memory_mb: float | None = None
    """Peak GPU memory torch allocated up to the end of training (``torch.cuda.max_memory_allocated``,
    before the test scoring); None where the run did not use CUDA."""
    speed_swaps: dict[str, Any] | None = None
    """The speed swaps as applied (:meth:`anglekit.training.speed.SpeedPlan.record`: applied, skipped
    and why); None in older results."""
    guide_masked: float | None = None
    """With ``--guide``: the share of in-batch negatives the guide left out, per batch, averaged over
    the run's training batches; None without a guide."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "output_dir": str(self.output_dir),
            "model_dir": str(self.model_dir),
            "steps": self.steps,
            "train_seconds": self.train_seconds,
            "tokenize_seconds": self.tokenize_seconds,
            "pairs_per_second": self.pairs_per_second,
            "unit": self.unit,
            "threads": self.threads,
            "peak_memory_mb": self.peak_memory_mb,
            "before": self.before,
            "after": self.after,
            "best_checkpoint": self.best_checkpoint,
            "precision": self.precision,
            "peak_gpu_memory_mb": self.peak_gpu_memory_mb,
            "speed_swaps": self.speed_swaps,
            "guide_masked": self.guide_masked,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainResult:
        """A result read back from ``results.json`` (keys added later take their defaults)."""
        known = {f for f in cls.__dataclass_fields__ if f != "already_complete"}
        values = {k: v for k, v in data.items() if k in known}
        values["output_dir"], values["model_dir"] = Path(values["output_dir"]), Path(values["model_dir"])
        return cls(**values)

    def table(self) -> str:
        rows = [("", "spearman x100", "pearson x100")]
        for name, scores in (("before", self.before), ("after", self.after)):
            if scores:
                rows.append((name, f"{scores['spearman']:.2f}", f"{scores['pearson']:.2f}"))
        lines = [f"{a:<8} {b:>14} {c:>14}" for a, b, c in rows] if len(rows) > 1 else []
        threads = f", {self.threads} CPU threads" if self.threads else ""
        threads += f", {self.precision}" if self.precision else ""
        tokenize = f" (+ {self.tokenize_seconds:.1f} s tokenizing)" if self.tokenize_seconds is not None else ""
        lines += [
            f"steps {self.steps}, train time {self.train_seconds:.1f} s{tokenize}, {self.pairs_per_second:.1f} {self.unit}/s{threads}, "
            f"peak memory {self.peak_memory_mb:.0f} MB",
            f"model saved to {self.model_dir}",
        ]
        if self.guide_masked is not None:
            lines.insert(-1, f"the guide left out {100 * self.guide_masked:.2f}% of the in-batch negatives (mean per batch)")
        if self.already_complete:
            lines.insert(0, f"the run in {self.output_dir} is already complete (results.json); nothing was changed")
        return "\n".join(lines)


def peak_memory_mb() -> float:
    """Peak resident memory of this process (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _cuda_in_use(device: str | None) -> bool:
    import torch

    return torch.cuda.is_available() and device != "cpu"


def last_complete_checkpoint(output_dir: Path) -> Path | None:
    """The newest ``checkpoint-N`` whose trainer state parses and whose weights exist.

    A run killed while saving leaves a half-written folder; it is skipped with a warning.
    """
    candidates = []
    for path in output_dir.glob("checkpoint-*"):
        suffix = path.name.removeprefix("checkpoint-")
        if path.is_dir() and suffix.isdigit():
            candidates.append((int(suffix), path))
    for _, path in sorted(candidates, reverse=True):
        # transformers writes trainer_state.json last, after the weights and optimizer state.
        try:
            json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            logger.warning("skipping incomplete checkpoint %s (%s)", path, exc)
            continue
        if any(path.glob("model*.safetensors")) or any(path.glob("*.bin")):
            return path
        logger.warning("skipping incomplete checkpoint %s (no weights)", path)
    return None


def _data_name(flag: str, spec: Any, pairs: Any) -> str:
    """How an error names a pair dataset: the flag, the spec and the file it resolved to."""
    source = str(getattr(pairs, "source", "") or "")
    return f"{flag} {spec}" + (f" ({source})" if source and source != str(spec) else "")


def _prepare_output_dir(config: TrainerSection) -> str | None:
    """Return the checkpoint to resume from (or None); refuse to mix a new run into an old one."""
    out = Path(config.output_dir)
    last = last_complete_checkpoint(out) if out.is_dir() else None
    if config.resume:
        if last is None:
            logger.warning("--resume: no checkpoint in %s, starting from the beginning", out)
            (out / "metrics.jsonl").unlink(missing_ok=True)
            return None
        return str(last)  # JsonlMetricsCallback drops what was logged past it when training begins
    if any(out.glob("checkpoint-*")) or (out / "metrics.jsonl").exists():
        if not config.overwrite_output_dir:
            raise ConfigError(f"{out} already holds a run; pass --resume to continue it or --overwrite-output-dir to replace it")
        for child in out.glob("checkpoint-*"):
            shutil.rmtree(child)
        (out / "metrics.jsonl").unlink(missing_ok=True)
    return None


def _check_resumed_ese_target(out: Path, config: TrainConfig) -> None:
    """Resuming an ESE run whose ``train_config.json`` says it began with another compression target
    than this config's: a ConfigError when the target was left unset (its default changed from
    ``angle-emb`` to ``unit`` on 2026-11-30, and a run begun before recorded no target), a warning
    when it was given. Nothing is checked when the file is missing or unreadable."""
    section = config.objective
    if not section.ese:
        return
    try:
        before = json.loads((out / "train_config.json").read_text(encoding="utf-8"))
        nesting, train = before.get("nesting"), before.get("train")
        if "nesting" in before:  # recorded as it ran (since 2026-11-30)
            began = nesting.get("target") if isinstance(nesting, dict) and nesting.get("kind") == "ese" else None
        else:  # before: an unset target ran angle-emb's
            began = (train.get("ese_target") or "angle-emb") if train.get("ese") else None
    except (OSError, ValueError, AttributeError):
        return
    now = section.ese_config().target
    if began is None or began == now:
        return
    if section.ese_target is None:
        raise ConfigError(
            f"{out} began with ESE's compression target {began!r} and would resume with the default {now!r} "
            f"(the default changed on 2026-11-30): pass --ese-target {began} to continue it as it began"
        )
    logger.warning("%s began with ESE's compression target %r; it resumes with %r as given", out, began, now)


def finished_result(out: Path) -> TrainResult | None:
    """The result of the run in ``out`` when it finished: results.json and the model are there and
    no checkpoint is missing after them (a run cut back to an earlier checkpoint is not finished).
    Its folders are ``out`` and ``out/model`` whatever results.json says (the run may have moved)."""
    results = out / "results.json"
    if not (results.is_file() and (out / "model").is_dir()):
        return None
    try:
        result = TrainResult.from_dict(json.loads(results.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{results}: the run looks complete but its results cannot be read ({exc})") from None
    last = last_complete_checkpoint(out)
    if last is not None and int(last.name.removeprefix("checkpoint-")) < result.steps:
        return None
    # Where the run is now: a finished run moved or copied elsewhere names its new folder.
    return replace(result, already_complete=True, output_dir=out, model_dir=out / "model")


def _schedule(config: TrainerSection, evaluating: bool) -> dict[str, Any]:
    """Evaluation and checkpoint cadence for TrainingArguments, checked up front.

    With dev data the best checkpoint is kept, which needs checkpoints to fall on evaluations.
    """
    if not evaluating:
        return {"eval_strategy": "no", "save_strategy": "steps", "save_steps": config.save_steps or 500}
    eval_steps = config.eval_steps or config.save_steps
    if eval_steps is None:
        return {"eval_strategy": "epoch", "save_strategy": "epoch"}
    save_steps = config.save_steps or eval_steps
    if save_steps % eval_steps != 0:
        raise ConfigError(f"save_steps ({save_steps}) must be a multiple of eval_steps ({eval_steps}) so that the best checkpoint (by dev Spearman) is on disk")
    return {"eval_strategy": "steps", "eval_steps": eval_steps, "save_strategy": "steps", "save_steps": save_steps}


def load_embedder(config: TrainConfig, device: str | None) -> Any:
    """The embedder to train: the model (or the base + ``init_adapters``), with the run's prompt,
    pooling, attention, dtype and k-bit settings, memory helpers, and LoRA adapters when asked."""
    from anglekit.llm.lora import unwrap
    from anglekit.model.embedder import Embedder

    load = {**config.model.load_kwargs(), "device": device}
    lora = config.lora
    if lora.init_adapters:
        embedder = Embedder.from_pretrained(lora.init_adapters, base_model=config.model.name or None, **load)
        if not embedder.has_lora:
            raise ConfigError(f"init_adapters {lora.init_adapters}: no LoRA adapters there (no adapter_config.json)")
    else:
        embedder = Embedder.from_pretrained(config.model.name, **load)
    base = unwrap(embedder.backbone)
    from anglekit.llm.attention import apply_attention

    attention = apply_attention(base, config.model.attn_implementation, embedder.device.type, unpad=config.model.unpad)
    logger.info("attention: %s (asked: %s%s)", attention, config.model.attn_implementation, ", unpadded" if config.model.unpad else "")
    if config.model.load_in_kbit is not None:
        from anglekit.llm.quantization import prepare_for_kbit_training

        prepare_for_kbit_training(base, gradient_checkpointing=config.trainer.gradient_checkpointing)
    elif config.trainer.gradient_checkpointing:
        from anglekit.training.checkpointing import enable_gradient_checkpointing

        enable_gradient_checkpointing(base, config.trainer.checkpoint_every)
    if lora.enabled:
        settings = lora.settings()
        embedder.add_lora(rank=settings.rank, alpha=settings.alpha, dropout=settings.dropout, target_modules=settings.target_modules)
    elif lora.init_adapters:
        embedder.train_adapters()
    if config.objective.ese:  # every layer is trained: the saved model may exit early (the server's per-request layer)
        embedder.config.early_exit = True
    if embedder.has_lora:
        trainable = sum(p.numel() for p in embedder.parameters() if p.requires_grad)
        total = sum(p.numel() for p in embedder.parameters())
        logger.info("LoRA: training %d of %d parameters (%.2f%%)", trainable, total, 100.0 * trainable / max(1, total))
    return embedder


def nest_objective(objective: Any, config: TrainConfig) -> Any:
    """The objective wrapped for nested dimensions (Matryoshka) or ESE when the config asks for it."""
    matryoshka, ese = config.objective.matryoshka_config(), config.objective.ese_config()
    if matryoshka is not None:
        from anglekit.losses.matryoshka import MatryoshkaObjective

        return MatryoshkaObjective(objective, matryoshka)
    if ese is not None:
        from anglekit.losses.ese import ESEObjective

        return ESEObjective(objective, ese)
    return objective


def check_nested(config: TrainConfig, objective: ResolvedObjective, hidden: int | None, source: str) -> None:
    """A ConfigError when matryoshka_dims or ese_compression_size do not fit the model's dimension
    ``hidden`` (or ``objective``'s own size check, the angle term's even split)."""
    section = config.objective
    sizes: list[int] = []
    what = ""
    if section.matryoshka_dims is not None:
        sizes, what = list(section.matryoshka_dims), "matryoshka_dims"
    elif section.ese:
        sizes, what = [section.ese_config().compression_size], "ese_compression_size"
    if not sizes:
        return
    if hidden is not None and max(sizes) > hidden:
        raise ConfigError(f"{source}: {what} {sizes}: {max(sizes)} is larger than the model's embedding dimension {hidden}")
    problem = objective.size_problem(sizes, "size")
    if problem is not None:
        raise ConfigError(f"{what} {sizes}: {problem}")


@dataclass
class DatasetPlan:
    """One training dataset of a run, checked before anything is loaded: its name (None for the
    single ``train_data``), entry, task and its objective, resolved once (preset, overrides, config)."""

    name: str | None
    entry: Any
    task: TrainingTask
    resolved: ResolvedObjective
    weight: float = 1.0

    @property
    def objective(self) -> str:
        """The objective preset's name."""
        return self.resolved.name

    @property
    def overrides(self) -> dict[str, Any]:
        """The objective config's overrides (by field name) from the knobs given."""
        return dict(self.resolved.overrides)


def dataset_plans(config: TrainConfig) -> list[DatasetPlan]:
    """The run's datasets with their tasks and objective overrides: one for a single ``train_data``;
    with several, each entry's objective (default: the run's) gets the objective settings its
    family has, and a setting that applies to no entry's objective is a ConfigError naming its flag."""
    entries = config.data.datasets
    if entries is None:
        task, resolved = resolve(config.objective, config.data.text_column)
        return [DatasetPlan(None, None, task, resolved)]
    from anglekit.losses.registry import applicable_knobs

    given = {key: value for key, value in config.objective.knobs.items() if value is not None}
    used: set[str] = set()
    plans = []
    readers = False
    for entry in entries:
        name = entry.objective or config.objective.name
        knobs = applicable_knobs(name, given)  # of its family; --guide only where there are in-batch negatives
        used |= set(knobs)
        try:
            section = replace(config.objective, name=name, knobs=knobs)
        except ConfigError as exc:
            raise ConfigError(f"train_data entry {entry.name!r}: {exc}") from None
        task, resolved = resolve(section, None)
        readers = readers or task.reads_text_column
        plans.append(DatasetPlan(entry.name, entry, task, resolved, entry.weight))
    unused = [key for key in given if key not in used]
    if unused:
        flags = ", ".join("--" + key.replace("_", "-") for key in unused)
        raise ConfigError(f"{flags} applies to none of the objectives of train_data ({', '.join(sorted({p.objective for p in plans}))})")
    if config.data.text_column is not None and not readers:
        raise ConfigError("--text-column applies to sentence data, and no train_data entry has a sentence objective")
    return plans


def check(config: TrainConfig) -> list[DatasetPlan]:
    """Everything that can be checked before data or a model is loaded: the required settings,
    each dataset's task and its objective resolved once, the device, that output_dir can be
    written, and the model (complete files, sizes that fit the objective and max_length);
    the datasets' plans (:func:`dataset_plans`), which the run hands down."""
    import torch

    from anglekit.model.checks import check_max_length
    from anglekit.model.loading import inspect_model

    config.require_inputs()
    plans = dataset_plans(config)
    for plan in plans:
        plan.task.check_data_file(config.data.train_data if plan.entry is None else plan.entry.data, plan.objective)
        if config.trainer.batch_size < plan.task.min_batch_size:
            raise ConfigError(f"the objective {plan.objective!r} needs batch_size >= {plan.task.min_batch_size} (in-batch negatives)")
    if config.trainer.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device cuda: no CUDA GPU is available here; use --device cpu, or --device auto to take one when there is")
    check_writable(config.trainer.output_dir, folder=True)
    model = config.model
    name = model.name or None
    if name is not None and not config.lora.init_adapters:
        facts = inspect_model(name, gguf_file=model.gguf_file, revision=model.revision, trust_remote_code=model.trust_remote_code)
        for plan in plans:
            plan.task.check_model(plan.resolved, facts, name)
            check_nested(config, plan.resolved, facts.hidden_size, name)
        if model.max_length is not None:
            check_max_length(model.max_length, facts, name)
    return plans


def _named_dataset(config: TrainConfig, train_dataset: Any) -> TrainConfig:
    """``config`` with ``train_data`` naming the in-memory ``train_dataset`` when one is given."""
    if train_dataset is None:
        return config
    if config.data.train_data:
        raise ConfigError("give train_data or train_dataset, not both")
    return replace(config, data=replace(config.data, train_data="<datasets.Dataset>"))


def train(config: TrainConfig, callbacks: Sequence[TrainerCallback] = (), *, train_dataset: Any = None) -> TrainResult:
    """Fine-tune ``config.model`` on ``config.data.train_data``; see :class:`TrainConfig`.

    ``callbacks``: further ``transformers.TrainerCallback`` objects, run after anglekit's own.
    ``train_dataset``: a ``datasets.Dataset`` or ``IterableDataset`` to train on instead of
    ``train_data`` (read in record batches, checked like a file; ``columns`` names its columns).
    """
    config = _named_dataset(config, train_dataset)
    from transformers import set_seed
    from transformers.trainer_callback import PrinterCallback

    from anglekit.training.callbacks import ProbeCallback
    from anglekit.training.trainer import AnglETrainer

    plans = check(config)
    run, data = config.trainer, config.data
    finished = finished_result(Path(run.output_dir)) if run.resume else None
    if finished is not None:
        logger.info("%s: the run is complete; nothing to resume", run.output_dir)
        return finished
    precision = resolve_precision(run.precision, run.device)
    logger.info("precision %s (%s: %s)", precision.name, precision.requested, precision.reason)
    resume_from = _prepare_output_dir(run)
    out = Path(run.output_dir)
    if resume_from is not None:
        _check_resumed_ese_target(out, config)
    out.mkdir(parents=True, exist_ok=True)
    set_seed(run.seed)

    several, task, (train_set, dev_set, test_set, probe_set), (objective, objective_config) = _training_data(config, plans, train_dataset)
    dev_retrieval = load_dev_retrieval(data)

    device = "cpu" if run.device == "cpu" else None
    embedder = load_embedder(config, device)
    role_sets = _column_roles(task, several, data.column_roles, train_set, embedder)  # checked before anything is written
    model = _training_model(config, embedder)
    warn_unused_data_settings(data, [train_set] if several is None else [d.train_set for d in several])

    before = _test_scores(embedder, run.eval_batch_size, data.test_data, test_set)

    tokenize_started = time.perf_counter()
    tokenized, collator = _tokenize(task, several, role_sets)
    tokenize_seconds = time.perf_counter() - tokenize_started
    evaluating = dev_set is not None or dev_retrieval is not None
    args = training_arguments(
        run, out, total_steps(run, tokenized, data.dataset_order), evaluating, precision, best_by="ndcg@10" if dev_retrieval is not None else "spearman"
    )
    probes = task.probes_batches if several is None else any(d.task.probes_batches for d in several)
    every_callback = _callbacks(config, out, precision, embedder, probe_set, probes, callbacks)
    trainer = AnglETrainer(
        model=model,
        args=args,
        train_dataset=tokenized,
        eval_dataset=dev_set if dev_set is not None else dev_retrieval,
        dev_retrieval=dev_retrieval,
        data_collator=collator,
        callbacks=every_callback,
        objective=objective,
        task=task,
        group_by_length=run.group_by_length,
        eval_batch_size=run.eval_batch_size,
        probes=next((c.accumulator for c in every_callback if isinstance(c, ProbeCallback)), None),
        gather_candidates=config.objective.gather_candidates,
        gradcache_chunk_size=run.gradcache_chunk_size,
        max_batch_tokens=run.max_batch_tokens,
        datasets=several,
        dataset_order=data.dataset_order,
    )
    trainer.remove_callback(PrinterCallback)  # our bar shows the components (none with --quiet); the default would print each log as a dict
    logger.info("training %s on %s, objective %s", config.model.name, train_set.summary(), objective_config)
    started = time.perf_counter()
    with loop_swaps(embedder, model, tokenized, getattr(collator, "pad_id", None), run, precision.autocast_dtype) as speed:
        _write_train_config(out, config, task, several, objective_config, train_set, speed)  # the swaps as applied
        trainer.train(resume_from_checkpoint=resume_from)
    seconds = time.perf_counter() - started
    unit = task.unit if several is None or len({d.task.unit for d in several}) == 1 else "rows"
    return _finish(config, trainer, embedder, objective_config, train_set.summary(), test_set, before, seconds, tokenize_seconds, unit,
                   precision.name, speed.record())  # fmt: skip


def _training_model(config: TrainConfig, embedder: Any) -> Any:
    """The module the trainer steps: the embedder, with the MLP head on top when ``mlp_head``."""
    if not config.objective.mlp_head:
        return embedder
    from anglekit.training.heads import MLPHead, TrainingModel

    return TrainingModel(embedder, MLPHead(embedder.dim).to(embedder.device))


def _write_train_config(out: Path, config: TrainConfig, task: Any, several: Sequence[Any] | None, objective_config: Any, train_set: Any,
                        speed: Any) -> None:  # fmt: skip
    """``train_config.json``: the settings (each speed swap flag as what ran: true only where a swap
    of it changed a module), the objective's config, the nesting wrapper's (ESE or Matryoshka,
    defaults filled in; null without one), the batch kind(s), the data, the speed plan as applied."""
    kinds: Any = task.kind if several is None else {d.name: d.task.kind for d in several}
    atomic_write_json(
        out / "train_config.json",
        {
            "train": _jsonable({**config.flat(), **speed.flags()}),
            "objective": _jsonable(dict(objective_config.__dict__)),
            "nesting": config.objective.nesting(),
            "batch_kind": kinds,
            "train_data": train_set.summary(),
            "speed_swaps": speed.record(),
        },
    )


def _training_data(config: TrainConfig, plans: Sequence[DatasetPlan], train_dataset: Any) -> tuple[Any, Any, tuple[Any, Any, Any, Any], tuple[Any, Any]]:
    """(the several datasets or None, the task, (train, dev, test, probe sets), (objective, its config))."""
    data = config.data
    if data.datasets is None:
        task = plans[0].task
        sets = load_datasets(task, data, train_dataset)
        objective, objective_config = task.build_objective(plans[0].resolved, sets[0], config.objective.positive_threshold, config.model.name)
        return None, task, sets, (nest_objective(objective, config), objective_config)
    several = build_datasets(config, plans)
    dev_set, test_set, probe_set = load_eval_sets(data)
    objective_config = _Configs({d.name: d.objective_config for d in several})
    return several, several[0].task, (_Joined(several), dev_set, test_set, probe_set), (several[0].objective, objective_config)


def _column_roles(task: Any, several: Sequence[Any] | None, configured: Any, train_set: Any, embedder: Any) -> list[tuple[Any, Any, dict[str, Any]]]:
    """(prompted set, what tokenizes it, its roles) per dataset: each column's role (named prompt);
    with several datasets each by its own kind, a configured column applying where the kind has it."""
    if several is None:
        role_sets = [apply_column_roles(task.columns_kind(train_set), configured, train_set, embedder)]
        roles = role_sets[0][2]
    else:
        kinds = [d.task.columns_kind(d.train_set) for d in several]
        role_sets = [apply_column_roles(kind, configured, d.train_set, embedder, partial=True) for kind, d in zip(kinds, several, strict=True)]
        roles = {f"{d.name}:{column}": role for d, (_, _, own) in zip(several, role_sets, strict=True) for column, role in own.items()}
        check_roles_used(configured, kinds)
    if any(role is not None for role in roles.values()):
        logger.info("column roles: %s", ", ".join(f"{column} {role or NO_ROLE}" for column, role in roles.items()))
    return role_sets


def _tokenize(task: Any, several: Sequence[Any] | None, role_sets: Sequence[tuple[Any, Any, Any]]) -> tuple[Any, Any]:
    """The tokenized training data and its collator (one per dataset, joined, with several)."""
    if several is None:
        prompted, tokenizer, _ = role_sets[0]
        return task.tokenize(prompted, tokenizer)
    from anglekit.training.multi import MultiCollator, MultiDataset

    pieces = [d.task.tokenize(prompted, tokenizer) for d, (prompted, tokenizer, _) in zip(several, role_sets, strict=True)]
    return MultiDataset([t for t, _ in pieces]), MultiCollator([c for _, c in pieces])


def warn_unused_data_settings(data: Any, train_sets: Sequence[Any]) -> list[str]:
    """Warn (and return the warnings) about data settings that are legal but do nothing here:
    ``pad_negatives`` without n-tuple rows, ``dataset_order`` with one dataset."""
    messages = []
    if getattr(data, "pad_negatives", False) and not any(getattr(s, "negatives", None) is not None for s in train_sets):
        messages.append("pad_negatives: the training data has no n-tuple rows (negative_1..negative_n), so it pads nothing")
    if data.datasets is None and data.dataset_order != "proportional":
        messages.append(f"dataset_order {data.dataset_order}: it orders several train_data datasets, and this run has one")
    for message in messages:
        logger.warning("%s", message)
    return messages


class _Joined:
    """The training sets of several datasets, summarised together (one line each)."""

    def __init__(self, datasets: Sequence[Any]) -> None:
        self.datasets = list(datasets)

    def summary(self) -> str:
        return "; ".join(f"[{d.name}, {d.task.kind}, weight {d.weight:g}] {d.train_set.summary()}" for d in self.datasets)


class _Configs:
    """The objective configs of several datasets by name (what the model card and train_config.json show)."""

    def __init__(self, configs: dict[str, Any]) -> None:
        self.__dict__.update({name: repr(config) for name, config in configs.items()})


def _jsonable(value: Any) -> Any:
    """``value`` with dataclasses (train_data entries) as mappings, for JSON."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return value


def build_datasets(config: TrainConfig, plans: Sequence[DatasetPlan]) -> list[Any]:
    """Each dataset of a multi-dataset run read by its task, with its objective (nested like the
    run's: Matryoshka, ESE) weighted by the entry's weight."""
    from anglekit.training.multi import TrainingDataset, Weighted

    datasets = []
    for plan in plans:
        data = replace(config.data, train_data=plan.entry.data)
        train_set = plan.task.load_data(data)
        objective, objective_config = plan.task.build_objective(plan.resolved, train_set, config.objective.positive_threshold, config.model.name)
        nested = nest_objective(objective, config)
        datasets.append(TrainingDataset(plan.name or "", plan.task, Weighted(nested, plan.weight), plan.weight, train_set, objective_config))
    return datasets


@contextmanager
def loop_swaps(embedder: Any, model: Any, tokenized: Any, pad_id: int | None, run: TrainerSection, autocast: Any = None) -> Iterator[Any]:
    """The training loop's speed swaps (:mod:`anglekit.training.speed`: the plan for ``model`` under
    the run's flags, its device and ``autocast``, a dtype or None), in place for the body and undone
    after it; the plan is logged once and yielded as applied."""
    from anglekit.training.speed import applied, plan, settings_for

    settings = settings_for(run, device=embedder.device.type, embedder=embedder, dataset=tokenized, pad_id=pad_id, autocast=autocast)
    with applied(plan(model, settings)) as speed:
        yield speed


def load_datasets(task: Any, data: Any, train_dataset: Any = None) -> tuple[Any, Any, Any, Any]:
    """(train, dev, test, probe) sets of the data section (None where not given); the dev and test
    pairs are checked to be scorable now, not at the first evaluation."""
    train_set = task.load_data(data, train_dataset)
    return (train_set, *load_eval_sets(data))


def load_eval_sets(data: Any) -> tuple[Any, Any, Any]:
    """(dev, test, probe) sets of the data section (None where not given), checked to be scorable now."""
    from anglekit.data.catalog import resolve_dataset
    from anglekit.metrics.similarity import check_scorable

    dev_set = resolve_dataset(data.dev_data, default_split="dev") if data.dev_data else None
    test_set = resolve_dataset(data.test_data, default_split="test") if data.test_data else None
    probe_set = resolve_dataset(data.probe_data, default_split="dev") if data.probe_data else None
    for flag, spec, pairs in (("--dev-data", data.dev_data, dev_set), ("--test-data", data.test_data, test_set)):
        if pairs is not None:
            check_scorable(pairs.labels, _data_name(flag, spec, pairs))
    return dev_set, test_set, probe_set


def total_steps(run: Any, tokenized: Any, order: str = "proportional") -> int:
    """The optimisation steps of a run: ``max_steps``, else the epochs' worth of batches (token-budget
    batches, and the per-dataset batches of several datasets, counted as the sampler makes them)."""
    from anglekit.training.multi import DatasetBatchSampler, MultiDataset

    if isinstance(tokenized, MultiDataset):
        sampler = DatasetBatchSampler(tokenized, run.batch_size, order=order, group_by_length=run.group_by_length, max_tokens=run.max_batch_tokens)
        steps_per_epoch = max(1, len(sampler) // run.gradient_accumulation)
    elif run.max_batch_tokens is not None:  # token-budget batches: their count, not batch_size, makes the steps
        from anglekit.training.sampler import TokenBudgetBatchSampler

        batches = len(TokenBudgetBatchSampler(tokenized.lengths(), run.max_batch_tokens))
        steps_per_epoch = max(1, batches // run.gradient_accumulation)
    else:
        steps_per_epoch = max(1, len(tokenized) // (run.batch_size * run.gradient_accumulation))
    return run.max_steps if run.max_steps > 0 else int(np.ceil(steps_per_epoch * run.epochs))


def load_dev_retrieval(data: Any) -> Any:
    """The ``dev_retrieval`` set (:func:`anglekit.data.beir.load_retrieval_set`, its ``dev``
    judgements where it has several), read and checked before training; None without one."""
    if not data.dev_retrieval:
        return None
    from anglekit.data.beir import load_retrieval_set
    from anglekit.data.catalog import default_data_root

    return load_retrieval_set(data.dev_retrieval, default_data_root(), split="dev")


def training_arguments(run: Any, out: Path, steps: int, evaluating: bool, precision: Any, best_by: str = "spearman") -> Any:
    """transformers' ``TrainingArguments`` derived from the trainer section of the typed config;
    ``best_by``: the dev metric that picks the best checkpoint."""
    from transformers import TrainingArguments

    warmup = run.warmup_steps or int(round(run.warmup_ratio * steps))
    optional = {"optim": run.optim} if run.optim is not None else {}
    if run.run_name is not None:
        optional["run_name"] = run.run_name
    return TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=run.batch_size,
        per_device_eval_batch_size=run.eval_batch_size,
        num_train_epochs=run.epochs,
        max_steps=run.max_steps,
        learning_rate=run.learning_rate,
        weight_decay=run.weight_decay,
        lr_scheduler_type=run.scheduler,
        lr_scheduler_kwargs=run.scheduler_arguments(),
        warmup_steps=warmup,
        gradient_accumulation_steps=run.gradient_accumulation,
        max_grad_norm=run.max_grad_norm,
        seed=run.seed,
        **_schedule(run, evaluating),
        save_total_limit=run.save_total_limit,
        load_best_model_at_end=evaluating,
        metric_for_best_model=best_by if evaluating else None,
        greater_is_better=True if evaluating else None,
        logging_steps=run.logging_steps,
        report_to=[name.strip() for name in run.report_to.split(",") if name.strip()] or "none",
        torch_compile=run.torch_compile,
        disable_tqdm=True,  # anglekit's own bar (ComponentProgressCallback) shows the loss components
        remove_unused_columns=False,
        dataloader_num_workers=run.dataloader_workers,
        dataloader_pin_memory=_cuda_in_use(run.device),
        **optional,
        **precision.training_arguments(),
    )


def _callbacks(config: TrainConfig, out: Path, precision: Any, embedder: Any, probe_set: Any, probes_batches: bool,
               extra: Sequence[TrainerCallback]) -> list[Any]:  # fmt: skip
    """anglekit's callbacks (metrics log, file modes, progress bar, probes), then the caller's."""
    from anglekit.training.callbacks import ComponentProgressCallback, JsonlMetricsCallback, ProbeCallback, SettleModesCallback
    from anglekit.training.probes import ProbeAccumulator, dataset_probes

    run = config.trainer
    every_callback: list[Any] = [JsonlMetricsCallback(out / "metrics.jsonl", describe(precision)), SettleModesCallback()]
    if not run.quiet:
        every_callback.append(ComponentProgressCallback())
    # Contrastive tasks probe every batch; pair tasks when probe_steps asks for it.
    accumulator = ProbeAccumulator() if probes_batches or config.objective.probe_steps is not None else None
    dataset_probe = None
    if probe_set is not None:
        probe_threshold = config.objective.positive_threshold
        if probe_threshold is None:
            probe_threshold = default_positive_threshold(probe_set.label_range, probe_set.labels)
        dataset_probe = partial(
            dataset_probes,
            partial(embedder.encode, batch_size=run.eval_batch_size),
            probe_set.text1,
            probe_set.text2,
            probe_set.labels,
            float(probe_threshold),
        )
    if accumulator is not None or dataset_probe is not None:
        probe_steps = config.objective.probe_steps or run.logging_steps
        every_callback.append(ProbeCallback(out / "metrics.jsonl", probe_steps, accumulator, dataset_probe))
    return every_callback + list(extra)


def _test_scores(embedder: Any, batch_size: int, spec: str | None, test_set: Any) -> dict[str, float]:
    """Spearman and Pearson x 100 of the test pairs (empty without a test set)."""
    if test_set is None:
        return {}
    from anglekit.metrics.similarity import evaluate_pairs

    source = _data_name("--test-data", spec, test_set)
    return evaluate_pairs(lambda t: embedder.encode(t, batch_size), test_set.text1, test_set.text2, test_set.labels, source=source).as_dict()


def _finish(config: TrainConfig, trainer: Any, embedder: Any, objective_config: Any, train_summary: str, test_set: Any,
            before: dict[str, float], seconds: float, tokenize_seconds: float, unit: str, precision: str,
            speed_swaps: dict[str, Any]) -> TrainResult:  # fmt: skip
    """Save the model with its card, score the test set, write results.json (the first process only)."""
    import torch

    from anglekit.training.card import record_scores, training_card

    run, out = config.trainer, Path(config.trainer.output_dir)
    # With several processes only the first writes the model and results.json; the others wait
    # until it has, so that no process returns before the run is on disk.
    writer = trainer.is_world_process_zero()
    card = training_card(config, objective_config, train_summary=train_summary, steps=trainer.state.global_step, seconds=seconds, before=before)
    model_dir = embedder.save_pretrained(out / "model", card=card) if writer else out / "model"
    gpu_peak = torch.cuda.max_memory_allocated() / 2**20 if embedder.device.type == "cuda" else None
    after = _test_scores(embedder, run.eval_batch_size, config.data.test_data, test_set)
    pairs = trainer.pairs_trained
    result = TrainResult(
        output_dir=out,
        model_dir=model_dir,
        steps=trainer.state.global_step,
        train_seconds=seconds,
        tokenize_seconds=tokenize_seconds,
        pairs_per_second=pairs / seconds if seconds > 0 else float("nan"),
        unit=unit,
        threads=torch.get_num_threads(),
        peak_memory_mb=peak_memory_mb(),
        before=before,
        after=after,
        best_checkpoint=trainer.state.best_model_checkpoint,
        precision=precision,
        peak_gpu_memory_mb=gpu_peak,
        speed_swaps=speed_swaps,
        guide_masked=trainer.guide_masked_overall(),
    )
    if writer:
        if after:
            record_scores(embedder, model_dir, config.data.test_data, after)  # the card gets them too
        atomic_write_json(out / "results.json", result.as_dict())
    trainer.accelerator.wait_for_everyone()
    return result
