"""All-gather of in-batch candidates across processes, with gradients (multi-GPU contrastive training).

With N processes of B sentences each, gathering the positives (and hard negatives) of every
process gives each anchor N*B - 1 in-batch negatives instead of B - 1, as SimCSE's distributed
training does. The gather is differentiable: the gradient of every process's loss reaches the rows
that another process contributed (backward sums the full gradient over processes with an
all-reduce, which every backend supports, and keeps this process's rows). Batches may differ in
size between processes (the last batch of an epoch): rows are padded for the collective and the
padding is dropped again.

Nothing here runs unless ``torch.distributed`` is initialised with more than one process.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["distributed_world", "gather_rows"]


def distributed_world() -> tuple[int, int]:
    """``(rank, world_size)`` of the default process group, ``(0, 1)`` when there is none."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _sizes(rows: int, device: torch.device) -> list[int]:
    import torch.distributed as dist

    mine = torch.tensor([rows], device=device, dtype=torch.long)
    every = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    return [int(t.item()) for t in every]


def _padded_gather(tensor: Tensor, sizes: list[int]) -> Tensor:
    import torch.distributed as dist

    longest = max(sizes)
    padded = tensor.new_zeros((longest, *tensor.shape[1:]))
    padded[: tensor.shape[0]] = tensor
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded.contiguous())
    return torch.cat([part[:size] for part, size in zip(parts, sizes, strict=True)])


class _GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Tensor, sizes: list[int], rank: int) -> Tensor:  # type: ignore[override]
        ctx.sizes, ctx.rank = sizes, rank
        return _padded_gather(tensor, sizes)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:  # type: ignore[override]
        import torch.distributed as dist

        total = grad.contiguous().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        start = sum(ctx.sizes[: ctx.rank])
        return total[start : start + ctx.sizes[ctx.rank]], None, None


def gather_rows(*tensors: Tensor) -> tuple[list[Tensor], int]:
    """Rows of each tensor from every process, in rank order, and where this process's rows start.

    The tensors share their number of rows (e.g. vectors and their text ids), so one exchange of
    batch sizes serves them all. A tensor that requires grad is gathered differentiably. Without
    a multi-process group this is ``(list(tensors), 0)``.
    """
    rank, world = distributed_world()
    if world == 1:
        return list(tensors), 0
    rows = {t.shape[0] for t in tensors}
    if len(rows) != 1:
        raise ValueError(f"gather_rows: the tensors must have the same number of rows, got {sorted(rows)}")
    sizes = _sizes(rows.pop(), tensors[0].device)
    gathered = [_GatherRows.apply(t, sizes, rank) if t.requires_grad else _padded_gather(t, sizes) for t in tensors]
    return gathered, sum(sizes[:rank])
