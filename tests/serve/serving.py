"""Helpers of the server tests: real uvicorn servers on 127.0.0.1 (a free port) in a thread of the
test process, a backend wrapper that records and holds batches, and checks of error bodies."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

import helpers


@dataclass
class Running:
    """A server started by :func:`start_server`."""

    url: str
    state: Any
    """The app's :class:`anglekit.serve.app.ServerState`."""


class Gate:
    """A backend wrapper that records the lengths of each batch and can hold the worker: while
    closed, ``embed`` waits (so that requests pile up) until ``release()``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.max_length = inner.max_length
        self.normalize = inner.normalize
        self.layers = getattr(inner, "layers", None)
        self.early_exit = getattr(inner, "early_exit", False)
        self.early_exit_problem = getattr(inner, "early_exit_problem", None)
        self.roles = getattr(inner, "roles", ())
        self.batches: list[list[int]] = []
        self.entered = threading.Event()
        self._open = threading.Event()
        self._open.set()
        self.fail_when: Callable[[Sequence[Sequence[int]]], bool] = lambda ids: False
        self.close_after: int | None = None
        """Close the gate again once this many batches went through (the next one waits at it)."""

    def hold(self) -> None:
        self.entered.clear()
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def tokenize(self, texts: Sequence[str], role: Any, *, truncate: bool) -> list[list[int]]:
        return self.inner.tokenize(texts, role, truncate=truncate)

    def embed(self, token_ids: Sequence[Sequence[int]], layer: int | None = None) -> np.ndarray:
        self.entered.set()
        assert self._open.wait(60), "the test never released the gate"
        self.batches.append([len(seq) for seq in token_ids])
        if self.close_after is not None and len(self.batches) >= self.close_after:
            self.close_after = None
            self.hold()
        if self.fail_when(token_ids):
            raise RuntimeError("the backend broke on purpose")
        return self.inner.embed(token_ids) if layer is None else self.inner.embed(token_ids, layer=layer)


def wait_for(condition: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.01)


@contextmanager
def start_server(load: Callable[[], Any], *, model_name: str = "tiny", wait_ready: bool = True, **settings: Any) -> Iterator[Running]:
    """uvicorn with :func:`anglekit.serve.app.create_app` on 127.0.0.1, a free port, in a thread;
    stopped (and joined) on exit."""
    import uvicorn

    from anglekit.serve.app import create_app
    from anglekit.serve.server import bind
    from anglekit.serve.settings import ServeSettings

    settings.setdefault("quiet", True)
    app = create_app(ServeSettings(port=0, **settings), load, model_name=model_name)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    running = Running(f"http://127.0.0.1:{port}", app.state.server)
    try:
        wait_for(lambda: server.started, what="uvicorn to start")
        if wait_ready:
            wait_for(lambda: running.state.status != "loading", what="the model to load")
        yield running
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()
        assert not thread.is_alive(), "the server did not stop"


def sentences(n: int, *, seed: int = 0, low: int = 2, high: int = 30) -> list[str]:
    rng = random.Random(seed)
    return [helpers.random_sentence(rng, low, high) for _ in range(n)]


def error_of(response: Any) -> dict[str, Any]:
    """The OpenAI error object of a response; fails unless the body has exactly that shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    return error
