"""Registering an attention function, with the mask function it expects, in transformers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def register_attention(name: str, attention: Callable[..., Any], mask: str) -> bool:
    """Registers ``attention`` under ``name`` in transformers' ``AttentionInterface`` and the mask
    function ``masking_utils.<mask>`` (e.g. ``sdpa_mask``) under the same name in its
    ``AttentionMaskInterface``; False where this transformers has neither (before 4.53)."""
    try:
        from transformers import AttentionInterface, masking_utils
        from transformers.masking_utils import AttentionMaskInterface
    except ImportError:
        return False
    mask_function = getattr(masking_utils, mask, None)
    if mask_function is None:
        return False
    AttentionInterface.register(name, attention)
    AttentionMaskInterface.register(name, mask_function)
    return True


__all__ = ["register_attention"]
