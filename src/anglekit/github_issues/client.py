"""A small GitHub REST client: token from the environment, ``Link`` pagination, rate limits by waiting.

HTTP goes through ``httpx`` (one ``httpx.Client`` per :class:`GitHubClient`: kept-alive
connections, redirects followed, the environment's proxy settings except for a loopback base URL);
``httpx`` is imported when a client is made, so ``import anglekit`` does not need it (it comes
with the ``data`` and ``llm`` extras). ``httpx`` itself retries nothing: the policy below is the
only one. Behaviour:

* the token is read from an environment variable (default ``GITHUB_TOKEN``), never from a
  command-line value; without it requests are anonymous (60 requests an hour on github.com);
* ``Link: <...>; rel="next"`` headers drive pagination (:meth:`GitHubClient.pages`);
* primary rate limit: when a response says ``X-RateLimit-Remaining: 0`` the next request waits
  until ``X-RateLimit-Reset`` (plus a second); a ``403``/``429`` with remaining 0 waits likewise
  and retries;
* secondary rate limit: a ``403``/``429`` with ``Retry-After`` waits that many seconds and
  retries; without it (a "secondary rate limit" message) waits a minute, doubling each time;
* the waits a response demands (``Retry-After``, a 403/429 with remaining 0) are bounded per
  request: after ``max_rate_limit_waits`` of them, or once they add up to ``max_total_wait_s``,
  :class:`RateLimited` is raised (each single wait is capped at ``max_wait_s``);
* ``5xx``, connection errors, timeouts (``timeout_s`` for connecting and for each read) and
  malformed JSON bodies are retried with exponential backoff, up to ``max_retries`` times, then
  raise :class:`GitHubError`; a ``404`` raises :class:`NotFound`.

Waiting goes through the injectable ``sleep``/``clock`` callables, so tests never really wait.
``rate_limit=False`` turns the pre-emptive primary-limit wait off (benchmarks against a local
server); responses that demand a wait (403/429) are still honoured. :meth:`GitHubClient.close`
(or ``with GitHubClient(...) as client:``) closes the connections; a client that is dropped
closes them when it is garbage-collected.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from anglekit.errors import AnglekitError, ConfigError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_TOKEN_ENV",
    "GitHubClient",
    "GitHubError",
    "NotFound",
    "RateLimited",
    "Response",
    "parse_link_header",
]

DEFAULT_BASE_URL = "https://api.github.com"
DEFAULT_TOKEN_ENV = "GITHUB_TOKEN"
_LINK = re.compile(r'<([^>]*)>\s*;\s*rel="?([^";]+)"?')
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _http_client(base_url: str, timeout_s: float, headers: dict[str, str]) -> httpx.Client:
    """The ``httpx.Client`` of one :class:`GitHubClient` (a clear error when httpx is missing)."""
    try:
        import httpx
    except ImportError:
        raise ConfigError("the GitHub client needs httpx: pip install 'anglekit[data]' (or httpx)") from None
    host = urllib.parse.urlsplit(base_url).hostname or ""
    return httpx.Client(timeout=timeout_s, headers=headers, follow_redirects=True, trust_env=host not in _LOOPBACK)


@dataclass
class _Attempts:
    """What one :meth:`GitHubClient.get` has spent: failed attempts, secondary-limit waits, waits a
    response demanded (Retry-After, the primary limit) and their seconds."""

    failures: int = 0
    secondary: int = 0
    demanded: int = 0
    demanded_s: float = 0.0


class GitHubError(AnglekitError):
    """A GitHub request failed for good (after retries). ``status`` is the HTTP status or None."""

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        self.url = url
        self.status = status
        super().__init__(f"{url}: {message}" if url else message)


class NotFound(GitHubError):
    """404 (or 410): the repository or issue does not exist, or is not visible with this token."""


class RateLimited(GitHubError):
    """Still rate limited after the bounded number of waits (or total waiting time) of one request."""


def parse_link_header(value: str | None) -> dict[str, str]:
    """``rel -> url`` from a ``Link`` header (``{}`` when absent)."""
    if not value:
        return {}
    links: dict[str, str] = {}
    for part in value.split(","):
        match = _LINK.search(part)
        if match:
            for rel in match.group(2).split():
                links[rel] = match.group(1)
    return links


@dataclass
class Response:
    status: int
    url: str
    headers: dict[str, str]
    data: Any

    @property
    def links(self) -> dict[str, str]:
        return parse_link_header(self.headers.get("link"))

    @property
    def next_url(self) -> str | None:
        return self.links.get("next")


@dataclass
class ClientStats:
    requests: int = 0
    retries: int = 0
    waits: int = 0
    waited_s: float = 0.0
    by_status: dict[int, int] = field(default_factory=dict)


class GitHubClient:
    """GET JSON from the GitHub REST API with pagination, retries and rate-limit waits."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        token_env: str = DEFAULT_TOKEN_ENV,
        per_page: int = 100,
        rate_limit: bool = True,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        secondary_wait_s: float = 60.0,
        max_wait_s: float = 3900.0,
        max_rate_limit_waits: int = 10,
        max_total_wait_s: float = 4 * 3900.0,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        user_agent: str = "anglekit-github-issues",
    ) -> None:
        if not 1 <= int(per_page) <= 100:
            raise ValueError(f"per_page must be in 1..100, got {per_page}")
        self.base_url = base_url.rstrip("/")
        self.token_env = token_env
        self._token = os.environ.get(token_env) or None
        self.per_page = int(per_page)
        self.rate_limit = rate_limit
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.secondary_wait_s = secondary_wait_s
        self.max_wait_s = max_wait_s
        self.max_rate_limit_waits = max_rate_limit_waits
        self.max_total_wait_s = max_total_wait_s
        self.timeout_s = timeout_s
        self.sleep = sleep
        self.clock = clock
        self.user_agent = user_agent
        self.stats = ClientStats()
        self._resume_at: float | None = None  # primary limit exhausted: no request before this time
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28", "User-Agent": user_agent}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        self._http = _http_client(self.base_url, timeout_s, headers)
        self._closer = weakref.finalize(self, self._http.close)

    def close(self) -> None:
        """Close the connections (the client cannot be used afterwards)."""
        self._closer()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()

    @property
    def authenticated(self) -> bool:
        return self._token is not None

    # ------------------------------------------------------------------ URLs
    def url(self, path: str, params: dict[str, Any] | None = None) -> str:
        """Absolute URL of an API path (an absolute URL is kept as it is), with query parameters."""
        url = path if path.startswith(("http://", "https://")) else f"{self.base_url}/{path.lstrip('/')}"
        if params:
            query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
            url += ("&" if "?" in url else "?") + query
        return url

    # ------------------------------------------------------------------ waiting
    def _wait(self, seconds: float, why: str) -> float:
        seconds = max(0.0, min(float(seconds), self.max_wait_s))
        self.stats.waits += 1
        self.stats.waited_s += seconds
        if seconds > 0:
            self.sleep(seconds)
        return seconds

    def _until_reset(self, headers: dict[str, str]) -> float | None:
        reset = headers.get("x-ratelimit-reset")
        try:
            return max(0.0, float(reset) - self.clock()) + 1.0 if reset is not None else None
        except ValueError:
            return None

    # ------------------------------------------------------------------ requests
    def _open(self, url: str) -> tuple[int, dict[str, str], bytes]:
        """One GET: status, headers (lower-case names) and body; transport failures raise ``httpx.TransportError``."""
        self.stats.requests += 1
        reply = self._http.get(url)
        status, body = reply.status_code, reply.content
        headers = {k.lower(): v for k, v in reply.headers.items()}
        self.stats.by_status[status] = self.stats.by_status.get(status, 0) + 1
        return status, headers, body

    def get(self, path: str, params: dict[str, Any] | None = None) -> Response:
        """GET one URL and parse its JSON body, waiting on rate limits and retrying transient failures."""
        url = self.url(path, params)
        if not url.startswith(("http://", "https://")):
            raise GitHubError("only http(s) URLs are fetched", url=url)
        import httpx

        tries = _Attempts()
        while True:
            if self._resume_at is not None:
                remaining = self._resume_at - self.clock()
                self._resume_at = None
                if remaining > 0:
                    self._wait(remaining, "primary rate limit")
            try:
                status, headers, body = self._open(url)
            except httpx.InvalidURL as error:
                raise GitHubError(f"invalid URL: {error}", url=url) from None
            except httpx.TransportError as error:  # connection refused or reset, timeouts, protocol errors
                self._retry(tries, url, None, f"request failed: {error or type(error).__name__}", "connection error")
                continue
            if self.rate_limit and headers.get("x-ratelimit-remaining") == "0" and status < 400:
                until = self._until_reset(headers)
                if until is not None:
                    self._resume_at = self.clock() + until
            if status in (403, 429):
                self._rate_limited(tries, url, status, headers, body)  # waited, or raised
                continue
            if status in (404, 410):
                raise NotFound(f"HTTP {status} (not found or not visible)", url=url, status=status)
            if status >= 500:
                self._retry(tries, url, status, f"HTTP {status} after {self.max_retries} retries", f"HTTP {status}")
                continue
            if status >= 400:
                raise GitHubError(f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}", url=url, status=status)
            try:
                data = json.loads(body.decode("utf-8")) if body.strip() else None
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                self._retry(tries, url, status, f"malformed JSON after {self.max_retries} retries: {error}", "malformed JSON")
                continue
            return Response(status, url, headers, data)

    def _retry(self, tries: _Attempts, url: str, status: int | None, give_up: str, why: str) -> None:
        """Back off before the next attempt (exponentially), or raise ``give_up`` past ``max_retries``."""
        tries.failures += 1
        if tries.failures > self.max_retries:
            raise GitHubError(give_up, url=url, status=status) from None
        self.stats.retries += 1
        self._wait(self.backoff_s * 2 ** (tries.failures - 1), why)

    def _rate_limited(self, tries: _Attempts, url: str, status: int, headers: Any, body: bytes) -> None:
        """A 403 or 429: wait as the response demands (Retry-After, the primary limit's reset) or back
        off on a secondary limit, within the budgets; raise when they are spent or it is not a limit."""
        retry_after = headers.get("retry-after")
        message = body[:300].decode("utf-8", "replace").lower()
        exhausted = headers.get("x-ratelimit-remaining") == "0"
        if retry_after is not None or exhausted:
            tries.demanded += 1
            if tries.demanded > self.max_rate_limit_waits or tries.demanded_s >= self.max_total_wait_s:
                raise RateLimited(
                    f"HTTP {status}: still rate limited after {tries.demanded - 1} waits ({tries.demanded_s:.0f} s); rerun later to resume",
                    url=url, status=status,
                )  # fmt: skip
        budget = max(self.max_total_wait_s - tries.demanded_s, 0.0)
        if retry_after is not None:
            try:
                seconds = float(retry_after)
            except ValueError:
                seconds = self.secondary_wait_s
            self.stats.retries += 1
            tries.demanded_s += self._wait(min(seconds, budget), "retry-after")
            return
        if exhausted:
            until = self._until_reset(headers)
            self.stats.retries += 1
            tries.demanded_s += self._wait(min(until if until is not None else self.secondary_wait_s, budget), "primary rate limit")
            return
        if status == 429 or "rate limit" in message:
            tries.secondary += 1
            if tries.secondary > self.max_retries:
                raise GitHubError("still rate limited after waiting", url=url, status=status)
            self.stats.retries += 1
            self._wait(self.secondary_wait_s * 2 ** (tries.secondary - 1), "secondary rate limit")
            return
        raise GitHubError(f"HTTP {status}: {message[:200]}", url=url, status=status)

    def pages(self, path: str, params: dict[str, Any] | None = None, *, start_url: str | None = None) -> Iterator[Response]:
        """Every page of a list endpoint, following ``rel="next"`` links (``per_page`` added).

        ``start_url`` resumes from a saved next-page URL instead of the first page.
        """
        url: str | None = start_url or self.url(path, {"per_page": self.per_page, **(params or {})})
        while url:
            response = self.get(url)
            if not isinstance(response.data, list):
                raise GitHubError(f"expected a JSON list, got {type(response.data).__name__}", url=url)
            yield response
            url = response.next_url

    def list_all(self, path: str, params: dict[str, Any] | None = None) -> list[Any]:
        """All items of a list endpoint (every page)."""
        items: list[Any] = []
        for page in self.pages(path, params):
            items.extend(page.data)
        return items
