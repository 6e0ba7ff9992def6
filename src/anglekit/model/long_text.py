"""Embedding texts longer than the model's window: pooling over overlapping token chunks.

This is anglekit's substitute for the paper's AnglE-RAN (a recurrent attention network over
segments of a long text): each window is embedded by the model itself and the window vectors
are pooled. It is a setting of the model (``long_text`` = ``truncate`` | ``chunk-mean`` |
``chunk-max``, with ``long_text_window``/``_stride``/``_max_chunks`` in
:class:`~anglekit.model.config.EmbedderConfig`, ``--long-text`` on the command line), applied by
every encode (torch, ONNX and OpenVINO backends, ``anglekit encode``/``eval``/``index``) and by
the server. The other route is a long-context encoder (``--max-length 8192`` on a model whose
positions allow it).

:func:`embed_long` tokenizes each text completely (no truncation), cuts the content tokens into
windows of ``window`` tokens *including* the model's special tokens (``[CLS] ... [SEP]`` for BERT,
``<s>`` for Llama: each chunk gets them exactly as a whole text would), consecutive windows
starting ``stride`` content tokens apart (so they overlap by ``window - specials - stride``
tokens; the last window is aligned to the text's end), encodes every chunk with the embedder's
backbone and pooling (:meth:`Embedder.forward`), and combines the chunk vectors:

* ``pooling="mean"``: mean weighted by each chunk's number of content tokens;
* ``pooling="max"``: element-wise maximum.

A text that fits in one window gives exactly one chunk with the same token ids as
:meth:`Embedder.encode`, hence the same vector. The result is normalised when the embedder's
config says so (or ``normalize=True``), after combining.

Limits: a prompt template (LLM embedders) is applied to the whole text before chunking, so only
the first/last chunk see its beginning/end; training still truncates at ``max_length``
(:func:`model_max_length` gives the largest value the backbone accepts).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from anglekit.errors import ConfigError

__all__ = [
    "ChunkPlan",
    "chunk_token_ids",
    "combine_chunks",
    "embed_long",
    "model_max_length",
    "plan_chunks",
    "plan_token_chunks",
    "RowChunks",
    "expand_rows",
    "pool_rows",
    "tokenize_whole",
]

_HUGE = 1_000_000


def model_max_length(embedder: Any) -> int | None:
    """The most tokens the backbone takes in one sequence (position embeddings and tokenizer limit), or None if unknown."""
    from anglekit.llm.lora import unwrap  # local import: keeps this module light to import

    limits = []
    backbone = getattr(embedder, "backbone", None)  # exported models (ONNX, OpenVINO) have none
    config = getattr(unwrap(backbone), "config", None) if backbone is not None else None
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        # RoBERTa-style models reserve padding_idx + 1 positions.
        offset = (getattr(config, "pad_token_id", 0) or 0) + 1 if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert") else 0
        limits.append(positions - offset)
    tokenizer_limit = getattr(embedder.tokenizer, "model_max_length", None)
    if isinstance(tokenizer_limit, int) and 0 < tokenizer_limit < _HUGE:
        limits.append(tokenizer_limit)
    return min(limits) if limits else None


def _special_wrap(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The special token ids a tokenizer puts before and after a single text (``[CLS]``/``[SEP]``, ``<s>``...).

    Found by tokenizing a probe with and without special tokens (transformers 5 tokenizers have no
    ``build_inputs_with_special_tokens``).
    """
    probe = "hello world"
    plain = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return list(full[:start]), list(full[start + len(plain) :])
    raise ConfigError(f"cannot tell where {type(tokenizer).__name__} puts its special tokens")


def chunk_token_ids(
    content: Sequence[int],
    tokenizer: Any,
    window: int,
    stride: int,
    *,
    max_chunks: int | None = None,
    wrap: tuple[list[int], list[int]] | None = None,
) -> list[list[int]]:
    """Token id lists (special tokens added) of the overlapping windows over ``content`` ids.

    ``max_chunks`` bounds the compute per text: when more windows would be needed, that many are
    spread evenly from the beginning to the end of the text (gaps between them are skipped).
    ``wrap`` is the tokenizer's ``(prefix, suffix)`` special ids, found once by the caller (else probed here).
    """
    prefix, suffix = wrap if wrap is not None else _special_wrap(tokenizer)
    specials = len(prefix) + len(suffix)
    room = window - specials
    if room < 1:
        raise ConfigError(f"window {window} leaves no room for text after {specials} special tokens")
    if not 1 <= stride <= room:
        raise ConfigError(f"stride must be in 1..{room} (window minus special tokens), got {stride}")
    n = len(content)
    if n <= room:
        return [[*prefix, *content, *suffix]]
    starts = list(range(0, n - room + 1, stride))
    if starts[-1] + room < n:
        starts.append(n - room)
    if max_chunks is not None:
        if max_chunks < 1:
            raise ConfigError(f"max_chunks must be positive, got {max_chunks}")
        if len(starts) > max_chunks:
            last = n - room
            starts = [0] if max_chunks == 1 else [round(j * last / (max_chunks - 1)) for j in range(max_chunks)]
    return [[*prefix, *content[s : s + room], *suffix] for s in starts]


@dataclass
class ChunkPlan:
    """The chunks of a list of texts: token ids per chunk, the text each belongs to, and its weight
    (content tokens) for ``chunk-mean``."""

    ids: list[list[int]]
    owner: np.ndarray
    weight: np.ndarray
    texts: int


@dataclass(frozen=True)
class _Windows:
    """How a model cuts long texts: its window, stride, chunk cap and special-token wrap."""

    tokenizer: Any
    window: int
    stride: int
    max_chunks: int | None
    wrap: tuple[list[int], list[int]]

    def cut(self, content: Sequence[int]) -> list[list[int]]:
        return chunk_token_ids(content, self.tokenizer, self.window, self.stride, max_chunks=self.max_chunks, wrap=self.wrap)

    def plan(self, chunks_per_text: list[list[list[int]]]) -> ChunkPlan:
        """The :class:`ChunkPlan` of each text's chunks (weights: content tokens)."""
        specials = len(self.wrap[0]) + len(self.wrap[1])
        ids = [chunk for chunks in chunks_per_text for chunk in chunks]
        owner = np.repeat(np.arange(len(chunks_per_text), dtype=np.int64), [len(chunks) for chunks in chunks_per_text])
        weight = np.asarray([max(len(chunk) - specials, 1) for chunk in ids], dtype=np.float32)
        return ChunkPlan(ids, owner, weight, len(chunks_per_text))


def _windows(model: Any, window: int | None = None, stride: int | None = None, max_chunks: int | None = None) -> _Windows:
    """The model's windowing: the arguments, else its config's ``long_text_*`` settings, else a
    window of ``max_length`` (at most :func:`model_max_length`) and half a window's content as stride."""
    config = model.config
    window = int(window or getattr(config, "long_text_window", None) or config.max_length)
    limit = model_max_length(model)
    if limit is not None and window > limit:
        raise ConfigError(f"long-text window {window} exceeds the model's limit of {limit} tokens")
    wrap = _special_wrap(model.tokenizer)
    room = window - len(wrap[0]) - len(wrap[1])
    stride = int(stride or getattr(config, "long_text_stride", None) or max(1, room // 2))
    return _Windows(model.tokenizer, window, stride, max_chunks or getattr(config, "long_text_max_chunks", None), wrap)


def plan_chunks(
    model: Any,
    texts: Sequence[str],
    role: str | None,
    *,
    window: int | None = None,
    stride: int | None = None,
    max_chunks: int | None = None,
) -> ChunkPlan:
    """Cut ``texts`` (prompt applied, no truncation) into windows for ``model`` (any backend with
    ``tokenizer`` and ``config``): ``window`` tokens (default ``config.long_text_window`` or
    ``max_length``; at most :func:`model_max_length`), starts ``stride`` content tokens apart
    (default: config, else half the content room), at most ``max_chunks`` per text."""
    windows = _windows(model, window, stride, max_chunks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # verbose=False: sequences longer than model_max_length are expected here (no warning).
        encoded = model.tokenizer([model.config.format(t, role) for t in texts], add_special_tokens=False, truncation=False,
                                  padding=False, verbose=False, return_attention_mask=False, return_token_type_ids=False)  # fmt: skip
    return windows.plan([windows.cut(content) for content in encoded["input_ids"]])


def plan_token_chunks(model: Any, token_ids: Sequence[Sequence[int]]) -> ChunkPlan:
    """:func:`plan_chunks` for texts already tokenized whole (special tokens included, no
    truncation), as the server's batcher holds them: each sequence's content is cut into the
    config's windows; a sequence that fits one window is its own single chunk."""
    windows = _windows(model)
    prefix, suffix = windows.wrap
    chunks_per_text = []
    for seq in map(list, token_ids):
        if len(seq) <= windows.window:
            chunks_per_text.append([seq])
            continue
        start = len(prefix) if seq[: len(prefix)] == prefix else 0
        end = len(seq) - len(suffix) if suffix and seq[len(seq) - len(suffix) :] == suffix else len(seq)
        chunks_per_text.append(windows.cut(seq[start:end]))
    return windows.plan(chunks_per_text)


def combine_chunks(vectors: np.ndarray, plan: ChunkPlan, pooling: Literal["mean", "max"]) -> np.ndarray:
    """One vector per text from its chunks' (un-normalised) vectors: the mean weighted by content
    tokens, or the element-wise maximum. A text with one chunk gets that chunk's vector."""
    out = np.zeros((plan.texts, vectors.shape[1]), dtype=np.float32)
    if pooling == "mean":
        np.add.at(out, plan.owner, vectors * plan.weight[:, None])
        totals = np.zeros(plan.texts, dtype=np.float32)
        np.add.at(totals, plan.owner, plan.weight)
        return out / totals[:, None]
    out.fill(-np.inf)
    np.maximum.at(out, plan.owner, vectors)
    return out


def embed_long(
    embedder: Any,
    texts: Sequence[str] | str,
    *,
    window: int | None = None,
    stride: int | None = None,
    pooling: Literal["mean", "max"] = "mean",
    max_chunks: int | None = None,
    batch_size: int = 32,
    normalize: bool | None = None,
    role: str | None = None,
) -> np.ndarray:
    """Embed ``texts`` of any length by pooling over overlapping chunks; ``[len(texts), dim]`` float32 (order kept).

    ``embedder.encode`` with ``long_text="chunk-<pooling>"`` and these window settings for this call
    (the embedder's config is swapped for the call: do not share the embedder with other threads meanwhile).

    ``window`` defaults to the embedder's ``config.max_length`` and may not exceed
    :func:`model_max_length`; ``stride`` (content tokens between chunk starts) defaults to half
    the content room of a window (50% overlap). ``max_chunks`` caps the windows per text (spread
    evenly over the text), e.g. 4 windows of 128 tokens cost what truncation at 512 costs.
    """
    from dataclasses import replace

    if pooling not in ("mean", "max"):
        raise ConfigError(f"pooling must be 'mean' or 'max', got {pooling!r}")
    if max_chunks is not None and max_chunks < 1:
        raise ConfigError(f"max_chunks must be positive, got {max_chunks}")
    window = int(window if window is not None else embedder.config.max_length)
    limit = model_max_length(embedder)
    if limit is not None and window > limit:
        raise ConfigError(f"window {window} exceeds the model's limit of {limit} tokens")
    saved = embedder.config
    embedder.config = replace(saved, long_text=f"chunk-{pooling}", long_text_window=window, long_text_stride=stride, long_text_max_chunks=max_chunks)
    try:
        return embedder.encode(texts, batch_size, normalize=normalize, role=role)
    finally:
        embedder.config = saved


# --------------------------------------------------------------------------- training
def tokenize_whole(embedder: Any, texts: Sequence[str], role: str | None = None) -> list[list[int]]:
    """Token ids of each whole text (prompt applied, special tokens added, no truncation): what a
    training batch holds when the model chunks long texts (:func:`expand_rows` cuts them later)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        encoded = embedder.tokenizer([embedder.config.format(t, role) for t in texts], truncation=False, padding=False, verbose=False,
                                     return_attention_mask=False, return_token_type_ids=False)  # fmt: skip
    return encoded["input_ids"]


@dataclass
class RowChunks:
    """Padded windows of a batch's rows and how to pool them back to one vector per row."""

    inputs: dict[str, Any]
    owner: Any
    weight: Any
    rows: int


def expand_rows(embedder: Any, inputs: dict[str, Any]) -> RowChunks | None:
    """The windows of a padded batch (``input_ids``/``attention_mask`` [N, T], whole texts) under
    the embedder's ``long_text`` setting, padded to [M, W] the embedder's way; None when the
    setting is ``truncate`` or every row fits one window (then the batch runs as it is)."""
    import torch

    config = embedder.config
    if getattr(config, "long_text", "truncate") == "truncate":
        return None
    window = int(getattr(config, "long_text_window", None) or config.max_length)
    mask = inputs["attention_mask"]
    if int(mask.sum(dim=1).max()) <= window:
        return None
    ids = inputs["input_ids"]
    rows = [ids[i][mask[i].bool()].tolist() for i in range(ids.shape[0])]  # real tokens, left or right padded
    plan = plan_token_chunks(embedder, rows)
    padded = embedder.pad(plan.ids, device=ids.device)
    return RowChunks(padded, torch.as_tensor(plan.owner, device=ids.device), torch.as_tensor(plan.weight, device=ids.device), len(rows))


def pool_rows(vectors: Any, chunks: RowChunks, mode: str) -> Any:
    """One vector per row from its windows' vectors (``[..., M, D]`` -> ``[..., N, D]``, a leading
    layer axis kept), differentiably: the mean weighted by content tokens (``chunk-mean``) or the
    element-wise maximum (``chunk-max``), as :func:`combine_chunks` does at inference."""
    import torch

    shape = (*vectors.shape[:-2], chunks.rows, vectors.shape[-1])
    index = chunks.owner.view(*([1] * (vectors.dim() - 2)), -1, 1).expand_as(vectors)
    if mode == "chunk-mean":
        weight = chunks.weight.to(vectors.dtype).view(*([1] * (vectors.dim() - 2)), -1, 1)
        total = torch.zeros(chunks.rows, device=vectors.device, dtype=vectors.dtype).index_add_(0, chunks.owner, chunks.weight.to(vectors.dtype))
        summed = torch.zeros(shape, device=vectors.device, dtype=vectors.dtype).scatter_add(-2, index, vectors * weight)
        return summed / total.view(-1, 1)
    return torch.zeros(shape, device=vectors.device, dtype=vectors.dtype).scatter_reduce(-2, index, vectors, reduce="amax", include_self=False)
