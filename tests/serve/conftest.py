"""Fixtures of the server tests: the tiny BERT as the served model, an independently loaded
Embedder as the reference, and one shared server per module (helpers in serving.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from serving import Running, start_server  # noqa: E402


@pytest.fixture(scope="session")
def reference(tiny_bert_dir: Path) -> Any:
    """The tiny BERT as an Embedder of its own: the reference the server's vectors are checked against."""
    from anglekit.model.embedder import Embedder

    return Embedder.from_pretrained(tiny_bert_dir, device="cpu")


@pytest.fixture(scope="session")
def tiny_backend(tiny_bert_dir: Path) -> Callable[..., Any]:
    """``tiny_backend(**Embedder options)`` -> a fresh torch backend of the tiny BERT on the CPU."""

    def load(**options: Any) -> Any:
        from anglekit.serve.backends import load_backend

        return load_backend("torch", str(tiny_bert_dir), device="cpu", **options)

    return load


@pytest.fixture(scope="module")
def server(tiny_backend: Callable[..., Any]) -> Iterator[Running]:
    """One server with the default settings, shared by a module's tests."""
    with start_server(lambda: tiny_backend()) as running:
        yield running


@pytest.fixture
def client(server: Running) -> Iterator[Any]:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c
