"""Spark: the ``make_predict_fn`` of ``pyspark.ml.functions.predict_batch_udf``.

The recipe is docs/scale.md's "Spark" block; ``tests/scale/test_spark_local.py`` runs that very
block on a local Spark. Spark calls the factory once per Python worker (the model loads once there)
and the function it returns on each batch, a 1-D numpy array of the column's values. This module
imports no Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anglekit.errors import ConfigError, DataError
from anglekit.io.text import is_blank
from anglekit.model import DEFAULT_BATCH_SIZE

__all__ = ["PredictFnFactory", "check_batch", "predict_fn_factory"]

FILTER_HINT = "drop them first, e.g. df.where(F.col('text').isNotNull() & (F.trim('text') != ''))"
"""What a null or blank text's error tells the user to do (``F``: ``pyspark.sql.functions``)."""


@dataclass(frozen=True)
class PredictFnFactory:
    """A picklable ``make_predict_fn``: calling it (in the worker) loads the model, on a GPU when
    the worker has one, and returns the batch function."""

    model: str
    batch_size: int = DEFAULT_BATCH_SIZE
    normalize: bool | None = None
    role: str | None = None
    device: str | None = None
    load: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> Callable[[np.ndarray], np.ndarray]:
        import torch

        from anglekit.model.embedder import Embedder

        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        embedder = Embedder.from_pretrained(self.model, device=device, **self.load)
        embedder.config.template(self.role)  # a role the model lacks: a ConfigError naming its prompts, before any batch

        def predict(texts: np.ndarray) -> np.ndarray:
            items = check_batch(texts)
            return np.asarray(embedder.encode(items, self.batch_size, normalize=self.normalize, role=self.role), dtype=np.float32)

        return predict


def check_batch(texts: Any) -> list[str]:
    """The texts of one ``predict_batch_udf`` batch; a DataError for anything but a 1-D batch of
    non-empty strings (a null, a blank, a number, bytes), naming the value, its place in the batch
    and the text before it (batch positions are not DataFrame rows)."""
    batch = np.asarray(texts, dtype=object)
    if batch.ndim != 1:
        raise DataError(f"expected one column of strings, got a batch of shape {batch.shape}: embed a string column")
    items = batch.tolist()
    for i, text in enumerate(items):
        if isinstance(text, str) and not is_blank(text):
            continue
        where = f"text {i + 1} of a batch of {len(items)}" + (f" (after {items[i - 1]!r:.60})" if i else "")
        if isinstance(text, str):
            raise DataError(f"{where} is blank ({text!r:.20}): {FILTER_HINT}")
        if text is None or (isinstance(text, float) and text != text) or type(text).__name__ == "NAType":
            raise DataError(f"{where} is null: {FILTER_HINT}")  # Spark's null reaches pandas as None, NaN or pd.NA
        raise DataError(f"{where} is not a string but {type(text).__name__} {text!r:.40}: embed a string column")
    return items


def predict_fn_factory(
    model: str, *, batch_size: int = DEFAULT_BATCH_SIZE, normalize: bool | None = None, role: str | None = None, device: str | None = None, **load: Any
) -> PredictFnFactory:
    """The ``make_predict_fn`` argument of ``predict_batch_udf`` for ``model``; ``load``: further
    ``Embedder.from_pretrained`` keyword arguments (dtype, revision, ...)."""
    if role is not None and (not isinstance(role, str) or not role.strip()):
        raise ConfigError(f"role must be the name of one of the model's prompts (query, document, ...) or None, got {role!r}")
    if normalize is not None and not isinstance(normalize, bool):
        raise ConfigError(f"normalize must be True, False or None (the model's setting), got {normalize!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    return PredictFnFactory(str(model), batch_size, normalize, role, device, dict(load))
