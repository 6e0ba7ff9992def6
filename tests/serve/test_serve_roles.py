"""Roles over HTTP: ``/v1/embeddings`` takes ``input_type`` and ``prompt_name`` (through the real
openai SDK's ``extra_body``), ``/embed`` any named prompt, ``/v1/search`` embeds queries with the
query prompt; unknown or disagreeing roles are 400s naming the model's prompts. Every vocabulary
of ``input_type`` and the general-prompt fallback: test_serve_input_types.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from anglekit.errors import ConfigError

from serving import Running, error_of, sentences, start_server

openai = pytest.importorskip("openai")

TOL = {"rtol": 1e-5, "atol": 1e-5}
PROMPTS = {"query": "query: ", "document": "passage: ", "classification": "topic of {text} is"}


@pytest.fixture(scope="module")
def prompted(tiny_bert_dir: Path) -> Any:
    from anglekit.model.embedder import Embedder

    return Embedder.from_pretrained(tiny_bert_dir, device="cpu", prompts=PROMPTS)


@pytest.fixture(scope="module")
def roles_server(tiny_backend: Callable[..., Any]) -> Iterator[Running]:
    with start_server(lambda: tiny_backend(prompts=PROMPTS)) as running:
        yield running


def _client(server: Running) -> Any:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)


def _vectors(response: Any) -> np.ndarray:
    return np.array([d.embedding for d in response.data], dtype=np.float32)


def test_input_type_and_prompt_name_pick_the_prompt(roles_server: Running, prompted: Any) -> None:
    texts = sentences(5, seed=11)
    client = _client(roles_server)
    for body, role in [({"input_type": "query"}, "query"), ({"input_type": "document"}, "document"), ({"prompt_name": "classification"}, "classification"),
                       ({"prompt_name": "query", "input_type": "query"}, "query"), ({}, None)]:  # fmt: skip
        got = _vectors(client.embeddings.create(input=texts, model="tiny", encoding_format="float", extra_body=body))
        np.testing.assert_allclose(got, prompted.encode(texts, role=role), **TOL, err_msg=str(body))
    # The reference applies the prompts literally (the test can fail): query differs from document and from none.
    plain = [f"passage: {t}" for t in texts]
    np.testing.assert_allclose(prompted.encode(texts, role="document"), prompted.encode(plain), **TOL)
    assert not np.allclose(prompted.encode(texts, role="query"), prompted.encode(texts, role="document"), atol=1e-3)


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        (
            {"input_type": "query", "prompt_name": "document"},
            "prompt_name",
            "input_type 'query' (the model's prompt 'query') and prompt_name 'document' disagree",
        ),
        ({"prompt_name": "search"}, "prompt_name", "prompt_name 'search': the model has no prompt of that name; its prompts: query, document, classification"),
        ({"input_type": "image"}, "input_type", "input_type must be one of 'query', 'document', 'passage', 'search_query', "),
        ({"input_type": 1}, "input_type", "input_type must be a string, one of 'query', 'document', "),
        (
            {"input_type": "clustering", "prompt_name": "query"},
            "prompt_name",
            "input_type 'clustering' (the general prompt) and prompt_name 'query' disagree",
        ),
        ({"prompt_name": ["query"]}, "prompt_name", "prompt_name must be a string"),
    ],
)
def test_bad_roles_are_400s_naming_the_prompts(roles_server: Running, body: dict[str, Any], param: str, message: str) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        _client(roles_server).embeddings.create(input=["a"], model="tiny", extra_body=body)
    error = raised.value.body
    assert raised.value.status_code == 400 and error["param"] == param and message in error["message"], error


def test_a_prompt_name_or_role_on_a_model_without_prompts_names_none(server: Running) -> None:
    """prompt_name and role stay strict (input_type falls back to the general prompt: test_serve_input_types)."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for route, body, param in [("/v1/embeddings", {"input": "a", "prompt_name": "query"}, "prompt_name"),
                                   ("/embed", {"inputs": "a", "role": "document"}, "role")]:  # fmt: skip
            response = client.post(route, json=body)
            assert response.status_code == 400, response.text
            error = error_of(response)
            assert error["param"] == param and error["message"].endswith("its prompts: none"), error
        assert client.get("/health").status_code == 200  # still up


def test_embed_route_takes_any_named_prompt(roles_server: Running, prompted: Any) -> None:
    texts = sentences(3, seed=12)
    with httpx.Client(base_url=roles_server.url, timeout=60) as client:
        got = client.post("/embed", json={"inputs": texts, "role": "classification"})
        assert got.status_code == 200, got.text
        np.testing.assert_allclose(np.array(got.json()), prompted.encode(texts, role="classification"), **TOL)


def test_search_embeds_queries_with_the_query_prompt(tmp_path: Path) -> None:
    """A real model (all-MiniLM-L6-v2) so that the prompts move the scores well beyond rounding."""
    from anglekit.index.store import VectorIndex
    from anglekit.model.embedder import Embedder
    from anglekit.model.offline import minilm_dir
    from anglekit.serve.backends import load_backend

    try:
        source = str(minilm_dir())
    except ConfigError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 package not installed: {exc}")
    prompts = {"query": "search query: ", "document": "search document: "}
    model = Embedder.from_pretrained(source, device="cpu", prompts=prompts)
    docs, queries = sentences(20, seed=13), ["a man plays the guitar", "the market fell"]
    VectorIndex.build(model, [f"d{i}" for i in range(len(docs))], docs, name="prompted").save(tmp_path / "idx")
    # Brute force: documents with the document prompt, queries with the query prompt.
    doc_vectors = model.encode(docs, normalize=True, role="document")
    scores = model.encode(queries, normalize=True, role="query") @ doc_vectors.T
    unprompted = model.encode(queries, normalize=True) @ doc_vectors.T
    assert np.abs(scores - unprompted).max() > 1e-2  # the query prompt matters (the test can fail)
    with start_server(lambda: load_backend("torch", source, device="cpu", prompts=prompts), index=(f"idx={tmp_path / 'idx'}",)) as running:
        assert running.state.status == "ready", running.state.error
        with httpx.Client(base_url=running.url, timeout=60) as client:
            response = client.post("/v1/search", json={"query": queries, "k": 3})
    assert response.status_code == 200, response.text
    assert response.json()["prompt_name"] == "query" and response.headers["X-Anglekit-Prompt-Name"] == "query"
    for row, query_scores in zip(response.json()["data"], scores, strict=True):
        ids = [hit["id"] for hit in row["results"]]
        np.testing.assert_allclose([hit["score"] for hit in row["results"]], [query_scores[int(i[1:])] for i in ids], atol=1e-4)
        np.testing.assert_allclose([hit["score"] for hit in row["results"]], np.sort(query_scores)[::-1][:3], atol=1e-4)


def test_models_and_info_list_the_prompt_names(roles_server: Running, tiny_backend: Callable[..., Any]) -> None:
    """A client finds which input_type / prompt_name values the model takes before sending one."""
    models = openai.OpenAI(base_url=f"{roles_server.url}/v1", api_key="unused", max_retries=0).models.list()
    assert sorted(models.data[0].model_extra["prompts"]) == sorted(PROMPTS)
    assert sorted(httpx.get(f"{roles_server.url}/v1/info").json()["prompts"]) == sorted(PROMPTS)
    with start_server(lambda: tiny_backend()) as plain:
        assert httpx.get(f"{plain.url}/v1/models").json()["data"][0]["prompts"] == []
        assert httpx.get(f"{plain.url}/v1/info").json()["prompts"] == []
