"""Find a file of a model: in a local folder, or in a hub repository (cached, offline-aware)."""

from __future__ import annotations

from pathlib import Path


def local_or_hub_file(name_or_path: str, filename: str, revision: str | None = None) -> Path | None:
    """Path of ``filename`` in a local directory or hub repository, or None when it has none."""
    local = Path(name_or_path)
    if local.is_dir():
        candidate = local / filename
        return candidate if candidate.is_file() else None
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError, RepositoryNotFoundError
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None
    try:
        return Path(hf_hub_download(name_or_path, filename, revision=revision))
    except (EntryNotFoundError, LocalEntryNotFoundError, RepositoryNotFoundError, OSError, ValueError):
        return None
