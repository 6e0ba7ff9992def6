"""GGUF checkpoints (llama.cpp's format): recognise them and say how transformers loads them.

transformers reads a GGUF file with ``from_pretrained(folder_or_repo, gguf_file=NAME)`` and
de-quantizes it into an ordinary model (float32 unless a dtype is given); the tokenizer comes from
the same file. This needs the ``gguf`` package (``pip install 'anglekit[llm]'``).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from anglekit.errors import ConfigError

SUFFIX = ".gguf"


@dataclass(frozen=True)
class GGUFSource:
    """A GGUF file: ``location`` (local folder or hub repository) and ``filename`` within it."""

    location: str
    filename: str

    def kwargs(self) -> dict[str, str]:
        """Keyword arguments for transformers' ``from_pretrained``."""
        return {"gguf_file": self.filename}


def locate_gguf(name_or_path: str, gguf_file: str | None = None) -> GGUFSource | None:
    """The GGUF source meant by a local ``.gguf`` path, or by ``gguf_file`` in a folder/repository;
    None for anything else."""
    if gguf_file is not None:
        if not gguf_file.endswith(SUFFIX):
            raise ConfigError(f"gguf_file must name a {SUFFIX} file, got {gguf_file!r}")
        return GGUFSource(name_or_path, gguf_file)
    path = Path(name_or_path)
    if name_or_path.endswith(SUFFIX):
        if not path.is_file():
            raise ConfigError(f"{name_or_path}: GGUF file not found")
        return GGUFSource(str(path.resolve().parent), path.name)
    return None


def dequantize_config() -> object | None:
    """transformers' ``GgufConfig(dequantize=True)``: unpack every GGUF weight into a plain float
    model when loading (None where transformers has no such config and always does so)."""
    try:
        from transformers import GgufConfig
    except ImportError:
        return None
    return GgufConfig(dequantize=True)


def drop_quantization_marker(model: object) -> None:
    """Forget transformers' record that ``model`` came from a quantised file, once its weights are
    plain floats (de-quantised GGUF, merged): it then saves and trains as the ordinary model it is.
    A model with any packed (non-float) weight keeps it."""
    if any(not p.is_floating_point() for p in model.parameters()):  # type: ignore[attr-defined]
        return
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and hasattr(quantizer, "remove_quantization_config"):
        quantizer.remove_quantization_config(model)
        return
    for name in ("hf_quantizer", "quantization_method"):
        if name in vars(model):
            delattr(model, name)
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "quantization_config"):
        del config.quantization_config
    if "is_quantized" in vars(model):
        model.is_quantized = False  # type: ignore[attr-defined]


def require_gguf() -> None:
    """Raise a clear error when the ``gguf`` package (needed to read GGUF files) is missing."""
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError("loading a GGUF file needs the 'gguf' package: pip install 'anglekit[llm]' (or gguf)")


__all__ = ["GGUFSource", "dequantize_config", "drop_quantization_marker", "locate_gguf", "require_gguf"]
