"""The record of an adapt run: ``adapt.json`` (the settings the folder was made with) and
``stages.json`` (per stage: its status, the command that does the same, its inputs' fingerprints,
its outputs, its time and what it found).

A stage is reused when its record says ``done``, its inputs' fingerprints are those it ran on and
its outputs are there; otherwise it runs (again). A stage's outputs are written atomically by the
library functions it calls, and its record turns ``done`` only after they are, so an interrupted
stage (Ctrl-C, a crash, an error) is never taken for a finished one. A user may replace a stage's
output by a file of their own: the stage stays reused, and the stages that read it run again,
since their inputs' fingerprints changed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError
from anglekit.io.atomic import atomic_write_text

SETTINGS_FILE = "adapt.json"
STAGES_FILE = "stages.json"


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON atomically, its keys in their order (the stages run in theirs)."""
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def fingerprint(path: str | Path) -> dict[str, Any]:
    """``{"size", "sha256"}`` of a file, or of a folder's files (their relative paths and contents, in order)."""
    path = Path(path)
    if path.is_file():
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return {"size": path.stat().st_size, "sha256": digest.hexdigest()}
    if path.is_dir():
        digest, size = hashlib.sha256(), 0
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            inner = fingerprint(child)
            size += inner["size"]
            digest.update(f"{child.relative_to(path).as_posix()}\0{inner['sha256']}\n".encode())
        return {"size": size, "sha256": digest.hexdigest()}
    return {"missing": str(path)}


def _differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    keys = sorted(set(before) | set(now))
    return [f"{k} ({before.get(k, '<unset>')!r} then, {now.get(k, '<unset>')!r} now)" for k in keys if before.get(k) != now.get(k)]


class StageBook:
    """``stages.json`` of an output folder, read at start and written (atomically) at every change."""

    def __init__(self, folder: Path, settings: dict[str, Any], say: Callable[[str], None]) -> None:
        self.folder, self.say = folder, say
        self.path = folder / STAGES_FILE
        self._check_settings(settings)
        self.stages: dict[str, Any] = {}
        if self.path.is_file():
            try:
                self.stages = json.loads(self.path.read_text(encoding="utf-8"))["stages"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{self.path}: unreadable ({exc}); remove it to run every stage again") from None

    def _check_settings(self, settings: dict[str, Any]) -> None:
        """Record the settings in a new folder; refuse a folder made with other settings, naming them."""
        path = self.folder / SETTINGS_FILE
        if path.is_file():
            try:
                before = json.loads(path.read_text(encoding="utf-8"))["settings"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{path}: unreadable ({exc}); use another --output-dir") from None
            differ = _differences(before, settings)
            if differ:
                raise ConfigError(
                    f"{self.folder} holds an adapt run with other settings: {'; '.join(differ)}; use another --output-dir, or the same settings to resume"
                )
            return
        if self.folder.is_dir() and any(self.folder.iterdir()):
            raise ConfigError(f"{self.folder} is not empty and holds no adapt run ({SETTINGS_FILE} missing); use an empty or new --output-dir")
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json(path, {"settings": settings, "created": _now()})

    def _save(self) -> None:
        write_json(self.path, {"stages": self.stages})

    def reusable(self, name: str, inputs: dict[str, Any], outputs: Sequence[Path]) -> dict[str, Any] | None:
        """The stage's record when it finished on these inputs and its outputs are there, else None."""
        record = self.stages.get(name)
        if not record or record.get("status") != "done" or record.get("inputs") != inputs:
            return None
        return record if all(Path(p).exists() for p in outputs) else None

    def run(self, name: str, command: str, inputs: dict[str, Any], outputs: Sequence[Path], work: Callable[[], dict[str, Any]],
            clean: Sequence[Path] = ()) -> dict[str, Any]:  # fmt: skip
        """Run a stage (or reuse it: :meth:`reusable`); its record's ``info`` (what ``work`` returned).

        ``clean``: the stage's own folders (its outputs and resumable work), removed before it runs
        on other inputs than its record's, so that nothing of the older inputs is resumed."""
        record = self.reusable(name, inputs, outputs)
        if record is not None:
            self.say(f"{name}: done before on the same inputs, reused ({', '.join(str(p) for p in outputs)})")
            return record["info"]
        before = self.stages.get(name)
        if before is not None and (before.get("inputs") != inputs or before.get("status") == "done"):
            for path in clean:
                _remove(Path(path))
        self.say(f"{name}: {command}")
        self.stages[name] = {"status": "running", "command": command, "inputs": inputs, "outputs": [str(p) for p in outputs], "started": _now()}
        self._save()
        start = time.perf_counter()
        try:
            info = work()
        except BaseException as exc:
            interrupted = isinstance(exc, KeyboardInterrupt)
            self.stages[name].update(status="interrupted" if interrupted else "failed", error=None if interrupted else f"{type(exc).__name__}: {exc}")
            self._save()
            raise
        self.stages[name].update(
            status="done", seconds=round(time.perf_counter() - start, 3), finished=_now(), info=info,
            output_fingerprints={str(p): fingerprint(p) for p in outputs},
        )  # fmt: skip
        self._save()
        return info


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


__all__ = ["SETTINGS_FILE", "STAGES_FILE", "StageBook", "fingerprint", "write_json"]
