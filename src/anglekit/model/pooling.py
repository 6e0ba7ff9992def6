"""Pooling strategies: token states -> one vector per text. Every strategy is masked.

The strategies are the ones the AnglE paper compares (Table 7) plus ``last_token`` for decoder LLMs.
Padding never enters a mean or a max, whatever side the tokenizer pads on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from anglekit.errors import ConfigError

POOLING_STRATEGIES: tuple[str, ...] = ("cls", "cls_avg", "last_avg", "last_max", "first_last_avg", "last_token")


def masked_mean(states: Tensor, mask: Tensor) -> Tensor:
    """Mean over the sequence of ``states`` [B, T, H] where ``mask`` [B, T] is 1."""
    weights = mask.to(states.dtype).unsqueeze(-1)
    total = (states * weights).sum(dim=1)
    count = weights.sum(dim=1).clamp(min=1.0)
    return total / count


def masked_max(states: Tensor, mask: Tensor) -> Tensor:
    """Max over the sequence where ``mask`` is 1 (padding is set to the dtype's minimum first)."""
    fill = torch.finfo(states.dtype).min
    masked = states.masked_fill(~mask.bool().unsqueeze(-1), fill)
    return masked.max(dim=1).values


def first_token(states: Tensor, mask: Tensor) -> Tensor:
    """State of the first real token of each row (position 0 with right padding; CLS for BERT)."""
    index = mask.long().argmax(dim=1)  # first position where mask is 1
    return states[torch.arange(states.shape[0], device=states.device), index]


def last_token(states: Tensor, mask: Tensor) -> Tensor:
    """State of the last non-padding token, correct for left and right padding.

    The last real token is the highest position whose mask is 1, which is found without assuming
    a padding side: positions are weighted by the mask and the largest one is taken.
    """
    positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0).expand_as(mask)
    index = (positions * mask.long()).argmax(dim=1)
    return states[torch.arange(states.shape[0], device=states.device), index]


def pool(strategy: str, hidden_states: Sequence[Tensor], attention_mask: Tensor) -> Tensor:
    """Pool ``hidden_states`` (embedding output, layer 1, ..., last layer) with ``strategy``.

    ``hidden_states`` follows transformers' ``output_hidden_states`` layout: index 0 is the
    embedding layer, index 1 the first transformer layer, -1 the last layer.
    """
    last = hidden_states[-1]
    if strategy == "cls":
        return first_token(last, attention_mask)
    if strategy == "cls_avg":
        return (first_token(last, attention_mask) + masked_mean(last, attention_mask)) / 2.0
    if strategy == "last_avg":
        return masked_mean(last, attention_mask)
    if strategy == "last_max":
        return masked_max(last, attention_mask)
    if strategy == "first_last_avg":
        # SimCSE's convention: hidden_states[1] is the first transformer layer's output.
        if len(hidden_states) < 2:
            raise ValueError("first_last_avg needs all hidden states (output_hidden_states=True)")
        first = hidden_states[1]
        return (masked_mean(first, attention_mask) + masked_mean(last, attention_mask)) / 2.0
    if strategy == "last_token":
        return last_token(last, attention_mask)
    raise ConfigError(f"unknown pooling {strategy!r}; choose one of {', '.join(POOLING_STRATEGIES)}")


def needs_all_hidden_states(strategy: str) -> bool:
    """Whether ``strategy`` reads a layer other than the last (so the backbone must return them all)."""
    check_strategy(strategy)
    return strategy == "first_last_avg"


def check_strategy(strategy: str) -> str:
    if strategy not in POOLING_STRATEGIES:
        raise ConfigError(f"unknown pooling {strategy!r}; choose one of {', '.join(POOLING_STRATEGIES)}")
    return strategy


PoolFn = Callable[[Sequence[Tensor], Tensor], Tensor]
