"""The dataset spec of the command line and configs: ``[hf:]SOURCE[:SPLIT]``, parsed in one place.

The text after the last ``:`` is the split when it looks like one (letters, digits, ``-``, ``_``)
and the whole spec is not an existing path; ``hf:`` forces the hub, where SOURCE is
``ORG/NAME`` or ``ORG/NAME/CONFIG``. What SOURCE names (a file, a folder, a catalogue name, a hub
id) is decided by the resolvers: :func:`anglekit.data.catalog.resolve_dataset` for pairs,
:mod:`anglekit.data.training_data` for sentences and triplets.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from anglekit.data.sources import is_hub_id
from anglekit.errors import ConfigError

__all__ = ["DatasetSpec", "hub_source", "looks_like_split", "parse_spec"]


class DatasetSpec(NamedTuple):
    """A parsed spec: ``split`` is ``default_split`` unless ``explicit``; ``force_hub`` for ``hf:``."""

    source: str
    split: str
    explicit: bool
    force_hub: bool


def looks_like_split(text: str) -> bool:
    """Whether ``text`` can be a split name (letters, digits, ``-``, ``_``; no path separator)."""
    return bool(text) and "/" not in text and "\\" not in text and text.replace("_", "").replace("-", "").isalnum()


def parse_spec(spec: str, default_split: str) -> DatasetSpec:
    """Split ``[hf:]SOURCE[:SPLIT]`` into its parts; an empty spec is a :class:`ConfigError`."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"empty dataset spec {spec!r}")
    spec = spec.strip()
    force_hub = spec.startswith("hf:")
    body = spec[3:] if force_hub else spec
    if not force_hub and Path(body).expanduser().exists():
        return DatasetSpec(body, default_split, False, False)
    if ":" in body:
        head, _, tail = body.rpartition(":")
        if head and looks_like_split(tail):
            return DatasetSpec(head, tail, True, force_hub)
    return DatasetSpec(body, default_split, False, force_hub)


def hub_source(source: str, spec: str) -> tuple[str, str | None]:
    """``(org/name, config or None)`` from the SOURCE of an ``hf:`` spec (``spec`` is for the error)."""
    parts = source.split("/")
    if not (2 <= len(parts) <= 3 and all(parts) and is_hub_id("/".join(parts[:2]))):
        raise ConfigError(f"{spec!r}: after 'hf:' comes a hub id org/name or org/name/config")
    return "/".join(parts[:2]), parts[2] if len(parts) == 3 else None
