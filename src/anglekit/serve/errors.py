"""The server's errors: one type per kind, each with its HTTP status and OpenAI-style body
``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from typing import Any

from anglekit.errors import AnglekitError


class ServeError(AnglekitError):
    """An error answered to a client. ``code`` also labels the errors metric."""

    status = 500
    type = "server_error"
    code = "internal_error"

    def __init__(self, message: str, *, param: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class InvalidRequest(ServeError):
    """Malformed JSON, a wrong type, an empty input, too many inputs."""

    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class ContextLengthExceeded(InvalidRequest):
    """An input longer than the model's max length, with truncation off."""

    code = "context_length_exceeded"


class Unauthorized(ServeError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class ModelNotFound(ServeError):
    status = 404
    type = "invalid_request_error"
    code = "model_not_found"


class IndexNotFound(ServeError):
    """A search names an index this server does not serve (or it serves none)."""

    status = 404
    type = "invalid_request_error"
    code = "index_not_found"


class RouteNotFound(ServeError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class MethodNotAllowed(ServeError):
    status = 405
    type = "invalid_request_error"
    code = "method_not_allowed"


class PayloadTooLarge(ServeError):
    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class UnsupportedMediaType(ServeError):
    status = 415
    type = "invalid_request_error"
    code = "unsupported_media_type"


class QueueFull(ServeError):
    """More texts waiting than ``--max-queue``; answered with ``Retry-After``."""

    status = 429
    type = "rate_limit_error"
    code = "queue_full"


class NotReady(ServeError):
    """The model is still loading, or the server is shutting down."""

    status = 503
    type = "server_error"
    code = "not_ready"


class InternalError(ServeError):
    """A failure of the server itself (e.g. the backend raised): only the requests concerned get it."""


__all__ = [
    "ContextLengthExceeded",
    "InternalError",
    "IndexNotFound",
    "InvalidRequest",
    "MethodNotAllowed",
    "ModelNotFound",
    "NotReady",
    "PayloadTooLarge",
    "QueueFull",
    "RouteNotFound",
    "ServeError",
    "Unauthorized",
    "UnsupportedMediaType",
]
