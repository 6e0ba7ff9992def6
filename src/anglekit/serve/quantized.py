"""Quantized embeddings of ``POST /v1/embeddings``: ``encoding_format`` int8, uint8, binary, ubinary.

Every quantized vector is the L2-normalised vector (after ``dimensions``), so that its codes rank
by cosine, as an index does:

- ``int8``: ``code = clip(round(x / scale), -127, 127)``, one symmetric ``scale`` for every
  coordinate, the index's own scale (:mod:`anglekit.index.quantize`) when the calibration comes
  from an int8 index, else ``1/127`` (``unit-range``: no coordinate of a unit vector is clipped).
  Decode: ``x ~ code * scale``.
- ``uint8``: the int8 code plus 128 (``zero_point`` 128). Decode: ``x ~ (code - 128) * scale``.
- ``binary`` / ``ubinary``: one bit per coordinate, 1 where ``x > 0``, packed 8 to a byte, most
  significant bit first (numpy's ``packbits``); ``binary`` stores each byte minus 128 as int8,
  ``ubinary`` as uint8 (sentence-transformers' ``quantize_embeddings`` conventions). Decode: the
  bits as ``+1/-1``.

The response names its calibration (``quantization`` object), and :func:`decode` is the client's
side of it. Searching the decoded vectors with a float query ranks like the index's own quantized
search over its codes (before its float rescoring).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from anglekit.index.quantize import binary_codes, int8_codes

QUANTIZED_FORMATS = ("int8", "uint8", "binary", "ubinary")
UNIT_RANGE = 1.0 / 127.0
"""The int8 scale without a calibration: unit vectors' coordinates lie in [-1, 1]."""


@dataclass(frozen=True)
class Calibration:
    """The int8 scale and where it comes from (``index:NAME`` or ``unit-range``)."""

    scale: float
    source: str


def quantize(unit: np.ndarray, encoding_format: str, calibration: Calibration) -> np.ndarray:
    """The codes of unit vectors ``[n, d]``: int8/uint8 ``[n, d]``, binary/ubinary ``[n, ceil(d/8)]``."""
    if encoding_format in ("binary", "ubinary"):
        packed = binary_codes(unit)
        return packed if encoding_format == "ubinary" else (packed.astype(np.int16) - 128).astype(np.int8)
    codes = int8_codes(unit, calibration.scale)
    if encoding_format == "uint8":
        return (codes.astype(np.int16) + 128).astype(np.uint8)
    if encoding_format != "int8":
        raise ValueError(f"not a quantized encoding format: {encoding_format!r}")
    return codes


def describe(encoding_format: str, calibration: Calibration, dimensions: int) -> dict[str, Any]:
    """The response's ``quantization`` object: what a client needs to decode the codes."""
    if encoding_format in ("binary", "ubinary"):
        return {"encoding_format": encoding_format, "dimensions": dimensions, "bits": "msb-first", "offset": -128 if encoding_format == "binary" else 0,
                "normalized": True}  # fmt: skip
    return {
        "encoding_format": encoding_format, "dimensions": dimensions, "scale": calibration.scale,
        "zero_point": 128 if encoding_format == "uint8" else 0, "calibration": calibration.source, "normalized": True,
    }  # fmt: skip


def decode(codes: Any, quantization: dict[str, Any]) -> np.ndarray:
    """Float vectors ``[n, dimensions]`` from the codes of a response and its ``quantization``."""
    array = np.asarray(codes)
    if array.ndim == 1:
        array = array[None, :]
    kind, dims = quantization["encoding_format"], int(quantization["dimensions"])
    if kind in ("binary", "ubinary"):
        packed = (array.astype(np.int16) - int(quantization.get("offset", 0))).astype(np.uint8)
        return np.unpackbits(packed, axis=1, count=dims).astype(np.float32) * 2.0 - 1.0
    if kind not in ("int8", "uint8"):
        raise ValueError(f"not a quantized encoding format: {kind!r}")
    return (array.astype(np.float32) - float(quantization["zero_point"])) * np.float32(quantization["scale"])


__all__ = ["QUANTIZED_FORMATS", "UNIT_RANGE", "Calibration", "decode", "describe", "quantize"]
