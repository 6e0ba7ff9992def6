"""int8 and binary codes of unit vectors, and exact top-k over float vectors or over codes.

- ``int8``: one symmetric scale for the whole index, ``code = round(x / scale)`` clipped to
  [-127, 127], the scale calibrated on the vectors present when codes are first needed
  (``max |x| / 127``); later vectors are clipped to it. A quarter of float32's memory.
- ``binary``: one bit a dimension, ``x > 0`` (as sentence-transformers' ``quantize_embeddings``),
  packed 8 to a byte: a 32nd of float32's memory.

Exact search over codes is asymmetric: the float query against the codes (``q . code * scale`` for
int8, ``q . sign(x)`` for binary), which ranks better than quantizing the query too; the candidates
are then rescored with the float vectors by :func:`rescore`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["QUANTIZATIONS", "binary_codes", "block_scorer", "int8_codes", "int8_scale", "rescore", "top_k"]

QUANTIZATIONS = ("none", "int8", "binary")
_BLOCK_ROWS = 65536
_QUERY_BATCH = 256


def int8_scale(vectors: np.ndarray) -> float:
    """The symmetric int8 scale of ``vectors``: max |x| / 127 (1/127 for an all-zero matrix)."""
    peak = float(np.max(np.abs(vectors))) if vectors.size else 0.0
    return (peak if peak > 0 else 1.0) / 127.0


def int8_codes(vectors: np.ndarray, scale: float) -> np.ndarray:
    return np.clip(np.rint(np.asarray(vectors, dtype=np.float32) / scale), -127, 127).astype(np.int8)


def binary_codes(vectors: np.ndarray) -> np.ndarray:
    return np.packbits(np.asarray(vectors) > 0, axis=1)


def block_scorer(quantize: str, matrix: np.ndarray, dim: int, scale: float | None) -> Callable[[Any, int, int], Any]:
    """``score(queries, start, stop)``: scores (torch, float32) of float queries against rows
    ``[start, stop)`` of ``matrix`` (float vectors, int8 codes or packed bits)."""
    import torch

    def rows(start: int, stop: int) -> Any:
        block = np.asarray(matrix[start:stop])
        if quantize == "binary":
            block = np.unpackbits(block, axis=1, count=dim).astype(np.float32) * 2.0 - 1.0
        elif quantize == "int8":
            block = block.astype(np.float32) * np.float32(scale)
        with warnings.catch_warnings():  # a memory-mapped, read-only block: never written to
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(np.ascontiguousarray(block, dtype=np.float32))

    def score(queries: Any, start: int, stop: int) -> Any:
        return queries @ rows(start, stop).T

    return score


def top_k(queries: np.ndarray, n: int, k: int, score: Callable[[Any, int, int], Any], *, block_rows: int = _BLOCK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """(scores, rows), each ``[len(queries), min(k, n)]``, best first (ties: lower row first), of
    an exact scan of ``n`` rows in blocks (memory bounded by the block and query batch sizes)."""
    import torch

    k = min(k, n)
    q_all = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32))
    out_scores = np.empty((len(queries), k), dtype=np.float32)
    out_rows = np.empty((len(queries), k), dtype=np.int64)
    if k == 0:
        return out_scores, out_rows
    for q0 in range(0, len(queries), _QUERY_BATCH):
        q = q_all[q0 : q0 + _QUERY_BATCH]
        best_s = torch.full((len(q), 0), float("-inf"))
        best_r = torch.zeros((len(q), 0), dtype=torch.int64)
        for start in range(0, n, block_rows):
            stop = min(n, start + block_rows)
            s = score(q, start, stop)
            kk = min(k, stop - start)
            top_s, top_i = torch.topk(s, kk, dim=1)
            best_s = torch.cat([best_s, top_s], dim=1)
            best_r = torch.cat([best_r, top_i + start], dim=1)
            if best_s.shape[1] > k:
                best_s, keep = torch.topk(best_s, k, dim=1)
                best_r = torch.gather(best_r, 1, keep)
        s_np, r_np = best_s.numpy(), best_r.numpy()
        order = np.lexsort((r_np, -s_np), axis=1)  # by score, ties by row: deterministic
        out_scores[q0 : q0 + len(q)] = np.take_along_axis(s_np, order, axis=1)
        out_rows[q0 : q0 + len(q)] = np.take_along_axis(r_np, order, axis=1)
    return out_scores, out_rows


def rescore(queries: np.ndarray, candidates: np.ndarray, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact float scores of each query's candidate rows (``-1`` = none), the best ``k`` kept:
    (scores, rows) ``[len(queries), k]``, missing places score ``-inf`` with row ``-1``."""
    queries = np.asarray(queries, dtype=np.float32)
    n_q, width = candidates.shape
    scores = np.full((n_q, width), -np.inf, dtype=np.float32)
    valid = candidates >= 0
    if valid.any():
        flat = candidates[valid]
        unique, inverse = np.unique(flat, return_inverse=True)
        rows = np.asarray(vectors[unique], dtype=np.float32)  # one read of each row (vectors may be memory-mapped)
        which = np.nonzero(valid)[0]
        scores[valid] = np.einsum("ij,ij->i", queries[which], rows[inverse])
    k = min(k, width)
    order = np.lexsort((np.where(valid, candidates, np.iinfo(np.int64).max), -scores), axis=1)[:, :k]
    top_scores = np.take_along_axis(scores, order, axis=1)
    top_rows = np.where(np.isfinite(top_scores), np.take_along_axis(candidates, order, axis=1), -1)
    return top_scores, top_rows
