"""Prometheus metrics of one server, in a registry of its own (``GET /metrics``)."""

from __future__ import annotations

import threading
import time
from collections import deque

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
TOKEN_RATE_WINDOW = 10.0
"""Seconds over which ``anglekit_tokens_per_second`` averages."""
_TOKEN_BUCKETS = (16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


class Metrics:
    """Requests and errors by kind, the queue, batch sizes and tokens, tokens per second, latencies
    (requests, queue, forward passes, searches)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("anglekit_requests", "HTTP requests answered", ("route", "status"), registry=r)
        self.errors = Counter("anglekit_errors", "Error answers by kind (the error body's code)", ("code",), registry=r)
        self.request_latency = Histogram("anglekit_request_duration_seconds", "Time from request to response", ("route",), buckets=_LATENCY_BUCKETS, registry=r)
        self.queue_texts = Gauge("anglekit_queue_texts", "Texts accepted and not yet embedded", registry=r)
        self.queue_requests = Gauge("anglekit_queue_requests", "Requests accepted and not yet answered by the batcher", registry=r)
        self.queue_wait = Histogram(
            "anglekit_queue_wait_seconds", "Time from a request's arrival to its first forward pass", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.batch_size = Histogram("anglekit_batch_size", "Texts per forward pass", buckets=_SIZE_BUCKETS, registry=r)
        self.batch_tokens = Histogram("anglekit_batch_tokens", "Padded tokens per forward pass", buckets=_TOKEN_BUCKETS, registry=r)
        self.batch_seconds = Histogram("anglekit_batch_duration_seconds", "Time of one forward pass", buckets=_LATENCY_BUCKETS, registry=r)
        self.return_wait = Histogram(
            "anglekit_return_wait_seconds",
            "Time the worker waited for the clients it just answered to come back (only when it waited)",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.texts = Counter("anglekit_texts", "Texts embedded", registry=r)
        self.tokens = Counter("anglekit_tokens", "Tokens embedded (without padding)", registry=r)
        self.tokens_per_second = Gauge("anglekit_tokens_per_second", f"Tokens embedded per second over the last {TOKEN_RATE_WINDOW:g} s", registry=r)
        self.tokens_per_second.set_function(self._token_rate)
        self.search_latency = Histogram(
            "anglekit_search_duration_seconds",
            "Time of a search request's index lookup (its queries embedded)",
            ("index",),
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.search_queries = Counter("anglekit_search_queries", "Queries searched", ("index",), registry=r)
        self._recent: deque[tuple[float, int]] = deque()
        self._recent_lock = threading.Lock()

    def observe_tokens(self, tokens: int, now: float) -> None:
        """Count a batch's tokens (``anglekit_tokens_total``, and ``anglekit_tokens_per_second``'s window)."""
        self.tokens.inc(tokens)
        with self._recent_lock:
            self._recent.append((now, tokens))
            while self._recent and self._recent[0][0] < now - TOKEN_RATE_WINDOW:
                self._recent.popleft()

    def _token_rate(self) -> float:
        now = time.perf_counter()
        with self._recent_lock:
            return sum(t for when, t in self._recent if when >= now - TOKEN_RATE_WINDOW) / TOKEN_RATE_WINDOW

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)


__all__ = ["CONTENT_TYPE", "Metrics"]
