"""Atomic writes: write to a temporary file in the target's folder, then rename over the target.

Files get the mode ``open()`` would give them (0666 less the umask), not ``mkstemp``'s 0600, and
staging folders (:func:`staging_dir`) the mode ``mkdir`` would give (0777 less the umask), not
``mkdtemp``'s 0700, so results, configs, vectors and exported folders stay readable by the other
users and services they are meant for.
:func:`check_writable` tells before hours of work whether an output can be written at all.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from anglekit.errors import DiskFullError, OutputError

_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process's umask (read by setting and restoring it, under a lock)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def folder_mode() -> int:
    """The mode ``mkdir`` gives a new folder under the process's umask (0777 less the umask)."""
    return 0o777 & ~_umask()


def file_mode() -> int:
    """The mode ``open()`` gives a new file under the process's umask (0666 less the umask)."""
    return 0o666 & ~_umask()


def staging_dir(target: str | os.PathLike[str], *, prefix: str | None = None) -> Path:
    """A new empty folder beside ``target`` (in its parent, which must exist) to build ``target``
    in, then rename onto it or move its content into it.

    ``tempfile.mkdtemp`` makes a 0700 folder whatever the umask; this one gets the mode ``mkdir``
    would give (:func:`folder_mode`), so a folder renamed into place is as readable as one made
    with ``mkdir``.
    """
    target = Path(target)
    path = Path(tempfile.mkdtemp(prefix=prefix if prefix is not None else f".{target.name}.", dir=target.parent))
    os.chmod(path, folder_mode())
    return path


def settle_modes(root: str | os.PathLike[str]) -> None:
    """Give ``root`` and every folder under it :func:`folder_mode`, every file :func:`file_mode`
    (symlinks are left alone): a staged tree written by libraries that use ``mkstemp``/``mkdtemp``
    (0600/0700, e.g. safetensors files) ends up as if written with ``mkdir`` and ``open()``."""
    dirs, files = folder_mode(), file_mode()
    for folder, _subfolders, names in os.walk(root):
        os.chmod(folder, dirs)
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, files)


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")  # numpy's tofile/save on a full disk


def out_of_space(path: str | os.PathLike[str], exc: OSError, *, written: int | None = None, intact: str = "") -> DiskFullError | None:
    """A :class:`DiskFullError` for ``exc`` when it is a full disk, a quota or a short write while
    writing ``path`` (``written``: bytes of it on disk when the write failed); else None.

    The message names the file, ENOSPC, the bytes asked for and written, the space left, and
    ``intact``: what the caller knows is still whole (e.g. "the shards before it are intact")."""
    short = _SHORT_WRITE.search(str(exc)) if exc.errno is None else None
    if exc.errno not in _NO_SPACE and short is None:
        return None
    requested = int(short.group(1)) if short else None
    if short and written is None:
        written = int(short.group(2))
    cause = errno.errorcode.get(exc.errno or errno.ENOSPC, "ENOSPC")
    what = os.strerror(exc.errno) if exc.errno else "a short write: the disk is full or over quota"
    if short:
        amount = f"{short.group(1)} bytes requested and {short.group(2)} written in the last call"
        amount += f", {written} bytes of the file in all" if written is not None and written != int(short.group(2)) else ""
    else:
        amount = f"{written} bytes written before it failed" if written is not None else "failed"
    free = _free_bytes(Path(path).parent)
    space = f"; {free} bytes free there" if free is not None else ""
    message = f"{path}: out of disk space ({cause}: {what}): {amount}{space}"
    return DiskFullError(f"{message}. {intact}" if intact else message, path=os.fspath(path), requested=requested, written=written)


def _free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


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


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once symlinks, ``..`` and ``~`` are
    resolved, or the same inode (a hard link). Paths that do not exist compare resolved."""
    a, b = os.path.expanduser(os.fspath(a)), os.path.expanduser(os.fspath(b))
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


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
        os.chmod(tmp_path, file_mode())
        os.replace(tmp_path, target)
    except OSError as exc:
        written = tmp_path.stat().st_size if tmp_path.exists() else None
        before = "its previous version is intact" if target.exists() else "it was not created"
        full = out_of_space(target, exc, written=written, intact=f"Nothing was changed at {target} ({before}); the partial temporary file was removed")
        if full is None:
            raise
        raise full from exc
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[Any]], None], *, binary: bool = False) -> None:
    """Open a temporary file, let ``write`` fill it, fsync, then rename it onto ``path``."""
    with atomic_path(path) as tmp, open(tmp, "wb" if binary else "w", encoding=None if binary else "utf-8") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write(path, lambda handle: handle.write(text))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
