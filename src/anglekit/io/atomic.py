"""Atomic writes: write to a temporary file in the target's folder, then rename over the target.

Files get the mode ``open()`` would give them (0666 less the umask), not ``mkstemp``'s 0600, so
results, configs and vectors stay readable by the other users and services they are meant for.
:func:`check_writable` tells before hours of work whether an output can be written at all.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from anglekit.errors import OutputError

_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process's umask (read by setting and restoring it, under a lock)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_writable(path: str | os.PathLike[str], *, folder: bool = False) -> Path:
    """``path`` if it can be written, else an :class:`OutputError` that says why; nothing is created.

    ``folder``: ``path`` is a folder to write into (it may not exist yet), else a file. The nearest
    existing ancestor must be a folder in which this process can create files.
    """
    target = Path(path)
    if folder and target.exists() and not target.is_dir():
        raise OutputError(f"{target}: exists and is not a folder")
    if not folder and target.is_dir():
        raise OutputError(f"{target}: is a folder; give a file name")
    ancestor = target if folder else target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputError(f"{target}: cannot be written, {ancestor} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as exc:
        raise OutputError(f"{target}: cannot write in {ancestor} ({_why(exc)})") from None
    return target


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write here ({_why(exc)})") from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_umask())
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
