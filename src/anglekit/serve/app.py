"""The FastAPI application: routes, errors, auth, body limit, metrics, readiness.

:func:`create_app` takes a ``load`` function instead of a model: the app starts listening at once,
loads and warms the model on a thread (``GET /health`` answers 503 until then) and runs every
request's texts through one :class:`~anglekit.serve.batcher.Batcher`.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anglekit.errors import AnglekitError
from anglekit.model.config import present_role
from anglekit.serve.backends import Backend
from anglekit.serve.batcher import Batcher
from anglekit.serve.clients import client_fields
from anglekit.serve.errors import (
    IndexNotFound,
    InternalError,
    InvalidRequest,
    MethodNotAllowed,
    ModelNotFound,
    NotReady,
    PayloadTooLarge,
    RouteNotFound,
    ServeError,
    Unauthorized,
)
from anglekit.serve.metrics import CONTENT_TYPE, Metrics
from anglekit.serve.quantized import UNIT_RANGE, Calibration, describe, quantize
from anglekit.serve.schemas import (
    ENCODING_FORMATS,
    MAX_K,
    EmbeddingsRequest,
    EmbedRequest,
    SearchRequest,
    dumps,
    embeddings_response,
    finish,
    input_type_prompts,
    parse_json,
    prompt_headers,
    search_response,
)
from anglekit.serve.search import ServedIndex, load_indexes
from anglekit.serve.settings import ServeSettings

log = logging.getLogger(__name__)

ROUTES = ("/v1/embeddings", "/v1/search", "/embed", "/v1/models", "/v1/info", "/health", "/metrics", "/", "/ui/app.js", "/ui/style.css")
"""The routes (metrics label any other path ``other``): :data:`ROUTE_TABLE` and :data:`UI_FILES` have their handlers."""

UI_FILES = {"/": ("index.html", "text/html; charset=utf-8"), "/ui/app.js": ("app.js", "text/javascript; charset=utf-8"),
            "/ui/style.css": ("style.css", "text/css; charset=utf-8")}  # fmt: skip
"""The page of ``GET /`` (``--no-ui``: none): path -> (file of the package's ``serve/ui`` folder, media type)."""

UI_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}
"""Headers of the page's files: it loads nothing but its own files and talks to this server only."""


class ServerState:
    """What the routes share: settings, the backend and batcher once loaded, the readiness status."""

    def __init__(self, settings: ServeSettings, load: Callable[[], Backend], model_name: str) -> None:
        self.settings = settings
        self.model_name = model_name
        self.metrics = Metrics()
        self.status = "loading"
        """``loading``, ``ready``, ``failed`` or ``stopping``."""
        self.error: BaseException | None = None
        self.backend: Backend | None = None
        self.batcher: Batcher | None = None
        self.indexes: dict[str, ServedIndex] = {}
        self.created = int(time.time())
        self.on_ready: Callable[[], None] | None = None
        self.on_failure: Callable[[BaseException], None] | None = None
        self._load = load

    def load(self) -> None:
        """Load and warm up the model, start the batcher (on a thread of its own)."""
        try:
            backend = self._load()
            indexes = load_indexes(self.settings.index, backend)
            s = self.settings
            batcher = Batcher(backend, max_batch_tokens=s.max_batch_tokens, max_batch_size=s.max_batch_size, max_queue=s.max_queue, metrics=self.metrics)
            batcher.warmup(s.warmup_seconds)
        except BaseException as exc:  # noqa: BLE001 - reported through /health and on_failure
            if isinstance(exc, AnglekitError):
                log.error("loading the model failed: %s", exc)
            else:
                log.exception("loading the model failed")
            self.error = exc
            self.status = "failed"
            if self.on_failure is not None:
                self.on_failure(exc)
            return
        if self.status != "loading":  # shut down while loading
            return
        self.backend = backend
        self.indexes = indexes
        self.batcher = batcher
        batcher.start()
        self.status = "ready"
        if self.on_ready is not None:
            self.on_ready()

    def ready_batcher(self) -> Batcher:
        if self.status == "ready" and self.batcher is not None:
            return self.batcher
        if self.status == "loading":
            raise NotReady("the model is still loading; retry when GET /health answers 200", headers={"Retry-After": "1"})
        if self.status == "failed":
            raise NotReady(f"the model failed to load: {self.error}")
        raise NotReady("the server is shutting down")

    def authorize(self, request: Request) -> None:
        key = self.settings.api_key
        if key is None:
            return
        header = request.headers.get("authorization")
        challenge = {"WWW-Authenticate": "Bearer"}
        if not header:
            raise Unauthorized("missing API key: send the header 'Authorization: Bearer KEY'", headers=challenge)
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), key.encode()):
            raise Unauthorized("invalid API key", headers=challenge)

    async def begin(self, request: Request) -> tuple[Batcher, dict[str, Any]]:
        """What every embedding route does first: check the key, the readiness, and read the JSON body."""
        self.authorize(request)
        batcher = self.ready_batcher()
        return batcher, parse_json(await request.body())

    def served_index(self, name: str | None) -> ServedIndex:
        """The index ``name`` (None: the only one served), else IndexNotFound."""
        if not self.indexes:
            raise IndexNotFound("this server serves no index; start it with --index DIR (built by 'anglekit index build')", param="index")
        if name is None:
            if len(self.indexes) > 1:
                raise IndexNotFound(f"this server serves several indexes; name one in 'index': {', '.join(self.indexes)}", param="index")
            return next(iter(self.indexes.values()))
        if name not in self.indexes:
            raise IndexNotFound(f"index {name!r} is not served here; served: {', '.join(self.indexes)}", param="index")
        return self.indexes[name]

    def check_layer(self, layer: int | None, backend: Backend) -> None:
        """A 400 unless the backend can stop at ``layer`` (a model trained with ESE)."""
        if layer is None:
            return
        if not getattr(backend, "early_exit", False):
            problem = getattr(backend, "early_exit_problem", None) or "this backend cannot stop at an earlier layer"
            raise InvalidRequest(f"layer is not available: {problem}", param="layer")
        layers = getattr(backend, "layers", None)
        if layers is not None and not 1 <= layer <= layers:
            raise InvalidRequest(f"layer must be between 1 and the model's {layers} layers, got {layer}", param="layer")

    def calibration(self, parsed: EmbeddingsRequest, dim: int) -> Calibration:
        """The int8 scale of a quantized response: the named index's, else the only int8 index's
        (for full-width vectors), else the unit range."""
        full = parsed.dimensions is None or parsed.dimensions == dim
        if parsed.index is not None:
            found = self.served_index(parsed.index).calibration()
            if found is None:
                raise InvalidRequest(f"index {parsed.index!r} is not int8-quantized: it has no scale to calibrate with", param="index")
            if not full:
                raise InvalidRequest("an index's int8 scale is calibrated on full-width vectors; leave dimensions out", param="index")
            return found
        int8 = [c for c in (served.calibration() for served in self.indexes.values()) if c is not None]
        return int8[0] if len(int8) == 1 and full else Calibration(UNIT_RANGE, "unit-range")

    def check_model(self, model: str | None) -> None:
        if model is not None and model != self.model_name:
            raise ModelNotFound(f"model {model!r} is not served here; this server serves {self.model_name!r}", param="model")


def error_response(state: ServerState, error: ServeError) -> Response:
    state.metrics.errors.labels(error.code).inc()
    return Response(dumps(error.body()), status_code=error.status, media_type="application/json", headers=error.headers)


def _json(value: Any, status: int = 200) -> Response:
    return Response(dumps(value), status_code=status, media_type="application/json")


class _Guard:
    """ASGI middleware around the app: the body size limit (a declared ``Content-Length`` over it is
    refused before the body is read; a streamed body is cut off when it passes it) and the request
    count and latency metrics."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        path = scope["path"]
        route = path if path in ROUTES else "other"
        status = 500
        limit = self.state.settings.payload_limit

        async def send_and_count(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            declared = _content_length(scope)
            if declared is not None and declared > limit:
                raise PayloadTooLarge(f"the request body has {declared} bytes, more than the limit of {limit} (--payload-limit)")
            received = 0

            async def limited_receive() -> Message:
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > limit:
                        raise PayloadTooLarge(f"the request body has more than {limit} bytes (--payload-limit)")
                return message

            await self.app(scope, limited_receive, send_and_count)
        except ServeError as error:
            await error_response(self.state, error)(scope, receive, send_and_count)
        finally:
            metrics = self.state.metrics
            metrics.requests.labels(route, str(status)).inc()
            metrics.request_latency.labels(route).observe(time.perf_counter() - started)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                raise InvalidRequest(f"Content-Length is not a number: {value.decode('latin-1')!r}") from None
            if length < 0:
                raise InvalidRequest(f"Content-Length is negative: {length}")
            return length
    return None


def _allowed_methods(app: FastAPI, path: str) -> str:
    """The ``Allow`` header for ``path``: the methods of every route on it."""
    methods: set[str] = set()
    for route in app.router.routes:
        if getattr(route, "path", None) == path:
            methods.update(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


Handler = Callable[[ServerState, Request], Awaitable[Response]]


def _guarded(state: ServerState, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """The route of ``handler``: its errors become error responses and no request takes the server down."""

    async def route(request: Request) -> Response:
        try:
            return await handler(state, request)
        except ServeError as error:
            return error_response(state, error)
        except ClientDisconnect:  # nobody to answer
            return Response(status_code=499)
        except Exception as exc:  # noqa: BLE001 - no request takes the server down
            log.exception("unexpected error on %s", request.url.path)
            return error_response(state, InternalError(f"unexpected error: {type(exc).__name__}: {exc}"))

    route.__name__ = handler.__name__.lstrip("_")
    route.__doc__ = handler.__doc__
    return route


def _roles(backend: Any) -> tuple[str, ...]:
    """The names of the served model's prompts."""
    return tuple(getattr(backend, "roles", ()))


async def _embeddings(state: ServerState, request: Request) -> Response:
    """OpenAI embeddings: ``input``, ``model``, ``encoding_format``, ``dimensions``, ``user``; ``layer``, ``index``,
    ``input_type``, ``prompt_name``; other clients' ``task``, ``truncate``, ``truncation``, ``output_dimension``,
    ``output_dtype``, ``embedding_type``, ``normalized``, ``late_chunking`` (docs/serve.md, Clients).
    The prompt applied is in the body's ``prompt_name`` and the headers."""
    settings = state.settings
    batcher, data = await state.begin(request)
    backend = batcher.backend
    parsed = EmbeddingsRequest.parse(data, max_inputs=settings.max_client_batch, dim=backend.dim, roles=_roles(backend))
    state.check_model(parsed.model)
    state.check_layer(parsed.layer, backend)
    encoding = parsed.encoding
    calibration = state.calibration(parsed, backend.dim) if encoding.quantized else None
    result = await batcher.embed(parsed.texts, parsed.role, layer=parsed.layer, **_truncation(parsed.truncation, settings.auto_truncate))
    normalize = backend.normalize if parsed.normalize is None else parsed.normalize
    vectors = finish(result.vectors, normalize=normalize or encoding.quantized, dimensions=parsed.dimensions)
    quantization = None
    if calibration is not None:
        quantization = describe(encoding.dtype, calibration, vectors.shape[1])
        vectors = quantize(vectors, encoding.dtype, calibration)
    body = embeddings_response(vectors, base64_rows=encoding.base64, model=state.model_name, tokens=result.tokens, role=parsed.role, quantization=quantization)
    return Response(body, media_type="application/json", headers=prompt_headers(parsed.role))


def _truncation(asked: str | None, auto_truncate: bool) -> dict[str, Any]:
    """The batcher's ``truncate`` and ``refusal`` for a request's ``truncate``/``truncation``
    (:data:`~anglekit.serve.clients.TRUNCATIONS`; None: the server's ``--auto-truncate``)."""
    if asked is None:
        return {"truncate": auto_truncate}
    return {"truncate": asked.lower(), "refusal": "the request asks for no truncation: truncate 'NONE' or truncation false"}


async def _search(state: ServerState, request: Request) -> Response:
    """Search a served index: ``index`` (optional with one index), ``query``, ``k``, ``model``."""
    batcher, data = await state.begin(request)
    parsed = SearchRequest.parse(data, max_inputs=state.settings.max_client_batch)
    state.check_model(parsed.model)
    served = state.served_index(parsed.index)
    if parsed.k > served.size:
        raise InvalidRequest(f"k is {parsed.k}, more than the {served.size} documents of index {served.name!r}", param="k")
    query_role = present_role("query", _roles(batcher.backend))  # the model's query prompt, else its general one (as encode_query)
    result = await batcher.embed(parsed.queries, query_role, truncate=state.settings.auto_truncate)
    started = time.perf_counter()
    hits = await asyncio.to_thread(served.search, result.vectors, parsed.k)
    state.metrics.search_latency.labels(served.name).observe(time.perf_counter() - started)
    state.metrics.search_queries.labels(served.name).inc(len(parsed.queries))
    body = search_response(parsed.queries, hits, index=served.name, model=state.model_name, tokens=result.tokens, role=query_role)
    return Response(body, media_type="application/json", headers=prompt_headers(query_role))


async def _embed(state: ServerState, request: Request) -> Response:
    """Native: ``inputs``, ``normalize`` (default: the model's), ``role`` (one of its named prompts)."""
    batcher, data = await state.begin(request)
    parsed = EmbedRequest.parse(data, max_inputs=state.settings.max_client_batch, roles=_roles(batcher.backend))
    result = await batcher.embed(parsed.texts, parsed.role, truncate=state.settings.auto_truncate)
    normalize = batcher.backend.normalize if parsed.normalize is None else parsed.normalize
    return Response(dumps(finish(result.vectors, normalize=normalize)), media_type="application/json", headers=prompt_headers(parsed.role))


async def _models(state: ServerState, request: Request) -> Response:
    """The served model (its dimensions, max input tokens, prompt names, layers with early exit, indexes)."""
    state.authorize(request)
    entry: dict[str, Any] = {"id": state.model_name, "object": "model", "created": state.created, "owned_by": "anglekit"}
    if state.backend is not None:
        entry.update(dimensions=state.backend.dim, max_input_tokens=state.backend.max_length, prompts=list(_roles(state.backend)))
        if getattr(state.backend, "early_exit", False):
            entry["layers"] = state.backend.layers
        if state.indexes:
            entry["indexes"] = [{"name": s.name, "documents": s.size, "kind": s.index.settings.kind,
                                 "quantize": s.index.settings.quantize} for s in state.indexes.values()]  # fmt: skip
    return _json({"object": "list", "data": [entry]})


async def _info(state: ServerState, request: Request) -> Response:
    """What the page needs (503 while loading): the model's name, dimension, prompt names, the
    prompt each ``input_type`` applies (null: the general one), the other clients' fields and their
    values (Jina's ``task``: the prompt each applies), layers (early exit), the encoding formats,
    the search depth and every served index."""
    state.authorize(request)
    backend = state.ready_batcher().backend
    early_exit = bool(getattr(backend, "early_exit", False))
    indexes = [{"name": s.name, "documents": s.size, "kind": s.index.settings.kind, "quantize": s.index.settings.quantize,
                "max_k": min(MAX_K, s.size)} for s in state.indexes.values()]  # fmt: skip
    return _json({
        "object": "info", "model": state.model_name, "dimensions": backend.dim, "max_input_tokens": backend.max_length,
        "normalize": bool(backend.normalize), "prompts": list(_roles(backend)), "input_types": input_type_prompts(_roles(backend)),
        "client_fields": client_fields(backend.dim, _roles(backend)), "layers": getattr(backend, "layers", None) if early_exit else None,
        "encoding_formats": list(ENCODING_FORMATS), "max_k": MAX_K, "max_client_batch": state.settings.max_client_batch,
        "auto_truncate": state.settings.auto_truncate, "indexes": indexes,
    })  # fmt: skip


async def _health(state: ServerState, request: Request) -> Response:
    """200 once the model is loaded and warmed up; 503 while loading, after a failure, when stopping."""
    body: dict[str, Any] = {"status": state.status}
    if state.error is not None:
        body["error"] = f"{type(state.error).__name__}: {state.error}"
    return _json(body, 200 if state.status == "ready" else 503)


async def _metrics(state: ServerState, request: Request) -> Response:
    """Prometheus text format."""
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)


ROUTE_TABLE: tuple[tuple[str, str, Handler, bool], ...] = (
    ("POST", "/v1/embeddings", _embeddings, True),
    ("POST", "/v1/search", _search, True),
    ("POST", "/embed", _embed, True),
    ("GET", "/v1/models", _models, True),
    ("GET", "/v1/info", _info, True),
    ("GET", "/health", _health, False),
    ("GET", "/metrics", _metrics, False),
)
"""(method, path, handler, guarded): guarded routes answer every failure as an error body."""


def _http_error_handler(app: FastAPI, state: ServerState) -> Callable[[Request, StarletteHTTPException], Awaitable[Response]]:
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return error_response(state, RouteNotFound(f"no route {request.method} {request.url.path}; see GET /openapi.json"))
        if exc.status_code == 405:
            allowed = _allowed_methods(app, request.url.path) or (exc.headers or {}).get("Allow", "")
            message = f"{request.method} is not allowed on {request.url.path}; allowed: {allowed}"
            return error_response(state, MethodNotAllowed(message, headers={"Allow": allowed}))
        error = ServeError(str(exc.detail), headers=dict(exc.headers or {}))
        error.status = exc.status_code
        return error_response(state, error)

    return http_error


def create_app(settings: ServeSettings, load: Callable[[], Backend], *, model_name: str) -> FastAPI:
    """The server's ASGI app. ``load()`` returns the backend; ``model_name`` is what the API
    answers to. The app's ``state.server`` is its :class:`ServerState`."""
    state = ServerState(settings, load, model_name)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        threading.Thread(target=state.load, name="anglekit-load", daemon=True).start()
        yield
        state.status = "stopping"
        if state.batcher is not None:
            await asyncio.to_thread(state.batcher.close)

    app = FastAPI(
        title="anglekit serve", lifespan=lifespan, docs_url=None, redoc_url=None,
        description="OpenAI-compatible embeddings with dynamic batching, search over served indexes.",
    )  # fmt: skip
    app.state.server = state
    for method, path, handler, guarded in ROUTE_TABLE:
        endpoint = _guarded(state, handler) if guarded else _plain(state, handler)
        app.add_api_route(path, endpoint, methods=[method], name=endpoint.__name__)
    if settings.ui:
        for path, (name, media_type) in UI_FILES.items():
            app.add_api_route(path, _ui_file(name, media_type), methods=["GET"], include_in_schema=False, name=f"ui:{name}")
    app.add_exception_handler(StarletteHTTPException, _http_error_handler(app, state))  # type: ignore[arg-type]
    app.add_middleware(_Guard, state=state)
    return app


def _ui_file(name: str, media_type: str) -> Callable[[], Awaitable[Response]]:
    """The route of one file of the page, read from the package once."""
    content = importlib.resources.files("anglekit.serve").joinpath("ui").joinpath(name).read_bytes()

    async def ui_file() -> Response:
        return Response(content, media_type=media_type, headers=UI_HEADERS)

    return ui_file


def _plain(state: ServerState, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def route(request: Request) -> Response:
        return await handler(state, request)

    route.__name__ = handler.__name__.lstrip("_")
    route.__doc__ = handler.__doc__
    return route


__all__ = ["ROUTES", "UI_FILES", "ServerState", "create_app", "error_response"]
