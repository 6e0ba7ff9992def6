"""The encode loop every inference backend shares: validate, tokenize once, batch by length,
embed, put the vectors back in input order, normalise, convert.

A backend provides ``config`` (an EmbedderConfig), ``dim``, ``tokenize_unpadded(texts, role)``,
``pad(sequences)`` and ``embed_padded(batch, normalize) -> array``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np


def prepare_tokenizer(tokenizer: Any, config: Any, source: str) -> None:
    """Apply the config's padding side and give a tokenizer without a pad token its eos token
    (decoder LLMs; padding is masked out, so any id will do)."""
    from anglekit.errors import ConfigError

    if config.padding_side is not None:
        tokenizer.padding_side = config.padding_side
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is None:
            raise ConfigError(f"{source}: tokenizer has neither a pad nor an eos token to pad with")
        tokenizer.pad_token = tokenizer.eos_token


def tokenize_texts(tokenizer: Any, config: Any, texts: Sequence[str], role: Literal["query", "document"] | None) -> list[list[int]]:
    """Token ids of each text (the role's prompt applied, truncated to max_length), in one tokenizer call."""
    encoded = tokenizer(
        [config.format(t, role) for t in texts],
        truncation=True,
        max_length=config.max_length,
        padding=False,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    return encoded["input_ids"]


def check_texts(texts: Any) -> tuple[list[str], bool]:
    """(the texts as a list, whether one string was given); TypeError naming what is accepted."""
    single = isinstance(texts, str)
    if not single and (texts is None or isinstance(texts, (bytes, dict)) or not hasattr(texts, "__iter__")):
        raise TypeError(f"encode: texts must be a string or a sequence of strings, got {type(texts).__name__}")
    items: list[str] = [texts] if single else list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"encode: item {i} is {type(text).__name__}, expected str")
    return items, single


def check_batch_size(batch_size: Any) -> int:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    return batch_size


def encode_texts(
    model: Any,
    texts: str | Sequence[str],
    batch_size: int,
    *,
    normalize: bool | None = None,
    show_progress: bool = False,
    convert_to: Literal["numpy", "torch"] = "numpy",
    role: Literal["query", "document"] | None = None,
) -> Any:
    """Embed ``texts`` with ``model`` (see the module doc): one string gives one vector, a list a
    matrix in input order. Batches are formed longest first, so memory problems show at once."""
    items, single = check_texts(texts)
    batch_size = check_batch_size(batch_size)
    if convert_to not in ("numpy", "torch"):
        raise ValueError(f"convert_to must be 'numpy' or 'torch', got {convert_to!r}")
    normalize = model.config.normalize if normalize is None else normalize
    if not items:
        result = np.zeros((0, model.dim), dtype=np.float32)
    else:
        ids = model.tokenize_unpadded(items, role)
        order = np.argsort([-len(seq) for seq in ids], kind="stable")
        result = np.empty((len(items), model.dim), dtype=np.float32)
        progress = None
        if show_progress:
            from tqdm.auto import tqdm

            progress = tqdm(total=len(items), desc="encode", unit="text")
        for start in range(0, len(items), batch_size):
            rows = order[start : start + batch_size]
            result[rows] = model.embed_padded(model.pad([ids[i] for i in rows]), normalize)
            if progress is not None:
                progress.update(len(rows))
        if progress is not None:
            progress.close()
    if single:
        result = result[0]
    if convert_to == "torch":
        import torch

        return torch.from_numpy(result)
    return result


__all__ = ["check_batch_size", "check_texts", "encode_texts", "prepare_tokenizer", "tokenize_texts"]
