"""Tell a local model path from a hub id before anything is downloaded, and fail fast on neither.

A name that can only be a path (``./x``, ``../x``, ``/x``, ``~/x``, ``a/b/c``) and does not exist
is an error at once. A name shaped like a hub id (``org/name``) with no local folder of that name is
looked up on the hub with one bounded request (no retries): offline (``HF_HUB_OFFLINE=1``) or with
the hub unreachable, and not in the local hub cache, the error says both that there is no such local
folder and that the hub could not provide it, instead of transformers' retries (25-49 s) and an
error that never mentions the folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from anglekit.errors import ConfigError

HUB_PROBE_TIMEOUT = 5.0
"""Seconds the one hub request may take (``ANGLEKIT_HUB_TIMEOUT`` overrides)."""


def expand_model_name(name: str) -> str:
    """``name`` with a leading ``~`` expanded (other names unchanged)."""
    return os.path.expanduser(name) if name.startswith("~") else name


def is_path_only(name: str) -> bool:
    """Whether ``name`` can only be a filesystem path (never a hub id ``name`` or ``org/name``)."""
    return (
        name.startswith(("./", "../", "/", "~"))
        or name in (".", "..")
        or name.count("/") > 1
        or "\\" in name
        or name.endswith(".gguf")  # a GGUF model is a local file (a hub one is named with gguf_file=)
    )


def _hub_offline() -> bool:
    """Whether the hub is switched off (``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE``, now or at import)."""
    truthy = {"1", "true", "yes", "on"}
    if any(os.environ.get(var, "").strip().lower() in truthy for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return True
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return True
    return bool(constants.HF_HUB_OFFLINE)


def in_hub_cache(repo_id: str) -> bool:
    """Whether the local hub cache holds any snapshot of the model repository ``repo_id``."""
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover
        return False
    snapshots = Path(constants.HF_HUB_CACHE) / ("models--" + repo_id.replace("/", "--")) / "snapshots"
    return snapshots.is_dir() and any(snapshots.iterdir())


def probe_hub(repo_id: str, revision: str | None = None, timeout: float | None = None) -> tuple[bool, str]:
    """(whether the hub has the model ``repo_id``, why not) from one GET of its model info, no retries."""
    from huggingface_hub import constants
    from huggingface_hub.utils import build_hf_headers, get_session

    if timeout is None:
        raw = os.environ.get("ANGLEKIT_HUB_TIMEOUT", "").strip()
        try:
            timeout = float(raw) if raw else HUB_PROBE_TIMEOUT
        except ValueError:
            timeout = -1.0
        if not timeout > 0:
            raise ConfigError(f"ANGLEKIT_HUB_TIMEOUT={raw!r}: expected a number of seconds > 0")
    url = f"{constants.ENDPOINT}/api/models/{repo_id}" + (f"/revision/{revision}" if revision else "")
    try:
        response = get_session().get(url, headers=build_hf_headers(), timeout=timeout, follow_redirects=True)
    except Exception as exc:  # noqa: BLE001 - any transport failure (httpx/requests/OS) means unreachable
        return False, f"the hub ({constants.ENDPOINT}) is unreachable: {type(exc).__name__}: {exc}"
    if response.status_code < 400:
        return True, ""
    if response.status_code in (401, 403, 404):
        return False, f"the hub ({constants.ENDPOINT}) has no model {repo_id!r}" + (
            f" at revision {revision!r}" if revision else ""
        ) + f" (HTTP {response.status_code}; a private or gated model needs a token: huggingface-cli login)"
    return False, f"the hub ({constants.ENDPOINT}) answered HTTP {response.status_code} for {repo_id!r}"


def check_model_location(name: str, revision: str | None = None) -> str:
    """``name`` as loading should use it (``~`` expanded), or a ConfigError when it is a path that
    does not exist, or a hub id that neither a local folder, the hub cache nor the hub provides."""
    given, name = name, expand_model_name(name)
    local = Path(name)
    if local.exists():
        return name
    where = local.absolute()
    if is_path_only(given):
        resolved = f" ({where})" if str(where) != given else ""
        raise ConfigError(f"{given}: not a model directory (no such folder or file{resolved})")
    if _hub_offline():
        if in_hub_cache(name):
            return name
        raise ConfigError(
            f"{name}: no such local folder ({where}), and not found on the hub: the hub is offline (HF_HUB_OFFLINE=1) and its local cache has no such model"
        )
    if in_hub_cache(name):
        return name  # transformers falls back to the cache quickly when the hub is unreachable
    found, why = probe_hub(name, revision)
    if not found:
        raise ConfigError(f"{name}: no such local folder ({where}), and not found on the hub: {why}")
    return name
