"""Several datasets in one run: each with its own task, objective and loss weight; a batch never
mixes datasets, so in-batch negatives never cross them.

:class:`MultiDataset` joins the tokenized datasets (item ``i`` is ``(dataset, row)``);
:class:`MultiCollator` collates a batch with its dataset's collator and tags it with
``dataset`` (an index); :class:`DatasetBatchSampler` forms each dataset's batches on its own
(length-grouped, or by the token budget) and interleaves them:

* ``proportional`` (the default): a seeded random order of every dataset's batches, so over an
  epoch dataset k gives exactly its ``n_k`` batches and at any point about ``n_k / sum(n)`` of them;
* ``round_robin``: one batch of each dataset in turn; a dataset whose batches are used up drops
  out and the others continue until every batch of the epoch is trained.

With several processes, batch ``i`` goes to process ``i mod world`` (accelerate), so batches come
in blocks of ``world`` from one dataset: every process of a step trains the same dataset (the
gathered negatives come from one dataset too). A dataset's batches beyond a multiple of ``world``
are left out of that epoch (a warning says how many).

:class:`Weighted` multiplies an objective's loss by its dataset's weight (GradCache and the plain
step alike see the weighted loss).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset, Sampler

from anglekit.losses.combined import ObjectiveOutput
from anglekit.training.sampler import LengthGroupedSampler, TokenBudgetBatchSampler

logger = logging.getLogger(__name__)

__all__ = ["DatasetBatchSampler", "MultiCollator", "MultiDataset", "TrainingDataset", "Weighted"]

ORDERS = ("proportional", "round_robin")


@dataclass
class TrainingDataset:
    """One dataset of a multi-dataset run: its name, task, objective (weighted) and rows."""

    name: str
    task: Any
    objective: Any
    weight: float
    train_set: Any
    objective_config: Any = None


class Weighted(nn.Module):
    """``weight * objective(...)``: the loss scaled, the components as the objective gives them."""

    def __init__(self, objective: nn.Module, weight: float) -> None:
        super().__init__()
        self.objective = objective
        self.weight = float(weight)

    @property
    def batch_kind(self) -> str:
        return self.objective.batch_kind  # type: ignore[no-any-return]

    @property
    def needs_layers(self) -> bool:
        return bool(getattr(self.objective, "needs_layers", False))

    def forward(self, *args: Any, **kwargs: Any) -> ObjectiveOutput:
        out = self.objective(*args, **kwargs)
        return out if self.weight == 1.0 else ObjectiveOutput(loss=self.weight * out.loss, components=out.components, stats=out.stats)


class MultiDataset(Dataset):
    """Tokenized datasets joined: index ``offset_k + j`` is row ``j`` of dataset ``k``."""

    def __init__(self, parts: Sequence[Any]) -> None:
        if not parts:
            raise ValueError("MultiDataset needs at least one dataset")
        self.parts = list(parts)
        self.offsets = [0]
        for part in self.parts:
            self.offsets.append(self.offsets[-1] + len(part))

    def __len__(self) -> int:
        return self.offsets[-1]

    def locate(self, index: int) -> tuple[int, int]:
        """(dataset, row) of a joined index."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} rows")
        k = next(k for k in range(len(self.parts)) if index < self.offsets[k + 1])
        return k, index - self.offsets[k]

    def __getitem__(self, index: int) -> tuple[int, Any]:
        k, row = self.locate(index)
        return k, self.parts[k][row]

    def part_lengths(self, k: int) -> list[int]:
        """Token lengths of dataset ``k``'s rows (1 each when it has none)."""
        part = self.parts[k]
        return part.lengths() if hasattr(part, "lengths") else [1] * len(part)

    def lengths(self) -> list[int]:
        return [length for k in range(len(self.parts)) for length in self.part_lengths(k)]

    @property
    def token_ids(self) -> list[list[int]] | None:
        """Every dataset's distinct texts in token ids (what compact embeddings read), or None when
        one of them has none (streamed)."""
        every = [getattr(part, "token_ids", None) for part in self.parts]
        return None if any(ids is None for ids in every) else list(chain.from_iterable(every))  # type: ignore[arg-type]


class MultiCollator:
    """A batch of one dataset's rows -> that dataset's collated batch plus ``dataset`` (its index)."""

    def __init__(self, collators: Sequence[Any]) -> None:
        self.collators = list(collators)
        self.pad_id = getattr(self.collators[0], "pad_id", None)

    def __call__(self, batch: Sequence[tuple[int, Any]]) -> dict[str, Any]:
        if not batch:
            raise ValueError("empty batch")
        datasets = {k for k, _ in batch}
        if len(datasets) != 1:
            raise ValueError(f"a batch mixes rows of datasets {sorted(datasets)}; batches must come from one dataset")
        k = datasets.pop()
        out = self.collators[k]([item for _, item in batch])
        out["dataset"] = torch.tensor(k)
        return out


class DatasetBatchSampler(Sampler[list[int]]):
    """Batches of joined indices, each from one dataset, interleaved by ``order`` (module doc).

    Within a dataset: length-grouped batches of ``batch_size`` (``group_by_length``), plain shuffled
    ones, or token-budget batches (``max_tokens``); everything follows from (seed, epoch).
    """

    def __init__(
        self,
        dataset: MultiDataset,
        batch_size: int,
        *,
        order: str = "proportional",
        seed: int = 0,
        group_by_length: bool = True,
        max_tokens: int | None = None,
        block: int = 1,
    ) -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
        if batch_size < 1 or block < 1:
            raise ValueError(f"batch_size and block must be >= 1, got {batch_size} and {block}")
        self.dataset = dataset
        self.batch_size = batch_size
        self.order = order
        self.seed = seed
        self.group_by_length = group_by_length
        self.max_tokens = max_tokens
        self.block = block
        self.epoch = 0
        self.dropped = 0
        """Batches left out of each epoch to fill whole blocks (several processes)."""

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _part_batches(self, k: int) -> list[list[int]]:
        lengths = self.dataset.part_lengths(k)
        seed = self.seed * 1_000_003 + 7919 * k  # a stream per dataset, each following (seed, epoch)
        if self.max_tokens is not None:
            budget = TokenBudgetBatchSampler(lengths, self.max_tokens, seed=seed)
            budget.set_epoch(self.epoch)
            rows = budget.batches()
        else:
            if self.group_by_length:
                grouped = LengthGroupedSampler(lengths, self.batch_size, seed=seed)
                grouped.set_epoch(self.epoch)
                order = list(grouped)
            else:
                generator = torch.Generator().manual_seed(seed * 1_000_003 + self.epoch)
                order = torch.randperm(len(lengths), generator=generator).tolist()
            rows = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        offset = self.dataset.offsets[k]
        return [[offset + i for i in batch] for batch in rows]

    def _blocks(self) -> tuple[list[list[list[list[int]]]], int]:
        """Each dataset's batches in blocks of ``block`` consecutive ones (a remainder left out), and
        how many were left out."""
        blocks, dropped = [], 0
        for k in range(len(self.dataset.parts)):
            batches = self._part_batches(k)
            whole = len(batches) - len(batches) % self.block
            dropped += len(batches) - whole
            blocks.append([batches[i : i + self.block] for i in range(0, whole, self.block)])
        return blocks, dropped

    def batches(self) -> list[list[int]]:
        """This epoch's batches, in training order."""
        blocks, self.dropped = self._blocks()
        if self.order == "proportional":
            labels = [k for k, part in enumerate(blocks) for _ in part]
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch + 104_729)
            sequence = [labels[i] for i in torch.randperm(len(labels), generator=generator).tolist()]
        else:
            sequence = []
            remaining = [len(part) for part in blocks]
            while any(remaining):
                for k in range(len(blocks)):
                    if remaining[k]:
                        sequence.append(k)
                        remaining[k] -= 1
        taken = [0] * len(blocks)
        out: list[list[int]] = []
        for k in sequence:
            out.extend(blocks[k][taken[k]])
            taken[k] += 1
        return out

    def __len__(self) -> int:
        return len(self.batches())

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.batches()
        if self.dropped:
            logger.warning("%d batch(es) left out of epoch %d so that every process trains the same dataset in a step", self.dropped, self.epoch)
        yield from batches


def component_names(name: str, components: dict[str, Tensor]) -> dict[str, Tensor]:
    """A dataset's components under ``<name>/<component>`` (logged as ``loss_<name>/<component>``)."""
    return {f"{name}/{component}": value for component, value in components.items()}
