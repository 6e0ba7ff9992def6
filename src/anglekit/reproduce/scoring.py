"""Scoring a cell's model: STS-B-style pairs, the STS suite, and ESE's two axes (vectors cut to
their leading coordinates, the middle layer's vector). A trained model's scorings share one
:class:`TextMemo`, so the texts two cells have in common are encoded once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError
from anglekit.reproduce.tables import Task


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

    With ``store`` (a folder), the vectors go to an :class:`~anglekit.evaluation.cache.EmbeddingCache`
    there (keyed by the model's fingerprint and max length), one shard per call of at most ``chunk``
    new texts (the STS suite calls with a batch of texts at a time), so a scoring cut short (the STS
    suite takes 30-45 minutes on 2 CPU cores for a small LLM) continues from what it had encoded."""

    def __init__(self, embedder: Any, batch_size: int, store: Path | None = None, chunk: int = 2048) -> None:
        self.embedder, self.batch_size = embedder, batch_size
        self.vectors: dict[str, Any] = {}
        self.cached: Any = None
        if store is not None:
            from anglekit.evaluation.cache import CachedEncoder, EmbeddingCache

            cache = EmbeddingCache(store, fingerprint=embedder.fingerprint(), max_length=embedder.config.max_length)
            self.cached = CachedEncoder(lambda texts: embedder.encode(list(texts), batch_size), cache, flush_every=chunk)

    def __call__(self, texts: Sequence[str], truncate_dim: int | None = None) -> Any:
        import numpy as np

        from anglekit.model.encoding import truncate_rows

        texts = list(texts)
        if not texts:
            return np.zeros((0, self.embedder.output_dim), dtype=np.float32)
        if self.cached is not None:
            vectors = self.cached(texts)
        else:
            missing = list(dict.fromkeys(t for t in texts if t not in self.vectors))
            if missing:
                self.vectors.update(zip(missing, self.embedder.encode(missing, self.batch_size), strict=True))
            vectors = np.stack([self.vectors[t] for t in texts])
        return vectors if truncate_dim is None else truncate_rows(vectors, truncate_dim, normalize=bool(self.embedder.config.normalize))


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


def load_identified(model: str, evaluation: dict[str, Any]) -> tuple[Any, str]:
    """:func:`load_embedder`'s model and the fingerprint of ``model`` as stored (with its adapters
    unmerged, as ``anglekit fingerprint MODEL`` gives it): merged weights are floats computed on this
    machine, which a fingerprint never hashes (:mod:`anglekit.model.identity`)."""
    embedder = _load(model, evaluation)
    identity = embedder.fingerprint()
    return (embedder.merge_lora() if embedder.has_lora else embedder), identity


def load_embedder(model: str, evaluation: dict[str, Any], layer: int | None = None) -> Any:
    """``model`` as the cell's ``evaluation`` settings embed with (pooling, max length, device, prompt).

    A model with LoRA adapters is scored with them merged into its weights: scoring only reads the
    model, the merged weights embed the same to float rounding (a test pins it), and the adapters'
    extra matrix products, small and many, cost SmolLM2 1.16x on 2 idle CPU cores and 1.6x on
    cores shared with another process (``benchmarks/bench_lora_merge.py``)."""
    embedder = _load(model, evaluation, layer)
    return embedder.merge_lora() if embedder.has_lora else embedder


def _load(model: str, evaluation: dict[str, Any], layer: int | None = None) -> Any:
    """``model`` as stored (adapters unmerged), with the cell's embedding settings."""
    from anglekit.model.embedder import Embedder

    return Embedder.from_pretrained(
        model, pooling=evaluation["pooling"], max_length=evaluation["max_length"], device=evaluation["device"],
        prompt=evaluation.get("prompt"), layer=layer,
    )  # fmt: skip


class ModelScorer:
    """Scores cells on the model in ``model_dir``, one :class:`TextMemo` per set of embedding settings
    (each an embedding cache of its own under ``store`` when it is given: the fingerprint covers them)."""

    def __init__(self, model_dir: str, store: Path | None = None) -> None:
        self.model_dir, self.store = model_dir, store
        self.memos: dict[tuple[Any, ...], TextMemo] = {}
        self.identities: dict[tuple[Any, ...], str] = {}

    def __call__(self, task: Task, evaluation: dict[str, Any], data_root: str | None, metric: str) -> dict[str, float]:
        settings = _settings(evaluation)
        if settings not in self.memos:
            embedder, self.identities[settings] = load_identified(self.model_dir, evaluation)
            self.memos[settings] = TextMemo(embedder, evaluation["batch_size"], store=self.store)
        if task.evaluation == "nested":
            return score_nested(self.model_dir, task, evaluation, data_root, self.memos[settings])
        return score(self.memos[settings], task, evaluation, data_root, metric)

    def fingerprint(self, evaluation: dict[str, Any]) -> str | None:
        """The fingerprint of the model as stored, embedding with ``evaluation``'s settings (None before
        it scored with them): :func:`load_identified`."""
        return self.identities.get(_settings(evaluation))


def _settings(evaluation: dict[str, Any]) -> tuple[Any, ...]:
    """What makes one embedding of a model differ from another in a cell's evaluation settings."""
    return tuple(evaluation.get(k) for k in ("pooling", "max_length", "device", "prompt"))
