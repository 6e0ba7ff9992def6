"""A model's identity (its fingerprint), from what defines it and never from floats computed here.

Indexes, shard folders and exports record the fingerprint of the model that made their vectors;
search, serve and resumed encodes check it. It must therefore be the same on every machine that
loads the same model: another thread count, CPU kind (SIMD kernels), torch release or load
precision (fp32 or bf16) must not change it, while any change to what the vectors depend on must.

The current scheme (``"v2-"`` + 16 hex digits) is a SHA-256 over, in order:

- the embedding settings that change vectors (:func:`embedding_settings`: pooling, max length,
  prompts, normalisation, truncation, layer, long-text handling, ...);
- the backbone's config without the keys of how it runs (dtype, attention implementation, cache,
  where it was loaded from: :data:`RUNTIME_CONFIG_KEYS`), and the LoRA adapters' settings;
- the tokenizer: its vocabulary (tokens and ids), its special tokens and its token ids of :data:`PROBE_TEXT`
  (case, accents, digits, punctuation, CJK, emoji), so a lower-casing or otherwise normalising
  tokenizer is another model;
- every tensor of the backbone's state dict by name, shape and bytes: floating weights as their
  bfloat16 bit patterns, rounded to nearest-even with integer operations on the float32 bits
  (exactly what ``tensor.to(torch.bfloat16)`` does), so the same weights loaded in fp32 or in bf16
  hash alike; fp16 weights, int8/4-bit (bitsandbytes) and integer buffers are hashed as their own
  bytes, tagged with their dtype: another identity.

No floating-point arithmetic touches the weights, so nothing about the machine enters the hash.

The scheme before it (no prefix; :func:`legacy_fingerprint`) summed the weights in float64 with a
multi-threaded reduction: its value changes with the thread count and the CPU. A recorded legacy
fingerprint is still accepted where this machine reproduces it (and re-recorded in the current
scheme at the next save); otherwise :class:`~anglekit.errors.ModelMismatchError` says how to
re-record it without recomputing any vector: ``anglekit fingerprint MODEL --update PATH``.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from operator import itemgetter
from typing import Any, Literal

import numpy as np

from anglekit.errors import ModelMismatchError
from anglekit.llm.lora import is_peft_model, unwrap
from anglekit.model.config import VECTOR_NEUTRAL

SCHEME = "v2"
PREFIX = f"{SCHEME}-"
PROBE_TEXT = "Hello WORLD, Straße naïve café ÉCOLE — 12,345.67 #42 e-mail@x.org 東京タワー 北京大学 한국어 🙂 don't\ttab  two"
"""Text whose token ids enter the identity: a tokenizer that cases, strips accents, splits digits
or handles CJK otherwise tokenizes it otherwise."""
NOT_IDENTITY = (*VECTOR_NEUTRAL, "base_model", "base_gguf_file", "format_version")
"""EmbedderConfig keys left out: they change no vector (``early_exit``), or say where the weights
came from (the weights themselves are hashed) or which file format wrote the settings."""
RUNTIME_CONFIG_KEYS = frozenset({
    "_name_or_path", "transformers_version", "torch_dtype", "dtype", "_attn_implementation", "attn_implementation",
    "_attn_implementation_autoset", "_attn_implementation_internal", "_commit_hash", "use_cache", "output_hidden_states",
    "output_attentions", "return_dict", "torchscript", "use_return_dict",
})  # fmt: skip
"""Backbone config keys of how the model runs or where it came from, not what it computes."""
LORA_KEYS = ("peft_type", "r", "lora_alpha", "use_rslora", "use_dora", "target_modules", "exclude_modules", "fan_in_fan_out", "bias",
             "rank_pattern", "alpha_pattern", "layers_to_transform", "layers_pattern", "modules_to_save")  # fmt: skip
"""LoRA adapter settings that change the forward pass (dropout and paths do not)."""
MIGRATE = "anglekit fingerprint MODEL --update {path}"
"""The command that re-records a fingerprint without recomputing any vector."""


def is_current(recorded: object) -> bool:
    """Whether ``recorded`` is a fingerprint of the current scheme."""
    return isinstance(recorded, str) and recorded.startswith(PREFIX)


def embedding_settings(config: Any) -> dict[str, Any]:
    """The settings of an EmbedderConfig (or its dict) that change vectors."""
    data = config if isinstance(config, dict) else config.to_dict()
    return {key: value for key, value in data.items() if key not in NOT_IDENTITY}


def backbone_settings(backbone: Any) -> dict[str, Any]:
    """The backbone's config without :data:`RUNTIME_CONFIG_KEYS` (at any depth), and the LoRA
    adapters' :data:`LORA_KEYS` when it has adapters."""
    out: dict[str, Any] = {"config": _without_runtime(unwrap(backbone).config.to_dict())}
    if is_peft_model(backbone):
        out["lora"] = {name: {key: getattr(adapter, key, None) for key in LORA_KEYS} for name, adapter in sorted(backbone.peft_config.items())}
    return out


def _without_runtime(data: Any) -> Any:
    if isinstance(data, dict):
        return {key: _without_runtime(value) for key, value in data.items() if key not in RUNTIME_CONFIG_KEYS}
    if isinstance(data, (list, tuple)):
        return [_without_runtime(value) for value in data]
    return data


def tokenizer_identity(tokenizer: Any) -> dict[str, Any]:
    """The vocabulary (every token with its id, in id order), the special tokens (with their ids)
    and the ids of :data:`PROBE_TEXT`."""
    vocab = sorted(tokenizer.get_vocab().items(), key=itemgetter(1, 0))
    specials = {str(token): tokenizer.convert_tokens_to_ids(token) for token in sorted(map(str, tokenizer.all_special_tokens))}
    return {
        "vocab": hashlib.sha256("\n".join(f"{i}\t{len(t)}\t{t}" for t, i in vocab).encode("utf-8", "surrogatepass")).hexdigest(),
        "special": specials,
        "special_map": {key: tokenizer.special_tokens_map[key] for key in sorted(tokenizer.special_tokens_map)},
        "pad": tokenizer.pad_token_id,
        "probe": list(tokenizer(PROBE_TEXT, add_special_tokens=True, truncation=False)["input_ids"]),
    }


def bfloat16_bits(float32_bits: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) of float32 values given as their bits (uint32): rounded
    to nearest, ties to even, like ``tensor.to(torch.bfloat16)``, with every NaN as 0x7FC0 (torch's
    kernels disagree on NaNs); integer operations only."""
    bits = np.ascontiguousarray(float32_bits).view(np.uint32).ravel()
    rounded = bits >> 16
    rounded &= 1
    rounded += 0x7FFF
    rounded += bits  # wraps only for negative NaNs, replaced below
    rounded >>= 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(bits.view(np.float32))
    if nan.any():
        out[nan] = 0x7FC0
    return out


def tensor_bytes(tensor: Any) -> tuple[str, bytes]:
    """(kind, bytes) of one state-dict tensor: ``"float"`` and its bfloat16 bits for fp32, bf16 and
    fp64 tensors (any NaN as 0x7FC0); else its dtype's name and raw bytes."""
    import torch

    value = tensor.detach()
    if value.device.type != "cpu":
        value = value.cpu()
    value = value.contiguous().reshape(-1)
    if value.dtype == torch.bfloat16:
        bits = value.view(torch.int16).numpy().view(np.uint16)
        nan = (bits & 0x7FFF) > 0x7F80
        if nan.any():
            bits = np.where(nan, np.uint16(0x7FC0), bits)
        return "float", bits.astype("<u2", copy=False).tobytes()
    if value.dtype in (torch.float32, torch.float64):
        single = value.numpy().astype(np.float32, copy=False)  # float64 -> float32: IEEE rounding, no arithmetic
        return "float", bfloat16_bits(single.view(np.uint32)).astype("<u2", copy=False).tobytes()
    return str(value.dtype).removeprefix("torch."), value.view(torch.uint8).numpy().tobytes()


def _part(digest: Any, name: str, value: Any) -> None:
    data = json.dumps(value, sort_keys=True, ensure_ascii=False, default=_jsonable).encode()
    digest.update(f"{name}:{len(data)}:".encode())
    digest.update(data)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(map(str, value))
    return str(value)


def fingerprint(embedder: Any) -> str:
    """The current-scheme fingerprint of an Embedder (see the module doc)."""
    digest = hashlib.sha256(SCHEME.encode())
    _part(digest, "settings", embedding_settings(embedder.config))
    _part(digest, "backbone", backbone_settings(embedder.backbone))
    _part(digest, "tokenizer", tokenizer_identity(embedder.tokenizer))
    state = embedder.backbone.state_dict()
    for name in sorted(state):
        kind, data = tensor_bytes(state[name])
        digest.update(f"{name}:{kind}:{tuple(state[name].shape)}:{len(data)}:".encode())
        digest.update(data)
    return PREFIX + digest.hexdigest()[:16]


def legacy_fingerprint(embedder: Any) -> str:
    """The fingerprint of anglekit before the current scheme: settings, backbone config and float64
    sums of each weight (their value depends on the thread count and CPU; kept to recognise the
    fingerprints already on disk)."""
    import torch

    digest = hashlib.sha256()
    settings = {k: v for k, v in embedder.config.to_dict().items() if k not in VECTOR_NEUTRAL}
    digest.update(json.dumps(settings, sort_keys=True).encode())
    backbone_config = {k: v for k, v in unwrap(embedder.backbone).config.to_dict().items() if k not in ("_name_or_path", "transformers_version")}
    digest.update(json.dumps(backbone_config, sort_keys=True, default=str).encode())
    with torch.no_grad():
        for name, param in embedder.backbone.state_dict().items():
            values = param.detach().double()
            stats = (tuple(param.shape), float(values.sum()), float((values * values).sum()))
            digest.update(f"{name}{stats}".encode())
    return digest.hexdigest()[:16]


Match = Literal["current", "legacy"]


class ModelIdentity:
    """A model's fingerprints, computed once each when first needed, and the one check of a
    recorded fingerprint against them."""

    def __init__(self, model: Any, *, current: str | None = None) -> None:
        """``current``: the model's fingerprint when already computed."""
        self.model = model
        if current is not None:
            self.__dict__["current"] = current

    @cached_property
    def current(self) -> str:
        return str(self.model.fingerprint())

    @cached_property
    def legacy(self) -> str | None:
        """The legacy-scheme fingerprint on this machine (None for a model without that scheme)."""
        compute = getattr(self.model, "legacy_fingerprint", None)
        return str(compute()) if callable(compute) else None

    def match(self, recorded: object) -> Match | None:
        """``"current"`` when ``recorded`` is this model's fingerprint; ``"legacy"`` when it is of the
        legacy scheme and this machine reproduces it for this model (re-record it); else None."""
        if recorded == self.current:
            return "current"
        if isinstance(recorded, str) and not is_current(recorded) and self.legacy is not None and recorded == self.legacy:
            return "legacy"
        return None

    def check(self, recorded: object, *, what: str, path: object = None, advice: str = "") -> Match:
        """:meth:`match`, or a ModelMismatchError: ``what`` says whose record it is (e.g. "this
        index was built with NAME"), ``path`` where it is (named in the command that re-records a
        legacy one), ``advice`` what to do when the model really differs."""
        found = self.match(recorded)
        if found is not None:
            return found
        source = getattr(self.model, "source", None) or "?"
        if isinstance(recorded, str) and not is_current(recorded) and self.legacy is not None:
            raise ModelMismatchError(
                f"{what} (fingerprint {recorded}, of the older scheme that summed the weights in floats, so its value changed with the "
                f"thread count, CPU kind and torch version); the model given ({source}) has fingerprint {self.current} and does not "
                f"reproduce that one on this machine. If it is the model that made these vectors, re-record the fingerprint without "
                f"recomputing any vector: {MIGRATE.format(path=path or 'PATH')}; else {advice or 'use the model that made them'}"
            )
        raise ModelMismatchError(
            f"{what} (fingerprint {recorded}); the model given has fingerprint {self.current} ({source}): other weights, tokenizer or "
            f"settings. {advice or 'Use the model that made these vectors'}"
        )


def check_fingerprint(recorded: object, model: Any, *, what: str, path: object = None, advice: str = "") -> Match:
    """:meth:`ModelIdentity.check` of ``model`` (an object with ``fingerprint()``)."""
    return ModelIdentity(model).check(recorded, what=what, path=path, advice=advice)


__all__ = [
    "MIGRATE",
    "NOT_IDENTITY",
    "PREFIX",
    "PROBE_TEXT",
    "RUNTIME_CONFIG_KEYS",
    "SCHEME",
    "Match",
    "ModelIdentity",
    "backbone_settings",
    "bfloat16_bits",
    "check_fingerprint",
    "embedding_settings",
    "fingerprint",
    "is_current",
    "legacy_fingerprint",
    "tensor_bytes",
]
