"""The gated MLP's ``silu(gate) * up`` keeping only ``gate`` and ``up`` for the backward pass (``fused_mlp``).

Llama-style decoders compute ``down_proj(silu(gate_proj(x)) * up_proj(x))``. Under autograd the
SiLU keeps ``gate`` and the product keeps both its operands, ``silu(gate)`` and ``up``: three
activations of the intermediate size (1536 in SmolLM2-135M, 2.7x the hidden size) per token and
layer. :func:`swiglu` computes the same product, bit for bit (the same two ops), as one
``autograd.Function`` that keeps ``gate`` and ``up`` and recomputes the SiLU in the backward pass
(the ops autograd runs, in the same dtypes, so the same gradients): a third less MLP activation
memory for one elementwise pass more.

:func:`fused_mlps` gives every MLP of a class in :data:`MLP_CLASSES` whose activation is SiLU
this forward for the length of the training loop (the class's own forward is put back afterwards,
whatever happens; the first module of each class is checked to compute the same as its class,
with the same dropout masks). Measured on CPUs only, so used on CPUs only.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from anglekit.training.speed.forward_swaps import imported_classes, llama_style, on_cpus, probe_both

MLP_CLASSES: tuple[tuple[str, str], ...] = llama_style("MLP")
"""(module, class) of the transformers MLPs computing ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``."""

SILU_CLASSES = ("SiLU", "SiLUActivation")
"""Names of the activation modules that compute ``F.silu`` (torch's and transformers')."""


class _SwiGLU(torch.autograd.Function):
    """``silu(gate) * up``; saves ``gate`` and ``up`` only."""

    @staticmethod
    def forward(ctx: Any, gate: Tensor, up: Tensor) -> Tensor:
        ctx.save_for_backward(gate, up)
        return F.silu(gate) * up

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None]:
        gate, up = ctx.saved_tensors
        # The ops autograd runs for silu(gate) * up, in their dtypes (so the same gradients), with
        # silu(gate) recomputed: one pass more, one activation less kept.
        with torch.autocast(gate.device.type, enabled=False):
            grad_up = grad_out * F.silu(gate) if ctx.needs_input_grad[1] else None
            grad_gate = torch.ops.aten.silu_backward(grad_out * up, gate) if ctx.needs_input_grad[0] else None
        return grad_gate, grad_up


def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """``F.silu(gate) * up``, bit for bit, keeping only ``gate`` and ``up`` for the backward pass."""
    return _SwiGLU.apply(gate, up)


def fused_mlp_forward(self: nn.Module, x: Tensor) -> Tensor:
    return self.down_proj(swiglu(self.gate_proj(x), self.up_proj(x)))


def mlp_agrees(mlp: nn.Module) -> bool:
    """Whether the class's own forward and the fused one give the same output bit for bit on a
    probe (its activation is SiLU; the same random state for both, so any dropout draws alike)."""
    if type(getattr(mlp, "act_fn", None)).__name__ not in SILU_CLASSES:
        return False
    weight = getattr(getattr(mlp, "gate_proj", None), "weight", None)
    if not isinstance(weight, Tensor):
        return False
    return torch.equal(*probe_both(mlp, fused_mlp_forward, weight))


def fused_mlps(model: nn.Module, *, enabled: bool, device: torch.device | str) -> AbstractContextManager[int]:
    """For the body, every SiLU-gated MLP of ``model`` whose class is one of :data:`MLP_CLASSES`
    computes its gate with :func:`swiglu` (on CPUs, when ``enabled``); yields how many do."""
    classes = imported_classes(MLP_CLASSES)
    done = "gated MLP(s) keep gate and up, not silu(gate), for backward"
    return on_cpus(model, enabled=enabled, device=device, classes=classes, forward=fused_mlp_forward, agrees=mlp_agrees, label="fused MLP", done=done)


__all__ = ["MLP_CLASSES", "fused_mlp_forward", "fused_mlps", "mlp_agrees", "swiglu"]
