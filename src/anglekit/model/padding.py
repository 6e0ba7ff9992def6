"""Pad token-id lists into tensors (no tokenizer call: ids are tokenized once, padded per batch)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor


def pad_token_ids(sequences: Sequence[Sequence[int]], pad_id: int, *, left: bool = False) -> dict[str, Tensor]:
    """``input_ids`` and ``attention_mask`` [len(sequences), longest] padded on the left or right."""
    if not sequences:
        raise ValueError("cannot pad an empty batch")
    width = max(len(s) for s in sequences)
    ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, seq in enumerate(sequences):
        n = len(seq)
        span = slice(width - n, width) if left else slice(0, n)
        ids[row, span] = seq
        mask[row, span] = 1
    return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}
