"""Training: a typed, sectioned :class:`TrainConfig` and :func:`train` on ``transformers.Trainer``.

- :mod:`~anglekit.training.config`: the settings (sections model, data, objective, lora, trainer);
- :mod:`~anglekit.training.tasks`: one task per batch kind (pairs, sentences, triplets);
- :mod:`~anglekit.training.trainer`, :mod:`~anglekit.training.run`: the Trainer and a whole run.

``from anglekit.training import TrainConfig, train`` imports lazily (no torch until used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["TrainConfig", "TrainResult", "train"]

if TYPE_CHECKING:  # pragma: no cover
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import TrainResult, train


def __getattr__(name: str) -> Any:
    if name == "TrainConfig":
        from anglekit.training.config import TrainConfig

        return TrainConfig
    if name in ("train", "TrainResult"):
        from anglekit.training import run

        return getattr(run, name)
    raise AttributeError(f"module 'anglekit.training' has no attribute {name!r}")
