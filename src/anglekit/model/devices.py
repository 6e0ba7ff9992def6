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


def dtype_for_precision(precision: str | None, dtype: str | torch.dtype | None) -> str | torch.dtype | None:
    """The torch backend's weight dtype for an inference ``precision`` (None: ``dtype`` as given);
    a ConfigError when ``dtype`` names another one."""
    if precision is None:
        return dtype
    wanted = DTYPES[precision]
    given = resolve_dtype(dtype)
    if given is not None and given != "auto" and given != wanted:
        raise ConfigError(f"precision {precision!r} and dtype {dtype!r} disagree: give one of them")
    return wanted


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


def check_device(device: str | torch.device | None) -> None:
    """A ConfigError when ``device`` names an accelerator this machine does not have (rather than
    torch's assertion deep inside ``.to()``); None and the CPU always pass."""
    if device is None:
        return
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"device {device!r}: {exc}") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r}: no CUDA GPU is available here; use cpu, or leave the device unset to take the best one")
    if kind == "cuda" and torch.device(device).index is not None and torch.device(device).index >= torch.cuda.device_count():
        raise ConfigError(f"device {device!r}: there are {torch.cuda.device_count()} CUDA device(s)")
    mps = getattr(torch.backends, "mps", None)
    if kind == "mps" and not (mps is not None and mps.is_available()):
        raise ConfigError(f"device {device!r}: Apple's MPS is not available here; use cpu")
