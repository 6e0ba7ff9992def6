"""Train only the input-embedding rows that the training data reaches (``compact_embeddings``).

A small encoder's input embedding is most of its weights (all-MiniLM-L6-v2: 30522 x 384, 11.7M of
22.7M), and a training step pays for all of it: a dense [V, D] gradient allocated and zeroed, its
norm for clipping, the clip's multiply and AdamW's read and write of the weights and both moments.
Yet a token that no training batch contains gets a zero gradient at every step, and AdamW with
weight decay 0 leaves an element with zero gradient and zero moments where it is (its update is
lr * 0 / (sqrt(0) + eps) = 0). So training a compact [U, D] matrix of the reachable rows (every
token of the in-memory training set, the padding and the special tokens: STS-B train reaches 10650
of MiniLM's 30522) gives the model that training the whole matrix gives: the same elementwise
AdamW on the same rows, the untouched rows bit for bit as they were. The one difference is the
order of the sums in the global gradient norm that clipping divides by (float rounding).

:func:`compacted` (or, as the speed plan decides, :func:`compact_rows` and
:func:`compact_embedding`) swaps the backbone's input embedding for a :class:`CompactEmbedding` for the
length of the training loop and puts the original module back with the trained rows written in,
whatever happens. Checkpoints keep the original key (``weight``, synced when a state dict is taken)
besides ``rows_weight``, and a checkpoint written without compaction resumes into one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

logger = logging.getLogger(__name__)

EXACT_OPTIMIZERS = (None, "adamw_torch", "adamw_torch_fused")
"""Optimizers (``--optim``) whose update of an element with zero gradient and zero state is zero."""
MAX_SHARE = 0.9
"""Compaction is skipped when the training set reaches more than this share of the vocabulary."""
GPU_REASON = "the dense embedding update is cheap and the id check would synchronise each step"
"""Why compaction is for CPUs only: measured on an H100 (MiniLM), the dense update is cheap there, and
the per-step id check synchronises the device, which cost more than it saved (docs/gpu.md)."""


class UnreachedTokenError(RuntimeError):
    """A training batch holds a token outside the compact rows: its row would silently not train."""


class CompactEmbedding(nn.Module):
    """An ``nn.Embedding`` whose trainable rows are ``rows`` only (``rows_weight``, [U, D]); the
    full matrix (``weight``, frozen) answers for the other tokens outside training."""

    def __init__(self, original: nn.Embedding, rows: Tensor) -> None:
        super().__init__()
        self._original = (original,)  # a tuple: not registered as a submodule (keys stay "weight")
        self.weight = original.weight
        self.num_embeddings, self.embedding_dim = original.num_embeddings, original.embedding_dim
        self.padding_idx = original.padding_idx
        rows = torch.unique(rows.to(device=self.weight.device, dtype=torch.long))
        slot = torch.full((self.num_embeddings,), -1, dtype=torch.long, device=rows.device)
        slot[rows] = torch.arange(len(rows), device=rows.device)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("slot", slot, persistent=False)
        self.compact_padding_idx = int(slot[self.padding_idx]) if self.padding_idx is not None and slot[self.padding_idx] >= 0 else None
        self.rows_weight = nn.Parameter(self.weight.detach()[rows].clone(), requires_grad=True)
        self.weight_requires_grad = self.weight.requires_grad
        self.weight.requires_grad_(False)
        self.register_state_dict_pre_hook(lambda module, prefix, keep_vars: module.sync())
        self.register_load_state_dict_pre_hook(self._rows_from_weight)

    def forward(self, input_ids: Tensor) -> Tensor:
        slots = self.slot[input_ids]
        if self.training and torch.is_grad_enabled():
            if not bool((slots >= 0).all()):
                missing = torch.unique(input_ids[slots < 0])[:5].tolist()
                raise UnreachedTokenError(f"token ids {missing} are not among the compact embedding rows (compact_embeddings)")
            return F.embedding(slots, self.rows_weight, self.compact_padding_idx)
        known = (slots >= 0).unsqueeze(-1)
        compact = F.embedding(slots.clamp(min=0), self.rows_weight)
        return torch.where(known, compact, F.embedding(input_ids, self.weight, self.padding_idx))

    @torch.no_grad()
    def sync(self) -> None:
        """Write the trained rows into the full matrix."""
        self.weight[self.rows] = self.rows_weight.to(self.weight.dtype)

    def restore(self) -> nn.Embedding:
        """The original module, its weight holding the trained rows and trainable again."""
        self.sync()
        self.weight.requires_grad_(self.weight_requires_grad)
        return self._original[0]

    def _rows_from_weight(self, module: nn.Module, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        # A checkpoint written without compaction holds "weight" alone: its rows are the start.
        if prefix + "rows_weight" not in state_dict and prefix + "weight" in state_dict:
            state_dict[prefix + "rows_weight"] = state_dict[prefix + "weight"][self.rows.to(state_dict[prefix + "weight"].device)]


def reachable_rows(token_ids: Iterable[Iterable[int]], extra: Iterable[int]) -> np.ndarray:
    """The distinct ids of ``token_ids`` (the training set's texts) and ``extra`` (padding, specials)."""
    seen: set[int] = set()
    for ids in token_ids:
        seen.update(ids)
    seen.update(int(i) for i in extra if i is not None)
    return np.fromiter(sorted(seen), dtype=np.int64, count=len(seen))


def why_not(embedding: Any, model: nn.Module, *, weight_decay: float, optim: str | None) -> str | None:
    """Why the input embedding cannot be compacted exactly, or None when it can."""
    if type(embedding) is not nn.Embedding:
        return f"the input embedding is a {type(embedding).__name__}, not a plain nn.Embedding"
    if not embedding.weight.requires_grad:
        return "the input embedding is frozen"
    if embedding.max_norm is not None or embedding.scale_grad_by_freq or embedding.sparse:
        return "the input embedding uses max_norm, scale_grad_by_freq or sparse gradients"
    if sum(p is embedding.weight for _, p in model.named_parameters(remove_duplicate=False)) != 1:
        return "the input embedding's weight is shared with another module (tied)"
    if weight_decay != 0:
        return f"weight decay {weight_decay} moves every row at every step"
    if optim not in EXACT_OPTIMIZERS:
        return f"the optimizer {optim} is not AdamW (exact only where a zero gradient means no update)"
    return None


def compact_rows(embedder: Any, model: nn.Module, dataset: Any, *, weight_decay: float, optim: str | None,
                 pad_id: int | None = None) -> tuple[np.ndarray | None, str]:  # fmt: skip
    """(the rows ``dataset`` reaches, a note) where ``embedder``'s input embedding can be compacted
    exactly and it is worth it, else (None, why not); the device is the caller's check."""
    backbone = embedder.backbone
    embedding = backbone.get_input_embeddings() if hasattr(backbone, "get_input_embeddings") else None
    token_ids = getattr(dataset, "token_ids", None)
    if token_ids is None:
        return None, f"the training rows ({type(dataset).__name__}) are not tokenized up front"
    reason = why_not(embedding, model, weight_decay=weight_decay, optim=optim)
    if reason is not None:
        return None, reason
    tokenizer = embedder.tokenizer
    rows = reachable_rows(token_ids, [pad_id, tokenizer.pad_token_id, *tokenizer.all_special_ids])
    rows = rows[(rows >= 0) & (rows < embedding.num_embeddings)]  # special ids beyond the matrix are never looked up
    if len(rows) > MAX_SHARE * embedding.num_embeddings:
        return None, f"the training set reaches {len(rows)} of {embedding.num_embeddings} rows"
    return rows, f"training {len(rows)} of {embedding.num_embeddings} input-embedding rows (the tokens the training set reaches)"


@contextmanager
def compact_embedding(backbone: Any, rows: np.ndarray) -> Iterator[CompactEmbedding]:
    """For the body, ``backbone``'s input embedding trains ``rows`` only (a :class:`CompactEmbedding`);
    the original module, with the trained rows written in, is back afterwards, whatever happens."""
    compact = CompactEmbedding(backbone.get_input_embeddings(), torch.from_numpy(rows))
    backbone.set_input_embeddings(compact)
    try:
        yield compact
    finally:
        backbone.set_input_embeddings(compact.restore())


@contextmanager
def compacted(
    embedder: Any, model: nn.Module, dataset: Any, *, enabled: bool, weight_decay: float, optim: str | None, pad_id: int | None = None
) -> Iterator[CompactEmbedding | None]:
    """For the body, ``embedder``'s backbone trains only the rows ``dataset`` reaches (its texts'
    tokens, ``pad_id`` and the tokenizer's special tokens; see the module doc); the original
    embedding, with the trained rows, is back afterwards. Yields the compact module, or None where
    compaction is off, not exact or not worth it (logged)."""
    rows, note = None, "off (compact_embeddings false)"
    if enabled and embedder.device.type != "cpu":
        note = f"on {embedder.device.type} {GPU_REASON}"
    elif enabled:
        rows, note = compact_rows(embedder, model, dataset, weight_decay=weight_decay, optim=optim, pad_id=pad_id)
    if rows is None:
        logger.info("compact embeddings: not used (%s)", note)
        yield None
        return
    logger.info("compact embeddings: %s", note)
    with compact_embedding(embedder.backbone, rows) as compact:
        yield compact
