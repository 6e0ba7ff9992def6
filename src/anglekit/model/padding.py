"""Pad token-id lists into tensors (no tokenizer call: ids are tokenized once, padded per batch)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor


def pad_token_ids(sequences: Sequence[Sequence[int]], pad_id: int, *, left: bool = False, multiple: int = 1, cap: int | None = None) -> dict[str, Tensor]:
    """``input_ids`` and ``attention_mask`` [len(sequences), width] padded on the left or right;
    ``width`` is the longest sequence rounded up to a ``multiple`` (never past ``cap``, the
    model's max length, unless the longest sequence already is)."""
    if not sequences:
        raise ValueError("cannot pad an empty batch")
    if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
        raise ValueError(f"multiple must be a positive int, got {multiple!r}")
    width = max(len(s) for s in sequences)
    if multiple > 1:
        rounded = -(-width // multiple) * multiple
        width = rounded if cap is None else max(width, min(rounded, cap))
    ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, seq in enumerate(sequences):
        n = len(seq)
        span = slice(width - n, width) if left else slice(0, n)
        ids[row, span] = seq
        mask[row, span] = 1
    return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}
