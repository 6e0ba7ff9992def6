"""Spark: the ``make_predict_fn`` of ``pyspark.ml.functions.predict_batch_udf`` (docs/scale.md).

>>> from pyspark.ml.functions import predict_batch_udf                  # doctest: +SKIP
>>> from pyspark.sql.types import ArrayType, FloatType                  # doctest: +SKIP
>>> embed = predict_batch_udf(predict_fn_factory("runs/quickstart/model"),
...                           return_type=ArrayType(FloatType()), batch_size=256)   # doctest: +SKIP
>>> df.withColumn("embedding", embed("text"))                           # doctest: +SKIP

Spark calls the factory once per Python worker (the model loads once there) and the function it
returns on each batch, a numpy array of strings. This module imports no Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anglekit.errors import ConfigError, DataError
from anglekit.io.text import is_blank
from anglekit.model import DEFAULT_BATCH_SIZE

__all__ = ["PredictFnFactory", "predict_fn_factory"]


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

        def predict(texts: np.ndarray) -> np.ndarray:
            items = list(np.asarray(texts).reshape(-1))
            for i, text in enumerate(items):
                if not isinstance(text, str) or is_blank(text):
                    raise DataError(f"text is not a non-empty string: {type(text).__name__} {text!r:.60}", row=i + 1)
            return np.asarray(embedder.encode(items, self.batch_size, normalize=self.normalize, role=self.role), dtype=np.float32)

        return predict


def predict_fn_factory(
    model: str, *, batch_size: int = DEFAULT_BATCH_SIZE, normalize: bool | None = None, role: str | None = None, device: str | None = None, **load: Any
) -> PredictFnFactory:
    """The ``make_predict_fn`` argument of ``predict_batch_udf`` for ``model``; ``load``: further
    ``Embedder.from_pretrained`` keyword arguments (dtype, revision, ...)."""
    if role is not None and (not isinstance(role, str) or not role.strip()):
        raise ConfigError(f"role must be the name of one of the model's prompts (query, document, ...) or None, got {role!r}")
    return PredictFnFactory(model, batch_size, normalize, role, device, dict(load))
