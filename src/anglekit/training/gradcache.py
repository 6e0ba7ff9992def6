"""GradCache (Gao et al., 2021): the exact gradient of a large batch with one chunk's activations.

A contrastive loss couples every row of a batch (each anchor meets every candidate), so it cannot be
split into independent micro-batches the way gradient accumulation splits a sum. GradCache splits
the *model* part instead. For a batch of N texts embedded as ``v = f_theta(x)`` ([N, D]) and a loss
``L(v)``, the chain rule gives ``dL/dtheta = sum_n (dL/dv_n) . (dv_n/dtheta)``. So:

1. embed the batch in chunks of c texts without gradients, saving each chunk's RNG state first;
2. compute ``L`` on the full matrix ``v`` (a leaf that requires grad) and backpropagate to get
   ``g = dL/dv`` (cheap: only the loss graph, no model activations);
3. embed each chunk again *with* gradients, restoring its saved RNG state so that dropout draws
   the same masks as in step 1, and backpropagate ``g`` of that chunk into the weights.

Peak activation memory is that of one chunk; the gradient equals that of embedding the batch
chunk by chunk with gradients and backpropagating ``L`` once (the same dropout masks), at the
cost of a second forward pass. With several processes, step 2 gathers candidates from every
process (:mod:`anglekit.training.gather`), and the gather's backward sends each process the
gradient that all processes' losses put on its rows.

The loss must depend on the model only through the final embeddings (every pair, sentence and
triplet objective, with or without Matryoshka); ESE reads every layer's output and is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from anglekit.errors import ConfigError
from anglekit.losses.combined import ObjectiveOutput

__all__ = ["RngState", "check_gradcache", "gradcache_step"]


@dataclass
class RngState:
    """The CPU generator's state and, when CUDA is in use, every visible GPU's generator state."""

    cpu: Tensor
    cuda: list[Tensor] | None

    @classmethod
    def capture(cls) -> RngState:
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        return cls(torch.get_rng_state(), cuda)

    @contextmanager
    def restored(self) -> Iterator[None]:
        """Run the block with these states; the generators continue afterwards as before the block."""
        devices = list(range(len(self.cuda))) if self.cuda is not None else []
        with torch.random.fork_rng(devices=devices):
            torch.set_rng_state(self.cpu)
            if self.cuda is not None:
                torch.cuda.set_rng_state_all(self.cuda)
            yield


def check_gradcache(objective: Any) -> None:
    """A ConfigError for an objective GradCache cannot run exactly (one that reads more than the final embeddings)."""
    if getattr(objective, "needs_layers", False):
        raise ConfigError(
            "gradcache_chunk_size does not combine with ese: ESE's loss reads every layer's output and GradCache caches only the final embeddings"
        )


def _chunks(inputs: dict[str, Tensor], size: int) -> list[dict[str, Tensor]]:
    rows = next(iter(inputs.values())).shape[0]
    return [{k: v[start : start + size] for k, v in inputs.items()} for start in range(0, rows, size)]


def gradcache_step(
    task: Any,
    services: Any,
    objective: Any,
    model: Any,
    inputs: dict[str, Tensor],
    chunk_size: int,
    *,
    backward: Callable[[Tensor], None],
    loss_scale: float = 1.0,
    no_sync: Callable[[], AbstractContextManager[Any]] = nullcontext,
    forward_context: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> tuple[Tensor, ObjectiveOutput, int]:
    """One GradCache step of ``task`` (a :class:`~anglekit.training.tasks.TrainingTask`) on a batch;
    gradients are accumulated into the model's parameters.

    ``backward(loss * loss_scale)`` runs the loss's backward (e.g. ``accelerator.backward``, which
    may scale it for fp16); the cached gradients then flow into each chunk as they are (already
    scaled). ``no_sync()`` wraps every chunk's backward but the last (DDP: one all-reduce per step);
    ``forward_context()`` wraps each forward pass (autocast). Returns (embeddings without grad,
    objective output, rows trained), as :meth:`TrainingTask.loss` does.
    """
    check_gradcache(objective)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(f"gradcache_chunk_size must be an integer >= 1, got {chunk_size!r}")
    rows, windows = task.embedding_rows(model, inputs)  # long texts: their windows are the rows
    chunks = _chunks(rows, chunk_size)
    states: list[RngState] = []
    parts: list[Tensor] = []
    with torch.no_grad():  # pass 1: embeddings only
        for chunk in chunks:
            states.append(RngState.capture())
            with forward_context():
                parts.append(model(**chunk).float())
    cached = torch.cat(parts).requires_grad_(True)
    with forward_context():
        vectors, out, size = task.fp32_loss(services, objective, task.pool(model, cached, windows), inputs)
    backward(out.loss * loss_scale)
    if cached.grad is None:  # the loss does not depend on the embeddings (no term active)
        return vectors.detach(), out, size
    grads = cached.grad
    start = 0
    for index, (chunk, state) in enumerate(zip(chunks, states, strict=True)):  # pass 2: the same forward, now with grad
        rows = chunk["input_ids"].shape[0]
        last = index == len(chunks) - 1
        with state.restored(), nullcontext() if last else no_sync():
            with forward_context():
                embedded = model(**chunk).float()
            embedded.backward(grads[start : start + rows])
        start += rows
    return vectors.detach(), out, size
