"""Length-grouped, seeded, epoch-aware sampling: batches of similar length, little padding."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Sampler


class LengthGroupedSampler(Sampler[int]):
    """Shuffle, then sort inside mega-batches of ``mega * batch_size`` items by length.

    Consecutive runs of ``batch_size`` indices form batches of similar length; the batches are then
    shuffled so the order of lengths is random. The permutation depends only on (seed, epoch), so
    a resumed run skips exactly the batches it had already trained on.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, *, seed: int = 0, mega: int = 50) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.lengths = list(lengths)
        self.batch_size = batch_size
        self.seed = seed
        self.mega = mega
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        span = self.mega * self.batch_size
        batches: list[list[int]] = []
        for start in range(0, len(order), span):
            group = sorted(order[start : start + span], key=lambda i: -self.lengths[i])
            batches.extend(group[i : i + self.batch_size] for i in range(0, len(group), self.batch_size))
        # Keep the (possibly short) last batch last, shuffle the rest.
        full = [b for b in batches if len(b) == self.batch_size]
        short = [b for b in batches if len(b) < self.batch_size]
        permutation = torch.randperm(len(full), generator=generator).tolist()
        for index in permutation:
            yield from full[index]
        for batch in short:
            yield from batch


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Batches formed by a token budget: ``rows x longest row's tokens <= max_tokens``.

    A row's length is its longest text (the sides of a pair are padded jointly to one width), so a
    batch's forward pass holds (texts per row) x that many token positions. Rows are sorted by
    length, ties broken by a (seed, epoch) shuffle, and consecutive rows are taken while the budget
    holds; a row longer than the budget forms a batch alone. The batch boundaries follow from the
    sorted lengths alone, so every epoch has the same number of batches (what transformers' Trainer
    counts its steps and a resume's skip by), while which rows of equal length share a batch and the
    order of the batches change with (seed, epoch).
    """

    def __init__(self, lengths: Sequence[int], max_tokens: int, *, seed: int = 0) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        self.lengths = [max(1, int(length)) for length in lengths]
        self.max_tokens = max_tokens
        self.seed = seed
        self.epoch = 0
        self._sizes = self._batch_sizes(sorted(self.lengths))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _batch_sizes(self, sorted_lengths: list[int]) -> list[int]:
        sizes: list[int] = []
        count = 0
        for length in sorted_lengths:  # ascending: the new row is the batch's longest
            if count and (count + 1) * length > self.max_tokens:
                sizes.append(count)
                count = 0
            count += 1
        if count:
            sizes.append(count)
        return sizes

    @property
    def oversized(self) -> int:
        """Rows longer than the budget (each trained in a batch of its own)."""
        return sum(1 for length in self.lengths if length > self.max_tokens)

    def __len__(self) -> int:
        return len(self._sizes)

    def batches(self) -> list[list[int]]:
        """This epoch's batches, in training order."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        ties = torch.rand(len(self.lengths), generator=generator).tolist()
        order = sorted(range(len(self.lengths)), key=lambda i: (self.lengths[i], ties[i]))
        batches: list[list[int]] = []
        start = 0
        for size in self._sizes:
            batches.append(order[start : start + size])
            start += size
        permutation = torch.randperm(len(batches), generator=generator).tolist()
        return [batches[i] for i in permutation]

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.batches()
