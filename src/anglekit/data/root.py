"""The local data root: the folder holding ``stsb/``, ``senteval/``, ``mrpc/``, ``flickr30k/`` ...

Looked up in this order, never relative to the current directory:

1. ``$ANGLEKIT_DATA`` when set (it must be a directory);
2. the per-user data folder ``$XDG_DATA_HOME/anglekit/data`` (``~/.local/share/anglekit/data``
   when ``XDG_DATA_HOME`` is unset or not absolute), when it exists.

A loader given ``data_root=`` uses that folder instead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from anglekit.errors import ConfigError

__all__ = [
    "DATA_ENV_VAR",
    "default_data_root",
    "explicit_or_default_root",
    "missing_data_root",
    "missing_locally",
    "user_data_dir",
]

DATA_ENV_VAR = "ANGLEKIT_DATA"
"""Environment variable naming the local data root."""


def user_data_dir() -> Path:
    """The per-user data folder, ``$XDG_DATA_HOME/anglekit/data`` (whether it exists or not)."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg).expanduser() if xdg else None
    if base is None or not base.is_absolute():  # the XDG spec: a relative value is ignored
        base = Path.home() / ".local" / "share"
    return base / "anglekit" / "data"


def default_data_root() -> Path | None:
    """``$ANGLEKIT_DATA`` when set (it must be a directory), else :func:`user_data_dir` when it
    exists, else ``None``."""
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        root = Path(env).expanduser()
        if not root.is_dir():
            raise ConfigError(f"{DATA_ENV_VAR}={env!r} is not a directory")
        return root
    user = user_data_dir()
    return user if user.is_dir() else None


def explicit_or_default_root(data_root: str | os.PathLike[str] | None) -> Path | None:
    """``data_root`` when given (it must be a directory), else :func:`default_data_root`."""
    if data_root is None:
        return default_data_root()
    root = Path(data_root).expanduser()
    if not root.is_dir():
        raise ConfigError(f"data_root {os.fspath(data_root)!r} is not a directory")
    return root


def missing_locally(name: str, places: Sequence[str], root: Path | None) -> str:
    """Why the named dataset ``name`` is not found locally, and where to put it.

    ``places`` are the folders (relative to the data root) where it is looked for; ``root`` is the
    data root that was searched (``None``: there was none).
    """
    looked = f"not under the data root {root}" if root is not None else "no local data root"
    wanted = " or ".join(f"{place}/" for place in places)
    return (
        f"{name} is not found locally ({looked}; looked for {wanted}): set ${DATA_ENV_VAR} to the folder "
        f"holding it, or put it in the per-user data folder {user_data_dir()}"
    )


def missing_data_root(command: str, flag: str) -> str:
    """Why ``command``, which needs a data root, found none, and how to give it one."""
    return (
        f"{command} needs a data root (the folder holding stsb/, mrpc/, senteval/ ...) and found none: pass "
        f"{flag} DIR, set ${DATA_ENV_VAR}, or put the data in the per-user data folder {user_data_dir()} "
        "(anglekit never looks relative to the current directory)"
    )
