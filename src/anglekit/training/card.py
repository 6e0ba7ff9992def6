"""The model card's training summary: what a run was (base model, data, objective with its weights
and temperatures, steps, seed, hardware) and how it scored, as a
:class:`~anglekit.model.card.ModelCardData` for ``Embedder.save_pretrained``."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import Any

from anglekit.model.card import ModelCardData
from anglekit.version import __version__

SCORE_KEYS = ("spearman", "pearson")


def dataset_hub_id(spec: str | None) -> str | None:
    """The hub dataset a data spec names: a catalogue name's hub copy (``stsb:train`` ->
    ``sentence-transformers/stsb``), an ``hf:org/name`` spec's id; None for files and the rest."""
    if not spec:
        return None
    from anglekit.data.catalog import known_pair_dataset
    from anglekit.data.spec import parse_spec

    try:
        parsed = parse_spec(spec, "train")
    except ValueError:
        return None
    if parsed.force_hub:
        parts = parsed.source.split("/")
        return "/".join(parts[:2]) if len(parts) >= 2 else None
    known = None if "/" in parsed.source else known_pair_dataset(parsed.source)
    return known.hub_id if known is not None else None


def hardware() -> str:
    """This machine's accelerator (CUDA GPU name and count, Apple MPS) or CPU, with the vector
    instructions torch uses and whether it computes bf16 natively (which ``--precision auto``
    follows), and torch's threads."""
    import torch

    from anglekit.model.hardware import cpu_has_native_bf16

    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        return f"{count} x {torch.cuda.get_device_name(0)} (CUDA)"
    cpu = _cpu_name()
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return f"Apple MPS ({cpu})"
    features = str(torch.backends.cpu.get_cpu_capability()) + (", native bf16" if cpu_has_native_bf16() else "")
    return f"CPU {cpu} ({features}), {torch.get_num_threads()} threads"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def scores_of(result: dict[str, Any]) -> dict[str, float]:
    """The Spearman and Pearson (x 100) of an evaluation result."""
    return {key: float(result[key]) for key in SCORE_KEYS if isinstance(result.get(key), (int, float))}


def training_card(
    config: Any,
    objective: Mapping[str, Any],
    *,
    train_summary: str,
    steps: int,
    seconds: float,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> ModelCardData:
    """The card data of a run of ``config`` (a :class:`~anglekit.training.config.TrainConfig`) with
    the objective settings ``objective`` (its config's fields, or each dataset's config by name);
    ``before`` / ``after``: test-set scores."""
    import torch
    import transformers

    model, data, run, lora = config.model, config.data, config.trainer, config.lora
    several = getattr(data, "datasets", None)
    train_specs = [entry.data for entry in several] if several else [data.train_data]
    train = "; ".join(f"{e.name}: {e.data} ({e.objective or config.objective.name}, weight {e.weight:g})" for e in several) if several else data.train_data
    specs = {"train": train, "dev": data.dev_data, "test": data.test_data}
    card = ModelCardData(base_model=model.name or None, base_gguf_file=model.gguf_file)
    card.data = {name: spec for name, spec in specs.items() if spec}
    if train_summary:
        card.data["train rows"] = train_summary
    every = [*train_specs, data.dev_data, data.test_data]
    card.datasets = list(dict.fromkeys(h for h in (dataset_hub_id(s) for s in every if s) if h))
    card.objective = {"preset": config.objective.name}
    card.objective.update({k: v for k, v in objective.items() if v is not None})
    nesting = config.objective.nesting()
    if nesting is not None:
        kind = nesting.pop("kind")
        card.objective.update({f"{kind}_{name}": value for name, value in nesting.items()})
    card.training = {
        "steps": steps,
        "epochs": run.epochs if run.max_steps <= 0 else None,
        "max steps": run.max_steps if run.max_steps > 0 else None,
        "batch size": run.batch_size,
        "gradient accumulation": run.gradient_accumulation if run.gradient_accumulation > 1 else None,
        "learning rate": run.learning_rate,
        "scheduler": run.scheduler,
        "warmup steps": run.warmup_steps or None,
        "warmup ratio": run.warmup_ratio or None,
        "weight decay": run.weight_decay or None,
        "precision": run.precision,
        "seed": run.seed,
        "LoRA": f"rank {lora.rank or 32}, alpha {lora.alpha or 32}, dropout {lora.dropout if lora.dropout is not None else 0.1}" if lora.enabled else None,
        "hardware": hardware(),
        "train time (s)": round(seconds, 1),
        "software": f"anglekit {__version__}, torch {torch.__version__}, transformers {transformers.__version__}",
    }
    card.training = {k: v for k, v in card.training.items() if v is not None}
    test = data.test_data or "test"
    if before:
        card.scores[f"{test} (before training)"] = scores_of(before)
    if after:
        card.scores[test] = scores_of(after)
    return card


__all__ = ["dataset_hub_id", "hardware", "scores_of", "training_card"]
