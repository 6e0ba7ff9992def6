"""Dropout with cheaper random numbers on CPUs (``fast_dropout``).

On a CPU, ``torch.nn.Dropout`` draws its mask with ``bernoulli_``: one call of the Mersenne Twister
per element, on one thread. Training a small encoder in bf16 spends more time there than in any
single matmul (all-MiniLM-L6-v2, 64 sequences a step: 13% of the step). :class:`FastDropout` draws
64 random bits per four elements instead and keeps an element when its 16 bits are at or above
``round(p * 65536)``: dropout with probability
``p' = round(p * 65536) / 65536`` (0.1 -> 0.100006), the kept elements scaled by ``1 / (1 - p')`` so
that the expectation is unchanged, and 3x faster than ``nn.Dropout`` on the masks of that model.
On CPUs the bits come from numpy's PCG64, seeded by one draw of torch's default generator per mask
(so masks follow ``torch.manual_seed`` and a saved RNG state), and are compared on the calling
thread (:func:`keep_bits`); elsewhere from ``random_`` over int64 on the device.
The mask is kept for the backward pass as one byte per element (0 or 1), and it is applied and
scaled in one pass (``addcmul``, the scale in the op's fp32 arithmetic even on bf16 inputs, where a
bf16 mask of ``1 / (1 - p)`` would round 1.1111 to 1.1094 and shrink every kept element).

:func:`faster_dropout` swaps every ``nn.Dropout`` of a model for one for the length of the training
loop and puts the originals back afterwards, whatever happens (:func:`fast_dropouts` swaps the ones
the speed plan chose). CUDA's dropout is already fused, so it is used on CPUs only.
:meth:`FastDropout.mask_and_scale` is the seam for code that applies the mask itself (LoRA's fused
update, :mod:`~anglekit.training.speed.lora_update`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

logger = logging.getLogger(__name__)

LEVELS = 1 << 16
"""Resolution of the keep test: 16 random bits per element."""

SEED_RANGE = 1 << 62
"""A CPU mask's PCG64 is seeded with a draw from ``[0, SEED_RANGE)`` of torch's default generator."""


class FastDropout(nn.Module):
    """``nn.Dropout(p)`` in distribution (``p`` rounded to a multiple of 1/65536), its mask from
    16 random bits per element."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p
        self.threshold = round(p * LEVELS)
        """Elements whose 16 bits (as unsigned) are below this are dropped."""
        self.scale = 1.0 / (1.0 - self.threshold / LEVELS)

    def forward(self, x: Tensor) -> Tensor:
        drawn = self.mask_and_scale(x)
        if drawn is None:
            return x
        return _MaskedScale.apply(x, *drawn)

    def mask_and_scale(self, like: Tensor) -> tuple[Tensor, float] | None:
        """The keep mask (uint8, shaped as ``like``) and the scale of kept elements that the forward
        applies to ``like`` now, drawn from the same random stream as the forward draws it; None
        where the forward is the identity (eval mode, ``p`` 0). Callers that fold the scale into
        their own arithmetic (LoRA's fused update) apply ``like * mask`` and scale by it."""
        if not self.training or self.threshold == 0:
            return None
        return keep_bits(like, self.threshold), self.scale

    def extra_repr(self) -> str:
        return f"p={self.p}"


def keep_bits(like: Tensor, threshold: int) -> Tensor:
    """A uint8 tensor shaped as ``like``: 1 where an element is kept (16 random bits at or above
    ``threshold``, read as unsigned), else 0.

    uint8, not bool: a product with a bool tensor converts it to the other operand's dtype in a
    scalar loop first (0.28 ms for 1280 x 576 bf16 elements here), a uint8 one in a vectorized
    loop (0.05 ms). On a CPU :func:`cpu_keep_bits`, elsewhere :func:`device_keep_bits`."""
    if like.device.type == "cpu":
        return cpu_keep_bits(like.numel(), threshold).view(like.shape)
    return device_keep_bits(like, threshold)


def device_keep_bits(like: Tensor, threshold: int) -> Tensor:
    """:func:`keep_bits` on ``like``'s device: ``random_`` over int64 words from the device's
    generator, compared there; the comparison's bool result is reinterpreted, not copied."""
    words = torch.empty((like.numel() + 3) // 4, dtype=torch.int64, device=like.device)
    # The full int64 range: every 16-bit lane uniform (random_() alone leaves the top bit 0).
    bits = words.random_(-(1 << 63), (1 << 63) - 1).view(torch.int16)[: like.numel()].view(like.shape)
    return (bits >= threshold - LEVELS // 2).view(torch.uint8)


def cpu_keep_bits(count: int, threshold: int) -> Tensor:
    """``count`` uint8 keep flags (1 where a uniform 16-bit lane is at or above ``threshold``),
    from numpy's PCG64 seeded by one draw of torch's default generator.

    In SmolLM2-135M's bf16 LoRA loop (210 masks a step of 0.3M-1.9M elements, 2 threads, an AMX
    Xeon) torch's serial Mersenne Twister took 0.58 ms a mask on average and torch's two-thread
    comparison 0.23 ms, an eighth of the training time; there PCG64 took 0.36 ms and numpy's
    comparison, on the calling thread with no OpenMP team to wake, 0.09 ms."""
    seed = int(torch.randint(SEED_RANGE, ()))
    lanes = np.random.PCG64(seed).random_raw((count + 3) // 4).view(np.uint16)[:count]
    keep = np.empty(count, dtype=np.uint8)
    np.greater_equal(lanes, threshold, out=keep.view(np.bool_))
    return torch.from_numpy(keep)


class _MaskedScale(torch.autograd.Function):
    """``x * keep * scale`` in one pass, saving only the one-byte ``keep`` for the backward pass."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return torch.addcmul(x.new_zeros(()), x, keep, value=scale)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (keep,) = ctx.saved_tensors
        return torch.addcmul(grad.new_zeros(()), grad, keep, value=ctx.scale), None, None


def dropouts(model: nn.Module) -> list[nn.Module]:
    """The ``nn.Dropout`` modules of ``model`` (exactly that type) that drop something (``p`` > 0)."""
    return [m for m in model.modules() if type(m) is nn.Dropout and m.p > 0]


@contextmanager
def fast_dropouts(model: nn.Module, modules: Collection[nn.Module]) -> Iterator[int]:
    """For the body, each of ``modules`` (children of ``model``) is a :class:`FastDropout` of the
    same ``p`` and mode; yields how many; the originals are back afterwards, whatever happens."""
    chosen = {id(m) for m in modules}
    swapped: list[tuple[nn.Module, str, nn.Module]] = []
    for parent in model.modules():
        for name, child in parent.named_children():
            if id(child) in chosen and type(child) is nn.Dropout:
                swapped.append((parent, name, child))
    try:
        for parent, name, child in swapped:
            fast = FastDropout(child.p)
            fast.train(child.training)
            setattr(parent, name, fast)
        yield len(swapped)
    finally:
        for parent, name, child in swapped:
            child.train(getattr(parent, name).training)
            setattr(parent, name, child)


@contextmanager
def faster_dropout(model: nn.Module, *, enabled: bool, device: torch.device | str) -> Iterator[int]:
    """For the body, every ``nn.Dropout`` of ``model`` (exactly that type) is a :class:`FastDropout`
    of the same ``p`` (on CPUs, when ``enabled``); yields how many were swapped."""
    if not enabled or torch.device(device).type != "cpu":
        yield 0
        return
    with fast_dropouts(model, dropouts(model)) as count:
        if count:
            logger.info("fast dropout: %d dropout module(s) draw 16-bit masks for training", count)
        yield count
