"""``input_type`` as real clients send it (Voyage/OpenAI-compatible, NVIDIA NIM, Cohere, Jina):
every value maps onto the model's role, else its general prompt exactly as ``encode_query`` /
``encode_document`` do; the response says which prompt it applied; ``/v1/info`` lists the mapping;
bad values are 400s naming the accepted ones. Checked with the real openai SDK and raw bodies."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from serving import Running, error_of, sentences, start_server

openai = pytest.importorskip("openai")

TOL = {"rtol": 1e-5, "atol": 1e-5}
GENERAL = "general: {text}"
ROLED = {"query": "query: ", "passage": "passage: ", "clustering": "cluster: "}
"""No ``document`` (``passage`` stands for it, as in sentence-transformers), no ``classification``."""

# Written out by hand (not computed by the code under test): input_type -> the prompt it applies.
ROLED_MAP = {
    "query": "query", "document": "passage", "passage": "passage", "search_query": "query", "search_document": "passage",
    "classification": None, "clustering": "clustering", "retrieval.query": "query", "retrieval.passage": "passage",
}  # fmt: skip
PLAIN_MAP = dict.fromkeys(ROLED_MAP)
QUERY_SIDE = ("query", "search_query", "retrieval.query")
DOCUMENT_SIDE = ("document", "passage", "search_document", "retrieval.passage")


@pytest.fixture(scope="module")
def models(tiny_bert_dir: Path) -> dict[str, Any]:
    """The references: Embedders of their own, with the same prompts as the served models."""
    from anglekit.model.embedder import Embedder

    def load(**options: Any) -> Any:
        return Embedder.from_pretrained(tiny_bert_dir, device="cpu", **options)

    return {"roled": load(prompt=GENERAL, prompts=ROLED), "plain": load(prompt=GENERAL), "bare": load()}


@pytest.fixture(scope="module")
def servers(tiny_backend: Callable[..., Any]) -> Iterator[dict[str, Running]]:
    """A model with role prompts (and a general one) and a model with a general prompt only."""
    with start_server(lambda: tiny_backend(prompt=GENERAL, prompts=ROLED)) as roled, start_server(lambda: tiny_backend(prompt=GENERAL)) as plain:
        yield {"roled": roled, "plain": plain}


def _sdk(server: Running) -> Any:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)


def _reference(model: Any, input_type: str, texts: list[str]) -> np.ndarray:
    """What the model's own methods give for ``input_type``: encode_query / encode_document for the
    two sides, encode with the role of that name (else the general prompt) for Cohere's other tasks."""
    if input_type in QUERY_SIDE:
        return model.encode_query(texts)
    if input_type in DOCUMENT_SIDE:
        return model.encode_document(texts)
    return model.encode(texts, role=input_type if model.config.has_role(input_type) else None)


def test_the_mapping_agrees_with_the_models_own_fallback(models: dict[str, Any]) -> None:
    """The hand-written tables above are those of role_if_present (what encode_query / encode_document use)."""
    for name, table in [("roled", ROLED_MAP), ("plain", PLAIN_MAP)]:
        config = models[name].config
        for input_type, prompt in table.items():
            side = "query" if input_type in QUERY_SIDE else "document" if input_type in DOCUMENT_SIDE else input_type
            assert config.role_if_present(side) == prompt, (name, input_type)


@pytest.mark.parametrize("name", ["roled", "plain"])
def test_the_openai_sdk_sends_every_vocabulary(servers: dict[str, Running], models: dict[str, Any], name: str) -> None:
    texts = sentences(4, seed=21)
    client, model = _sdk(servers[name]), models[name]
    table = ROLED_MAP if name == "roled" else PLAIN_MAP
    for input_type, prompt in table.items():
        raw = client.embeddings.with_raw_response.create(input=texts, model="tiny", extra_body={"input_type": input_type})
        parsed = raw.parse()  # the SDK still parses the response with its extra field
        got = np.array([d.embedding for d in parsed.data], dtype=np.float32)
        np.testing.assert_allclose(got, _reference(model, input_type, texts), **TOL, err_msg=input_type)
        assert parsed.model_extra["prompt_name"] == prompt, input_type
        assert raw.headers["X-Anglekit-Prompt"] == ("general" if prompt is None else "named"), input_type
        assert raw.headers.get("X-Anglekit-Prompt-Name") == prompt, input_type


def test_the_fallback_is_the_general_prompt_not_none(models: dict[str, Any]) -> None:
    """The references above can tell the prompts apart (the tests can fail): the general prompt is
    applied, not dropped, and the roles differ from it and from each other."""
    texts = sentences(4, seed=22)
    roled, plain, bare = models["roled"], models["plain"], models["bare"]
    general = plain.encode(texts)
    np.testing.assert_allclose(general, bare.encode([GENERAL.format(text=t) for t in texts]), **TOL)
    np.testing.assert_allclose(plain.encode_query(texts), general, **TOL)
    assert not np.allclose(general, bare.encode(texts), atol=1e-3)
    picked = [roled.encode(texts, role=r) for r in ("query", "passage", "clustering")] + [roled.encode(texts)]
    for i in range(len(picked)):
        for j in range(i):
            assert not np.allclose(picked[i], picked[j], atol=1e-3), (i, j)


@pytest.mark.parametrize("input_type", list(ROLED_MAP))
def test_raw_bodies_of_each_vocabulary(servers: dict[str, Running], models: dict[str, Any], input_type: str) -> None:
    texts = sentences(3, seed=23)
    for name, table in [("roled", ROLED_MAP), ("plain", PLAIN_MAP)]:
        for encoding in ("float", "base64"):
            body = {"input": texts, "model": "tiny", "input_type": input_type, "encoding_format": encoding}
            response = httpx.post(f"{servers[name].url}/v1/embeddings", json=body, timeout=60)
            assert response.status_code == 200, response.text
            data = response.json()
            rows = [d["embedding"] for d in data["data"]]
            got = np.array(rows if encoding == "float" else [np.frombuffer(base64.b64decode(r), "<f4") for r in rows], dtype=np.float32)
            np.testing.assert_allclose(got, _reference(models[name], input_type, texts), **TOL, err_msg=f"{name} {input_type}")
            assert data["prompt_name"] == table[input_type]
            assert response.headers["X-Anglekit-Prompt"] == ("general" if table[input_type] is None else "named")


def test_info_lists_each_input_type_and_its_prompt(servers: dict[str, Running]) -> None:
    for name, table in [("roled", ROLED_MAP), ("plain", PLAIN_MAP)]:
        info = httpx.get(f"{servers[name].url}/v1/info", timeout=60).json()
        assert info["input_types"] == table, name
        assert list(info["input_types"]) == list(ROLED_MAP)  # the documented order


def test_prompt_name_stays_strict_and_must_agree_with_input_type(servers: dict[str, Running], models: dict[str, Any]) -> None:
    texts = sentences(2, seed=24)
    with httpx.Client(base_url=servers["roled"].url, timeout=60) as client:
        # Agreeing: passage (the document side) and the prompt it maps to.
        ok = client.post("/v1/embeddings", json={"input": texts, "input_type": "passage", "prompt_name": "passage"})
        assert ok.status_code == 200, ok.text
        np.testing.assert_allclose(np.array([d["embedding"] for d in ok.json()["data"]]), models["roled"].encode_document(texts), **TOL)
        for body, message in [
            ({"prompt_name": "document"}, "prompt_name 'document': the model has no prompt of that name; its prompts: query, passage, clustering"),
            ({"input_type": "classification", "prompt_name": "clustering"}, "input_type 'classification' (the general prompt) and prompt_name 'clustering' disagree"),
            ({"input_type": "document", "prompt_name": "query"}, "input_type 'document' (the model's prompt 'passage') and prompt_name 'query' disagree"),
        ]:  # fmt: skip
            response = client.post("/v1/embeddings", json={"input": texts, **body})
            assert response.status_code == 400, response.text
            assert message in error_of(response)["message"], response.text
    with httpx.Client(base_url=servers["plain"].url, timeout=60) as client:
        response = client.post("/v1/embeddings", json={"input": "a", "prompt_name": "query"})
        assert response.status_code == 400 and error_of(response)["message"].endswith("its prompts: none"), response.text


ACCEPTED = "one of 'query', 'document', 'passage', 'search_query', 'search_document', 'classification', 'clustering', 'retrieval.query', 'retrieval.passage'"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (1, "must be a string, " + ACCEPTED + "; got a number"),
        (["query"], "must be a string, " + ACCEPTED + "; got an array"),
        (True, "must be a string, " + ACCEPTED + "; got a boolean"),
        ({"query": 1}, "must be a string, " + ACCEPTED + "; got an object"),
        ("", "must be " + ACCEPTED + "; got an empty string"),
        ("image", "must be " + ACCEPTED + "; got 'image'"),
        ("Query", "got 'Query' (did you mean 'query'?)"),
        ("passage ", "got 'passage ' (did you mean 'passage'?)"),
        ("retrieval.document", "got 'retrieval.document'"),
        ("x" * 100_000, "got 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... (100000 characters)"),
    ],
)
def test_bad_input_types_are_400s_naming_the_accepted_values(servers: dict[str, Running], value: Any, says: str) -> None:
    for name in ("roled", "plain"):
        with pytest.raises(openai.BadRequestError) as raised:
            _sdk(servers[name]).embeddings.create(input=["a"], model="tiny", extra_body={"input_type": value})
        error = raised.value.body
        assert raised.value.status_code == 400 and error["param"] == "input_type", error
        assert error["message"].endswith(says), error
        assert error["message"].startswith("input_type must be") and len(error["message"]) < 400, error


def test_oversized_names_are_cut_in_messages(servers: dict[str, Running]) -> None:
    with httpx.Client(base_url=servers["roled"].url, timeout=60) as client:
        for field in ("prompt_name", "encoding_format"):
            response = client.post("/v1/embeddings", json={"input": "a", field: "y" * 200_000})
            assert response.status_code == 400, response.text
            error = error_of(response)
            assert error["param"] == field and "(200000 characters)" in error["message"] and len(error["message"]) < 400, error
        response = client.post("/embed", json={"inputs": "a", "role": "z" * 5_000})
        assert response.status_code == 400 and "(5000 characters)" in error_of(response)["message"], response.text


def test_null_input_type_is_no_input_type(servers: dict[str, Running], models: dict[str, Any]) -> None:
    texts = sentences(2, seed=25)
    response = httpx.post(f"{servers['roled'].url}/v1/embeddings", json={"input": texts, "input_type": None}, timeout=60)
    assert response.status_code == 200 and response.json()["prompt_name"] is None, response.text
    np.testing.assert_allclose(np.array([d["embedding"] for d in response.json()["data"]]), models["roled"].encode(texts), **TOL)


def test_native_and_search_routes_say_their_prompt(
    servers: dict[str, Running], models: dict[str, Any], tmp_path: Path, tiny_backend: Callable[..., Any]
) -> None:
    """/embed names the role it applied; /v1/search embeds queries as encode_query does (here the
    general prompt: the model has no query role) and says so."""
    from anglekit.index.store import VectorIndex

    texts = sentences(3, seed=26)
    embedded = httpx.post(f"{servers['roled'].url}/embed", json={"inputs": texts, "role": "clustering"}, timeout=60)
    assert embedded.status_code == 200 and embedded.headers["X-Anglekit-Prompt-Name"] == "clustering", embedded.text
    general = httpx.post(f"{servers['roled'].url}/embed", json={"inputs": texts}, timeout=60)
    assert general.headers["X-Anglekit-Prompt"] == "general" and "X-Anglekit-Prompt-Name" not in general.headers
    plain = models["plain"]
    docs = sentences(12, seed=27)
    VectorIndex.build(plain, [f"d{i}" for i in range(len(docs))], docs, name="p").save(tmp_path / "idx")
    scores = plain.encode_query(texts, normalize=True) @ plain.encode_document(docs, normalize=True).T
    with start_server(lambda: tiny_backend(prompt=GENERAL), index=(f"p={tmp_path / 'idx'}",)) as running:
        response = httpx.post(f"{running.url}/v1/search", json={"query": texts, "k": 3}, timeout=60)
    assert response.status_code == 200, response.text
    assert response.json()["prompt_name"] is None and response.headers["X-Anglekit-Prompt"] == "general"
    for row, query_scores in zip(response.json()["data"], scores, strict=True):
        np.testing.assert_allclose([hit["score"] for hit in row["results"]], np.sort(query_scores)[::-1][:3], atol=1e-4)


def test_a_non_ascii_prompt_name_travels_percent_encoded(tiny_backend: Callable[..., Any], models: dict[str, Any]) -> None:
    """Header values are latin-1 at best: a prompt name outside ASCII is percent-encoded UTF-8 there, as is in the body."""
    from urllib.parse import unquote

    name = "запрос café"
    texts = sentences(2, seed=28)
    with start_server(lambda: tiny_backend(prompts={name: "q: "})) as running:
        response = httpx.post(f"{running.url}/v1/embeddings", json={"input": texts, "prompt_name": name}, timeout=60)
    assert response.status_code == 200, response.text
    assert response.json()["prompt_name"] == name and response.headers["X-Anglekit-Prompt"] == "named"
    encoded = response.headers["X-Anglekit-Prompt-Name"]
    assert encoded.isascii() and unquote(encoded) == name
    expected = models["bare"].encode([f"q: {t}" for t in texts])
    np.testing.assert_allclose(np.array([d["embedding"] for d in response.json()["data"]]), expected, **TOL)
