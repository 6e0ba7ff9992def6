"""Upload a model folder to the Hugging Face hub through huggingface_hub's own API.

``push_folder`` creates the repository when it does not exist (``HfApi.create_repo(exist_ok=True)``)
and uploads the folder in one commit (``HfApi.upload_folder``). The token comes from ``token=``,
else from huggingface_hub's usual places (``HF_TOKEN``, ``hf auth login``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anglekit.errors import ExportError


def push_folder(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool | None = None,
    token: str | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
) -> str:
    """Upload every file of ``folder`` to the model repository ``repo_id``; the commit's URL."""
    if not isinstance(repo_id, str) or repo_id.count("/") > 1 or not repo_id.strip("/"):
        raise ExportError(f"hub repository must be 'name' or 'owner/name', got {repo_id!r}")
    source = Path(folder)
    if not source.is_dir() or not any(source.iterdir()):
        raise ExportError(f"{source}: nothing to upload (not a folder, or empty)")
    try:
        from huggingface_hub import HfApi
    except ImportError as exc:  # pragma: no cover - huggingface_hub comes with transformers
        raise ExportError("pushing to the hub needs huggingface_hub: pip install huggingface_hub") from exc
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id=repo_id, repo_type="model", private=private, exist_ok=True)
        commit: Any = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(source),
            repo_type="model",
            revision=revision,
            commit_message=commit_message or f"Upload {source.name} (anglekit)",
        )
    except Exception as exc:  # noqa: BLE001 - huggingface_hub raises many types; all mean the push failed
        raise ExportError(f"push of {source} to the hub repository {repo_id!r} failed: {type(exc).__name__}: {exc}") from exc
    return str(getattr(commit, "commit_url", None) or commit)


__all__ = ["push_folder"]
