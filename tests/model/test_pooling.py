"""Pooling strategies against hand computations with explicit loops, on padded batches.

Padded positions hold huge garbage values, so any leak of padding into a mean, a max or a token
pick shows up as an enormous error. Every strategy is checked with right and left padding.
"""

from __future__ import annotations

import math

import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.model.pooling import (
    POOLING_STRATEGIES,
    check_strategy,
    first_token,
    last_token,
    masked_max,
    masked_mean,
    needs_all_hidden_states,
    pool,
)

GARBAGE = 1.0e6
LENGTHS = [6, 3, 1, 4]
WIDTH = 6
HIDDEN = 5
N_LAYERS = 4  # hidden_states: embeddings, layer 1, layer 2, last layer


def _rows_of(lengths: list[int], seed: int = 0) -> list[list[torch.Tensor]]:
    """Per text, per layer, a [length, HIDDEN] tensor of real token states (float64)."""
    gen = torch.Generator().manual_seed(seed)
    return [[torch.randn(n, HIDDEN, generator=gen, dtype=torch.float64) for _ in range(N_LAYERS)] for n in lengths]


def _padded(rows: list[list[torch.Tensor]], side: str, width: int = WIDTH) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Batch ``rows`` into N_LAYERS tensors [B, width, H], padding holding +huge garbage, and the mask."""
    gen = torch.Generator().manual_seed(123)
    batch = len(rows)
    layers = [GARBAGE * (1.0 + torch.rand(batch, width, HIDDEN, generator=gen, dtype=torch.float64)) for _ in range(N_LAYERS)]
    mask = torch.zeros(batch, width, dtype=torch.long)
    for b, per_layer in enumerate(rows):
        n = per_layer[0].shape[0]
        start = width - n if side == "left" else 0
        mask[b, start : start + n] = 1
        for layer, states in enumerate(per_layer):
            layers[layer][b, start : start + n] = states
    return layers, mask


# ------------------------------------------------------------------ hand references (loops)


def _mean(states: torch.Tensor) -> list[float]:
    n = states.shape[0]
    out = []
    for h in range(HIDDEN):
        total = 0.0
        for t in range(n):
            total += float(states[t, h])
        out.append(total / n)
    return out


def _max(states: torch.Tensor) -> list[float]:
    out = []
    for h in range(HIDDEN):
        best = -math.inf
        for t in range(states.shape[0]):
            best = max(best, float(states[t, h]))
        out.append(best)
    return out


def hand_pool(strategy: str, per_layer: list[torch.Tensor]) -> list[float]:
    """Reference pooling of ONE unpadded text (``per_layer[i]`` is hidden_states[i], [n, H])."""
    last = per_layer[-1]
    first_tok = [float(v) for v in last[0]]
    last_tok = [float(v) for v in last[last.shape[0] - 1]]
    if strategy == "cls":
        return first_tok
    if strategy == "cls_avg":
        return [(a + b) / 2 for a, b in zip(first_tok, _mean(last), strict=False)]
    if strategy == "last_avg":
        return _mean(last)
    if strategy == "last_max":
        return _max(last)
    if strategy == "first_last_avg":
        return [(a + b) / 2 for a, b in zip(_mean(per_layer[1]), _mean(last), strict=False)]
    if strategy == "last_token":
        return last_tok
    raise AssertionError(strategy)


# ------------------------------------------------------------------ tests


def test_strategy_list_is_complete() -> None:
    assert set(POOLING_STRATEGIES) == {"cls", "cls_avg", "last_avg", "last_max", "first_last_avg", "last_token"}


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("strategy", POOLING_STRATEGIES)
def test_pool_matches_hand_computation_on_padded_batch(strategy: str, side: str) -> None:
    rows = _rows_of(LENGTHS)
    layers, mask = _padded(rows, side)
    got = pool(strategy, layers, mask)
    assert got.shape == (len(LENGTHS), HIDDEN)
    assert torch.isfinite(got).all()
    for b, per_layer in enumerate(rows):
        expected = hand_pool(strategy, per_layer)
        for h in range(HIDDEN):
            assert float(got[b, h]) == pytest.approx(expected[h], abs=1e-9), (strategy, side, b, h)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("strategy", POOLING_STRATEGIES)
def test_padding_does_not_change_a_row(strategy: str, side: str) -> None:
    """A text pooled alone (no padding at all) equals the same text inside a padded batch."""
    rows = _rows_of(LENGTHS, seed=7)
    layers, mask = _padded(rows, side, width=WIDTH + 3)  # every row padded, even the longest
    batched = pool(strategy, layers, mask)
    for b, per_layer in enumerate(rows):
        alone_layers = [s.unsqueeze(0) for s in per_layer]
        alone_mask = torch.ones(1, per_layer[0].shape[0], dtype=torch.long)
        alone = pool(strategy, alone_layers, alone_mask)
        torch.testing.assert_close(batched[b], alone[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("side", ["right", "left"])
def test_cls_is_first_real_token_and_last_token_is_last_real_token(side: str) -> None:
    # Distinct marker values per position make the picked position readable.
    batch, width = 3, 5
    lengths = [5, 2, 3]
    states = torch.full((batch, width, 1), GARBAGE)
    mask = torch.zeros(batch, width, dtype=torch.long)
    for b, n in enumerate(lengths):
        start = width - n if side == "left" else 0
        for k in range(n):
            states[b, start + k, 0] = 100 * b + k  # k = index among the REAL tokens
            mask[b, start + k] = 1
    cls = pool("cls", [states], mask)[:, 0].tolist()
    last = pool("last_token", [states], mask)[:, 0].tolist()
    assert cls == [100 * b + 0 for b in range(batch)]
    assert last == [100 * b + n - 1 for b, n in enumerate(lengths)]
    assert first_token(states, mask)[:, 0].tolist() == cls
    assert last_token(states, mask)[:, 0].tolist() == last


def test_first_last_avg_reads_hidden_states_1_and_last() -> None:
    """hidden_states[0] is the embedding output: first_last_avg must use [1] (first transformer layer)."""
    mask = torch.ones(1, 2, dtype=torch.long)
    embeddings = torch.full((1, 2, 1), 1000.0)
    layer1 = torch.tensor([[[2.0], [4.0]]])  # mean 3
    layer2 = torch.full((1, 2, 1), -500.0)
    last = torch.tensor([[[10.0], [20.0]]])  # mean 15
    got = pool("first_last_avg", [embeddings, layer1, layer2, last], mask)
    assert got.item() == pytest.approx((3.0 + 15.0) / 2)
    with pytest.raises(ValueError, match="hidden states"):
        pool("first_last_avg", [last], mask)


def test_last_max_with_all_negative_states_ignores_zero_padding() -> None:
    """Padding filled with 0 (or anything) must not win a max over negative real values."""
    states = torch.tensor([[[-3.0, -1.0], [-2.0, -5.0], [0.0, 0.0], [0.0, 0.0]]])
    mask = torch.tensor([[1, 1, 0, 0]])
    assert pool("last_max", [states], mask).tolist() == [[-2.0, -1.0]]
    assert masked_max(states, mask).tolist() == [[-2.0, -1.0]]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("strategy", ["last_avg", "last_max", "cls", "last_token"])
def test_half_precision_padding_does_not_leak(strategy: str, dtype: torch.dtype) -> None:
    rows = _rows_of([4, 2])
    layers64, mask = _padded(rows, "right")
    layers = [torch.where(mask.bool().unsqueeze(-1), x, torch.full_like(x, 6.0e4)).to(dtype) for x in layers64]
    got = pool(strategy, layers, mask).double()
    for b, per_layer in enumerate(rows):
        expected = torch.tensor(hand_pool(strategy, per_layer), dtype=torch.float64)
        torch.testing.assert_close(got[b], expected, rtol=2e-2, atol=2e-2)


def test_masked_mean_of_a_row_is_its_plain_mean() -> None:
    states = torch.arange(12, dtype=torch.float32).reshape(1, 4, 3)
    mask = torch.tensor([[1, 1, 1, 0]])
    torch.testing.assert_close(masked_mean(states, mask), states[:, :3].mean(dim=1))


def test_unknown_strategy_is_a_config_error() -> None:
    states = torch.zeros(1, 2, 3)
    mask = torch.ones(1, 2, dtype=torch.long)
    with pytest.raises(ConfigError, match="unknown pooling 'mean'"):
        pool("mean", [states], mask)
    with pytest.raises(ConfigError, match="cls_avg"):  # the message lists the valid choices
        check_strategy("avg")
    with pytest.raises(ConfigError):
        needs_all_hidden_states("CLS")


def test_needs_all_hidden_states_only_for_first_last_avg() -> None:
    assert [s for s in POOLING_STRATEGIES if needs_all_hidden_states(s)] == ["first_last_avg"]
