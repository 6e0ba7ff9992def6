"""``--guide MODEL``: the guide's embeddings of each training batch (:mod:`anglekit.losses.guide`).

A guide other than the student is loaded once, frozen, and embeds every distinct training text
before training (:mod:`anglekit.training.frozen`, as ``--distill-teacher`` does) with its own
tokenizer, prompts and max length: its tokenizer may differ from the student's. Each batch looks
its rows up (the collators send the training ``rows``). A guide that names the student itself is
allowed (with a warning): then the guide is the student as it trains, its embeddings of the batch
detached (as sentence-transformers' GISTEmbedLoss with ``guide=model`` scores under ``no_grad``;
anglekit reuses the batch's own forward pass rather than running a second one, so in training mode
the dropout masks are the batch's own).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from anglekit.errors import ConfigError
from anglekit.losses.guide import GuideTable, GuideVectors
from anglekit.training.frozen import embed_frozen, load_frozen, same_model

logger = logging.getLogger(__name__)

__all__ = ["Guide", "attach_guide", "guide_of", "guide_rows", "guide_table", "guided"]


@dataclass(frozen=True)
class Guide:
    """The guide of an objective: its ``name`` and ``table`` (None: the student itself)."""

    name: str
    table: GuideTable | None

    def rows(self, vectors: Tensor, inputs: dict[str, Tensor]) -> Tensor:
        """The guide's vectors [N, D'] of a batch laid out as the student's ``vectors`` [N, D]
        (or [layers, N, D]: the last layer is the embedding)."""
        final = vectors if vectors.dim() == 2 else vectors[-1]
        if self.table is None:
            return final.detach()
        if "rows" not in inputs:
            raise ValueError("a guided batch needs the training rows (the collator's 'rows')")
        looked_up = self.table.lookup(inputs["rows"]).to(final.device, torch.float32)
        if looked_up.shape[0] != final.shape[0]:
            raise ValueError(f"the guide's batch has {looked_up.shape[0]} texts and the student's {final.shape[0]}")
        return looked_up


def guide_table(name: str, train_set: Any, *, batch_size: int = 64) -> GuideTable:
    """The guide ``name``'s embeddings of ``train_set``: pairs' texts with the general prompt,
    (anchor, positive[, negatives]) rows' anchors as queries and the rest as documents."""
    model = load_frozen(name, "--guide")
    what = f"the guide {name}"
    if hasattr(train_set, "text1"):
        frozen = embed_frozen(model, {None: [*train_set.text1, *train_set.text2]}, batch_size=batch_size, what=what)
        cells = np.stack([frozen.index(None, train_set.text1), frozen.index(None, train_set.text2)], axis=1)
        return GuideTable(frozen.vectors, torch.from_numpy(cells.astype(np.int64)))
    negative_lists = train_set.negative_lists()
    width = max((len(row) for row in negative_lists), default=0)
    documents = [*train_set.positive, *(text for row in negative_lists for text in row)]
    frozen = embed_frozen(model, {"query": train_set.anchor, "document": documents}, batch_size=batch_size, what=what)
    cells = np.full((len(train_set), 2 + width), -1, dtype=np.int64)
    cells[:, 0] = frozen.index("query", train_set.anchor)
    cells[:, 1] = frozen.index("document", train_set.positive)
    for row, texts in enumerate(negative_lists):
        cells[row, 2 : 2 + len(texts)] = frozen.index("document", texts)
    return GuideTable(frozen.vectors, torch.from_numpy(cells))


def attach_guide(module: Any, config: Any, train_set: Any, student: str | None) -> Any:
    """``module`` with the guide ``config.guide`` names (none: unchanged): the student itself
    (a warning says so) or a frozen model's table of ``train_set``'s embeddings."""
    name = getattr(config, "guide", None)
    if name is None:
        return module
    from anglekit.data.stream import ArrowRows

    if isinstance(train_set, ArrowRows):
        raise ConfigError(f"--guide {name}: the guide's embeddings of the training texts are held in memory; train without --stream-data")
    if same_model(name, student):
        logger.warning(
            "--guide %s is the student model itself: the guide is the student as it trains (its own embeddings of each batch, detached), "
            "not a separate frozen model",
            name,
        )
        module.guide = Guide(name, None)
    else:
        module.guide = Guide(name, guide_table(name, train_set))
    return module


def guide_of(objective: Any) -> Guide | None:
    """The :class:`Guide` of ``objective``, looking through wrappers (weights, Matryoshka, ESE)."""
    while objective is not None:
        guide = getattr(objective, "guide", None)
        if isinstance(guide, Guide):
            return guide
        objective = getattr(objective, "objective", None)
    return None


def guide_rows(objective: Any, vectors: Tensor, inputs: dict[str, Tensor]) -> Tensor | None:
    """The guide's vectors of a batch (as :meth:`Guide.rows`), or None without a guide."""
    guide = guide_of(objective)
    return None if guide is None else guide.rows(vectors, inputs)


def guided(vectors: GuideVectors | None) -> dict[str, Any]:
    """The objective's keyword for the guide's vectors: ``{"guide": vectors}``, or none without one
    (objectives of plugins need not take it)."""
    return {} if vectors is None else {"guide": vectors}
