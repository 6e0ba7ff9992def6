"""Serving: an OpenAI-compatible embedding server with dynamic batching (``anglekit serve``).

- :mod:`~anglekit.serve.settings`: :class:`ServeSettings`, the typed settings (and flags).
- :mod:`~anglekit.serve.backends`: the backend protocol and registry (``torch``: the Embedder).
- :mod:`~anglekit.serve.batcher`: the dynamic batcher (a worker thread, length-ordered batches
  under a token budget).
- :mod:`~anglekit.serve.app`: the FastAPI app (routes, errors, auth, limits, readiness);
  :mod:`~anglekit.serve.schemas`, :mod:`~anglekit.serve.errors`, :mod:`~anglekit.serve.metrics`.
- :mod:`~anglekit.serve.server`: uvicorn, binding, graceful shutdown.

Needs the ``serve`` extra (fastapi, uvicorn, prometheus-client, orjson) from the app on; the
settings and backends import neither fastapi nor torch.
"""
