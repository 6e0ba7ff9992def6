"""LoadSettings: how a model is loaded for inference, typed, declared once.

The fields are what :meth:`~anglekit.model.embedder.Embedder.from_pretrained` takes beside the
model (the backend, device, dtype and precision, the hub revision, GGUF file and adapters' base,
and the embedding settings laid over the model's own: pooling, prompts, max length, nested
dimensions, long texts). Their metadata (help, choices, flag parser) is the one source of the
command line's model flags: ``anglekit encode``, ``eval``, ``index build``, ``search``, ``serve``,
``merge-lora`` and ``export`` generate theirs from it (:func:`anglekit.cli.common.add_load_settings`).

Nothing here imports torch. Values are checked for their type when the object is made (the
backend against the registry, :mod:`anglekit.model.backends`); what a value means (a pooling, a
device) is checked where it is used, when the model loads.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, fields, replace
from typing import Any

from anglekit.config.fields import check_fields, positive_int, setting
from anglekit.errors import ConfigError
from anglekit.llm.prompts import check_placeholders
from anglekit.model.backends import AUTO, backend_names, get_backend
from anglekit.model.encoding import LONG_TEXT_MODES

DTYPE_CHOICES = ("fp32", "bf16", "fp16")
"""The weight dtypes by their short names (``--dtype``)."""
DTYPE_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
"""Longer spellings of the dtypes (and torch's, without ``torch.``), read as the short names."""
INFERENCE_PRECISIONS = ("fp32", "bf16")
"""``precision`` values of the inference backends (``--precision`` of encode, eval, serve, export)."""

_DEVICE = re.compile(r"(cpu|mps|cuda(:\d+)?)")


def device_name(text: str) -> str:
    """A flag's parser (argparse type): cpu, cuda, cuda:N or mps."""
    if not _DEVICE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda, cuda:N or mps, got {text!r}")
    return text


def named_prompt(text: str) -> tuple[str, str]:
    """A flag's parser (argparse type): ``NAME=PROMPT`` as (name, prompt); the prompt may be empty,
    a prefix or a template, but not hold a placeholder other than ``{text}``."""
    name, sep, prompt = text.partition("=")
    if not sep or not name.strip() or name != name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=PROMPT (a role name, '=', then a prefix or a template with {{text}}), got {text!r}")
    prompt_template(prompt, shown=text)
    return name, prompt


def prompt_template(text: str, *, shown: str | None = None) -> str:
    """A flag's parser (argparse type): a prompt template or preset, refused when it holds a
    placeholder other than ``{text}`` (:func:`~anglekit.llm.prompts.placeholders`)."""
    try:
        check_placeholders(text, repr(text if shown is None else shown))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def check_prompt_placeholders(settings: Any) -> None:
    """A ConfigError naming the setting when a prompt of ``settings`` (``prompt``, ``query_prompt``,
    ``document_prompt``, ``prompts``; those it has) holds a placeholder other than ``{text}``."""
    for name in ("prompt", "query_prompt", "document_prompt"):
        value = getattr(settings, name, None)
        check_placeholders(value, f"{name} {value!r}")
    prompts = getattr(settings, "prompts", None)
    for role, value in prompts.items() if isinstance(prompts, dict) else ():
        check_placeholders(value, f"prompts.{role} {value!r}")


def _backend_choices() -> tuple[str, ...]:
    return (AUTO, *backend_names())


@dataclass(frozen=True)
class LoadSettings:
    """How to load a model for inference. Every field is optional: None (False) leaves the model's
    own setting, or the backend's default. ``backend`` and ``precision`` take ``auto`` as None."""

    backend: str | None = setting(
        None,
        choices=_backend_choices,
        help="Inference backend that runs the model: torch (PyTorch), onnx (onnxruntime: a folder from 'anglekit export "
        "--format onnx'), openvino (a folder from '--format openvino', or an ONNX folder) or another registered one; "
        "auto: the backend whose files the folder holds, else torch (default: auto).",
    )
    device: str | None = setting(
        None, parse=device_name, metavar="DEVICE", help="Run the model on cpu, cuda, cuda:N or mps (default: the best available: cuda, else mps, else cpu)."
    )
    dtype: str | None = setting(None, choices=DTYPE_CHOICES, help="Load the weights in this dtype (default: as stored).")
    precision: str | None = setting(
        None,
        choices=(AUTO, *INFERENCE_PRECISIONS),
        help="What the model computes in: fp32, or bf16 (faster on CPUs with AVX512-BF16 or AMX and on GPUs; torch: bf16 "
        "weights; openvino: its inference precision; onnx: fp32 only). auto: torch, the weights' stored dtype or --dtype; "
        "openvino, the precision the export recorded, else fp32 (default: auto).",
    )
    revision: str | None = setting(None, metavar="REV", help="Hub revision of the model: branch, tag or commit (default: the main branch).")
    trust_remote_code: bool = setting(False, help="Run the model repository's own code (models such as nomic, jina or gte-v1.5 need it) (default: off).")
    gguf_file: str | None = setting(None, metavar="FILE", help="Load this GGUF file from the model's folder or hub repository.")
    base_model: str | None = setting(
        None, metavar="MODEL", help="For a folder of LoRA adapters: the base model to load them onto (default: the one the adapters record)."
    )
    load_in_kbit: int | None = setting(None, metavar="BITS", help="Load the backbone in 4 or 8 bits through bitsandbytes (CUDA only).")
    max_length: int | None = setting(None, parse=positive_int, minimum=1, metavar="N", help="Truncate to this many tokens (default: the model's).")
    pooling: str | None = setting(None, metavar="NAME", help="Override the model's pooling: cls, cls_avg, last_avg, last_max, first_last_avg, last_token.")
    prompt: str | None = setting(
        None,
        parse=prompt_template,
        metavar="TEMPLATE",
        help="Prompt template with {text}, or a preset: paper, paper-b, retrieval-query, none (default: the model's).",
    )
    query_prompt: str | None = setting(
        None, parse=prompt_template, metavar="TEMPLATE", help="Prompt template of queries (the role query; default: the model's)."
    )
    document_prompt: str | None = setting(
        None, parse=prompt_template, metavar="TEMPLATE", help="Prompt template of documents (the role document; default: the model's)."
    )
    prompts: dict[str, str] | None = setting(
        None,
        parse=named_prompt,
        metavar="NAME=PROMPT",
        help="A named prompt (role), as sentence-transformers saves them: a prefix, or a template with {text} (no other "
        "placeholder); repeatable (--prompts 'query=query: ' --prompts 'document=passage: ') (default: the model's).",
    )
    prompt_preprocess: bool | None = setting(
        None, help="Apply the paper's sentence preprocessing before the prompt (default: on when the template quotes {text})."
    )
    normalize: bool | None = setting(None, help="L2-normalise the vectors by default (default: the model's setting).")
    padding_side: str | None = setting(None, choices=("left", "right"), help="Pad on this side (default: the tokenizer's).")
    bidirectional: bool | None = setting(None, help="Decoder LLMs: drop the causal mask (BiLLM) (default: the model's setting, else off).")
    truncate_dim: int | None = setting(
        None,
        parse=positive_int,
        minimum=1,
        metavar="K",
        help="Keep the first K coordinates of each vector, normalised after the cut when normalising (models trained "
        "with nested dimensions: Matryoshka, ESE) (default: the model's setting, else all).",
    )
    layer: int | None = setting(
        None, parse=positive_int, minimum=1, metavar="N", help="Embed from this transformer layer (1 = the first), as if the model stopped there (ESE)."
    )
    long_text: str | None = setting(
        None,
        choices=LONG_TEXT_MODES,
        help="Texts longer than the window: truncate, or embed overlapping windows and pool their vectors (chunk-mean, "
        "chunk-max; anglekit's substitute for AnglE-RAN) (default: the model's, else truncate).",
    )
    long_text_window: int | None = setting(None, parse=positive_int, minimum=1, metavar="N", help="Tokens per chunk (default: --max-length).")
    long_text_stride: int | None = setting(
        None, parse=positive_int, minimum=1, metavar="N", help="Content tokens between chunk starts (default: half a window)."
    )
    long_text_max_chunks: int | None = setting(None, parse=positive_int, minimum=1, metavar="N", help="At most this many chunks per text.")

    def __post_init__(self) -> None:
        if self.backend == AUTO:
            object.__setattr__(self, "backend", None)
        if self.backend is not None:
            get_backend(self.backend)  # an UnknownBackendError naming the registered ones
        if self.precision == AUTO:
            object.__setattr__(self, "precision", None)
        if self.precision is not None and (not isinstance(self.precision, str) or self.precision not in INFERENCE_PRECISIONS):
            raise ConfigError(f"precision must be one of {', '.join(INFERENCE_PRECISIONS)}, got {self.precision!r}")
        if self.device is not None and not isinstance(self.device, str):
            object.__setattr__(self, "device", str(self.device))  # a torch.device
        if self.dtype is not None:
            object.__setattr__(self, "dtype", _dtype_name(self.dtype))
        check_fields(self, exclude=("dtype",) if self.dtype == AUTO else ())  # auto: transformers' choice, for the python API
        check_prompt_placeholders(self)

    @classmethod
    def of(cls, settings: LoadSettings | None = None, **options: Any) -> LoadSettings:
        """``settings`` (default: all defaults) with ``options`` (field names) over it; an unknown
        option is a TypeError, as for a function's keyword arguments."""
        if settings is None:
            return cls(**options)
        if not isinstance(settings, LoadSettings):
            raise TypeError(f"settings must be a LoadSettings, got {type(settings).__name__}")
        return replace(settings, **options) if options else settings

    def given(self) -> dict[str, Any]:
        """The settings that differ from their defaults, by field name (JSON values)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}

    def embedding(self) -> dict[str, Any]:
        """The given settings of :class:`~anglekit.model.config.EmbedderConfig` (how text becomes a vector)."""
        return {key: value for key, value in self.given().items() if key in EMBEDDING_FIELDS}


EMBEDDING_FIELDS = (
    "pooling", "prompt", "query_prompt", "document_prompt", "prompts", "prompt_preprocess", "normalize", "max_length", "padding_side",
    "bidirectional", "truncate_dim", "layer", "long_text", "long_text_window", "long_text_stride", "long_text_max_chunks",
)  # fmt: skip
"""The fields that are settings of the model's :class:`~anglekit.model.config.EmbedderConfig`."""

FIXED_BY_EXPORT = (
    "pooling", "prompt_preprocess", "padding_side", "bidirectional", "layer", "dtype", "load_in_kbit", "gguf_file",
    "base_model", "revision", "trust_remote_code",
)  # fmt: skip
"""Fields an exported graph (ONNX, OpenVINO) fixed when it was written: given with such a model, an error."""


def _dtype_name(dtype: Any) -> str:
    """The short name of a dtype given by a longer name or as a torch dtype (others as written)."""
    name = str(dtype).removeprefix("torch.")
    return DTYPE_ALIASES.get(name, name)


__all__ = [
    "DTYPE_CHOICES",
    "EMBEDDING_FIELDS",
    "FIXED_BY_EXPORT",
    "INFERENCE_PRECISIONS",
    "LoadSettings",
    "check_prompt_placeholders",
    "device_name",
    "named_prompt",
    "prompt_template",
]
