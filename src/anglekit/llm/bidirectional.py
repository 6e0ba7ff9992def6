"""Bidirectional attention for decoder backbones (the BiLLM idea): drop the causal mask so that
every token attends to every other non-padding token, as in an encoder.

transformers (5.x) builds a decoder's mask with ``create_causal_mask``, which falls back to a
bidirectional (padding-only) mask when ``config.is_causal`` is False; the attention kernels
(SDPA, flash attention) read the per-module ``is_causal`` flag when no mask is materialised. Both
are switched off here. Padding stays masked.
"""

from __future__ import annotations

import inspect
from typing import Any

from anglekit.errors import ConfigError


def _masks_honour_is_causal() -> bool:
    try:
        from transformers import masking_utils
    except ImportError:
        return False
    source = inspect.getsource(masking_utils.create_causal_mask)
    return "is_causal" in source and hasattr(masking_utils, "create_bidirectional_mask")


def enable_bidirectional(backbone: Any) -> int:
    """Make ``backbone`` (a transformers decoder, possibly PEFT-wrapped) attend bidirectionally.

    Returns the number of attention modules switched. Raises a ConfigError when the model has no
    causal attention to switch or this transformers version cannot build non-causal decoder masks.
    """
    if not _masks_honour_is_causal():
        raise ConfigError("bidirectional attention needs a transformers version whose masks honour config.is_causal (e.g. 5.x)")
    config = getattr(backbone, "config", None)
    if config is None:
        raise ConfigError("bidirectional attention: the backbone has no transformers config")
    switched = 0
    for module in backbone.modules():
        if getattr(module, "is_causal", None) is True:
            module.is_causal = False
            switched += 1
    if switched == 0:
        raise ConfigError(
            f"bidirectional attention: {type(backbone).__name__} has no causal attention modules to switch "
            "(it is an encoder already, or an architecture anglekit cannot switch)"
        )
    config.is_causal = False
    return switched


def is_bidirectional(backbone: Any) -> bool:
    """Whether :func:`enable_bidirectional` was applied to ``backbone``."""
    return getattr(getattr(backbone, "config", None), "is_causal", True) is False


__all__ = ["enable_bidirectional", "is_bidirectional"]
