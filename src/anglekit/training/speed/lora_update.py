"""LoRA's update added to the base layer's output inside one matmul (``fused_lora``).

PEFT computes an adapted layer as ``result = base(x); result = result + lora_B(h) * scaling``
with ``h = lora_A(dropout(x))``: besides the matmuls, a multiplication by ``scaling`` (even at
1.0) and an addition, each a full pass over the layer's output, and the multiplication again in
the backward pass. On a CPU those passes over a decoder's activations are bound by memory
bandwidth, not arithmetic: in SmolLM2-135M's LoRA step (32 sequences of 40 tokens, 2 threads, an
AMX Xeon) the scaling and the additions over the 1536-wide MLP outputs alone took 2.4-3.3 ms
each, more than the ``lora_B`` matmul feeding them. For the training loop each plain adapted layer
computes ``result.addmm_(h, lora_B.weight.T, alpha=scaling)`` instead: BLAS adds the update to
the base output in place and scales it within the matmul, one pass, the sum rounded once (PEFT rounds the
update, its scaled copy and the sum separately, so the outputs differ by bf16 rounding, and the
fused one is the more exact). Anything but the plain case (DoRA and other variants, bias on
``lora_B``, merged or disabled adapters, per-sample adapter names, positional extras) runs PEFT's
own forward. With fast dropout on the adapter's input (``x * keep * s``), the dropout's scale
``s`` joins ``scaling`` in the matmul too and the mask is one multiplication: fast dropout's own
``addcmul`` takes two passes (filling its output, then the product), in the backward pass too.
The mask is drawn as fast dropout draws it (:meth:`FastDropout.mask_and_scale
<anglekit.training.speed.fast_dropout.FastDropout.mask_and_scale>`, the same random stream). Put back after the loop,
whatever happens.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import Tensor, nn

from anglekit.training.speed.fast_dropout import FastDropout
from anglekit.training.speed.forward_swaps import imported_classes, on_cpus, probe_both

TOLERANCE = 1e-5
"""Largest relative difference from PEFT's forward accepted by the fp32 probe (rounding order)."""


def add_update(result: Tensor, h: Tensor, weight: Tensor, scaling: float) -> Tensor:
    """``result + (h @ weight.T) * scaling`` for 2D ``result`` and ``h``, by one in-place
    ``addmm_`` on ``result`` (the base layer's fresh output, which its matmul does not keep for
    backward), in ``result``'s dtype: no copy of ``result`` (out-of-place ``addmm`` starts by
    copying it), no separate scaling or sum, and (2D, not a view) no copy in the backward pass."""
    if result.dim() != 2 or result._is_view() or (result.requires_grad and result.grad_fn is None):
        result = result.reshape(-1, result.shape[-1]).clone()  # a view or a leaf cannot be written in place cheaply
    return result.addmm_(h.reshape(-1, h.shape[-1]).to(result.dtype), weight.to(result.dtype).t(), alpha=scaling)


def _plain(layer: Any, name: str) -> bool:
    lora_b = layer.lora_B[name]
    return name not in (getattr(layer, "lora_variant", None) or {}) and type(lora_b) is nn.Linear and lora_b.bias is None


def fused_lora_forward(self: Any, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    cls_forward = type(self).forward
    if args or kwargs or self.disable_adapters or self.merged:
        return cls_forward(self, x, *args, **kwargs)
    active = [name for name in self.active_adapters if name in self.lora_A]
    if not all(_plain(self, name) for name in active):
        return cls_forward(self, x)
    rows = x.reshape(-1, x.shape[-1])  # 2D throughout, so that the in-place update is not on a view
    result = self.base_layer(rows)
    for name in active:
        lora_a, dropout = self.lora_A[name], self.lora_dropout[name]
        x_in = self._cast_input_dtype(rows, lora_a.weight.dtype)
        scaling = self.scaling[name]
        drawn = dropout.mask_and_scale(x_in) if type(dropout) is FastDropout else None
        if drawn is not None:
            # dropout(x) = x * keep * s, and s passes through both linear maps: it joins the
            # update's scaling in the matmul, and the mask is applied by one multiplication.
            keep, scale = drawn
            h = lora_a(x_in * keep)
            scaling = scaling * scale
        else:
            h = lora_a(dropout(x_in))
        result = add_update(result, h, self.lora_B[name].weight, scaling)
    return result.view(*x.shape[:-1], result.shape[-1])  # add_update keeps the base output's dtype


def lora_agrees(layer: Any) -> bool:
    """PEFT's forward and the fused one agree (fp32 relative difference within :data:`TOLERANCE`)
    on a probe, with the same random state for both (so the same dropout masks)."""
    weight = getattr(getattr(layer, "base_layer", None), "weight", None)
    if not isinstance(weight, Tensor) or weight.dim() != 2:
        return False
    own, fused = (out.double() for out in probe_both(layer, fused_lora_forward, weight))
    difference = (own - fused).norm() / own.norm().clamp_min(1e-30)
    half = weight.dtype in (torch.bfloat16, torch.float16)
    return bool(difference <= (1e-2 if half else TOLERANCE))


LORA_CLASSES: tuple[tuple[str, str], ...] = (("peft.tuners.lora.layer", "Linear"),)
"""(module, class) of PEFT's LoRA linear layer."""


def lora_layer_classes() -> tuple[type[nn.Module], ...]:
    """PEFT's LoRA ``Linear`` where PEFT is already imported (a model without it has none)."""
    return imported_classes(LORA_CLASSES)


def fused_lora(model: nn.Module, *, enabled: bool, device: torch.device | str) -> AbstractContextManager[int]:
    """For the body, every PEFT LoRA ``Linear`` of ``model`` adds its plain adapters' updates with
    :func:`add_update` (on CPUs, when ``enabled``); yields how many layers do."""
    done = "adapted layer(s) add their update inside one matmul"
    return on_cpus(
        model, enabled=enabled, device=device, classes=lora_layer_classes(), forward=fused_lora_forward, agrees=lora_agrees, label="fused LoRA", done=done
    )


__all__ = ["LORA_CLASSES", "add_update", "fused_lora", "fused_lora_forward", "lora_agrees"]
