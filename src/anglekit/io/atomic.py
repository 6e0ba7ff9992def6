"""Atomic writes: write to a temporary file in the target's folder, then rename over the target."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[Any]], None], *, binary: bool = False) -> None:
    """Open a temporary file, let ``write`` fill it, fsync, then rename it onto ``path``."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb" if binary else "w", encoding=None if binary else "utf-8") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write(path, lambda handle: handle.write(text))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
