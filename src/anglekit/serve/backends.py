"""Inference backends of the server: a small protocol and a registry of loaders by name.

A backend turns texts into token ids and token ids into pooled, un-normalised float32 vectors;
the batcher does the rest (batching, normalising, truncating dimensions). ``torch`` is the
:class:`~anglekit.model.embedder.Embedder`; another backend (ONNX) is one more entry in
:data:`BACKENDS`. Nothing here imports torch until a backend is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from anglekit.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from anglekit.model.embedder import Embedder

Role = Literal["query", "document"]


class Backend(Protocol):
    """What the batcher needs from a model. ``tokenize`` and ``embed`` run on the batcher's worker
    thread only, never on the event loop and never concurrently."""

    dim: int
    """Length of the vectors."""
    max_length: int
    """Tokens per text at most (prompt and special tokens included), unless ``chunks_long_texts``."""
    chunks_long_texts: bool
    """The model's ``long_text`` setting chunks long texts: ``tokenize`` keeps every token and
    ``embed`` pools the windows of a longer text, so no text is too long."""
    normalize: bool
    """The model's own setting: whether its vectors are L2-normalised by default."""

    def tokenize(self, texts: Sequence[str], role: Role | None, *, truncate: bool) -> list[list[int]]:
        """Token ids of each text with the role's prompt; cut to ``max_length`` when ``truncate``,
        else whole (so that the caller can tell how long a text is)."""
        ...

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Pooled, un-normalised vectors of one batch, float32 ``[len(token_ids), dim]``. A backend
        whose ``early_exit`` is true also takes ``layer=`` (1 = the first transformer layer): the
        vectors of that layer, the layers after it not run."""
        ...


class TorchBackend:
    """The PyTorch :class:`~anglekit.model.embedder.Embedder`: the same tokenisation, padding and
    forward pass as :meth:`~anglekit.model.embedder.Embedder.encode`."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder.eval()
        self._describe(embedder)

    early_exit_problem: str | None = None
    """Why a request may not choose its layer (None: it may, ``early_exit`` is true)."""

    def _describe(self, embedder: Any) -> None:
        self.dim = embedder.dim
        self.layers: int | None = getattr(embedder, "num_layers", None)
        """The transformer layers of the model (None when unknown)."""
        self.early_exit = False
        if not getattr(embedder.config, "early_exit", False):
            self.early_exit_problem = "this model was not trained with ESE (its anglekit_config.json has no early_exit: true)"
        elif getattr(embedder, "backend", "torch") != "torch":
            self.early_exit_problem = "the exported graph runs every layer; serve the model's PyTorch weights (--backend torch)"
        elif self.layers is None:
            self.early_exit_problem = "the backbone's config does not say how many layers it has"
        elif getattr(embedder.config, "long_text", "truncate") != "truncate":
            self.early_exit_problem = "chunked long texts are pooled from the last layer only"
        else:
            self.early_exit, self.early_exit_problem = True, None
        self.precision = str(getattr(embedder, "precision", "fp32"))
        self.max_length = embedder.config.max_length
        self.normalize = embedder.config.normalize
        self.long_text = getattr(embedder.config, "long_text", "truncate")
        self.chunks_long_texts = self.long_text != "truncate"
        self.window = getattr(embedder.config, "long_text_window", None) or self.max_length

    def tokenize(self, texts: Sequence[str], role: Role | None, *, truncate: bool) -> list[list[int]]:
        if truncate and not self.chunks_long_texts:
            return self.embedder.tokenize_unpadded(texts, role)
        config = self.embedder.config
        encoded = self.embedder.tokenizer(
            [config.format(t, role) for t in texts],
            truncation=False,
            padding=False,
            return_attention_mask=False,
            return_token_type_ids=False,
            verbose=False,
        )
        return encoded["input_ids"]

    def embed(self, token_ids: Sequence[Sequence[int]], layer: int | None = None) -> np.ndarray:
        if layer is not None:
            if not self.early_exit:
                raise ValueError(f"layer {layer}: {self.early_exit_problem}")
            return self._embed(token_ids, layer)
        if self.chunks_long_texts and any(len(seq) > self.window for seq in token_ids):
            from anglekit.model.long_text import combine_chunks, plan_token_chunks

            plan = plan_token_chunks(self.embedder, token_ids)
            step = max(len(token_ids), 1)
            vectors = [self._embed(plan.ids[i : i + step]) for i in range(0, len(plan.ids), step)]
            import numpy as np

            return combine_chunks(np.concatenate(vectors), plan, "mean" if self.long_text == "chunk-mean" else "max")
        return self._embed(token_ids)

    def _embed(self, token_ids: Sequence[Sequence[int]], layer: int | None = None) -> np.ndarray:
        import torch

        with torch.inference_mode():
            vectors = self.embedder(**self.embedder.pad(token_ids, device=self.embedder.device), layer=layer)
        return vectors.float().cpu().numpy()


def load_torch(model: str, *, threads: int | None = None, **options: Any) -> Backend:
    """``Embedder.from_pretrained(model, **options)`` as a backend; ``threads``: torch's CPU threads."""
    import torch

    from anglekit.model.embedder import Embedder

    if threads is not None:
        torch.set_num_threads(threads)
    embedder = Embedder.from_pretrained(model, **options)
    if getattr(embedder, "backend", "torch") in ("onnx", "openvino"):  # a folder of exported weights only: from_pretrained chose it
        return OnnxBackend(embedder)
    return TorchBackend(embedder)


class OnnxBackend(TorchBackend):
    """An :class:`~anglekit.model.onnx.OnnxEmbedder` (a folder from ``anglekit export --format onnx``)
    or its OpenVINO subclass: the same tokenisation; the pooled vectors come from the exported graph."""

    def __init__(self, embedder: Any) -> None:  # noqa: D107 - no torch module to put in eval mode
        self.embedder = embedder
        self._describe(embedder)

    def _embed(self, token_ids: Sequence[Sequence[int]], layer: int | None = None) -> np.ndarray:
        return self.embedder.embed_padded(self.embedder.pad(token_ids), normalize=False)


def load_onnx(model: str, *, threads: int | None = None, **options: Any) -> Backend:
    """An exported ONNX folder as a backend; ``threads``: onnxruntime's intra-op threads
    (default: torch's setting). Loading options other than device fixed the export: refused."""
    from anglekit.model.onnx import OnnxEmbedder

    return _load_exported(OnnxEmbedder, "ONNX model", model, threads, options)


def load_openvino(model: str, *, threads: int | None = None, **options: Any) -> Backend:
    """An exported OpenVINO (or ONNX) folder compiled by OpenVINO for the CPU; ``threads``: its
    inference threads (default: torch's setting). Loading options other than device: refused."""
    from anglekit.model.openvino import OpenVinoEmbedder

    return _load_exported(OpenVinoEmbedder, "model", model, threads, options)


def _load_exported(runtime: Any, what: str, model: str, threads: int | None, options: dict[str, Any]) -> Backend:
    """An exported folder loaded by ``runtime`` (OnnxEmbedder or OpenVinoEmbedder): ``device`` and
    the long-text settings and ``precision`` apply; any other loading option was fixed by the export (ConfigError)."""

    device = options.pop("device", None)
    precision = options.pop("precision", None)
    long_text = _long_text_options(options)
    given = sorted(key for key, value in options.items() if value not in (None, False))
    if given:
        raise ConfigError(f"{', '.join(given)}: fixed when the {what} was exported; export again to change them")
    loaded = runtime.from_pretrained(model, threads=threads, device=device, precision=precision)
    return OnnxBackend(_with_long_text(loaded, long_text, model))


_LONG_TEXT_KEYS = ("long_text", "long_text_window", "long_text_stride", "long_text_max_chunks")


def _long_text_options(options: dict[str, Any]) -> dict[str, Any]:
    """The long-text settings among the loading ``options`` (removed from them): inference
    settings, allowed with exported models too."""
    return {key: options.pop(key) for key in _LONG_TEXT_KEYS if options.get(key) is not None}


def _with_long_text(embedder: Any, settings: dict[str, Any], source: str) -> Any:
    if settings:
        from anglekit.model.config import EmbedderConfig

        embedder.config = EmbedderConfig.from_dict({**embedder.config.to_dict(), **settings}, source=source)
    return embedder


BACKENDS: dict[str, Callable[..., Backend]] = {"torch": load_torch, "onnx": load_onnx, "openvino": load_openvino}
"""Backend loaders by name: ``loader(model, threads=None, **Embedder.from_pretrained options) -> Backend``."""


def load_backend(name: str, model: str, *, threads: int | None = None, **options: Any) -> Backend:
    """The backend ``name`` with ``model`` loaded (``threads``: CPU threads, default: the backend's)."""

    if name not in BACKENDS:
        raise ConfigError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")
    return BACKENDS[name](model, threads=threads, **options)


__all__ = ["BACKENDS", "Backend", "OnnxBackend", "Role", "TorchBackend", "load_backend", "load_onnx", "load_openvino", "load_torch"]
