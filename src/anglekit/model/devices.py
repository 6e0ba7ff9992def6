"""Devices and weight dtypes: names as users write them -> torch objects."""

from __future__ import annotations

import torch

from anglekit.errors import ConfigError

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
DTYPE_CHOICES = ("fp32", "bf16", "fp16")
"""The short names offered on the command line (``--dtype``)."""


def default_device() -> torch.device:
    """CUDA when present, else Apple's MPS when present, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | str | None:
    """A torch dtype for a name (``fp32``, ``bfloat16``, ...); None and ``auto`` pass through."""
    if dtype is None or isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ConfigError(f"unknown dtype {dtype!r}; choose one of auto, {', '.join(DTYPES)}") from None
