"""The server over HTTP on 127.0.0.1: the real openai SDK and httpx as clients, vectors checked
against Embedder.encode, order under concurrency, batching, the other routes."""

from __future__ import annotations

import asyncio
import base64
import random
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

from serving import Gate, Running, sentences, start_server, wait_for

openai = pytest.importorskip("openai")

TOL = {"rtol": 1e-5, "atol": 1e-5}


def sdk(server: Running, api_key: str = "unused") -> Any:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=api_key, max_retries=0, timeout=60)


def from_base64(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4")


def truncated(vectors: np.ndarray, d: int, normalize: bool) -> np.ndarray:
    out = vectors[:, :d]
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12) if normalize else out


# ------------------------------------------------------------------ the OpenAI route, with the OpenAI SDK


def test_sdk_float_and_base64_equal_encode(server: Running, reference: Any) -> None:
    texts = sentences(9, seed=1)
    expected = reference.encode(texts)
    client = sdk(server)
    as_float = client.embeddings.create(input=texts, model="tiny", encoding_format="float")
    assert as_float.object == "list" and as_float.model == "tiny"
    assert [d.index for d in as_float.data] == list(range(9))
    assert all(d.object == "embedding" for d in as_float.data)
    np.testing.assert_allclose(np.array([d.embedding for d in as_float.data]), expected, **TOL)
    as_base64 = client.embeddings.create(input=texts, model="tiny", encoding_format="base64")
    np.testing.assert_allclose(np.stack([from_base64(d.embedding) for d in as_base64.data]), expected, **TOL)
    # Without encoding_format the SDK asks for base64 and decodes it itself.
    default = client.embeddings.create(input=texts, model="tiny")
    np.testing.assert_allclose(np.array([d.embedding for d in default.data], dtype=np.float32), expected, **TOL)
    tokens = sum(len(ids) for ids in reference.tokenize_unpadded(texts))
    assert as_float.usage.prompt_tokens == as_float.usage.total_tokens == tokens


def test_sdk_one_string_and_user(server: Running, reference: Any) -> None:
    response = sdk(server).embeddings.create(input="a man plays the guitar .", model="tiny", user="someone")
    assert len(response.data) == 1
    np.testing.assert_allclose(response.data[0].embedding, reference.encode("a man plays the guitar ."), **TOL)


def test_dimensions_truncate_without_normalising_for_a_model_that_does_not(server: Running, reference: Any) -> None:
    assert reference.config.normalize is False
    texts = sentences(4, seed=2)
    response = sdk(server).embeddings.create(input=texts, model="tiny", dimensions=8, encoding_format="float")
    got = np.array([d.embedding for d in response.data])
    np.testing.assert_allclose(got, truncated(reference.encode(texts), 8, normalize=False), **TOL)


def test_dimensions_renormalise_for_a_model_that_normalises(tiny_backend: Callable[..., Any], tiny_bert_dir: Any) -> None:
    from anglekit.model.embedder import Embedder

    normalizing = Embedder.from_pretrained(tiny_bert_dir, device="cpu", normalize=True)
    texts = sentences(5, seed=3)
    with start_server(lambda: tiny_backend(normalize=True)) as server:
        client = sdk(server)
        full = client.embeddings.create(input=texts, model="tiny", encoding_format="float")
        np.testing.assert_allclose(np.array([d.embedding for d in full.data]), normalizing.encode(texts), **TOL)
        for d in (1, 7, 32):
            response = client.embeddings.create(input=texts, model="tiny", dimensions=d, encoding_format="base64")
            got = np.stack([from_base64(x.embedding) for x in response.data])
            assert got.shape == (5, d)
            np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
            np.testing.assert_allclose(got, truncated(normalizing.encode(texts, normalize=False), d, normalize=True), **TOL)


def test_sdk_errors_are_openai_errors(server: Running) -> None:
    client = sdk(server)
    with pytest.raises(openai.BadRequestError) as too_many:
        client.embeddings.create(input=["x"], model="tiny", dimensions=33)
    assert "dimensions" in str(too_many.value) and "32" in str(too_many.value)
    with pytest.raises(openai.NotFoundError, match="not served here"):
        client.embeddings.create(input=["x"], model="text-embedding-3-small")
    with pytest.raises(openai.BadRequestError, match="empty string"):
        client.embeddings.create(input="", model="tiny")


def test_real_minilm_through_the_sdk_equals_encode() -> None:
    from anglekit.errors import ConfigError
    from anglekit.model.embedder import Embedder
    from anglekit.model.offline import minilm_dir
    from anglekit.serve.backends import load_backend

    try:
        directory = str(minilm_dir())
    except ConfigError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 package not installed: {exc}")
    model = Embedder.from_pretrained(directory, device="cpu")
    texts = ["A man is playing a guitar.", "hi", "The weather is lovely today, isn't it? " * 40, "Ein Mann spielt Gitarre."]
    with start_server(lambda: load_backend("torch", directory, device="cpu"), model_name="all-MiniLM-L6-v2") as server:
        client = sdk(server)
        as_float = client.embeddings.create(input=texts, model="all-MiniLM-L6-v2", encoding_format="float")
        as_base64 = client.embeddings.create(input=texts, model="all-MiniLM-L6-v2", encoding_format="base64")
        cut = client.embeddings.create(input=texts, model="all-MiniLM-L6-v2", dimensions=128, encoding_format="float")
    expected = model.encode(texts)
    np.testing.assert_allclose(np.array([d.embedding for d in as_float.data]), expected, **TOL)
    np.testing.assert_allclose(np.stack([from_base64(d.embedding) for d in as_base64.data]), expected, **TOL)
    np.testing.assert_allclose(np.array([d.embedding for d in cut.data]), truncated(model.encode(texts, normalize=False), 128, normalize=True), **TOL)


# ------------------------------------------------------------------ the native route


def test_embed_route_uses_the_role_prompts_and_normalize(tiny_backend: Callable[..., Any], tiny_bert_dir: Any) -> None:
    from anglekit.model.embedder import Embedder

    prompts = {"query_prompt": "query : {text}", "document_prompt": "passage : {text}"}
    prompted = Embedder.from_pretrained(tiny_bert_dir, device="cpu", **prompts)
    texts = sentences(6, seed=4)
    with start_server(lambda: tiny_backend(**prompts)) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        for role in ("query", "document"):
            got = client.post("/embed", json={"inputs": texts, "role": role, "normalize": True})
            assert got.status_code == 200, got.text
            np.testing.assert_allclose(np.array(got.json()), prompted.encode(texts, role=role, normalize=True), **TOL)
        plain = client.post("/embed", json={"inputs": texts})
        np.testing.assert_allclose(np.array(plain.json()), prompted.encode(texts), **TOL)
        one = client.post("/embed", json={"inputs": texts[0], "normalize": False, "role": "query"})
        np.testing.assert_allclose(np.array(one.json()), prompted.encode(texts[:1], role="query"), **TOL)
    # The roles differ from each other and from no role, so the prompts were applied.
    assert not np.allclose(prompted.encode(texts, role="query"), prompted.encode(texts, role="document"))


# ------------------------------------------------------------------ concurrency and batching


def test_100_concurrent_mixed_requests_each_get_their_own_vectors_in_order(server: Running, reference: Any) -> None:
    rng = random.Random(11)
    requests = [sentences(rng.choice([1, 1, 2, 5, 13, 40]), seed=1000 + i, low=1, high=60) for i in range(100)]
    formats = [rng.choice(["float", "base64"]) for _ in requests]
    unique = sorted({t for texts in requests for t in texts})
    expected = dict(zip(unique, reference.encode(unique), strict=False))

    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=httpx.Limits(max_connections=100)) as client:
            return list(
                await asyncio.gather(
                    *(
                        client.post("/v1/embeddings", json={"input": texts, "model": "tiny", "encoding_format": fmt})
                        for texts, fmt in zip(requests, formats, strict=False)
                    )
                )
            )

    responses = asyncio.run(main())
    for texts, fmt, response in zip(requests, formats, responses, strict=False):
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        assert [d["index"] for d in data] == list(range(len(texts)))
        got = np.stack([from_base64(d["embedding"]) if fmt == "base64" else np.array(d["embedding"]) for d in data])
        np.testing.assert_allclose(got, np.stack([expected[t] for t in texts]), **TOL)


def test_32_concurrent_one_sentence_requests_cost_about_one_forward_pass(tiny_backend: Callable[..., Any], reference: Any) -> None:
    gate = Gate(tiny_backend())
    texts = sentences(32, seed=5)
    with start_server(lambda: gate) as server:
        gate.batches.clear()
        gate.hold()

        async def main() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                first = asyncio.ensure_future(client.post("/v1/embeddings", json={"input": texts[0]}))
                await asyncio.to_thread(gate.entered.wait, 60)
                rest = [asyncio.ensure_future(client.post("/v1/embeddings", json={"input": t})) for t in texts[1:]]
                await asyncio.to_thread(wait_for, lambda: server.state.batcher.queued == 32)
                gate.release()
                return [await first, *await asyncio.gather(*rest)]

        responses = asyncio.run(main())
        metrics = httpx.get(f"{server.url}/metrics").text
    assert [len(b) for b in gate.batches] == [1, 31]
    got = np.array([r.json()["data"][0]["embedding"] for r in responses])
    np.testing.assert_allclose(got, reference.encode(texts), **TOL)
    assert "anglekit_batch_size_count 2.0" in metrics and "anglekit_batch_size_sum 32.0" in metrics


# ------------------------------------------------------------------ models, health, metrics


def test_models_lists_the_served_model(server: Running, reference: Any) -> None:
    models = sdk(server).models.list()
    assert [m.id for m in models.data] == ["tiny"]
    raw = httpx.get(f"{server.url}/v1/models").json()
    assert raw["object"] == "list"
    assert raw["data"][0]["dimensions"] == reference.dim and raw["data"][0]["max_input_tokens"] == reference.config.max_length


def test_health_and_metrics(server: Running, client: httpx.Client) -> None:
    assert client.get("/health").json() == {"status": "ready"}
    assert client.post("/v1/embeddings", json={"input": ["a b c", "d"]}).status_code == 200
    assert client.post("/v1/embeddings", json={"input": []}).status_code == 400
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    for name in (
        'anglekit_requests_total{route="/v1/embeddings",status="200"}',
        'anglekit_requests_total{route="/v1/embeddings",status="400"}',
        'anglekit_errors_total{code="invalid_request"}',
        "anglekit_queue_texts 0.0",
        "anglekit_queue_requests 0.0",
        "anglekit_batch_size_bucket",
        "anglekit_batch_tokens_bucket",
        'anglekit_request_duration_seconds_bucket{le="0.005",route="/v1/embeddings"}',
        "anglekit_queue_wait_seconds_bucket",
        "anglekit_batch_duration_seconds_bucket",
        "anglekit_texts_total",
        "anglekit_tokens_total",
    ):
        assert name in text, name
