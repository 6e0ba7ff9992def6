"""Attention kernels and unpadded (variable-length) batches for training and encoding.

``auto`` picks FlashAttention-2 when the ``flash_attn`` package is installed, the model runs on
CUDA and its class supports it; else PyTorch's SDPA when the class supports it; else the eager
attention. A kernel asked for by name is checked, never silently replaced. Unpadding (attention
over the concatenated tokens of a batch, without its padding) needs a variable-length kernel:
FlashAttention-2's (``flash_attn``) or torch's own (``torch_varlen``, :mod:`anglekit.llm.varlen`,
CUDA builds of torch, no extra package); ``auto`` with ``unpad`` picks the first, else the second.
``flash_attn`` is only looked up (``importlib.util.find_spec``), never imported, here.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from anglekit.errors import ConfigError
from anglekit.llm import varlen

AUTO = "auto"
EAGER = "eager"
SDPA = "sdpa"
FLASH_ATTENTION_2 = "flash_attention_2"
TORCH_VARLEN = varlen.TORCH_VARLEN
ATTENTION_CHOICES = (AUTO, EAGER, SDPA, FLASH_ATTENTION_2, TORCH_VARLEN)
VARLEN_KERNELS = (FLASH_ATTENTION_2, TORCH_VARLEN)
"""The kernels that attend over unpadded batches."""


def flash_attn_installed() -> bool:
    """Whether the ``flash_attn`` package can be imported (without importing it)."""
    return importlib.util.find_spec("flash_attn") is not None


def _model_name(model: Any) -> str:
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    return f"{type(model).__name__} ({model_type})" if model_type else type(model).__name__


def supports(model: Any, implementation: str) -> bool:
    """Whether ``model``'s class declares support for ``implementation``."""
    if implementation == EAGER:
        return True
    if implementation == SDPA:
        return bool(getattr(model, "_supports_sdpa", False))
    if implementation in VARLEN_KERNELS:  # torch_varlen: the same padding-mask contract as FlashAttention-2
        return bool(getattr(model, "_supports_flash_attn", False) or getattr(model, "_supports_flash_attn_2", False))
    raise ConfigError(f"attn_implementation {implementation!r}: choose one of {', '.join(ATTENTION_CHOICES)}")


def choose_attention(model: Any, requested: str | None, device_type: str, *, unpad: bool = False) -> str:
    """The attention implementation ``model`` should run on a ``device_type`` device.

    ``requested`` None or ``auto``: flash_attention_2 > sdpa > eager, as available; with ``unpad``,
    torch_varlen where flash_attention_2 is missing. A named kernel the model, the device or this
    installation cannot run is a ConfigError saying why.
    """
    requested = AUTO if requested is None else requested
    if requested not in ATTENTION_CHOICES:
        raise ConfigError(f"attn_implementation {requested!r}: choose one of {', '.join(ATTENTION_CHOICES)}")
    name = _model_name(model)
    if requested == AUTO:
        if device_type == "cuda" and flash_attn_installed() and supports(model, FLASH_ATTENTION_2):
            return FLASH_ATTENTION_2
        if unpad and device_type == "cuda" and varlen.kernel_available() and supports(model, TORCH_VARLEN):
            return TORCH_VARLEN
        return SDPA if supports(model, SDPA) else EAGER
    if not supports(model, requested):
        raise ConfigError(f"attn_implementation {requested}: {name} does not support it; use auto, eager" + ("" if requested == SDPA else " or sdpa"))
    if requested in VARLEN_KERNELS and device_type != "cuda":
        raise ConfigError(f"attn_implementation {requested} runs on CUDA only, the model is on {device_type}; use auto or sdpa")
    if requested == FLASH_ATTENTION_2 and not flash_attn_installed():
        raise ConfigError(f"attn_implementation {requested} needs the 'flash_attn' package (pip install flash-attn); use auto or sdpa")
    if requested == TORCH_VARLEN and not varlen.kernel_available():
        raise ConfigError(
            f"attn_implementation {requested} needs a CUDA build of torch with FlashAttention and a GPU of compute capability 8.0+; use auto or sdpa"
        )
    return requested


def check_unpadding(model: Any, implementation: str) -> None:
    """A ConfigError unless ``model`` can attend over unpadded (variable-length) batches: its class
    must support FlashAttention-2 and a variable-length kernel must be the one chosen."""
    name = _model_name(model)
    if not supports(model, FLASH_ATTENTION_2):
        raise ConfigError(
            f"unpad: {name} has no variable-length attention (its class does not support flash_attention_2); "
            "train without unpad (length-grouped batches already cut most padding)"
        )
    if implementation not in VARLEN_KERNELS:
        raise ConfigError(
            f"unpad: needs attn_implementation flash_attention_2 (the 'flash_attn' package) or torch_varlen (a CUDA build of torch), "
            f"both on a CUDA GPU, but {name} runs {implementation}"
        )


def set_attention(model: Any, implementation: str) -> None:
    """Switch ``model`` (a transformers model) to ``implementation`` when it runs another one; a
    ConfigError when it cannot switch."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) == implementation:
        return
    if not hasattr(model, "set_attn_implementation"):
        raise ConfigError(f"attn_implementation {implementation}: {_model_name(model)} cannot switch its attention")
    if implementation == TORCH_VARLEN and not varlen.register():
        raise ConfigError(f"attn_implementation {implementation}: needs transformers' attention interfaces (transformers 4.53 or newer)")
    try:
        model.set_attn_implementation(implementation)
    except (ValueError, ImportError) as exc:  # transformers' own refusal (e.g. a kernel it cannot load)
        raise ConfigError(f"attn_implementation {implementation}: {exc}") from exc
    if getattr(config, "_attn_implementation", implementation) != implementation:  # transformers only warned
        raise ConfigError(f"attn_implementation {implementation}: {_model_name(model)} cannot switch its attention")


def apply_attention(model: Any, requested: str | None, device_type: str, *, unpad: bool = False) -> str:
    """Choose, check and set the attention of ``model``; the implementation it now runs.

    Under ``auto`` only a variable-length kernel is switched to (transformers already loads SDPA
    where the model supports it, else eager, and a model with its own choice, e.g. remote code,
    keeps it); if that switch fails the model keeps its kernel. A named kernel is set or refused.
    """
    implementation = choose_attention(model, requested, device_type, unpad=unpad)
    current = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if requested not in (None, AUTO):
        set_attention(model, implementation)
    elif implementation in VARLEN_KERNELS:
        try:
            set_attention(model, implementation)
        except ConfigError:
            implementation = current or (SDPA if supports(model, SDPA) else EAGER)
    else:
        implementation = current or implementation
    if unpad:
        check_unpadding(model, implementation)
    return implementation


__all__ = [
    "ATTENTION_CHOICES",
    "TORCH_VARLEN",
    "VARLEN_KERNELS",
    "apply_attention",
    "check_unpadding",
    "choose_attention",
    "flash_attn_installed",
    "set_attention",
    "supports",
]
