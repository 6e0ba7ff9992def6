"""Every bound and bad input: a clear OpenAI-style error with a fitting status, and the server
goes on answering good requests with the right vectors."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from serving import Gate, Running, error_of, sentences, start_server, wait_for

TOL = {"rtol": 1e-5, "atol": 1e-5}

BAD_EMBEDDINGS = [
    # (body, status, code, param, words in the message)
    (b'{"input": ["a"', 400, "invalid_request", None, "not valid JSON"),
    (b"", 400, "invalid_request", None, "empty"),
    (b"   ", 400, "invalid_request", None, "empty"),
    (b'["a", "b"]', 400, "invalid_request", None, "JSON object"),
    (b'"a"', 400, "invalid_request", None, "JSON object"),
    (b"null", 400, "invalid_request", None, "JSON object"),
    (b'{"model": "tiny"}', 400, "invalid_request", "input", "required"),
    (b'{"input": null}', 400, "invalid_request", "input", "required"),
    (b'{"input": []}', 400, "invalid_request", "input", "empty array"),
    (b'{"input": ""}', 400, "invalid_request", "input", "empty string"),
    (b'{"input": ["a", ""]}', 400, "invalid_request", "input", "input[1] is an empty string"),
    (b'{"input": "   "}', 400, "invalid_request", "input", "input is blank"),
    (b'{"input": ["ok", "  "]}', 400, "invalid_request", "input", "input[1] is blank"),
    (b'{"input": ["ok", "\\t\\n\\r"]}', 400, "invalid_request", "input", "input[1] is blank"),
    (b'{"input": ["\\u00a0\\u3000", "ok"]}', 400, "invalid_request", "input", "input[0] is blank"),
    (b'{"input": "\\u200b\\ufeff "}', 400, "invalid_request", "input", "input is blank"),
    (b'{"input": ["ok", "\\u3164\\u115f\\u2060"]}', 400, "invalid_request", "input", "input[1] is blank"),
    (b'{"input": 5}', 400, "invalid_request", "input", "string or an array"),
    (b'{"input": {"text": "a"}}', 400, "invalid_request", "input", "string or an array"),
    (b'{"input": ["a", 5]}', 400, "invalid_request", "input", "input[1] must be a string"),
    (b'{"input": [1, 2, 3]}', 400, "invalid_request", "input", "token ids"),
    (b'{"input": [[1, 2]]}', 400, "invalid_request", "input", "token ids"),
    (b'{"input": ["a", null]}', 400, "invalid_request", "input", "input[1] must be a string, got null"),
    (b'{"input": "a", "model": 3}', 400, "invalid_request", "model", "model must be a string"),
    (b'{"input": "a", "model": "other"}', 404, "model_not_found", "model", "not served"),
    (b'{"input": "a", "encoding_format": "int4"}', 400, "invalid_request", "encoding_format", "'float', 'base64', 'int8', 'uint8', 'binary', 'ubinary'"),
    (b'{"input": "a", "encoding_format": 1}', 400, "invalid_request", "encoding_format", "must be a string"),
    (b'{"input": "a", "dimensions": "8"}', 400, "invalid_request", "dimensions", "integer"),
    (b'{"input": "a", "dimensions": true}', 400, "invalid_request", "dimensions", "integer"),
    (b'{"input": "a", "dimensions": 8.5}', 400, "invalid_request", "dimensions", "integer"),
    (b'{"input": "a", "dimensions": 0}', 400, "invalid_request", "dimensions", "between 1 and"),
    (b'{"input": "a", "dimensions": 33}', 400, "invalid_request", "dimensions", "between 1 and the model's dimension 32"),
    (b'{"input": "a", "user": 7}', 400, "invalid_request", "user", "user must be a string"),
    (b'{"input": "a", "temperature": 1}', 400, "invalid_request", "temperature", "unknown field 'temperature'"),
    (b'{"input": "a\\ud800"}', 400, "invalid_request", None, "surrogate"),  # no text a tokenizer could read
    (b'{"input": "\xff\xfe"}', 400, "invalid_request", None, "not valid JSON"),  # not UTF-8
]

BAD_EMBED = [
    (b'{"inputs": []}', "inputs", "empty array"),
    (b'{"inputs": ""}', "inputs", "empty string"),
    (b'{"inputs": [" "]}', "inputs", "inputs[0] is blank"),
    (b'{"inputs": ["a", "\\n"]}', "inputs", "inputs[1] is blank"),
    (b'{"input": ["a"]}', "input", "unknown field 'input'"),
    (b'{"inputs": ["a"], "normalize": "yes"}', "normalize", "true or false"),
    (b'{"inputs": ["a"], "normalize": 1}', "normalize", "true or false"),
    (b'{"inputs": ["a"], "role": "passage"}', "role", "role 'passage': the model has no prompt of that name; its prompts: none"),
    (b'{"inputs": ["a"], "role": 1}', "role", "role must be a string"),
    (b'{"inputs": [3]}', "inputs", "inputs[0] must be a string"),
]


@pytest.fixture(scope="module")
def bounded(tiny_backend: Callable[..., Any]) -> Iterator[Running]:
    """A server with small limits: 4 inputs per request, a 2000-byte body."""
    with start_server(lambda: tiny_backend(), max_client_batch=4, payload_limit=2000) as running:
        yield running


@pytest.mark.parametrize(("body", "status", "code", "param", "words"), BAD_EMBEDDINGS)
def test_bad_embeddings_requests(client: httpx.Client, body: bytes, status: int, code: str, param: str | None, words: str) -> None:
    response = client.post("/v1/embeddings", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    error = error_of(response)
    assert error["code"] == code and error["param"] == param
    assert error["type"] == ("invalid_request_error" if status in (400, 404) else error["type"])
    assert words in error["message"], error["message"]


@pytest.mark.parametrize(("body", "param", "words"), BAD_EMBED)
def test_bad_embed_requests(client: httpx.Client, body: bytes, param: str, words: str) -> None:
    response = client.post("/embed", content=body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["param"] == param and words in error["message"], error


def test_unknown_routes_and_methods(client: httpx.Client) -> None:
    missing = client.post("/v1/embedding", json={"input": "a"})
    assert missing.status_code == 404 and error_of(missing)["code"] == "not_found"
    wrong = client.get("/v1/embeddings")
    assert wrong.status_code == 405 and error_of(wrong)["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/v1/embeddings", "POST"),
        ("PUT", "/v1/embeddings", "POST"),
        ("DELETE", "/embed", "POST"),
        ("POST", "/health", "GET"),
        ("POST", "/v1/models", "GET"),
        ("PATCH", "/metrics", "GET"),
        ("HEAD", "/health", "GET"),
    ],
)
def test_every_405_names_the_allowed_methods(client: httpx.Client, method: str, path: str, allow: str) -> None:
    """RFC 9110 15.5.6: a 405 carries Allow; each method it names is answered (not 405)."""
    response = client.request(method, path)
    assert response.status_code == 405 and response.headers["allow"] == allow
    if method != "HEAD":  # a HEAD answer has no body
        assert error_of(response)["code"] == "method_not_allowed" and allow in error_of(response)["message"]
    for allowed in allow.split(", "):
        assert client.request(allowed, path, json={"input": "a"} if allowed == "POST" else None).status_code != 405


def test_the_server_survives_the_bad_requests(server: Running, client: httpx.Client, reference: Any) -> None:
    # Runs after the parametrised bad requests above, on the same server.
    texts = sentences(6, seed=21)
    response = client.post("/v1/embeddings", json={"input": texts, "model": "tiny"})
    assert response.status_code == 200
    np.testing.assert_allclose(np.array([d["embedding"] for d in response.json()["data"]]), reference.encode(texts), **TOL)
    assert client.get("/health").status_code == 200
    assert server.state.batcher.queued == 0


def test_too_many_inputs(bounded: Running) -> None:
    for path, key in (("/v1/embeddings", "input"), ("/embed", "inputs")):
        response = httpx.post(f"{bounded.url}{path}", json={key: ["a"] * 5})
        assert response.status_code == 400
        error = error_of(response)
        assert error["param"] == key and "5 items" in error["message"] and "limit of 4" in error["message"]
        assert httpx.post(f"{bounded.url}{path}", json={key: ["a"] * 4}).status_code == 200


def test_a_body_over_the_payload_limit(bounded: Running) -> None:
    big = {"input": ["x" * 700] * 3}
    declared = httpx.post(f"{bounded.url}/v1/embeddings", json=big)
    assert declared.status_code == 413
    assert error_of(declared)["code"] == "payload_too_large" and "2000" in error_of(declared)["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: a chunked body, cut off when it passes the limit
        yield b'{"input": ["'
        for _ in range(30):
            yield b"y" * 100
        yield b'"]}'

    streamed = httpx.post(f"{bounded.url}/v1/embeddings", content=chunks())
    assert streamed.status_code == 413 and error_of(streamed)["code"] == "payload_too_large"
    assert raw_status(bounded, b"POST /v1/embeddings HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n{}") == 400
    ok = httpx.post(f"{bounded.url}/v1/embeddings", json={"input": ["x" * 500] * 3})
    assert ok.status_code == 200


def raw_status(server: Running, request: bytes) -> int:
    """The status code answered to raw bytes (for requests httpx refuses to send)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(request)
        return int(conn.recv(4096).split(b" ", 2)[1])


def test_a_full_queue_answers_429_with_retry_after(tiny_backend: Callable[..., Any], reference: Any) -> None:
    gate = Gate(tiny_backend())
    texts = sentences(8, seed=31)
    with start_server(lambda: gate, max_queue=8, max_client_batch=8) as server:
        gate.hold()

        async def main() -> tuple[httpx.Response, httpx.Response]:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                held = asyncio.ensure_future(client.post("/v1/embeddings", json={"input": texts}))
                await asyncio.to_thread(wait_for, lambda: server.state.batcher.queued == 8)
                refused = await client.post("/v1/embeddings", json={"input": "one more"})
                gate.release()
                return await held, refused

        held, refused = asyncio.run(main())
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    error = error_of(refused)
    assert error["code"] == "queue_full" and error["type"] == "rate_limit_error" and "limit 8" in error["message"]
    assert held.status_code == 200
    np.testing.assert_allclose(np.array([d["embedding"] for d in held.json()["data"]]), reference.encode(texts), **TOL)


def test_long_inputs_are_truncated_by_default(client: httpx.Client, reference: Any) -> None:
    long_text = " ".join(["music"] * 400)
    response = client.post("/v1/embeddings", json={"input": [long_text, "short"]})
    assert response.status_code == 200
    assert response.json()["usage"]["prompt_tokens"] == reference.config.max_length + len(reference.tokenize_unpadded(["short"])[0])
    np.testing.assert_allclose(np.array([d["embedding"] for d in response.json()["data"]]), reference.encode([long_text, "short"]), **TOL)


def test_without_auto_truncate_a_long_input_is_an_error_with_its_token_count(tiny_backend: Callable[..., Any], reference: Any) -> None:
    long_text = " ".join(["music"] * 400)
    count = len(reference.tokenizer(long_text)["input_ids"])
    with start_server(lambda: tiny_backend(), auto_truncate=False) as server:
        for path, key in (("/v1/embeddings", "input"), ("/embed", "inputs")):
            response = httpx.post(f"{server.url}{path}", json={key: ["short", long_text]})
            assert response.status_code == 400
            error = error_of(response)
            assert error["code"] == "context_length_exceeded" and error["param"] == "input"
            assert f"input[1] has {count} tokens" in error["message"] and str(reference.config.max_length) in error["message"]
        fits = httpx.post(f"{server.url}/v1/embeddings", json={"input": ["short", "a b c"]})
        assert fits.status_code == 200


def test_api_key(tiny_backend: Callable[..., Any]) -> None:
    with start_server(lambda: tiny_backend(), api_key="s3cret") as server:
        for method, path, body in (("POST", "/v1/embeddings", {"input": "a"}), ("POST", "/embed", {"inputs": "a"}), ("GET", "/v1/models", None)):
            missing = httpx.request(method, f"{server.url}{path}", json=body)
            assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
            assert error_of(missing)["code"] == "invalid_api_key" and "missing" in error_of(missing)["message"]
            wrong = httpx.request(method, f"{server.url}{path}", json=body, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401 and error_of(wrong)["type"] == "authentication_error"
            right = httpx.request(method, f"{server.url}{path}", json=body, headers={"Authorization": "Bearer s3cret"})
            assert right.status_code == 200, right.text
        basic = httpx.post(f"{server.url}/v1/embeddings", json={"input": "a"}, headers={"Authorization": "Basic s3cret"})
        assert basic.status_code == 401
        assert httpx.get(f"{server.url}/health").status_code == 200
        assert httpx.get(f"{server.url}/metrics").status_code == 200
        import openai

        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="s3cret", max_retries=0)
        assert len(client.embeddings.create(input=["a", "b"], model="tiny").data) == 2
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0).embeddings.create(input="a", model="tiny")


def test_not_ready_until_loaded_and_warmed_up(tiny_backend: Callable[..., Any]) -> None:
    go = threading.Event()

    def slow_load() -> Any:
        assert go.wait(60)
        return tiny_backend()

    with start_server(slow_load, wait_ready=False) as server:
        health = httpx.get(f"{server.url}/health")
        assert health.status_code == 503 and health.json() == {"status": "loading"}
        early = httpx.post(f"{server.url}/v1/embeddings", json={"input": "a"})
        assert early.status_code == 503 and error_of(early)["code"] == "not_ready" and early.headers["retry-after"] == "1"
        go.set()
        wait_for(lambda: httpx.get(f"{server.url}/health").status_code == 200, what="readiness")
        assert httpx.post(f"{server.url}/v1/embeddings", json={"input": "a"}).status_code == 200


def test_a_model_that_fails_to_load_is_reported(tmp_path: Any) -> None:
    from anglekit.serve.backends import load_backend

    with start_server(lambda: load_backend("torch", str(tmp_path / "no-such-model"), device="cpu"), wait_ready=True) as server:
        health = httpx.get(f"{server.url}/health")
        assert health.status_code == 503 and health.json()["status"] == "failed" and "no-such-model" in health.json()["error"]
        refused = httpx.post(f"{server.url}/v1/embeddings", json={"input": "a"})
        assert refused.status_code == 503 and "failed to load" in error_of(refused)["message"]


def test_a_backend_failure_answers_500_and_the_server_goes_on(tiny_backend: Callable[..., Any], reference: Any) -> None:
    gate = Gate(tiny_backend())
    marker = gate.tokenize(["piano"], None, truncate=True)[0][1]
    gate.fail_when = lambda ids: any(marker in seq for seq in ids)
    with start_server(lambda: gate) as server:
        broken = httpx.post(f"{server.url}/v1/embeddings", json={"input": ["the piano"]})
        assert broken.status_code == 500
        error = error_of(broken)
        assert error["type"] == "server_error" and "broke on purpose" in error["message"]
        fine = httpx.post(f"{server.url}/v1/embeddings", json={"input": ["a dog"]})
        assert fine.status_code == 200
        np.testing.assert_allclose(fine.json()["data"][0]["embedding"], reference.encode("a dog"), **TOL)


def test_clients_that_go_away_do_not_hurt_the_server(tiny_backend: Callable[..., Any], reference: Any) -> None:
    gate = Gate(tiny_backend())
    with start_server(lambda: gate) as server:
        host, port = server.url.removeprefix("http://").split(":")
        # Gone in the middle of its body.
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            conn.sendall(b'POST /v1/embeddings HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n{"input": ["a')
        # Gone while its texts wait for the model.
        gate.hold()
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            body = b'{"input": ["a b c", "d e"]}'
            conn.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            gate.entered.wait(60)
        gate.release()
        wait_for(lambda: server.state.batcher.queued == 0, what="the queue to empty")
        texts = sentences(3, seed=41)
        response = httpx.post(f"{server.url}/v1/embeddings", json={"input": texts})
        assert response.status_code == 200
        np.testing.assert_allclose(np.array([d["embedding"] for d in response.json()["data"]]), reference.encode(texts), **TOL)
