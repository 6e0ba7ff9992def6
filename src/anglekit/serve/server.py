"""Run the app with uvicorn: bind, load in the background, drain on SIGTERM, exit cleanly.

On SIGTERM (or Ctrl-C) uvicorn stops accepting connections and waits for the requests in flight;
then the batcher finishes every text it accepted and stops. A SIGTERM shutdown returns normally
(exit status 0).
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn

from anglekit.serve.app import ServerState, create_app
from anglekit.serve.backends import Backend
from anglekit.serve.settings import ServeSettings


class _Server(uvicorn.Server):
    """uvicorn's server that marks the app as stopping (``/health`` 503) as soon as a signal comes."""

    def __init__(self, config: uvicorn.Config, state: ServerState) -> None:
        super().__init__(config)
        self.state = state

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.state.status in ("loading", "ready"):
            self.state.status = "stopping"
        super().handle_exit(sig, frame)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=2048)


def serve(
    settings: ServeSettings,
    load: Callable[[], Backend],
    *,
    model_name: str,
    announce: Callable[[str], Any] = lambda line: print(line, file=sys.stderr, flush=True),
) -> None:
    """Serve until SIGTERM/SIGINT. ``announce`` gets ``listening on http://HOST:PORT`` once bound
    and ``ready`` once the model is warm. A model that fails to load stops the server and its
    error is raised here."""
    app = create_app(settings, load, model_name=model_name)
    state: ServerState = app.state.server
    config = uvicorn.Config(
        app,
        log_level="warning" if settings.quiet else "info",
        access_log=not settings.quiet,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=None,
    )
    server = _Server(config, state)
    state.on_ready = lambda: announce("ready")

    def failed(exc: BaseException) -> None:
        server.should_exit = True

    state.on_failure = failed
    sock = bind(settings.host, settings.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    announce(f"listening on http://{shown}:{port} (model {model_name!r} loading)")
    # uvicorn re-raises a caught SIGTERM after its graceful shutdown, with the handler it found:
    # a no-op here, so that a drained server exits 0 instead of dying of the signal.
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda sig, frame: None)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if state.error is not None:
        raise state.error


__all__ = ["bind", "serve"]
