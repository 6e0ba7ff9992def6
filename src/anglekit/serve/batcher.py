"""Dynamic batching: concurrent requests share forward passes, off the event loop.

Requests (jobs) go into a thread-safe queue; one worker thread does everything heavy. Each step it

1. takes every job that arrived, tokenises them (one tokenizer call per prompt role) and appends
   their texts to a FIFO pool;
2. takes from the front of the pool the oldest texts up to ``max_batch_tokens`` tokens (the
   *window*; at least one text), sorts them by token length, longest first, and cuts them into
   batches of at most ``max_batch_size`` texts and ``max_batch_tokens`` padded tokens;
3. runs those batches, writes each vector into its job's result and resolves a job's future
   (on the job's event loop) as soon as its last text is done.

Before a window starts, the worker waits a moment (at most ``return_wait``, 2 ms, and a quarter
of the last window's time) for the clients it has just answered, until as many new requests came
as it answered or the batch is full: a client that got its answer usually sends its next request
at once, and it then shares the next forward pass instead of waiting for the one after. A lone
client is never held back (its next request is already there).

Texts of similar length share a batch, so little is padded; a window is finished before the next
starts, so the oldest texts always go first and none waits behind more than one window. A failure
fails only the jobs concerned; the worker goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anglekit.serve.backends import Backend, Role
from anglekit.serve.errors import ContextLengthExceeded, InternalError, InvalidRequest, NotReady, QueueFull, ServeError
from anglekit.serve.metrics import Metrics

log = logging.getLogger(__name__)

_STOP = object()


@dataclass
class Embedded:
    """The result of one request."""

    vectors: np.ndarray
    """Pooled, un-normalised vectors, float32 ``[len(texts), dim]``, in input order."""
    tokens: int
    """Tokens embedded (prompt and special tokens included, after truncation)."""


TRUNCATE_MODES = ("end", "start", "none")
"""What :meth:`Batcher.embed` does with a text longer than the model's max length: cut its end, cut
its start (keep its end, with the prompt; the backend's ``keep_end``), or refuse it."""

SERVER_REFUSES = "the server runs with --no-auto-truncate"
"""Why a text is refused when the request did not choose (``ContextLengthExceeded``'s message says it)."""


def truncate_mode(truncate: bool | str) -> str:
    """A mode of :data:`TRUNCATE_MODES` (True: ``end``, False: ``none``); ValueError for anything else."""
    if isinstance(truncate, bool):
        return "end" if truncate else "none"
    if truncate not in TRUNCATE_MODES:
        raise ValueError(f"truncate must be True, False or one of {', '.join(TRUNCATE_MODES)}, got {truncate!r}")
    return truncate


@dataclass(eq=False)
class _Job:
    texts: list[str]
    role: Role | None
    truncate: str
    """A mode of :data:`TRUNCATE_MODES`."""
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Embedded]
    arrived: float
    layer: int | None = None
    """Embed from this layer (a backend with early exit), None: the model's output."""
    refusal: str = SERVER_REFUSES
    """Why a text too long is refused (truncate ``none``), said after its token count."""
    ids: list[list[int]] = field(default_factory=list)
    vectors: np.ndarray | None = None
    remaining: int = 0
    started: bool = False
    done: bool = False
    cancelled: bool = False


def _resolve(future: asyncio.Future[Embedded], result: Embedded | None, error: BaseException | None) -> None:
    if future.done():  # the request was cancelled (its client went away)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]


WARMUP_WIDTH = 128
"""The widest batch (in tokens) :meth:`Batcher.warmup` prepares shapes for."""

WARMUP_BATCH = 32
"""The largest batch size :meth:`Batcher.warmup` prepares shapes for."""


def warmup_shapes(max_batch_size: int, max_batch_tokens: int, max_width: int, multiple: int) -> list[tuple[int, int]]:
    """(batch size, width) pairs a batcher's small batches take, cheapest (fewest tokens) first:
    sizes up to ``max_batch_size`` (and :data:`WARMUP_BATCH`), widths the multiples of ``multiple``
    up to ``max_width``, within ``max_batch_tokens``."""
    widths = range(multiple, max(max_width, multiple) + 1, multiple)
    shapes = [(b, w) for b in range(1, min(max_batch_size, WARMUP_BATCH) + 1) for w in widths if b * w <= max_batch_tokens]
    return sorted(shapes, key=lambda shape: (shape[0] * shape[1], shape[0]))


class Batcher:
    """Merges concurrent :meth:`embed` calls into length-ordered batches run on one worker thread."""

    def __init__(
        self,
        backend: Backend,
        *,
        max_batch_tokens: int,
        max_batch_size: int,
        max_queue: int,
        metrics: Metrics | None = None,
        return_wait: float = 0.002,
    ) -> None:
        self.backend = backend
        self.return_wait = return_wait
        """Longest wait (seconds) for the clients just answered to send their next request before a
        window starts (at most a quarter of the last window's time; see ``_await_returns``)."""
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.max_queue = max_queue
        self.metrics = metrics or Metrics()
        self._incoming: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._texts = 0
        self._requests = 0
        self._closed = False
        self._answered = 0
        self._first_answer: float | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------- life cycle
    def warmup(self, seconds: float = 0.0) -> int:
        """Run a few forward passes (one text, a full batch), on the calling thread, before :meth:`start`.

        A backend whose runtime prepares its kernels for each new input shape (``pad_multiple`` > 1:
        OpenVINO pads widths to that multiple) then also runs the shapes small batches take, cheapest
        first (batch size x width), for at most ``seconds``, so that the first requests do not pay
        for them. The number of shapes run."""
        ids = self.backend.tokenize(["warm up the model"] * self.max_batch_size, None, truncate=True)
        self.backend.embed(ids[:1])
        self.backend.embed(ids)
        multiple = getattr(self.backend, "pad_multiple", 1)
        if multiple <= 1 or seconds <= 0:
            return 0
        text = ids[0]
        started = time.perf_counter()
        done = 0
        for size, width in warmup_shapes(self.max_batch_size, self.max_batch_tokens, min(self.backend.max_length, WARMUP_WIDTH), multiple):
            if time.perf_counter() - started >= seconds:
                break
            row = (text * (width // len(text) + 1))[:width]  # any ids will do: only the shape matters
            self.backend.embed([row] * size)
            done += 1
        log.info("warmed %d input shapes in %.1f s", done, time.perf_counter() - started)
        return done

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="anglekit-batcher", daemon=True)
            self._thread.start()

    def close(self, timeout: float | None = None) -> None:
        """Accept nothing more, finish every accepted request, stop the worker."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._incoming.put(_STOP)
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def accepting(self) -> bool:
        """Whether :meth:`embed` takes new requests (started and not closed)."""
        return self._thread is not None and not self._closed

    @property
    def queued(self) -> int:
        """Texts accepted and not yet embedded."""
        return self._texts

    # ----------------------------------------------------------------- requests
    async def embed(
        self, texts: Sequence[str], role: Role | None = None, *, truncate: bool | str = True, layer: int | None = None, refusal: str = SERVER_REFUSES
    ) -> Embedded:
        """The vectors of ``texts`` (from ``layer`` when given: texts of one layer share a batch);
        ``truncate``: what to do with a text over the max length (:func:`truncate_mode`);
        :class:`QueueFull` when ``max_queue`` texts already wait, :class:`ContextLengthExceeded` for a
        text over the max length when ``truncate`` is False or ``none`` (its message ends with ``refusal``)."""
        mode = truncate_mode(truncate)
        loop = asyncio.get_running_loop()
        job = _Job(list(texts), role, mode, loop, loop.create_future(), time.perf_counter(), layer, refusal)
        n = len(job.texts)
        with self._lock:
            if self._closed or self._thread is None:
                raise NotReady("the server is shutting down" if self._closed else "the batcher is not running")
            if self._texts + n > self.max_queue:
                raise QueueFull(
                    f"the queue is full ({self._texts} texts waiting, limit {self.max_queue}); retry later",
                    headers={"Retry-After": "1"},
                )
            self._texts += n
            self._requests += 1
            self._incoming.put(job)
        self._gauges()
        try:
            return await job.future
        except asyncio.CancelledError:
            job.cancelled = True  # the worker skips what is left of it
            raise

    def _gauges(self) -> None:
        self.metrics.queue_texts.set(self._texts)
        self.metrics.queue_requests.set(self._requests)

    def _finish(self, job: _Job, result: Embedded | None = None, error: BaseException | None = None) -> None:
        if job.done:
            return
        job.done = True
        self._answered += 1
        if self._first_answer is None:
            self._first_answer = time.perf_counter()  # requests that come after it may be its client's next
        job.ids = []
        with self._lock:
            self._texts -= len(job.texts)
            self._requests -= 1
        self._gauges()
        with contextlib.suppress(RuntimeError):  # the event loop is closed: nobody waits any more
            job.loop.call_soon_threadsafe(_resolve, job.future, result, error)

    # ----------------------------------------------------------------- worker
    def _work(self) -> None:
        pool: deque[tuple[_Job, int]] = deque()
        stopping = False
        answered, ended, took = 0, 0.0, 0.0  # the last window: requests answered, its first answer, its duration
        while True:
            jobs, stop = self._take(block=not pool and not stopping)
            stopping = stopping or stop
            if jobs:
                self._prepare(jobs, pool)
            if not pool:
                if stopping:
                    return
                continue
            if answered and not stopping and self.return_wait > 0:
                stopping = self._await_returns(pool, answered, ended, min(self.return_wait, took / 4))
            started = time.perf_counter()
            before = self._answered
            self._first_answer = None
            for batch in self._window(pool):
                self._run(batch)
            answered, took = self._answered - before, time.perf_counter() - started
            ended = self._first_answer or time.perf_counter()

    def _await_returns(self, pool: deque[tuple[_Job, int]], answered: int, ended: float, wait: float) -> bool:
        """Clients just answered often send their next request at once: wait up to ``wait`` seconds
        for as many new requests as were answered (while the batch is not full), so that they share
        the next forward pass instead of the one after. Whether a stop came meanwhile."""
        returned = sum(1 for job in {job for job, _ in pool} if job.arrived > ended)
        if returned >= answered or len(pool) >= self.max_batch_size:
            return False
        began = time.perf_counter()
        try:
            return self._gather(pool, answered, returned, began + wait)
        finally:
            self.metrics.return_wait.observe(time.perf_counter() - began)

    def _gather(self, pool: deque[tuple[_Job, int]], answered: int, returned: int, deadline: float) -> bool:
        while returned < answered and len(pool) < self.max_batch_size:
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            try:
                first = self._incoming.get(timeout=left)
            except queue.Empty:
                break
            jobs, stop = self._take(block=False)
            jobs = [first, *jobs] if first is not _STOP else jobs
            if jobs:
                self._prepare(jobs, pool)
                returned += len(jobs)
            if stop or first is _STOP:
                return True
        return False

    def _take(self, *, block: bool) -> tuple[list[_Job], bool]:
        items = [self._incoming.get()] if block else []
        while True:
            try:
                items.append(self._incoming.get_nowait())
            except queue.Empty:
                break
        return [i for i in items if i is not _STOP], any(i is _STOP for i in items)

    def _prepare(self, jobs: list[_Job], pool: deque[tuple[_Job, int]]) -> None:
        """Tokenise new jobs, check their lengths, append their texts to the pool."""
        groups: dict[tuple[Role | None, str], list[_Job]] = {}
        for job in jobs:
            groups.setdefault((job.role, job.truncate), []).append(job)
        for (role, mode), group in groups.items():
            try:
                ids = self.backend.tokenize([t for job in group for t in job.texts], role, truncate=mode == "end")
            except Exception:  # noqa: BLE001 - find the job that broke it: tokenise one by one
                ids = None
            start = 0
            for job in group:
                if ids is not None:
                    job.ids = ids[start : start + len(job.texts)]
                    start += len(job.texts)
                else:
                    try:
                        job.ids = self.backend.tokenize(job.texts, role, truncate=mode == "end")
                    except Exception as exc:  # noqa: BLE001 - one bad request fails alone
                        log.exception("tokenizing a request failed")
                        self._finish(job, error=InvalidRequest(f"the input could not be tokenized: {exc}", param="input"))
                        continue
                error = self._keep_ends(job) if mode == "start" else None
                error = error or self._check_lengths(job)
                if error is not None:
                    self._finish(job, error=error)
                    continue
                job.vectors = np.empty((len(job.texts), self.backend.dim), dtype=np.float32)
                job.remaining = len(job.texts)
                pool.extend((job, i) for i in range(len(job.texts)))

    def _keep_ends(self, job: _Job) -> ServeError | None:
        """Truncate ``start``: the texts over the max length cut at their start (the backend's ``keep_end``)."""
        limit = self.backend.max_length
        long = [i for i, seq in enumerate(job.ids) if len(seq) > limit]
        if not long or getattr(self.backend, "chunks_long_texts", False):
            return None
        keep_end = getattr(self.backend, "keep_end", None)
        if keep_end is None:
            return InvalidRequest("truncate START (keep the end of a long input) is not available with this backend", param="truncate")
        try:
            kept = keep_end([job.texts[i] for i in long], job.role)
        except Exception as exc:  # noqa: BLE001 - one bad request fails alone
            log.exception("cutting the start of a long input failed")
            return InvalidRequest(f"the input could not be tokenized: {exc}", param="input")
        for i, seq in zip(long, kept, strict=True):
            job.ids[i] = seq
        return None

    def _check_lengths(self, job: _Job) -> ServeError | None:
        limit = self.backend.max_length
        chunks = getattr(self.backend, "chunks_long_texts", False)  # long texts are pooled over windows: none is too long
        for i, seq in enumerate(job.ids):
            if not seq:
                return InvalidRequest(f"input[{i}] has no tokens", param="input")
            if len(seq) > limit and not chunks:
                return ContextLengthExceeded(
                    f"input[{i}] has {len(seq)} tokens, more than the model's maximum of {limit} ({job.refusal})",
                    param="input",
                )
        return None

    def _window(self, pool: deque[tuple[_Job, int]]) -> list[list[tuple[_Job, int]]]:
        """The oldest texts up to the token budget, sorted by length and cut into batches."""
        window: list[tuple[_Job, int]] = []
        tokens = 0
        while pool:
            job, i = pool[0]
            if job.done or job.cancelled:
                pool.popleft()
                self._finish(job, error=InternalError("the request was cancelled"))
                continue
            length = len(job.ids[i])
            if window and tokens + length > self.max_batch_tokens:
                break
            pool.popleft()
            window.append((job, i))
            tokens += length
        window.sort(key=lambda item: (item[0].layer or 0, -len(item[0].ids[item[1]])))  # a batch runs to one layer
        batches: list[list[tuple[_Job, int]]] = []
        current: list[tuple[_Job, int]] = []
        longest = 0
        for job, i in window:
            full = len(current) >= self.max_batch_size or (len(current) + 1) * longest > self.max_batch_tokens
            if current and (full or current[0][0].layer != job.layer):
                batches.append(current)
                current = []
            if not current:
                longest = len(job.ids[i])
            current.append((job, i))
        if current:
            batches.append(current)
        return batches

    def _run(self, batch: list[tuple[_Job, int]]) -> None:
        """One forward pass; its vectors go to their jobs."""
        batch = [(job, i) for job, i in batch if not (job.done or job.cancelled)]
        if not batch:
            return
        now = time.perf_counter()
        for job, _ in batch:
            if not job.started:
                job.started = True
                self.metrics.queue_wait.observe(now - job.arrived)
        ids = [job.ids[i] for job, i in batch]
        layer = batch[0][0].layer
        try:
            vectors = self.backend.embed(ids) if layer is None else self.backend.embed(ids, layer=layer)  # type: ignore[call-arg]
        except Exception as exc:  # noqa: BLE001 - the requests of this batch fail, the server goes on
            log.exception("a forward pass failed")
            error = InternalError(f"the model failed on this request's batch: {type(exc).__name__}: {exc}")
            for job, _ in batch:
                self._finish(job, error=error)
            return
        shape = getattr(vectors, "shape", None)
        if shape is None or tuple(shape) != (len(batch), self.backend.dim):
            # a backend (a plugin's, say) that answers another shape: every request of the batch
            # fails at once, instead of waiting forever for rows that never come
            log.error("the backend returned %s vectors for a batch of %d texts of dim %d", shape, len(batch), self.backend.dim)
            error = InternalError(
                f"the model returned vectors of shape {shape} for a batch of {len(batch)} texts (expected ({len(batch)}, {self.backend.dim}))"
            )
            for job, _ in batch:
                self._finish(job, error=error)
            return
        lengths = [len(seq) for seq in ids]
        ended = time.perf_counter()
        self.metrics.batch_seconds.observe(ended - now)
        self.metrics.batch_size.observe(len(batch))
        self.metrics.batch_tokens.observe(len(batch) * max(lengths))
        self.metrics.texts.inc(len(batch))
        self.metrics.observe_tokens(sum(lengths), ended)
        for row, (job, i) in zip(vectors, batch, strict=True):
            job.vectors[i] = row  # type: ignore[index]
            job.remaining -= 1
            if job.remaining == 0:
                self._finish(job, Embedded(job.vectors, sum(len(seq) for seq in job.ids)))  # type: ignore[arg-type]


__all__ = ["SERVER_REFUSES", "TRUNCATE_MODES", "WARMUP_BATCH", "WARMUP_WIDTH", "Batcher", "Embedded", "truncate_mode", "warmup_shapes"]
