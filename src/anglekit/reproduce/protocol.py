"""The settings every cell of a reproduction shares: the preset (CPU scale or the paper's) and the
starting point.

A cell trains with :func:`anglekit.training.run.train`; :class:`Protocol` holds the TrainConfig
values common to all cells of a run (model, pooling, length, batch, learning rate, epochs), and
:data:`STARTS` the starting points a user picks between, each with the sentence the report prints
about it.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError
from anglekit.model import DEFAULT_BATCH_SIZE

logger = logging.getLogger(__name__)

MINILM = "pypi:all-minilm-l6-v2"
SMOLLM2 = "pypi:smollm2-135m-instruct"


@dataclass(frozen=True)
class Start:
    """A starting point: the model a cell trains from, and what it means for the ablations."""

    name: str
    model: str
    pooling: str
    meaning: str
    reinit_top_layers: int = 0
    protocol: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Protocol fields this start sets instead of the preset's (a flag still wins)."""
    train: dict[str, Any] = dataclasses.field(default_factory=dict)
    """TrainConfig keys every trained cell of this start adds (LoRA, prompt, precision, ...)."""
    prompt: str | None = None
    """The prompt every cell embeds with (the zero-shot row's too)."""


STARTS: dict[str, Start] = {
    "minilm": Start(
        "minilm",
        MINILM,
        "last_avg",
        "all-MiniLM-L6-v2 (22M parameters, 6 layers) as shipped: it was already trained on about a billion "
        "sentence pairs, STS-like data included, so it starts near its best and the ablations are muted.",
    ),
    "minilm-reinit": Start(
        "minilm-reinit",
        MINILM,
        "last_avg",
        "all-MiniLM-L6-v2 with its top 2 of 6 transformer layers re-initialised (seed 0, BERT's "
        "initialisation): the lower layers keep their word-level knowledge, the sentence-level tuning is gone, "
        "so the objectives have to build it (a stand-in for the paper's untuned BERT, which is not offline).",
        reinit_top_layers=2,
    ),
    "bert-base": Start(
        "bert-base",
        "bert-base-uncased",
        "cls",
        "bert-base-uncased (110M, not sentence-tuned): the paper's starting point (needs the hub or a local copy).",
    ),
    "smollm2": Start(
        "smollm2",
        SMOLLM2,
        "last_token",
        "SmolLM2-135M-Instruct (a raw decoder LLM, never trained for similarity; its embeddings are far from isotropic): the "
        "paper's AnglE-LLaMA recipe scaled down: LoRA (rank 32, alpha 32, dropout 0.1) on every linear layer, the paper's prompt, "
        "last-token pooling, batch 16, learning rate 1e-4, max length 96, bf16 where the CPU has it (no gradient checkpointing: "
        "the model is small, and on a CPU it cost a third of each step).",
        protocol={"max_length": 96, "batch_size": 16, "learning_rate": 1e-4},
        train={
            "lora": True,
            "lora_rank": 32,
            "lora_alpha": 32.0,
            "lora_dropout": 0.1,
            "prompt": "paper",
            "precision": "auto",
            "probe_steps": 10,
        },  # fmt: skip
        prompt="paper",
    ),
}


@dataclass(frozen=True)
class Protocol:
    """The shared training settings of a reproduction (TrainConfig keys) and its start."""

    preset: str
    start: Start
    max_length: int
    batch_size: int
    learning_rate: float
    epochs: float
    max_steps: int = -1
    device: str | None = None
    eval_batch_size: int = DEFAULT_BATCH_SIZE
    model: str | None = None
    """An explicit --model overrides the start's model (the start's meaning is then not printed)."""

    def model_name(self) -> str:
        return self.model or self.start.model

    def train_settings(self) -> dict[str, Any]:
        """TrainConfig keys every cell shares (a row adds its objective and data)."""
        return {
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "learning_rate": self.learning_rate,
            "scheduler": "constant",
            "warmup_steps": 0,
            "epochs": float(self.epochs),
            "max_steps": self.max_steps,
            "eval_batch_size": self.eval_batch_size,
            "device": self.device,
            **self.start.train,
        }

    def describe(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["start"] = self.start.name
        data["model"] = self.model_name()
        return data


PRESETS: dict[str, dict[str, Any]] = {
    "cpu": {"start": "minilm", "max_length": 64, "batch_size": 32, "learning_rate": 2e-5, "epochs": 1.0},
    "paper": {"start": "bert-base", "max_length": 128, "batch_size": 32, "learning_rate": 2e-5, "epochs": 5.0},
}
"""``cpu``: the training benchmark's protocol (minutes per cell on 2 cores). ``paper``: the paper's model,
pooling and max length (batch 32, learning rate 2e-5 and 5 epochs are anglekit's choice: the paper does
not print them); for a GPU."""


def make_protocol(preset: str = "cpu", *, start: str | None = None, model: str | None = None, **overrides: Any) -> Protocol:
    """The protocol of ``preset`` with ``start`` and any of its fields replaced (None keeps the preset's)."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    values = dict(PRESETS[preset])
    start_name = start or values.pop("start")
    values.pop("start", None)
    if start_name not in STARTS:
        raise ConfigError(f"unknown start {start_name!r}; choose from {', '.join(STARTS)}")
    values.update(STARTS[start_name].protocol)
    fields = {f.name for f in dataclasses.fields(Protocol)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ConfigError(f"unknown protocol setting(s) {unknown}")
    values.update({k: v for k, v in overrides.items() if v is not None})
    for name in ("max_length", "batch_size"):
        if not isinstance(values[name], int) or isinstance(values[name], bool) or values[name] < 1:
            raise ConfigError(f"{name} must be a positive integer, got {values[name]!r}")
    if not values["learning_rate"] > 0 or not values["epochs"] > 0:
        raise ConfigError("learning_rate and epochs must be > 0")
    steps = values.get("max_steps", -1)
    if not isinstance(steps, int) or isinstance(steps, bool) or (steps < 1 and steps != -1):
        raise ConfigError(f"max_steps must be >= 1, or -1 to train for the epochs; got {steps!r} (0 would train nothing)")
    return Protocol(preset=preset, start=STARTS[start_name], model=model, **values)


def prepare_start(protocol: Protocol, folder: Path) -> str:
    """The model name cells load: the start's model, or (re-initialised starts) a folder written once
    under ``folder`` and reused by every cell and every resumed run."""
    start = protocol.start
    if not start.reinit_top_layers or protocol.model is not None:
        return protocol.model_name()
    target = folder / f"start-{start.name}"
    if target.is_dir():  # written under a temporary name, then renamed: present means complete
        return str(target)
    import torch

    from anglekit.model.embedder import Embedder

    embedder = Embedder.from_pretrained(start.model, pooling=start.pooling, device="cpu")
    backbone = embedder.backbone
    layers = getattr(getattr(backbone, "encoder", None), "layer", None)
    if layers is None or len(layers) <= start.reinit_top_layers:
        raise ConfigError(f"{start.model}: cannot re-initialise the top {start.reinit_top_layers} layers")
    std = float(getattr(backbone.config, "initializer_range", 0.02))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # BERT's initialisation: linear N(0, initializer_range), zero bias; LayerNorm 1 / 0
        for layer in list(layers)[-start.reinit_top_layers :]:
            for module in layer.modules():
                if isinstance(module, torch.nn.Linear):
                    module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * std)
                    if module.bias is not None:
                        module.bias.zero_()
                elif isinstance(module, torch.nn.LayerNorm):
                    module.weight.fill_(1.0)
                    module.bias.zero_()
    logger.info("start %s: re-initialised the top %d layers of %s", start.name, start.reinit_top_layers, start.model)
    tmp = folder / f".start-{start.name}.tmp"
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    folder.mkdir(parents=True, exist_ok=True)
    embedder.save_pretrained(tmp)
    tmp.rename(target)
    return str(target)
