"""Ray Data: embed a dataset's text column on a cluster, the model loaded once per actor.

>>> import ray                                                              # doctest: +SKIP
>>> from anglekit.scale.ray import RayEmbedder, embed_dataset
>>> ds = ray.data.read_parquet("s3://bucket/corpus/")                       # doctest: +SKIP
>>> out = embed_dataset(ds, "runs/quickstart/model", concurrency=4)         # doctest: +SKIP
>>> # the same by hand: ds.map_batches(RayEmbedder, fn_constructor_kwargs={"model": ...},
>>> #                                  concurrency=4, num_gpus=1, batch_size=256)

Needs ``pip install 'anglekit[scale]'`` (ray[data]); the class itself imports no Ray.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anglekit.errors import ConfigError, DataError
from anglekit.io.text import is_blank
from anglekit.model import DEFAULT_BATCH_SIZE

__all__ = ["RayEmbedder", "embed_dataset"]


class RayEmbedder:
    """A callable class for ``Dataset.map_batches``: each actor loads ``model`` once (on a GPU when
    the actor has one, else the CPU) and adds ``output_column`` (float32 vectors) to each batch.

    ``role``: the model's ``query`` or ``document`` prompt; ``normalize``: default the model's;
    ``load``: further ``Embedder.from_pretrained`` keyword arguments (dtype, revision, ...).
    """

    def __init__(
        self,
        model: str,
        *,
        text_column: str = "text",
        output_column: str = "embedding",
        batch_size: int = DEFAULT_BATCH_SIZE,
        normalize: bool | None = None,
        role: str | None = None,
        device: str | None = None,
        **load: Any,
    ) -> None:
        import torch

        from anglekit.model.embedder import Embedder

        if role is not None and (not isinstance(role, str) or not role.strip()):
            raise ConfigError(f"role must be the name of one of the model's prompts (query, document, ...) or None, got {role!r}")
        self.text_column, self.output_column = text_column, output_column
        self.batch_size, self.normalize, self.role = batch_size, normalize, role
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = Embedder.from_pretrained(model, device=device, **load)

    def __call__(self, batch: Any) -> Any:
        """``batch``: a dict of column -> numpy array (Ray's ``numpy`` batch format) or a pandas DataFrame."""
        columns = list(batch.keys()) if isinstance(batch, dict) else list(batch.columns)
        if self.text_column not in columns:
            raise DataError(f"no column {self.text_column!r} in the batch; columns: {', '.join(map(repr, columns))}", field=self.text_column)
        texts = list(batch[self.text_column])
        for i, text in enumerate(texts):
            if not isinstance(text, str) or is_blank(text):
                raise DataError(f"text is not a non-empty string: {type(text).__name__} {text!r:.60}", row=i + 1, field=self.text_column)
        vectors = self.model.encode(texts, self.batch_size, normalize=self.normalize, role=self.role)
        if isinstance(batch, dict):
            batch[self.output_column] = np.asarray(vectors, dtype=np.float32)
        else:
            batch[self.output_column] = list(np.asarray(vectors, dtype=np.float32))
        return batch


def embed_dataset(
    dataset: Any,
    model: str,
    *,
    concurrency: int = 1,
    num_gpus: float | None = None,
    batch_size: int = 256,
    **embedder: Any,
) -> Any:
    """``dataset.map_batches(RayEmbedder, ...)`` with ``concurrency`` actors; each takes one GPU
    when the cluster has GPUs (``num_gpus`` overrides), else CPUs. ``embedder``: the keyword
    arguments of :class:`RayEmbedder`. Lazy, like every Ray Data transformation."""
    import ray

    if not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}")
    if num_gpus is None:
        num_gpus = 1 if ray.is_initialized() and ray.cluster_resources().get("GPU", 0) >= 1 else 0
    return dataset.map_batches(
        RayEmbedder,
        fn_constructor_kwargs={"model": model, **embedder},
        batch_size=batch_size,
        batch_format="numpy",
        concurrency=concurrency,
        num_gpus=num_gpus,
    )
