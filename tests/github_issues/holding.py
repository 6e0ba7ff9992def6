"""A fake GitHub that can hold a request, so that a test kills a collector mid-run by construction."""

from __future__ import annotations

import threading
from typing import Any

from fake_github import FakeGitHub


class HoldingGitHub(FakeGitHub):
    """The fake GitHub, which can hold a request (never answer it) from the ``hold_at``-th on: a run
    held there cannot finish, so a kill lands mid-run by construction."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hold_at: int | None = None
        self.reached = threading.Event()
        self.release = threading.Event()

    def _handle(self, handler: Any) -> None:
        with self._lock:
            n = len(self.requests)
        if self.hold_at is not None and n >= self.hold_at:
            self.reached.set()
            self.release.wait(120)  # the client is killed meanwhile; released when the server stops
            return
        super()._handle(handler)

    def stop(self) -> None:
        self.release.set()
        super().stop()
