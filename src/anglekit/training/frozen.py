"""A frozen model's embeddings of the training texts, computed once before training.

Both a distillation teacher (``--distill-teacher``, :func:`anglekit.training.tasks.distill.teacher_table`)
and a guide against false negatives (``--guide``, :mod:`anglekit.training.guide`) are models that
do not train: each distinct text is embedded once, with the model's own tokenizer, prompts and max
length (so its tokenizer may differ from the student's), in the role its column plays (an anchor as
a query, a positive or negative as a document, a pair's texts with the general prompt).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from anglekit.errors import AnglekitError, ConfigError

logger = logging.getLogger(__name__)

__all__ = ["FrozenEmbeddings", "embed_frozen", "load_frozen", "same_model"]


@dataclass(frozen=True)
class FrozenEmbeddings:
    """Each distinct (role, text)'s vector: ``vectors`` [T, D'] and ``where[(role, text)]`` its row."""

    vectors: Tensor
    where: Mapping[tuple[str | None, str], int]

    def index(self, role: str | None, texts: Sequence[str]) -> list[int]:
        return [self.where[(role, text)] for text in texts]


def load_frozen(name: str, flag: str) -> Any:
    """The model ``name`` (hub id, folder, ``pypi:NAME``) as an Embedder in eval mode; one line
    naming ``flag`` and the model when it cannot be loaded."""
    from anglekit.model import Embedder

    looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name  # a hub id is ORG/NAME
    if looks_local and not Path(name).expanduser().exists():
        raise ConfigError(f"{flag} {name}: no such file or folder")
    try:
        model = Embedder.from_pretrained(name)
    except (AnglekitError, OSError, ValueError) as err:
        raise ConfigError(f"{flag} {name}: cannot load the model: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from err
    model.eval()
    return model


def embed_frozen(model: Any, texts: Mapping[str | None, Sequence[str]], *, batch_size: int = 64, what: str = "the model") -> FrozenEmbeddings:
    """``model``'s embeddings of ``texts`` (role -> texts; ``query``, ``document`` or None for the
    general prompt), each distinct text of a role once."""
    parts, where = [], {}
    for role, group in texts.items():
        distinct = list(dict.fromkeys(group))
        if not distinct:
            continue
        logger.info("%s embeds %d distinct texts as %s", what, len(distinct), role or "plain texts")
        encode = {"query": model.encode_query, "document": model.encode_document}.get(role or "", model.encode)
        parts.append(np.asarray(encode(distinct, batch_size=batch_size), dtype=np.float32))
        start = sum(len(p) for p in parts[:-1])
        where.update({(role, text): start + i for i, text in enumerate(distinct)})
    vectors = torch.from_numpy(np.concatenate(parts)) if parts else torch.zeros(0, 1)
    return FrozenEmbeddings(vectors, where)


def same_model(a: str | None, b: str | None) -> bool:
    """Whether two model names name the same model: the same text, or the same folder on disk."""
    if not a or not b:
        return False
    if a.strip() == b.strip():
        return True
    pa, pb = Path(a.strip()).expanduser(), Path(b.strip()).expanduser()
    try:
        return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()
    except OSError:
        return False
