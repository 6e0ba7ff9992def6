"""Scoring a cell's model: STS-B-style pairs, the STS suite, and ESE's two axes (vectors cut to
their leading coordinates, the middle layer's vector). A trained model's scorings share one
:class:`TextMemo`, so the texts two cells have in common are encoded once."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError
from anglekit.reproduce.tables import Task

logger = logging.getLogger(__name__)


def score_pairs(encode: Any, test: str, data_root: str | None) -> float:
    """Spearman x 100 of the pairs' cosines against their labels on the dataset ``test``."""
    from anglekit.data.catalog import resolve_dataset
    from anglekit.metrics.similarity import evaluate_pairs

    data = resolve_dataset(test, data_root=data_root)
    return float(evaluate_pairs(encode, data.text1, data.text2, data.labels, source=test).spearman)


def score_nested(model: str, task: Task, evaluation: dict[str, Any], data_root: str | None, encode: TextMemo | None = None) -> dict[str, float]:
    """STS-B-style pairs scored with the full vector, its leading ``task.nested`` dimensions, and the
    middle transformer layer's vector (ESE's two axes). The cuts are taken from the full vectors (as
    ``encode(truncate_dim=k)`` takes them), so each text is encoded once at full size."""
    from anglekit.reproduce.tables import MIDDLE_LAYER, nested_metrics

    test, batch = str(task.test), evaluation["batch_size"]
    full_vectors = encode or TextMemo(load_embedder(model, evaluation), batch)
    full, *cuts = nested_metrics(task.nested)[:-1]
    out = {full: score_pairs(full_vectors, test, data_root)}
    for name, dim in zip(cuts, task.nested, strict=True):
        out[name] = score_pairs(lambda t, d=dim: full_vectors(t, truncate_dim=d), test, data_root)
    layers = full_vectors.embedder.num_layers
    if layers is None:
        raise ConfigError(f"{model}: the backbone's config has no num_hidden_layers, so it has no middle layer to score")
    middle = load_embedder(model, evaluation, layer=max(1, layers // 2))
    out[MIDDLE_LAYER] = score_pairs(lambda t: middle.encode(t, batch), test, data_root)
    return out


class TextMemo:
    """``texts -> vectors`` of one embedder, each distinct text encoded once: the cells scored on one
    trained model (the STS suite, STS-B, its cuts) share the texts they have in common.

    With ``store`` (a folder), texts are encoded ``chunk`` at a time and each chunk's vectors are saved
    there, so a scoring cut short (the STS suite takes half an hour on a CPU for a small LLM) continues
    from the chunks already saved; only use it for one model and one set of embedding settings."""

    def __init__(self, embedder: Any, batch_size: int, store: Path | None = None, chunk: int = 2048) -> None:
        self.embedder, self.batch_size, self.store, self.chunk = embedder, batch_size, store, chunk
        self.vectors: dict[str, Any] = {}
        if store is not None and store.is_dir():
            self._load(store)

    def _load(self, store: Path) -> None:
        import numpy as np

        for part in sorted(store.glob("part-*.npz")):
            try:
                with np.load(part, allow_pickle=False) as data:
                    texts, vectors = data["texts"], data["vectors"]
                if len(texts) != len(vectors):
                    raise ValueError(f"{len(texts)} texts and {len(vectors)} vectors")
            except (OSError, ValueError, KeyError) as exc:
                logger.warning("scoring cache %s cannot be read (%s); its texts are encoded again", part, exc)
                continue
            self.vectors.update(zip((str(t) for t in texts), vectors, strict=True))

    def __call__(self, texts: Sequence[str], truncate_dim: int | None = None) -> Any:
        import numpy as np

        from anglekit.model.encoding import truncate_rows

        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        step = self.chunk if self.store is not None else max(1, len(missing))
        for start in range(0, len(missing), step):
            part = missing[start : start + step]
            vectors = self.embedder.encode(part, self.batch_size)
            if self.store is not None:
                self._save(part, vectors)
            self.vectors.update(zip(part, vectors, strict=True))
        if not texts:
            return np.zeros((0, self.embedder.output_dim), dtype=np.float32)
        vectors = np.stack([self.vectors[t] for t in texts])
        return vectors if truncate_dim is None else truncate_rows(vectors, truncate_dim, normalize=bool(self.embedder.config.normalize))

    def _save(self, texts: list[str], vectors: Any) -> None:
        import numpy as np

        assert self.store is not None
        self.store.mkdir(parents=True, exist_ok=True)
        number = len(list(self.store.glob("part-*.npz")))
        target = self.store / f"part-{number:05d}.npz"
        partial = self.store / f".part-{number:05d}.tmp.npz"
        np.savez(partial, texts=np.array(texts, dtype=str), vectors=np.asarray(vectors, dtype=np.float32))
        os.replace(partial, target)


def score(encode: Any, task: Task, evaluation: dict[str, Any], data_root: str | None, metric: str) -> dict[str, float]:
    """``task``'s scores of ``encode``: ``{metric: spearman}`` for pairs, the STS suite's columns for ``sts-suite``."""
    if task.evaluation == "pairs":
        return {metric: score_pairs(encode, str(task.test), data_root)}
    if task.evaluation == "sts-suite":
        from anglekit.evaluation.suites import run_suite

        # The embedder is loaded at the cell's max length already (GloVe has none).
        result = run_suite("sts", encode, data_root=data_root, progress=False, batch_size=evaluation["batch_size"])
        return {k: float(v) for k, v in result["scores"].items()}
    raise ConfigError(f"unknown evaluation {task.evaluation!r}")


def load_embedder(model: str, evaluation: dict[str, Any], layer: int | None = None) -> Any:
    """``model`` as the cell's ``evaluation`` settings embed with (pooling, max length, device, prompt)."""
    from anglekit.model.embedder import Embedder

    return Embedder.from_pretrained(
        model, pooling=evaluation["pooling"], max_length=evaluation["max_length"], device=evaluation["device"],
        prompt=evaluation.get("prompt"), layer=layer,
    )  # fmt: skip


class ModelScorer:
    """Scores cells on the model in ``model_dir``, one :class:`TextMemo` per set of embedding settings
    (saved under ``store``/<hash of the settings> when ``store`` is given)."""

    def __init__(self, model_dir: str, store: Path | None = None) -> None:
        self.model_dir, self.store = model_dir, store
        self.memos: dict[tuple[Any, ...], TextMemo] = {}

    def __call__(self, task: Task, evaluation: dict[str, Any], data_root: str | None, metric: str) -> dict[str, float]:
        settings = tuple(evaluation.get(k) for k in ("pooling", "max_length", "device", "prompt"))
        if settings not in self.memos:
            folder = None
            if self.store is not None:
                folder = self.store / hashlib.sha256(json.dumps(settings, default=str).encode()).hexdigest()[:12]
            self.memos[settings] = TextMemo(load_embedder(self.model_dir, evaluation), evaluation["batch_size"], store=folder)
        if task.evaluation == "nested":
            return score_nested(self.model_dir, task, evaluation, data_root, self.memos[settings])
        return score(self.memos[settings], task, evaluation, data_root, metric)
