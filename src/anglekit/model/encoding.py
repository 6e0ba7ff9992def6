"""The encode loop every inference backend shares: validate, tokenize once, batch by length,
embed, put the vectors back in input order, normalise, convert.

A backend provides ``config`` (an EmbedderConfig), ``dim``, ``tokenize_unpadded(texts, role)``,
``pad(sequences)`` and ``embed_padded(batch, normalize) -> array``. Truncation to a leading slice
of the coordinates (``truncate_dim``, nested-dimension models) happens here, for every backend.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from anglekit.errors import ConfigError
from anglekit.model import DEFAULT_BATCH_SIZE

LONG_TEXT_MODES = ("truncate", "chunk-mean", "chunk-max")
"""How texts longer than the window are embedded (see :mod:`anglekit.model.long_text`)."""


def prepare_tokenizer(tokenizer: Any, config: Any, source: str) -> None:
    """Apply the config's padding side and give a tokenizer without a pad token its eos token
    (decoder LLMs; padding is masked out, so any id will do)."""

    if config.padding_side is not None:
        tokenizer.padding_side = config.padding_side
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is None:
            raise ConfigError(f"{source}: tokenizer has neither a pad nor an eos token to pad with")
        tokenizer.pad_token = tokenizer.eos_token


def tokenize_texts(tokenizer: Any, config: Any, texts: Sequence[str], role: str | None) -> list[list[int]]:
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


def check_truncate_dim(truncate_dim: Any, dim: int) -> int | None:
    """``truncate_dim`` checked against the model's dimension ``dim``: None, or an integer in
    [1, dim] (ConfigError otherwise). ``dim`` itself means no truncation and gives None."""

    if truncate_dim is None:
        return None
    if isinstance(truncate_dim, bool) or not isinstance(truncate_dim, (int, np.integer)):
        raise ConfigError(f"truncate_dim must be an integer, got {type(truncate_dim).__name__} {truncate_dim!r}")
    truncate_dim = int(truncate_dim)
    if truncate_dim < 1 or truncate_dim > dim:
        raise ConfigError(f"truncate_dim must be between 1 and the model's dimension {dim}, got {truncate_dim}")
    return None if truncate_dim == dim else truncate_dim


def truncate_rows(vectors: np.ndarray, truncate_dim: int, normalize: bool) -> np.ndarray:
    """The first ``truncate_dim`` coordinates of each row, L2-normalised when ``normalize``
    (a zero row stays zero)."""
    cut = np.ascontiguousarray(vectors[:, :truncate_dim], dtype=np.float32)
    if normalize:
        norms = np.linalg.norm(cut, axis=1, keepdims=True)
        cut /= np.maximum(norms, 1e-12)
    return cut


def _embed_rows(model: Any, ids: list[list[int]], batch_size: int, normalize: bool, show_progress: bool) -> Any:
    """(row indices, their vectors) of each batch of ``ids``, longest first."""
    order = np.argsort([-len(seq) for seq in ids], kind="stable")
    progress = None
    if show_progress:
        from tqdm.auto import tqdm

        progress = tqdm(total=len(ids), desc="encode", unit="text")
    try:
        for start in range(0, len(ids), batch_size):
            rows = order[start : start + batch_size]
            yield rows, model.embed_padded(model.pad([ids[i] for i in rows]), normalize)
            if progress is not None:
                progress.update(len(rows))
    finally:
        if progress is not None:
            progress.close()


def encode_texts(
    model: Any,
    texts: str | Sequence[str],
    batch_size: int,
    *,
    normalize: bool | None = None,
    show_progress: bool = False,
    convert_to: Literal["numpy", "torch"] = "numpy",
    role: str | None = None,
    truncate_dim: int | None = None,
    long_text: str | None = None,
) -> Any:
    """Embed ``texts`` with ``model`` (see the module doc): one string gives one vector, a list a
    matrix in input order. Batches are formed longest first, so memory problems show at once.

    ``truncate_dim`` (default: the config's ``truncate_dim``) keeps the first k coordinates; the
    vectors are normalised after the cut, so truncated normalised vectors have unit norm.
    ``long_text`` (default: the config's): ``truncate``, or ``chunk-mean``/``chunk-max`` to embed
    overlapping windows of each text and pool them (:mod:`anglekit.model.long_text`)."""
    items, single = check_texts(texts)
    batch_size = check_batch_size(batch_size)
    model.config.template(role)  # a role the model does not have: an error naming the ones it has, even for no texts
    if convert_to not in ("numpy", "torch"):
        raise ValueError(f"convert_to must be 'numpy' or 'torch', got {convert_to!r}")
    normalize = model.config.normalize if normalize is None else normalize
    if truncate_dim is None:
        truncate_dim = getattr(model.config, "truncate_dim", None)
    truncate = check_truncate_dim(truncate_dim, model.dim)
    width = model.dim if truncate is None else truncate
    mode = long_text or getattr(model.config, "long_text", "truncate")
    if mode not in LONG_TEXT_MODES:
        raise ConfigError(f"long_text must be one of {', '.join(LONG_TEXT_MODES)}, got {mode!r}")
    if not items:
        result = np.zeros((0, width), dtype=np.float32)
    elif mode == "truncate":
        ids = model.tokenize_unpadded(items, role)
        result = np.empty((len(items), width), dtype=np.float32)
        for rows, vectors in _embed_rows(model, ids, batch_size, normalize and truncate is None, show_progress):
            result[rows] = vectors if truncate is None else truncate_rows(vectors, truncate, normalize)
    else:
        from anglekit.model.long_text import combine_chunks, plan_chunks

        plan = plan_chunks(model, items, role)
        chunks = np.empty((len(plan.ids), model.dim), dtype=np.float32)
        for rows, vectors in _embed_rows(model, plan.ids, batch_size, False, show_progress):
            chunks[rows] = vectors
        pooled = combine_chunks(chunks, plan, "mean" if mode == "chunk-mean" else "max")
        result = truncate_rows(pooled, truncate or model.dim, normalize)
    if single:
        result = result[0]
    if convert_to == "torch":
        import torch

        return torch.from_numpy(result)
    return result


def zero_rows_message(vectors: np.ndarray, *, first_row: int = 1, where: str = "") -> str | None:
    """A warning naming the rows (1-based from ``first_row``: the first few, and how many) whose
    vector is all zeros: normalising such a vector gives zeros, which match nothing. None: none are."""
    rows = np.flatnonzero(~np.any(np.asarray(vectors) != 0, axis=-1))
    if rows.size == 0:
        return None
    shown = ", ".join(str(int(r) + first_row) for r in rows[:ZERO_ROWS_SHOWN]) + (", ..." if rows.size > ZERO_ROWS_SHOWN else "")
    return (
        f"{where}{rows.size} of {len(vectors)} vectors are all zeros (rows {shown}): the model embeds those texts as the zero "
        "vector, which normalising leaves at zero and which scores 0 against everything"
    )


ZERO_ROWS_SHOWN = 5
"""How many zero-vector rows a warning lists."""


__all__ = ["check_batch_size", "check_texts", "check_truncate_dim", "encode_texts", "prepare_tokenizer", "tokenize_texts", "truncate_rows", "zero_rows_message"]


class EncodeAPI:
    """``encode`` / ``encode_query`` / ``encode_document`` over :func:`encode_texts`, written once for
    every backend (torch, ONNX, OpenVINO). A backend may override :meth:`_encoding` to run the loop
    in a context (the torch one: eval and inference mode)."""

    def _encoding(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def encode(
        self,
        texts: str | Sequence[str],
        batch_size: int = DEFAULT_BATCH_SIZE,
        *,
        normalize: bool | None = None,
        show_progress: bool = False,
        convert_to: Literal["numpy", "torch"] = "numpy",
        role: str | None = None,
        truncate_dim: int | None = None,
        long_text: str | None = None,
    ) -> Any:
        """Embed ``texts`` (one string gives one vector, a list gives a matrix in input order).

        ``role`` picks one of the model's named prompts (``query``, ``document``, ...; None: its
        general ``prompt``); a role it does not have is a ConfigError naming the ones it has.
        ``truncate_dim`` (default: the config's) keeps the first k
        coordinates, normalised after the cut when normalising; an integer outside [1, dim] is a
        ConfigError. ``long_text`` (default: the config's) is ``truncate``, ``chunk-mean`` or
        ``chunk-max``. Batches are formed in order of token length (longest first, so memory
        problems show at once) and the output is put back in input order (:func:`encode_texts`).
        """
        with self._encoding():
            return encode_texts(
                self, texts, batch_size, normalize=normalize, show_progress=show_progress, convert_to=convert_to, role=role,
                truncate_dim=truncate_dim, long_text=long_text,
            )  # fmt: skip

    def encode_query(self, texts: str | Sequence[str], batch_size: int = DEFAULT_BATCH_SIZE, **kwargs: Any) -> Any:
        """:meth:`encode` with the model's ``query`` prompt, or its general prompt when it has none
        (as sentence-transformers' ``encode_query``)."""
        return self.encode(texts, batch_size, role=self.config.role_if_present("query"), **kwargs)

    def encode_document(self, texts: str | Sequence[str], batch_size: int = DEFAULT_BATCH_SIZE, **kwargs: Any) -> Any:
        """:meth:`encode` with the model's ``document`` prompt (else ``passage`` or ``corpus``), or its
        general prompt when it has none (as sentence-transformers' ``encode_document``)."""
        return self.encode(texts, batch_size, role=self.config.role_if_present("document"), **kwargs)
