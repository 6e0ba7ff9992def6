"""Split names: the one normaliser every loader uses.

Canonical names are ``train``, ``dev`` and ``test``. Accepted aliases (any case, surrounding blanks
ignored): ``validation``, ``valid``, ``val`` and ``trial`` (SICK's dev file) for ``dev``. Loaders whose
files use another name map the canonical one themselves (the GitHub Issues files say ``valid``).
"""

from __future__ import annotations

from anglekit.errors import ConfigError

__all__ = ["SPLITS", "SPLIT_ALIASES", "normalize_split"]

SPLITS = ("train", "dev", "test")
"""The canonical split names."""

SPLIT_ALIASES: dict[str, str] = {
    "train": "train",
    "dev": "dev",
    "validation": "dev",
    "valid": "dev",
    "val": "dev",
    "trial": "dev",
    "test": "test",
}
"""Accepted split names (lower case) -> canonical name."""


def normalize_split(split: str) -> str:
    """``train`` / ``dev`` / ``test`` from a split name or alias (``validation``, ``valid``, ``val``, ``trial``)."""
    key = split.strip().lower() if isinstance(split, str) else None
    if key not in SPLIT_ALIASES:
        raise ConfigError(f"unknown split {split!r}; use one of train, dev (validation), test")
    return SPLIT_ALIASES[key]
