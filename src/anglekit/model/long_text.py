"""Embedding texts longer than the model's window: pooling over overlapping token chunks.

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
from typing import Any, Literal

import numpy as np
import torch

from anglekit.errors import ConfigError

__all__ = ["chunk_token_ids", "embed_long", "model_max_length"]

_HUGE = 1_000_000


def model_max_length(embedder: Any) -> int | None:
    """The most tokens the backbone takes in one sequence (position embeddings and tokenizer limit), or None if unknown."""
    from anglekit.llm.lora import unwrap  # local import: keeps this module light to import

    limits = []
    config = getattr(unwrap(embedder.backbone), "config", None)
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
    role: Literal["query", "document"] | None = None,
) -> np.ndarray:
    """Embed ``texts`` of any length by pooling over overlapping chunks; ``[len(texts), dim]`` float32 (order kept).

    ``window`` defaults to the embedder's ``config.max_length`` and may not exceed
    :func:`model_max_length`; ``stride`` (content tokens between chunk starts) defaults to half
    the content room of a window (50% overlap). ``max_chunks`` caps the windows per text (spread
    evenly over the text), e.g. 4 windows of 128 tokens cost what truncation at 512 costs.
    """
    single = isinstance(texts, str)
    items = [texts] if single else list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"embed_long: item {i} is {type(text).__name__}, expected str")
    if pooling not in ("mean", "max"):
        raise ConfigError(f"pooling must be 'mean' or 'max', got {pooling!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if max_chunks is not None and max_chunks < 1:
        raise ConfigError(f"max_chunks must be positive, got {max_chunks}")
    tokenizer = embedder.tokenizer
    window = int(window if window is not None else embedder.config.max_length)
    limit = model_max_length(embedder)
    if limit is not None and window > limit:
        raise ConfigError(f"window {window} exceeds the model's limit of {limit} tokens")
    wrap = _special_wrap(tokenizer)
    room = window - len(wrap[0]) - len(wrap[1])
    stride = int(stride if stride is not None else max(1, room // 2))
    normalize = embedder.config.normalize if normalize is None else normalize
    if not items:
        return np.zeros((0, embedder.dim), dtype=np.float32)

    formatted = [embedder.config.format(t, role) for t in items]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # verbose=False: sequences longer than model_max_length are expected here (no warning).
        encoded = tokenizer(formatted, add_special_tokens=False, truncation=False, padding=False, verbose=False,
                            return_attention_mask=False, return_token_type_ids=False)
    chunks: list[list[int]] = []
    owner: list[int] = []
    weight: list[float] = []
    specials = len(wrap[0]) + len(wrap[1])
    for i, content in enumerate(encoded["input_ids"]):
        for ids in chunk_token_ids(content, tokenizer, window, stride, max_chunks=max_chunks, wrap=wrap):
            chunks.append(ids)
            owner.append(i)
            weight.append(float(max(len(ids) - specials, 1)))

    order = np.argsort([-len(c) for c in chunks], kind="stable")
    vectors = torch.empty((len(chunks), embedder.dim), dtype=torch.float32)
    was_training = embedder.training
    embedder.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(chunks), batch_size):
                index = order[start : start + batch_size]
                batch = embedder.pad([chunks[j] for j in index], device=embedder.device)
                vectors[torch.from_numpy(np.ascontiguousarray(index))] = embedder(**batch).float().cpu()
    finally:
        embedder.train(was_training)

    owners = torch.tensor(owner)
    out = torch.zeros((len(items), vectors.shape[1]), dtype=torch.float32)
    if pooling == "mean":
        w = torch.tensor(weight, dtype=torch.float32)
        out.index_add_(0, owners, vectors * w[:, None])
        totals = torch.zeros(len(items), dtype=torch.float32).index_add_(0, owners, w)
        out /= totals[:, None]
    else:
        for i in range(len(items)):
            out[i] = vectors[owners == i].max(dim=0).values
    if normalize:
        out = torch.nn.functional.normalize(out, p=2, dim=1)
    result = out.numpy()
    return result[0] if single else result
