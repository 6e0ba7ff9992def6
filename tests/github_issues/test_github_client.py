"""GitHub REST client against a fake API on 127.0.0.1: pagination, rate limits, retries, token."""

from __future__ import annotations

from typing import Any

import pytest

from anglekit.github_issues.client import GitHubClient, GitHubError, NotFound, parse_link_header

from fake_github import FakeGitHub


class FakeTime:
    """Injectable clock + sleep: sleeping advances the clock, nothing really waits."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _client(server: FakeGitHub, t: FakeTime, **kwargs: Any) -> GitHubClient:
    kwargs.setdefault("per_page", 3)
    return GitHubClient(server.base_url, sleep=t.sleep, clock=t.clock, **kwargs)


def _list_fixture(n: int = 8, **extra: Any) -> dict[str, Any]:
    return {"routes": {"/items": {"items": [{"id": i} for i in range(n)]}}, **extra}


def test_parse_link_header() -> None:
    header = '<https://api.github.com/x?page=2>; rel="next", <https://api.github.com/x?page=5>; rel="last"'
    assert parse_link_header(header) == {"next": "https://api.github.com/x?page=2", "last": "https://api.github.com/x?page=5"}
    assert parse_link_header(None) == {} and parse_link_header("") == {}


def test_pagination_follows_link_headers() -> None:
    t = FakeTime()
    with FakeGitHub(_list_fixture(8)) as server:
        client = _client(server, t)
        pages = list(client.pages("/items"))
        assert [len(p.data) for p in pages] == [3, 3, 2]
        assert [x["id"] for p in pages for x in p.data] == list(range(8))
        assert [r["query"].get("page", "1") for r in server.requests] == ["1", "2", "3"]
        assert all(r["query"]["per_page"] == "3" for r in server.requests)
    assert t.sleeps == []


def test_token_from_environment_never_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_GH_TOKEN", "s3cret")
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    with FakeGitHub(_list_fixture(1)) as server:
        _client(server, FakeTime(), token_env="MY_GH_TOKEN").get("/items")
        anonymous = _client(server, FakeTime())
        assert not anonymous.authenticated
        anonymous.get("/items")
        assert [r["authorization"] for r in server.requests] == ["Bearer s3cret", None]


def test_secondary_limit_retry_after_waits_then_retries() -> None:
    t = FakeTime()
    fixture = _list_fixture(8, once={"/items?page=2": [{"status": 429, "headers": {"Retry-After": "7"}, "json": {"message": "slow down"}}]})
    with FakeGitHub(fixture) as server:
        items = _client(server, t).list_all("/items")
    assert len(items) == 8
    assert t.sleeps == [7.0]


def test_primary_limit_403_waits_until_reset() -> None:
    t = FakeTime()
    reset = int(t.now) + 100
    fixture = _list_fixture(
        2,
        once={
            "/items": [
                {"status": 403, "headers": {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)}, "json": {"message": "API rate limit exceeded"}}
            ]
        },
    )
    with FakeGitHub(fixture) as server:
        response = _client(server, t).get("/items")
    assert len(response.data) == 2
    assert t.sleeps == [pytest.approx(101.0)]


def test_remaining_zero_waits_before_next_request_unless_limiter_off() -> None:
    reset_in = 50
    for limiter, expected in ((True, [pytest.approx(reset_in + 1.0)]), (False, [])):
        t = FakeTime()
        fixture = _list_fixture(
            2,
            once={"/items": [{"status": 200, "headers": {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(t.now) + reset_in)}, "json": [{"id": 0}]}]},
        )
        with FakeGitHub(fixture) as server:
            client = _client(server, t, rate_limit=limiter)
            client.get("/items")
            assert t.sleeps == []  # nothing to wait for until the next request
            client.get("/items")
        assert t.sleeps == expected


def test_secondary_limit_without_retry_after_backs_off() -> None:
    t = FakeTime()
    fixture = _list_fixture(1, once={"/items": [{"status": 403, "json": {"message": "You have exceeded a secondary rate limit"}}] * 2})
    with FakeGitHub(fixture) as server:
        _client(server, t, secondary_wait_s=60.0).get("/items")
    assert t.sleeps == [60.0, 120.0]


def test_malformed_json_is_retried_then_fails() -> None:
    t = FakeTime()
    fixture = _list_fixture(1, once={"/items": [{"status": 200, "text": "{not json"}]})
    with FakeGitHub(fixture) as server:
        assert _client(server, t).get("/items").data == [{"id": 0}]
    assert len(t.sleeps) == 1
    broken = {"routes": {"/bad": {"status": 200, "text": "[{truncated"}}}
    with FakeGitHub(broken) as server:
        with pytest.raises(GitHubError, match="malformed JSON"):
            _client(server, FakeTime(), max_retries=2).get("/bad")
        assert len(server.requests) == 3


def test_server_errors_retry_and_404_raises_not_found() -> None:
    t = FakeTime()
    fixture = _list_fixture(1, once={"/items": [{"status": 502, "json": {}}]})
    with FakeGitHub(fixture) as server:
        assert _client(server, t).get("/items").data == [{"id": 0}]
        with pytest.raises(NotFound) as info:
            _client(server, t).get("/repos/nobody/nothing/issues")
    assert info.value.status == 404
    assert t.sleeps == [1.0]


def test_other_403_is_an_error_not_a_wait() -> None:
    fixture = {"routes": {"/private": {"status": 403, "json": {"message": "Resource not accessible by integration"}}}}
    t = FakeTime()
    with FakeGitHub(fixture) as server, pytest.raises(GitHubError, match="403"):
        _client(server, t).get("/private")
    assert t.sleeps == []


def _closed_port() -> int:
    """A port nothing listens on (bound, then closed): connecting to it is refused."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused_is_retried_with_backoff_then_fails() -> None:
    t = FakeTime()
    client = _client_at(f"http://127.0.0.1:{_closed_port()}", t, max_retries=3, backoff_s=0.5)
    with pytest.raises(GitHubError, match="request failed") as info:
        client.get("/items")
    assert info.value.status is None and info.value.url.endswith("/items")
    assert t.sleeps == [0.5, 1.0, 2.0] and client.stats.requests == 4 and client.stats.retries == 3


def test_a_request_the_server_never_answers_times_out_and_is_retried() -> None:
    from holding import HoldingGitHub

    t = FakeTime()
    with HoldingGitHub(_list_fixture(1)) as server:
        server.hold_at = 0  # every request is held: each attempt times out by construction
        client = _client(server, t, timeout_s=0.2, max_retries=1)
        with pytest.raises(GitHubError, match="request failed"):
            client.get("/items")
        assert server.reached.is_set() and client.stats.requests == 2 and client.stats.retries == 1
    assert t.sleeps == [1.0]


def test_redirects_are_followed_like_a_renamed_repository() -> None:
    fixture = {
        "routes": {
            "/repos/old/name/issues": {"status": 301, "headers": {"Location": "/repos/new/name/issues?per_page=3"}, "json": {}},
            "/repos/new/name/issues": {"items": [{"id": i} for i in range(5)]},
        }
    }
    t = FakeTime()
    with FakeGitHub(fixture) as server:
        with _client(server, t) as client:
            items = client.list_all("/repos/old/name/issues")
        assert [r["path"] for r in server.requests] == ["/repos/old/name/issues", "/repos/new/name/issues", "/repos/new/name/issues"]
    assert [x["id"] for x in items] == list(range(5)) and t.sleeps == []


def test_headers_sent_and_connections_kept_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "tok")
    with FakeGitHub(_list_fixture(7)) as server:
        seen: list[Any] = []
        original = server._handle

        def record(handler: Any) -> None:
            seen.append((handler.client_address, dict(handler.headers)))
            original(handler)

        server._handle = record  # type: ignore[method-assign]
        with _client(server, FakeTime()) as client:
            assert len(client.list_all("/items")) == 7
    assert len(seen) == 3 and len({address for address, _ in seen}) == 1  # one connection for the three pages
    headers = seen[0][1]
    assert headers["Accept"] == "application/vnd.github+json" and headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert headers["User-Agent"] == "anglekit-github-issues" and headers["Authorization"] == "Bearer tok"


def test_without_httpx_the_module_imports_and_a_client_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import anglekit, anglekit.cli, anglekit.github_issues.client, anglekit.generation.backends.openai_compat\n"
        "assert 'httpx' not in sys.modules, 'imported httpx'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    from anglekit.errors import ConfigError

    monkeypatch.setitem(sys.modules, "httpx", None)  # import httpx -> ImportError
    with pytest.raises(ConfigError, match=r"needs httpx: pip install 'anglekit\[data\]'"):
        GitHubClient("http://127.0.0.1:1")


def _client_at(base_url: str, t: FakeTime, **kwargs: Any) -> GitHubClient:
    return GitHubClient(base_url, sleep=t.sleep, clock=t.clock, **kwargs)


def test_a_loopback_api_is_reached_past_an_environment_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, dead)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with FakeGitHub(_list_fixture(2)) as server, _client(server, FakeTime(), max_retries=0) as client:
        assert client.get("/items").data == [{"id": 0}, {"id": 1}]
