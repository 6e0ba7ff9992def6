"""RMSNorm that keeps only its input and one fp32 number per row for the backward pass (``fused_norm``).

transformers' Llama-style ``RMSNorm.forward`` casts its input to fp32, squares it, takes the row
mean, multiplies by ``rsqrt`` and casts back before scaling by the weight. Under autograd each of
those ops keeps its operands: the fp32 copy of the activation (twice the bytes of a bf16 input) and,
where the weight is trained, the normalised rows, for every norm of the model (61 in SmolLM2-135M),
and the backward pass walks the same five ops again. :func:`rms_norm_forward` computes the same forward, bit for bit (the same
ops in the same order, in any dtypes, under autocast or not), as one ``autograd.Function`` that
saves the input in its own dtype, the per-row fp32 ``rstd`` and the weight, and recomputes the
normalised rows in the backward pass (standard RMSNorm backward, in fp32 outside autocast).

Measured on 2 threads of an AMX Xeon, 61 norms of a [32, 40, 576] bf16 activation with a frozen
bf16 weight (as under LoRA) in bf16 autocast: forward and backward take 131 ms instead of 215 (forward
57 against 98, backward 74 against 117), and the 172 MiB of fp32 copies kept for the backward pass
become the 86 MiB of the bf16 inputs themselves (1.4 MiB less per norm at that shape). On the 30
layers of SmolLM2-135M (random weights, LoRA r=16 on every linear, no LM head, 32 x 40 tokens) the
peak RSS of a step falls from 2696-2733 MiB to 2627 MiB, its time from 2.38 s to 2.24-2.35 s.

:func:`fused_rms_norms` makes every norm of a model whose class is one of :data:`NORM_CLASSES` use
it for the length of the training loop and puts the class's own ``forward`` back afterwards, whatever
happens. It is measured on CPUs only (on CUDA, fused kernels from the hub may replace the norm), so
it is used on CPUs only.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from anglekit.training.speed.forward_swaps import imported_classes, llama_style, on_cpus

NORM_CLASSES: tuple[tuple[str, str], ...] = llama_style("RMSNorm")
"""(module, class) of the transformers norms whose ``forward`` is exactly Llama's maths: ``weight *
(x.float() * rsqrt(mean(x.float() ** 2) + eps)).to(x.dtype)``. Not Gemma's (``1 + weight``, scaled
in fp32 before the cast) nor other variants."""


class _RMSNorm(torch.autograd.Function):
    """Llama's RMSNorm forward; saves ``x`` (its dtype), the fp32 ``rstd`` [..., 1] and the weight."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, eps: float) -> Tensor:
        # The same ops in the same order as transformers' forward (autocast, if on, treats them alike).
        input_dtype = x.dtype
        hidden = x.to(torch.float32)
        variance = hidden.pow(2).mean(-1, keepdim=True)
        rstd = torch.rsqrt(variance + eps)
        # A fresh fp32 copy can be normalised in place (same bits as the out-of-place multiply).
        normed = hidden.mul_(rstd) if hidden is not x else hidden * rstd
        out = weight * normed.to(input_dtype)
        ctx.save_for_backward(x, rstd, weight)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        x, rstd, weight = ctx.saved_tensors
        need_x, need_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_x = grad_weight = None
        # fp32 maths (float64 for float64 inputs), outside autocast whatever the caller's state.
        compute = torch.promote_types(x.dtype, torch.float32)
        with torch.autocast(x.device.type, enabled=False):
            xhat = _fresh(x, compute).mul_(rstd)
            if need_weight:
                # The forward scaled the normalised rows rounded to x's dtype: so does this gradient.
                grad_weight = (grad_out.to(compute) * xhat.to(x.dtype)).sum_to_size(weight.shape).to(weight.dtype)
            if need_x:
                g = _fresh(grad_out, compute).mul_(weight.to(compute))
                dot = torch.linalg.vecdot(g, xhat).unsqueeze_(-1).div_(xhat.shape[-1])
                # rstd * (g - xhat * mean(g * xhat)), in place on the temporaries.
                grad_x = g.addcmul_(xhat, dot, value=-1).mul_(rstd).to(x.dtype)
        return grad_x, grad_weight, None


def _fresh(t: Tensor, dtype: torch.dtype) -> Tensor:
    """``t`` in ``dtype`` as a tensor of its own (a copy even where ``t`` has that dtype already)."""
    return t.to(dtype, copy=True)


def rms_norm_forward(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """``weight * (x.float() * rsqrt(mean(x.float() ** 2, -1) + eps)).to(x.dtype)``, bit for bit as
    transformers' Llama RMSNorm, keeping only ``x``, a per-row fp32 ``rstd`` and ``weight`` for the
    backward pass."""
    return _RMSNorm.apply(x, weight, eps)


def fused_rms_norm_forward(self: nn.Module, hidden_states: Tensor) -> Tensor:
    return rms_norm_forward(hidden_states, self.weight, self.variance_epsilon)


def rms_norm_agrees(norm: nn.Module) -> bool:
    """Whether the class's own ``forward`` and :func:`rms_norm_forward` agree bit for bit on a few
    rows with this norm's weight (fp32 and bf16 inputs): a guard against a transformers release that
    changes the maths under the same class name."""
    weight = getattr(norm, "weight", None)
    eps = getattr(norm, "variance_epsilon", None)
    if not isinstance(weight, Tensor) or weight.dim() != 1 or not isinstance(eps, (int, float)):
        return False
    generator = torch.Generator(device="cpu").manual_seed(0)
    probe = torch.randn(4, weight.shape[0], generator=generator).to(weight.device)
    with torch.no_grad():
        for dtype in (torch.float32, torch.bfloat16):
            x = probe.to(dtype)
            if not torch.equal(type(norm).forward(norm, x), rms_norm_forward(x, weight, eps)):
                return False
    return True


def fused_rms_norms(model: nn.Module, *, enabled: bool, device: torch.device | str) -> AbstractContextManager[int]:
    """For the body, every module of ``model`` whose class is one of :data:`NORM_CLASSES` (exactly)
    runs :func:`rms_norm_forward` (on CPUs, when ``enabled``); yields how many do. Modules whose
    ``forward`` is already replaced on the instance (hooks, hub kernels) are left alone."""
    classes = imported_classes(NORM_CLASSES)
    done = "norm(s) keep their input and an fp32 rstd per row for backward"
    return on_cpus(
        model, enabled=enabled, device=device, classes=classes, forward=fused_rms_norm_forward, agrees=rms_norm_agrees, label="fused RMSNorm", done=done
    )


__all__ = ["NORM_CLASSES", "fused_rms_norm_forward", "fused_rms_norms", "rms_norm_agrees", "rms_norm_forward"]
