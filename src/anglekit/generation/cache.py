"""On-disk answer cache: one JSON file per (LLM, rendered prompt, input, sampling settings).

Each answer is written atomically as soon as it arrives, so a crash or Ctrl-C loses at most the
requests in flight; a rerun reads the cached answers and asks only for the rest. The key is the
SHA-256 of the canonical JSON of ``{llm, prompt, input, params}``; the file is
``<dir>/<key[:2]>/<key>.json``. An unreadable entry (a torn write from another tool, a disk error)
counts as a miss and is asked again.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from anglekit.io.atomic import atomic_write_text

CACHE_VERSION = 1


def cache_key(llm_id: str, prompt: str, text: str, params: dict[str, Any]) -> str:
    blob = json.dumps({"v": CACHE_VERSION, "llm": llm_id, "prompt": prompt, "input": text, "params": params}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class AnswerCache:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.corrupt = 0

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            with self._lock:
                self.corrupt += 1
            return None
        if not isinstance(entry, dict) or not isinstance(entry.get("answer"), str):
            with self._lock:
                self.corrupt += 1
            return None
        return entry

    def put(self, key: str, entry: dict[str, Any]) -> None:
        atomic_write_text(self._path(key), json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n")


__all__ = ["AnswerCache", "cache_key"]
