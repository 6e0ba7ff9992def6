"""OpenAI-compatible chat/completions over HTTP (httpx), with retries.

HTTP goes through one ``httpx.Client`` per backend (kept-alive connections shared by the
generation threads; no proxy for a loopback base URL, else the environment's proxy settings;
redirects are not followed: a 3xx answer fails the request like another 4xx). ``httpx`` is imported
when a backend is made, so ``import anglekit`` does not need it (it comes with the ``llm`` and
``data`` extras). ``httpx`` retries nothing and the OpenAI SDK is not used, so the policy below is
the only one.

Retried: HTTP 408, 409, 425, 429 and every 5xx (500-599, Cloudflare's 520-529 included), timeouts
(``RetryPolicy.timeout`` for connecting and for each read), connection errors, and response bodies that are not the expected JSON. The wait before the next
attempt is the server's ``Retry-After`` (seconds or an HTTP date) when given, capped at
``RetryPolicy.max_retry_after``; otherwise exponential backoff ``backoff_base * 2**attempt``
(capped at ``backoff_max``) with up to 25% jitter.

An answer whose content is not text (a number, ``null``, a list) fails that request with a
:class:`BackendError` (counted with the failed requests; not taken as an empty answer).

Other 4xx fail that request with a :class:`BackendError` quoting the server's message; 401, 403 and
404 (bad key, unknown model) are ``fatal`` at once, and any other 4xx becomes ``fatal`` when the
same status and message come back ``RetryPolicy.max_repeated_errors`` times in a row (default 3;
an answer in between resets the count): a request the server rejects every time (an unsupported
``max_tokens``, say) stops the run instead of failing each request one by one.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anglekit.config import setting
from anglekit.errors import ConfigError
from anglekit.generation.backends import BackendError, Completion, GenerationParams, check_base_url

if TYPE_CHECKING:
    import httpx

RETRY_STATUSES = frozenset({408, 409, 425, 429, *range(500, 600)})
FATAL_STATUSES = frozenset({401, 403, 404})
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True)
class RetryPolicy:
    """How requests are retried and given up; the fields are settings (``anglekit generate`` flags)."""

    max_retries: int = setting(5, minimum=0, help="retries (attempts after the first) on 408/409/425/429/5xx/timeouts/connection errors")
    timeout: float = setting(60.0, minimum=0, exclusive_minimum=True, help="seconds per HTTP request")
    backoff_base: float = setting(1.0, minimum=0, help="first backoff in seconds (doubles; Retry-After wins)")
    backoff_max: float = setting(60.0, minimum=0, help="longest backoff in seconds")
    max_retry_after: float = setting(300.0, minimum=0, help="longest wait a Retry-After header may ask for, in seconds")
    max_repeated_errors: int = setting(
        3, minimum=1, metavar="N", help="stop the run when the server rejects requests with the same 4xx status and message N times in a row"
    )

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.timeout <= 0 or self.backoff_base < 0 or self.backoff_max < 0:
            raise ConfigError("max_retries and backoff must be >= 0 and timeout > 0")
        if self.max_repeated_errors < 1:
            raise ConfigError(f"max_repeated_errors must be >= 1, got {self.max_repeated_errors}")

    def backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max, self.backoff_base * (2**attempt))
        return delay * (1.0 + 0.25 * random.random())


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date); None if absent/invalid."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def server_message(body: bytes) -> str:
    """The error message in an error response body (``{"error": {"message": ...}}``, ``{"error": ...}``,
    ``{"message": ...}``, ``{"detail": ...}``), else the body's text; at most 300 characters."""
    text = body.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text[:300]
    for candidate in (payload.get("error") if isinstance(payload, dict) else None, payload):
        if isinstance(candidate, dict):
            for key in ("message", "detail", "error"):
                if isinstance(candidate.get(key), str) and candidate[key].strip():
                    return candidate[key].strip()[:300]
        elif isinstance(candidate, str) and candidate.strip():
            return candidate.strip()[:300]
    return text[:300]


def _http_client(base_url: str, timeout: float) -> httpx.Client:
    """The ``httpx.Client`` of one backend (a clear error when httpx is missing)."""
    try:
        import httpx
    except ImportError:
        raise ConfigError("the openai: backend needs httpx: pip install 'anglekit[llm]' (or httpx)") from None
    host = urllib.parse.urlsplit(base_url).hostname or ""
    return httpx.Client(timeout=timeout, trust_env=host not in _LOOPBACK)


class _Retry(Exception):
    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


class OpenAICompatBackend:
    """``POST {base_url}/chat/completions`` with one user message holding the prompt."""

    max_concurrency = None

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        retry: RetryPolicy | None = None,
        on_retry: Callable[[str, float], None] | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.base_url = check_base_url(base_url, "base_url")
        self.url = self.base_url + "/chat/completions"
        self.llm_id = f"openai:{model}@{self.base_url}"
        self.api_key_env = api_key_env
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self.extra_body = dict(extra_body or {})
        self._errors_lock = threading.Lock()
        self._last_error: tuple[int, str] | None = None
        self._repeats = 0
        self._http = _http_client(self.base_url, self.retry.timeout)
        self._closer = weakref.finalize(self, self._http.close)

    def close(self) -> None:
        """Close the connections (the backend cannot be used afterwards; also done when it is garbage-collected)."""
        self._closer()

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "anglekit-generate"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _body(self, prompt: str, params: GenerationParams) -> bytes:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        body.update(self.extra_body)
        return json.dumps(body).encode("utf-8")

    def _attempt(self, body: bytes) -> Completion:
        import httpx

        try:
            response = self._http.post(self.url, content=body, headers=self._headers())
        except httpx.TimeoutException:
            raise _Retry("timeout") from None
        except httpx.TransportError as exc:  # refused, reset, closed early, protocol errors
            raise _Retry(f"connection error ({exc or type(exc).__name__})") from None
        status = response.status_code
        if status in RETRY_STATUSES:
            raise _Retry(f"HTTP {status}", parse_retry_after(response.headers.get("Retry-After")))
        if status >= 300:
            raise self._client_error(status, response.reason_phrase, server_message(response.content[:4096]))
        raw = response.content
        try:
            payload = json.loads(raw)
            choice = payload["choices"][0]
            text = choice["message"]["content"] if "message" in choice else choice["text"]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError):
            raise _Retry("malformed response") from None
        usage = payload.get("usage") or {}
        counts = {k: int(usage[k]) for k in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(k), (int, float))}
        with self._errors_lock:
            self._last_error, self._repeats = None, 0
        if not isinstance(text, str):  # a number, null (a refusal, a tool call), a list: not an answer to parse
            field = "choices[0].message.content" if "message" in choice else "choices[0].text"
            raise BackendError(f"{self.url}: the answer's {field} is {type(text).__name__} {str(json.dumps(text))[:80]}, not text")
        return Completion(text, counts)

    def _client_error(self, status: int, reason: str, detail: str) -> BackendError:
        """The error of a non-retryable answer; ``fatal`` for 401/403/404 or a repeated status+message."""
        with self._errors_lock:
            if self._last_error == (status, detail):
                self._repeats += 1
            else:
                self._last_error, self._repeats = (status, detail), 1
            repeats = self._repeats
        message = f"{self.url}: HTTP {status} {reason}: {detail!r}"
        if status in FATAL_STATUSES:
            return BackendError(message, fatal=True)
        if repeats >= self.retry.max_repeated_errors:
            return BackendError(
                f"{message} -- the same error {repeats} times in a row: every request would fail, so the run stops "
                "(answers so far are kept; fix the request, e.g. --max-tokens or the model, and rerun)",
                fatal=True,
            )
        return BackendError(message)

    def complete(self, prompt: str, params: GenerationParams) -> Completion:
        body = self._body(prompt, params)
        last = ""
        for attempt in range(self.retry.max_retries + 1):
            try:
                return self._attempt(body)
            except _Retry as exc:
                last = exc.reason
                if attempt == self.retry.max_retries:
                    break
                wait = min(exc.wait, self.retry.max_retry_after) if exc.wait is not None else self.retry.backoff(attempt)
                if self.on_retry is not None:
                    self.on_retry(exc.reason, wait)
                time.sleep(wait)
        raise BackendError(f"{self.url}: giving up after {self.retry.max_retries + 1} attempts (last: {last})")


__all__ = ["FATAL_STATUSES", "RETRY_STATUSES", "OpenAICompatBackend", "RetryPolicy", "parse_retry_after", "server_message"]
