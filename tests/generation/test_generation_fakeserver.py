"""A fake OpenAI-compatible server on 127.0.0.1 (port 0, a thread) for the generation tests, and its own checks.

Requests are answered by a script: ``script(request) -> Reply | None`` (None: the default answer).
Every request is logged with the input sentence and kind parsed from the paper's prompt. The server
refuses to serve more than ``max_requests`` requests and shuts itself down after ``lifetime_s``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_INPUT = re.compile(r"Input sentence: (.*)\. Output:$", re.DOTALL)


def prompt_parts(prompt: str) -> tuple[str, str]:
    """(input sentence, kind) from a paper prompt."""
    match = _INPUT.search(prompt)
    text = match.group(1) if match else prompt
    kind = "antonym" if "opposite-meaning" in prompt else "synonym"
    return text, kind


def default_sentences(text: str, kind: str, n: int = 3) -> list[str]:
    forms = (
        ["Put differently, {x}", "{x}, as someone might say it", "Essentially this: {x} and that is all"]
        if kind == "synonym"
        else ["It is not true that {x}", "Quite the reverse of {x} happened", "Nobody would claim {x} ever"]
    )
    return [forms[i % 3].format(x=text.rstrip(".").lower()) + ("" if i < 3 else f" (variant {i})") for i in range(n)]


def numbered(items: list[str]) -> str:
    return "\n".join(f"{i + 1}. {s}" for i, s in enumerate(items))


@dataclass
class Reply:
    status: int = 200
    content: str | None = None
    """The assistant message; None: the default numbered answer."""
    raw_body: str | None = None
    """Send this body verbatim (malformed responses)."""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    hang: bool = False
    """Hold the request until the server is released or stopped (then answer 503)."""
    usage: dict[str, int] | None = None


@dataclass
class Logged:
    model: str
    text: str
    kind: str
    status: int
    """0: held (``hang``) and never answered."""
    at: float


class FakeOpenAIServer:
    def __init__(self, script: Callable[[dict[str, Any], int], Reply | None] | None = None, *, max_requests: int = 500, lifetime_s: float = 120.0) -> None:
        self.script = script
        self.max_requests = max_requests
        self.log: list[Logged] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.headers_seen: list[dict[str, str]] = []
        self.inflight = 0
        self.max_inflight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                with server.lock:
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                try:
                    self._post()
                finally:
                    with server.lock:
                        server.inflight -= 1

            def _post(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.headers_seen.append(dict(self.headers))
                with server.lock:
                    n = len(server.log)
                if self.path != "/v1/chat/completions" or n >= server.max_requests:
                    self._send(404 if self.path != "/v1/chat/completions" else 503, {"error": "no"})
                    return
                prompt = body["messages"][-1]["content"]
                text, kind = prompt_parts(prompt)
                reply = (server.script(body, n) if server.script else None) or Reply()
                with server.lock:
                    server.log.append(Logged(body.get("model", ""), text, kind, 0 if reply.hang else reply.status, time.monotonic()))
                if reply.hang:
                    server.release.wait(30)
                    self._send(503, {"error": "released"})
                    return
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.raw_body is not None:
                    self._send(reply.status, reply.raw_body, reply.headers)
                    return
                if reply.status != 200:
                    self._send(reply.status, {"error": {"message": "scripted"}}, reply.headers)
                    return
                content = reply.content if reply.content is not None else numbered(default_sentences(text, kind))
                payload: dict[str, Any] = {
                    "id": "x",
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                }
                if reply.usage is not None:
                    payload["usage"] = reply.usage
                self._send(200, payload, reply.headers)

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = (body if isinstance(body, str) else json.dumps(body)).encode("utf-8")
                try:
                    self.send_response(status)
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.timer = threading.Timer(lifetime_s, self.stop)
        self.timer.daemon = True

    def __enter__(self) -> FakeOpenAIServer:
        self.thread.start()
        self.timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.timer.cancel()
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def ok(self) -> list[Logged]:
        with self.lock:
            return [r for r in self.log if r.status == 200]


def test_fake_server_answers_and_logs() -> None:
    with FakeOpenAIServer() as server:
        prompt = "You are a highly smart same-meaning sentence-generating system. Your job is to generate 3 synonymous sentences of a given input sentence. Input sentence: A cat sits. Output:"
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}]}).encode()
        request = urllib.request.Request(server.url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=5) as response:
            payload = json.loads(response.read())
    assert payload["choices"][0]["message"]["content"].startswith("1. Put differently, a cat sits")
    assert [(r.text, r.kind) for r in server.log] == [("A cat sits", "synonym")]
