"""What bf16 autocast does badly on its own, put right for the training loop.

- **Attention in fp32 on CPUs** (``fp32_attention``). CPU autocast runs ``scaled_dot_product_attention``
  in bf16, and PyTorch's bf16 flash-attention kernel for CPUs is slow for short sequences: forward
  and backward of one SmolLM2-135M layer (32 sequences of 37 tokens, 2 threads, an AMX Xeon) take
  25 ms in bf16 against 4-6 ms in fp32. For the loop the model's ``sdpa`` attention becomes
  ``anglekit_sdpa_fp32``: the same transformers function on query, key and value cast up, outside
  autocast, its output cast back (the maths is fp32, so at least as exact). Attention with dropout
  (BERT's attention-probability dropout) takes SDPA's math path in either dtype and is left to
  ``sdpa``. Needs transformers' ``AttentionInterface`` and ``AttentionMaskInterface`` (4.53+);
  skipped and logged where they or the model's ``set_attn_implementation`` are missing.
- **No LoRA input casts under autocast** (always). PEFT casts each LoRA layer's input to the
  adapter's dtype (fp32 master weights) before its dropout, and autocast casts it back to bf16 for
  ``lora_A``: two copies of the activation per adapted layer, and an fp32 dropout mask. Under
  autocast the first cast does nothing useful; :func:`uncast_lora_inputs` turns it off for the loop
  (``peft.helpers.disable_input_dtype_casting``, PEFT 0.15+; skipped and logged before).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

logger = logging.getLogger(__name__)

FP32_SDPA = "anglekit_sdpa_fp32"
"""The name the upcasting attention is registered under in transformers' attention interfaces."""


def sdpa_in_fp32(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: Any, **kwargs: Any) -> Any:
    """transformers' ``sdpa`` attention computed in fp32 outside autocast, its output in the query's
    dtype; with attention dropout, the plain ``sdpa`` function (no faster kernel to win there)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if kwargs.get("dropout", 0.0) or query.dtype == torch.float32:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()
    with torch.autocast(query.device.type, enabled=False):
        out, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(), attention_mask, **kwargs)
    return out.to(query.dtype), weights


def _register() -> bool:
    """Registers :data:`FP32_SDPA` (attention and mask) with transformers; False where it cannot."""
    from anglekit.llm.registry import register_attention

    return register_attention(FP32_SDPA, sdpa_in_fp32, "sdpa_mask")


def attention_problem(backbone: Any) -> str | None:
    """Why ``backbone``'s ``sdpa`` attention cannot switch to :data:`FP32_SDPA` here, or None when it
    can (tried: switched and switched back)."""
    config = getattr(backbone, "config", None)
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return f"the attention is {getattr(config, '_attn_implementation', None)}, not sdpa"
    if not hasattr(backbone, "set_attn_implementation") or not _register():
        return "this transformers has no attention interface to register it with"
    try:
        backbone.set_attn_implementation(FP32_SDPA)
    except (ValueError, TypeError, NotImplementedError) as exc:
        return str(exc)
    kept = config._attn_implementation
    backbone.set_attn_implementation("sdpa")
    if kept != FP32_SDPA:  # transformers declined with a warning only
        return f"{type(backbone).__name__} kept {kept}"
    return None


@contextmanager
def attention_in_fp32(backbone: Any) -> Iterator[bool]:
    """For the body, ``backbone``'s attention is :data:`FP32_SDPA`; ``sdpa`` again afterwards,
    whatever happens (:func:`attention_problem` said it can switch)."""
    backbone.set_attn_implementation(FP32_SDPA)
    try:
        yield True
    finally:
        backbone.set_attn_implementation("sdpa")


@contextmanager
def fp32_attention(backbone: Any, *, enabled: bool, device: torch.device | str, autocast_dtype: torch.dtype | None) -> Iterator[bool]:
    """For the body, ``backbone``'s ``sdpa`` attention runs in fp32 (CPU, bf16 autocast, when
    ``enabled``); yields whether it was switched. The original implementation is restored after."""
    config = getattr(backbone, "config", None)
    applies = enabled and torch.device(device).type == "cpu" and autocast_dtype == torch.bfloat16
    if not applies or getattr(config, "_attn_implementation", None) != "sdpa":
        yield False
        return
    problem = attention_problem(backbone)
    if problem is not None:
        logger.info("fp32 attention: skipped (%s)", problem)
        yield False
        return
    logger.info("fp32 attention: bf16 autocast on a CPU, attention without dropout computes in fp32")
    with attention_in_fp32(backbone) as switched:
        yield switched


def lora_input_casts_problem() -> str | None:
    """Why PEFT's LoRA input casts cannot be turned off here (an older PEFT), or None."""
    try:
        from peft.helpers import disable_input_dtype_casting  # noqa: F401
    except ImportError:  # an older PEFT: it casts, as it always did
        return "this PEFT cannot turn them off"
    return None


def uncast_lora_inputs(model: Any, *, autocast_dtype: torch.dtype | None) -> Any:
    """A context in which PEFT's LoRA layers leave their inputs' dtype to autocast (under autocast)."""
    if autocast_dtype is None or not any(hasattr(m, "cast_input_dtype_enabled") for m in model.modules()):
        return nullcontext()
    problem = lora_input_casts_problem()
    if problem is not None:
        logger.info("LoRA input casts: kept (%s)", problem)
        return nullcontext()
    logger.info("LoRA input casts: off under %s autocast", str(autocast_dtype).removeprefix("torch."))
    return lora_inputs_uncast(model)


def lora_inputs_uncast(model: Any) -> Any:
    """PEFT's context turning the LoRA layers' input casts off (:func:`lora_input_casts_problem` is None)."""
    from peft.helpers import disable_input_dtype_casting

    return disable_input_dtype_casting(model)
