"""The server's view of a model: a small protocol over the inference backends.

A backend turns texts into token ids and token ids into pooled, un-normalised float32 vectors;
the batcher does the rest (batching, normalising, truncating dimensions). The model is loaded by
the inference backend registry (:mod:`anglekit.model.backends`: ``torch``, ``onnx``, ``openvino``
and any other registered one); :class:`TorchBackend` serves the PyTorch
:class:`~anglekit.model.embedder.Embedder`, :class:`EncoderBackend` any other encoder through its
encode API. Nothing here imports torch until a backend is loaded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from anglekit.model.backends import AUTO, DEFAULT_BACKEND, load_encoder
from anglekit.model.load_settings import FIXED_BY_EXPORT, LoadSettings

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from anglekit.model.embedder import Embedder

log = logging.getLogger(__name__)

Role = str
"""The name of one of the model's prompts (``query``, ``document``, ...)."""


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
    roles: tuple[str, ...]
    """The names of the model's prompts, the roles a request may ask for."""

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
    runs_every_layer = False
    """The model cannot stop at an earlier layer (an exported graph)."""
    pad_multiple = 1
    """Batches are padded to exactly their longest text."""

    def _describe(self, embedder: Any) -> None:
        self.dim = embedder.dim
        self.roles: tuple[str, ...] = tuple(getattr(embedder.config, "roles", ()))
        self.layers: int | None = getattr(embedder, "num_layers", None)
        """The transformer layers of the model (None when unknown)."""
        self.early_exit = False
        if not getattr(embedder.config, "early_exit", False):
            self.early_exit_problem = "this model was not trained with ESE (its anglekit_config.json has no early_exit: true)"
        elif self.runs_every_layer:
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

    def keep_end(self, texts: Sequence[str], role: Role | None) -> list[list[int]]:
        """Token ids of each text with the role's prompt, a text too long for ``max_length`` cut at
        its start: the longest end of it, cut where a token starts, that fits with the prompt and
        the special tokens (NVIDIA NIM's ``truncate: START``; the batcher's ``truncate="start"``)."""
        return [self._keep_end(text, role) for text in texts]

    def _keep_end(self, text: str, role: Role | None) -> list[int]:
        starts = _token_starts(self.embedder.tokenizer, text)
        fitting: dict[int, list[int]] = {}

        def fits(i: int) -> bool:
            fitting[i] = self.tokenize([text[starts[i] :]], role, truncate=False)[0]
            return len(fitting[i]) <= self.max_length

        if not fits(len(starts) - 1):  # the prompt and one token do not fit: cut the end of the last token's text
            return self.tokenize([text[starts[-1] :]], role, truncate=True)[0]
        # The first start from which the rest fits, by bisection (the rest shrinks as the start moves
        # on); it lies among the last max_length starts (the rest has no more tokens than starts), so
        # the search begins there and tokenizes short ends only.
        low, high = 0, len(starts) - 1
        bound = max(0, len(starts) - self.max_length)
        if bound > 0:
            low, high = (0, bound) if fits(bound) else (bound + 1, high)
        while low < high:
            middle = (low + high) // 2
            if fits(middle):
                high = middle
            else:
                low = middle + 1
        return fitting[low] if low in fitting else self.tokenize([text[starts[low] :]], role, truncate=False)[0]

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


class EncoderBackend(TorchBackend):
    """Any other encoder with the Embedder's encode API (``tokenize_unpadded``, ``pad``,
    ``embed_padded``): an :class:`~anglekit.model.onnx.OnnxEmbedder` (a folder from ``anglekit
    export --format onnx``), its OpenVINO subclass, or another registered backend's. The same
    tokenisation; the pooled vectors come from its ``embed_padded`` (all layers run)."""

    runs_every_layer = True

    def __init__(self, embedder: Any) -> None:  # noqa: D107 - no torch module to put in eval mode
        self.embedder = embedder
        self._describe(embedder)
        self.pad_multiple: int = getattr(embedder, "pad_multiple", 1)
        """The runtime pads batches to a multiple of this many tokens (> 1: it prepares kernels per
        input shape, and the server warms the common shapes up at start)."""

    def _embed(self, token_ids: Sequence[Sequence[int]], layer: int | None = None) -> np.ndarray:
        with getattr(self.embedder, "_encoding", contextlib.nullcontext)():  # the context its encode loop runs in
            return self.embedder.embed_padded(self.embedder.pad(token_ids), normalize=False)


def _token_starts(tokenizer: Any, text: str) -> list[int]:
    """The character offsets where the tokens of ``text`` start (a fast tokenizer's offsets; else
    where its words start), the first 0."""
    try:
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)["offset_mapping"]
        starts = sorted({start for start, end in offsets if end > start})
    except NotImplementedError:  # a slow (Python) tokenizer has no offsets
        starts = [match.start() for match in re.finditer(r"\S+", text)]
    return [0, *(start for start in starts if start > 0)]


def load_backend(
    name: str | None,
    model: str,
    *,
    threads: int | None = None,
    settings: LoadSettings | None = None,
    int8_export: bool = False,
    announce: Callable[[str], Any] | None = None,
    **options: Any,
) -> Backend:
    """``model`` loaded by the inference backend ``name`` (a name registered in
    :mod:`anglekit.model.backends`; None or ``auto``: the one whose files the folder holds; an
    unknown name is an :class:`~anglekit.errors.UnknownBackendError`) with ``settings`` and
    ``options`` (:class:`~anglekit.model.load_settings.LoadSettings` fields by name, over
    ``settings``); ``threads``: its CPU threads (default: the backend's). ``torch`` lets the folder
    decide too: a folder of exported weights only is served by their runtime. ``int8_export``
    (with ``name`` None or ``auto``): serve the fastest int8 export of these weights that the
    model's folder holds (:mod:`anglekit.model.int8_exports`), saying which to ``announce``."""
    requested = None if name in (None, AUTO) else name
    chosen = None if requested == DEFAULT_BACKEND else requested
    load_settings = LoadSettings.of(settings, **{**options, "backend": chosen})
    encoder = load_encoder(model, load_settings, threads=threads)
    if int8_export and requested is None:
        encoder = _int8_export_of(encoder, model, load_settings, threads, announce or log.info)
    return serving(encoder)


def _int8_export_of(encoder: Any, model: str, settings: LoadSettings, threads: int | None, announce: Callable[[str], Any]) -> Any:
    """The fastest int8 export of ``encoder`` (a torch Embedder loaded from the folder ``model``)
    found in that folder, loaded; else ``encoder``."""
    from anglekit.model.embedder import Embedder
    from anglekit.model.int8_exports import int8_exports

    given = set(settings.given())
    if not isinstance(encoder, Embedder) or settings.device not in (None, "cpu") or settings.precision or settings.dtype or given & set(FIXED_BY_EXPORT):
        return encoder  # an export runs on the CPU in its own precision, with the settings it was exported with
    exports = int8_exports(model, encoder)
    if not exports:
        return encoder
    if getattr(encoder.config, "early_exit", False):
        announce(f"the model was trained with ESE: serving its PyTorch weights (requests may choose a layer), not {exports[0].describe()}")
        return encoder
    best = exports[0]
    graph = load_encoder(best.path, dataclasses.replace(settings, backend=best.backend), threads=threads)
    announce(f"serving {best.describe()} (--no-int8-export: the PyTorch weights)")
    return graph


def serving(encoder: Any) -> Backend:
    """The server's backend over a loaded encoder: :class:`TorchBackend` for an
    :class:`~anglekit.model.embedder.Embedder`, else :class:`EncoderBackend` (its encode API)."""
    from anglekit.model.embedder import Embedder

    return TorchBackend(encoder) if isinstance(encoder, Embedder) else EncoderBackend(encoder)


OnnxBackend = EncoderBackend
"""The former name of :class:`EncoderBackend` (it served the ONNX and OpenVINO models first)."""

__all__ = ["Backend", "EncoderBackend", "OnnxBackend", "Role", "TorchBackend", "load_backend", "serving"]
