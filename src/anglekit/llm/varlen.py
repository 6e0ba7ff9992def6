"""Unpadded attention on CUDA with PyTorch's own FlashAttention-2 kernel (``torch_varlen``).

transformers unpads a batch only inside the ``flash_attn`` package's variable-length kernel, and
that package has no wheels on PyPI (it compiles against the local CUDA toolkit). CUDA builds of
torch ship the same FlashAttention-2 kernel behind SDPA, with a variable-length entry point:
``aten::_flash_attention_forward`` takes the concatenated tokens of a batch and their cumulative
sequence lengths, is differentiable and applies attention dropout (it is what nested-tensor SDPA
runs). :func:`varlen_attention_forward` is a transformers attention function on that op: it drops
the padded rows of query, key and value (the 2D padding mask, which transformers' FlashAttention
mask function passes through), attends over each sequence's own tokens (causally for decoders,
within each sequence) and scatters the result back to the padded layout the model expects.

Registered as ``torch_varlen`` with transformers' ``AttentionInterface`` and
``AttentionMaskInterface`` (4.53+) by :func:`register`; the op's schema is pinned by a test (it is
private to torch). The kernel runs on CUDA GPUs of compute capability 8.0+ in fp16/bf16: fp32
inputs are cast to the autocast dtype (else bf16 where supported, else fp16) and back, as
transformers does for FlashAttention. Grouped-query key/value heads are repeated to the query's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where it is used: anglekit.llm.attention (and the CLI's --help) stay light
    import torch

TORCH_VARLEN = "torch_varlen"
"""The name the attention (and its mask function) is registered under in transformers."""


def kernel_available() -> bool:
    """Whether this torch has the variable-length FlashAttention op and a CUDA GPU able to run it
    (compute capability 8.0 or newer)."""
    import torch

    if not hasattr(torch.ops.aten, "_flash_attention_forward") or not torch.cuda.is_available():
        return False
    major, _ = torch.cuda.get_device_capability()
    available = getattr(torch.backends.cuda, "is_flash_attention_available", lambda: True)  # torch 2.3+
    return major >= 8 and bool(available())


def _kernel() -> Callable[..., Any]:
    """The variable-length attention op (tests substitute a reference on the CPU)."""
    import torch

    return torch.ops.aten._flash_attention_forward


def unpad_layout(mask: torch.Tensor | None, batch: int, length: int, device: torch.device) -> tuple[torch.Tensor | None, torch.Tensor, int]:
    """``(indices, cu_seqlens, max_len)`` of a padded batch: the flat positions of its real tokens
    (None when there is no padding), the int32 cumulative sequence lengths (``batch + 1``) and the
    longest sequence. ``mask`` is the 2D (batch, length) padding mask, truthy on real tokens."""
    import torch

    if mask is None:
        return None, torch.arange(0, (batch + 1) * length, length, dtype=torch.int32, device=device), length
    if mask.dim() != 2 or tuple(mask.shape) != (batch, length):
        raise ValueError(f"{TORCH_VARLEN}: expected a 2D padding mask of shape {(batch, length)}, got {tuple(mask.shape)}")
    keep = mask.bool()
    lengths = keep.sum(dim=1, dtype=torch.int32)
    cu = torch.nn.functional.pad(torch.cumsum(lengths, dim=0, dtype=torch.int32), (1, 0))
    indices = torch.nonzero(keep.flatten(), as_tuple=False).flatten()
    return indices, cu, int(lengths.max().item()) if batch else 0


def kernel_dtype(query: torch.Tensor) -> torch.dtype:
    """The half dtype the kernel computes in: the query's own when it is one, else the autocast
    dtype of its device when autocast is on, else bf16 where the GPU has it, else fp16."""
    import torch

    if query.dtype in (torch.float16, torch.bfloat16):
        return query.dtype
    device_type = query.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        if dtype in (torch.float16, torch.bfloat16):
            return dtype
    if device_type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16
    return torch.bfloat16


def varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention over the real tokens of each sequence only; query/key/value are
    ``(batch, heads, length, head_dim)``, the output ``(batch, length, heads, head_dim)`` (padded
    rows zero), as transformers' attention functions return it."""
    if sliding_window is not None or softcap is not None:
        raise NotImplementedError(f"{TORCH_VARLEN}: sliding-window and soft-capped attention are not supported; use sdpa")
    batch, heads, length, head_dim = query.shape
    if key.shape[2] != length:
        raise NotImplementedError(f"{TORCH_VARLEN}: query and key lengths differ ({length} vs {key.shape[2]}): no KV cache; use sdpa")
    if key.shape[1] != heads:  # grouped-query attention: each key/value head serves heads // kv_heads query heads
        key = key.repeat_interleave(heads // key.shape[1], dim=1)
        value = value.repeat_interleave(heads // value.shape[1], dim=1)
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    dtype = kernel_dtype(query) if query.is_cuda else query.dtype
    indices, cu, max_len = unpad_layout(attention_mask, batch, length, query.device)

    def flat(t: torch.Tensor) -> torch.Tensor:  # (B, H, S, D) -> (tokens, H, D), real tokens only
        rows = t.transpose(1, 2).reshape(batch * length, heads, head_dim).to(dtype)
        return rows if indices is None else rows.index_select(0, indices)

    out = _kernel()(flat(query), flat(key), flat(value), cu, cu, max_len, max_len, float(dropout), causal, False, scale=scaling)[0]
    out = out.to(query.dtype)
    if indices is not None:
        out = out.new_zeros(batch * length, heads, head_dim).index_copy(0, indices, out)
    return out.reshape(batch, length, heads, head_dim), None


def register() -> bool:
    """Registers :data:`TORCH_VARLEN` (attention and FlashAttention's padding-mask function) with
    transformers; False where this transformers has no attention interfaces (before 4.53)."""
    from anglekit.llm.registry import register_attention

    return register_attention(TORCH_VARLEN, varlen_attention_forward, "flash_attention_mask")


__all__ = ["TORCH_VARLEN", "kernel_available", "kernel_dtype", "register", "unpad_layout", "varlen_attention_forward"]
