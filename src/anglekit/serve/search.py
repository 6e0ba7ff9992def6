"""The indexes a server searches (``--index``): loaded and checked against the served model at start.

``POST /v1/search`` embeds its queries through the server's batcher (the model's query prompt,
like ``anglekit search``) and searches the named index with
:meth:`~anglekit.index.store.VectorIndex.search_vectors`, on a worker thread, one search at a
time per index (an index is not made for concurrent readers).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.errors import ConfigError, ModelMismatchError
from anglekit.index.store import Hit, VectorIndex
from anglekit.serve.quantized import Calibration

log = logging.getLogger(__name__)


@dataclass
class ServedIndex:
    """One index of the server, by name."""

    name: str
    path: Path
    index: VectorIndex
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def size(self) -> int:
        return len(self.index)

    def calibration(self) -> Calibration | None:
        """The int8 scale of an int8 index (None for another quantization)."""
        scale = self.index.int8_scale
        return Calibration(float(scale), f"index:{self.name}") if scale is not None else None

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        """The ``k`` best documents of each query vector, as ``anglekit search`` gives them."""
        with self.lock:
            return self.index.search_hits(queries, k)


def parse_spec(spec: str) -> tuple[str, Path]:
    """``NAME=DIR`` or ``DIR`` (named after the folder) -> (name, folder)."""
    name, sep, folder = spec.partition("=")
    if not sep:
        folder, name = spec, Path(spec.rstrip("/\\")).name
    name, folder = name.strip(), folder.strip()
    if not name or not folder:
        raise ConfigError(f"--index must be DIR or NAME=DIR, got {spec!r}")
    return name, Path(folder).expanduser()


def load_indexes(specs: tuple[str, ...] | None, backend: Any) -> dict[str, ServedIndex]:
    """Every ``--index``, loaded (checksums verified) and checked against the served model: a
    :class:`~anglekit.errors.ModelMismatchError` for an index built with another model or other
    settings, a ConfigError for a duplicate name, an empty index or a model without a fingerprint."""
    served: dict[str, ServedIndex] = {}
    if not specs:
        return served
    model = getattr(backend, "embedder", None)
    if not callable(getattr(model, "fingerprint", None)):
        raise ConfigError("--index: the served model has no fingerprint to check the index against")
    for spec in specs:
        name, folder = parse_spec(spec)
        if name in served:
            raise ConfigError(f"--index: two indexes are named {name!r}; name them with NAME=DIR")
        try:
            index = VectorIndex.load(folder, model=model)  # checks the model's fingerprint (weights and settings)
        except ModelMismatchError as exc:
            raise ModelMismatchError(f"--index {spec}: {exc}") from None
        if len(index) == 0:
            raise ConfigError(f"--index {spec}: the index holds no documents")
        served[name] = ServedIndex(name, folder, index)
        log.info("index %r: %d documents from %s (%s, quantize %s)", name, len(index), folder, index.settings.kind, index.settings.quantize)
    return served


__all__ = ["ServedIndex", "load_indexes", "parse_spec"]
