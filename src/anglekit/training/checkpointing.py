"""Gradient checkpointing, in every layer or every n-th (``checkpoint_every``).

Checkpointing every layer of SmolLM2-135M (LoRA, bf16 on a CPU) costs half as much time again as
not checkpointing, for a memory need far below what a laptop has; checkpointing every n-th layer
spends only the memory the run can afford. transformers marks each layer that may recompute as a
``GradientCheckpointingLayer`` (4.52+) whose ``gradient_checkpointing`` attribute says whether it
does; recent versions take ``every_n_layers`` themselves, and for the others the layers in between
are switched off after the model's own ``gradient_checkpointing_enable``.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from anglekit.errors import ConfigError

logger = logging.getLogger(__name__)


def enable_gradient_checkpointing(model: Any, every: int = 1) -> None:
    """Recompute activations in the backward pass (non-reentrant, so it works when the inputs of
    the checkpointed blocks need no gradient, as with LoRA on frozen embeddings), in every
    ``every``-th layer (the first, the (every+1)-th, ...)."""
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise ConfigError(f"checkpoint_every must be an integer >= 1, got {every!r}")
    kwargs: dict[str, Any] = {"use_reentrant": False}
    enable = getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5
    takes_every = enable is not None and "every_n_layers" in inspect.signature(enable).parameters
    if enable is not None:
        enable(activation_checkpointing_kwargs=kwargs, **({"every_n_layers": every} if takes_every else {}))
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if every > 1 and not takes_every:
        _switch_off_between(model, every)
    if every > 1:
        logger.info("gradient checkpointing: every %d-th layer recomputes", every)


def _switch_off_between(model: Any, every: int) -> None:
    """Keeps checkpointing in layers 0, every, 2 * every, ... of ``model``'s checkpointing layers."""
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:  # transformers < 4.52: no per-layer switch
        layers = []
    else:
        layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    if not layers:
        raise ConfigError(
            f"checkpoint_every {every}: {type(model).__name__} has no per-layer checkpointing switch "
            "(transformers' GradientCheckpointingLayer, 4.52+); use checkpoint_every 1"
        )
    for index, layer in enumerate(layers):
        layer.gradient_checkpointing = index % every == 0
