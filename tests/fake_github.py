"""A fake GitHub REST API on 127.0.0.1, serving a fixture written to disk (tests and ``benchmarks/bench_github.py``).

Not part of the package: importable as ``fake_github`` with ``tests/`` on ``sys.path`` (``tests/conftest.py``
puts it there; the benchmark does the same).

A fixture is a JSON object::

    {
      "routes": {                                   # path -> what to serve
        "/repos/o/n/issues": {"items": [...]},      # a list, paginated by ?per_page / ?page with Link headers
        "/repos/o/n/issues/7": {"json": {...}},     # one JSON body (status 200 unless "status" is given)
        "/repos/gone/away/issues": {"status": 404, "json": {"message": "Not Found"}},
        "/repos/o/n/issues/9/comments": {"status": 200, "text": "{not json"}   # a raw body
      },
      "once": {                                     # served first, one per request, before the route
        "/repos/o/n/issues?page=2": [{"status": 429, "headers": {"Retry-After": "7"}, "json": {}}]
      },
      "headers": {"X-RateLimit-Limit": "5000"}      # added to every response
    }

``once`` keys are a path or ``path?page=N``. Every request is recorded in :attr:`FakeGitHub.requests`
(and appended to ``log_path`` when given). :func:`make_fixture` builds the routes of whole
repositories (closed issues, open originals, comments, timelines, pull requests) from a compact form.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["FakeGitHub", "make_fixture", "write_fixture"]


class FakeGitHub:
    """``with FakeGitHub(fixture) as server: client = GitHubClient(server.base_url)``."""

    def __init__(
        self,
        fixture: str | os.PathLike[str] | Mapping[str, Any],
        *,
        delay_s: float = 0.0,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        data = dict(fixture) if isinstance(fixture, Mapping) else json.loads(Path(fixture).read_text(encoding="utf-8"))
        self.routes: dict[str, Any] = dict(data.get("routes", {}))
        self.once: dict[str, list[Any]] = {k: list(v) for k, v in data.get("once", {}).items()}
        self.extra_headers: dict[str, str] = {str(k): str(v) for k, v in data.get("headers", {}).items()}
        self.delay_s = delay_s
        self.log_path = Path(log_path) if log_path is not None else None
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("server not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: without it a kept-alive connection waits for delayed ACKs

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                fake._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def paths(self) -> list[str]:
        """``path?query`` of every request so far, in order."""
        with self._lock:
            return [r["target"] for r in self.requests]

    # ------------------------------------------------------------------ serving
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        parsed = urllib.parse.urlsplit(handler.path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        entry = {"target": handler.path, "path": parsed.path, "query": query, "authorization": handler.headers.get("Authorization")}
        with self._lock:
            self.requests.append(entry)
            if self.log_path is not None:
                with open(self.log_path, "a", encoding="utf-8") as log:
                    log.write(json.dumps(entry) + "\n")
            page = query.get("page")
            queued = None
            for key in ([f"{parsed.path}?page={page}"] if page else []) + [parsed.path]:
                if self.once.get(key):
                    queued = self.once[key].pop(0)
                    break
        if self.delay_s:
            time.sleep(self.delay_s)
        if queued is not None:
            return self._send(handler, queued)
        route = self.routes.get(parsed.path)
        if route is None:
            return self._send(handler, {"status": 404, "json": {"message": "Not Found"}})
        if "items" in route:
            return self._send_page(handler, parsed, query, route)
        return self._send(handler, route)

    def _send_page(self, handler: BaseHTTPRequestHandler, parsed: Any, query: dict[str, str], route: Mapping[str, Any]) -> None:
        items: list[Any] = list(route["items"])
        per_page = max(1, min(100, int(query.get("per_page", 30))))
        page = max(1, int(query.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        body = items[(page - 1) * per_page : page * per_page]
        host = handler.headers.get("Host", "127.0.0.1")

        def link(n: int) -> str:
            return f"http://{host}{parsed.path}?" + urllib.parse.urlencode({**query, "page": n})

        links = []
        if page < last:
            links += [f'<{link(page + 1)}>; rel="next"', f'<{link(last)}>; rel="last"']
        if page > 1:
            links += [f'<{link(1)}>; rel="first"', f'<{link(page - 1)}>; rel="prev"']
        headers = dict(route.get("headers", {}))
        if links:
            headers["Link"] = ", ".join(links)
        self._send(handler, {"status": route.get("status", 200), "headers": headers, "json": body})

    def _send(self, handler: BaseHTTPRequestHandler, spec: Mapping[str, Any]) -> None:
        status = int(spec.get("status", 200))
        payload = str(spec["text"]).encode("utf-8") if "text" in spec else json.dumps(spec.get("json")).encode("utf-8")
        handler.send_response(status)
        headers = {**self.extra_headers, **{str(k): str(v) for k, v in spec.get("headers", {}).items()}}
        headers.setdefault("Content-Type", "application/json; charset=utf-8")
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)


def _issue_object(repo: str, spec: Mapping[str, Any], base: str = "https://api.github.com") -> dict[str, Any]:
    number = int(spec["number"])
    issue = {
        "number": number,
        "title": spec.get("title", f"Issue {number}"),
        "body": spec.get("body", ""),
        "state": "open" if spec.get("open") else "closed",
        "state_reason": spec.get("state_reason", None if spec.get("open") else "completed"),
        "labels": [{"name": name} for name in spec.get("labels", ())],
        "comments": len(spec.get("comments", ())),
        "created_at": spec.get("created_at", "2023-01-01T00:00:00Z"),
        "closed_at": None if spec.get("open") else "2023-02-01T00:00:00Z",
        "html_url": f"https://github.com/{repo}/issues/{number}",
        "repository_url": f"{base}/repos/{repo}",
        "user": {"login": spec.get("user", "someone")},
    }
    if spec.get("pull_request"):
        issue["pull_request"] = {"url": f"{base}/repos/{repo}/pulls/{number}"}
    return issue


def _comment_object(comment_id: int, comment: str | Mapping[str, Any]) -> dict[str, Any]:
    spec: Mapping[str, Any] = {"body": comment} if isinstance(comment, str) else comment
    return {
        "id": comment_id,
        "body": spec.get("body", ""),
        "user": {"login": spec.get("user", "maintainer")},
        "author_association": spec.get("author_association", "MEMBER"),
        "created_at": spec.get("created_at", "2023-01-02T00:00:00Z"),
    }


def make_fixture(repos: Mapping[str, Sequence[Mapping[str, Any]]], *, missing: Sequence[str] = ()) -> dict[str, Any]:
    """Routes of whole repositories from compact issue specs.

    Each spec: ``number`` (required), ``title``, ``body``, ``state_reason``, ``labels`` (names),
    ``comments`` (bodies, written by a ``MEMBER``, or objects with ``body``, ``author_association``
    and ``user``), ``timeline`` (event objects, served at ``/issues/N/timeline``), ``pull_request`` (bool), ``open`` (bool:
    left out of the closed-issue list but served at ``/issues/N``). ``missing`` repositories 404.
    """
    routes: dict[str, Any] = {}
    for repo, issues in repos.items():
        closed = []
        for spec in sorted(issues, key=lambda s: int(s["number"])):
            obj = _issue_object(repo, spec)
            number = obj["number"]
            if not spec.get("open"):
                closed.append(obj)
            routes[f"/repos/{repo}/issues/{number}"] = {"json": obj}
            routes[f"/repos/{repo}/issues/{number}/comments"] = {
                "items": [_comment_object(number * 1000 + k, comment) for k, comment in enumerate(spec.get("comments", ()))]
            }
            routes[f"/repos/{repo}/issues/{number}/timeline"] = {"items": list(spec.get("timeline", ()))}
        routes[f"/repos/{repo}/issues"] = {"items": closed}
    for repo in missing:
        routes[f"/repos/{repo}/issues"] = {"status": 404, "json": {"message": "Not Found"}}
    return {"routes": routes, "once": {}, "headers": {}}


def write_fixture(path: str | os.PathLike[str], fixture: Mapping[str, Any]) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(fixture, indent=1), encoding="utf-8")
    return target
