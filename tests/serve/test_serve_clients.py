"""The fields other embedding APIs' clients send to ``/v1/embeddings`` (NVIDIA NIM, Voyage, Jina),
as their SDKs send them (nulls and defaults included): truncation (END / START / NONE and the
booleans), ``output_dimension``, ``output_dtype``, ``embedding_type``, ``task``, ``normalized``,
``late_chunking``. Vectors are checked against the Embedder's own ``encode`` (its truncation, its
``truncate_dim``), a brute-force search for START's cut, and sentence-transformers'
``quantize_embeddings`` for the binary types; conflicts and wrong types are 400s naming the fields."""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import helpers
from serving import Gate, Running, error_of, sentences, start_server

TOL = {"rtol": 1e-5, "atol": 1e-5}
GENERAL = "general: {text}"
ROLED = {"query": "query: ", "passage": "passage: ", "clustering": "cluster: "}

# Written out by hand: Jina's task -> the prompt it applies (None: the general one) on each model.
ROLED_TASKS = {"retrieval.query": "query", "retrieval.passage": "passage", "text-matching": None, "classification": None, "separation": "clustering"}
PLAIN_TASKS = dict.fromkeys(ROLED_TASKS)


@pytest.fixture(scope="module")
def models(tiny_bert_dir: Path) -> dict[str, Any]:
    """References: Embedders of their own with the served models' prompts."""
    from anglekit.model.embedder import Embedder

    def load(**options: Any) -> Any:
        return Embedder.from_pretrained(tiny_bert_dir, device="cpu", **options)

    return {"roled": load(prompt=GENERAL, prompts=ROLED), "plain": load(prompt=GENERAL), "chunked": load(long_text="chunk-mean")}


@pytest.fixture(scope="module")
def servers(tiny_backend: Callable[..., Any]) -> Iterator[dict[str, Running]]:
    """The model with role prompts (served with --no-auto-truncate too), the one with a general
    prompt only, one that chunks long texts, and one behind a wrapper without ``keep_end``."""
    with (
        start_server(lambda: tiny_backend(prompt=GENERAL, prompts=ROLED)) as roled,
        start_server(lambda: tiny_backend(prompt=GENERAL, prompts=ROLED), auto_truncate=False) as strict,
        start_server(lambda: tiny_backend(prompt=GENERAL)) as plain,
        start_server(lambda: tiny_backend(long_text="chunk-mean")) as chunked,
        start_server(lambda: Gate(tiny_backend())) as wrapped,
    ):
        yield {"roled": roled, "strict": strict, "plain": plain, "chunked": chunked, "wrapped": wrapped}


def _post(server: Running, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/embeddings", json=body, timeout=120)


def _vectors(response: httpx.Response, dtype: str = "<f4") -> np.ndarray:
    assert response.status_code == 200, response.text
    rows = [d["embedding"] for d in response.json()["data"]]
    if rows and isinstance(rows[0], str):
        return np.array([np.frombuffer(base64.b64decode(r), dtype) for r in rows])
    return np.array(rows, dtype=np.float32 if dtype == "<f4" else np.int16)


def _long_text(seed: int, sentences_: int = 60) -> str:
    rng = random.Random(seed)
    return " ".join(helpers.random_sentence(rng, 10, 14) for _ in range(sentences_))


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _start_cut(model: Any, text: str, role: str | None) -> str:
    """Brute force: the end of ``text`` from the first token start after which the whole request
    (prompt, special tokens) fits the model's max length, scanning every token start in order."""
    tokenizer, config = model.tokenizer, model.config
    for start, end in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]:
        if end > start and len(tokenizer(config.format(text[start:], role))["input_ids"]) <= config.max_length:
            return text[start:]
    raise AssertionError("no end of the text fits")


# ---------------------------------------------------------------- NVIDIA NIM: truncate


def test_nim_bodies_truncate_end_start_and_none(servers: dict[str, Running], models: dict[str, Any]) -> None:
    """langchain-nvidia-ai-endpoints' body: input, model, encoding_format, input_type, truncate."""
    model = models["roled"]
    long_text, short = _long_text(1), "a short passage"
    whole = len(model.tokenizer(model.config.format(long_text, "passage"))["input_ids"])
    assert whole > 3 * model.config.max_length  # the cut is real
    body = {"input": [short, long_text], "model": "tiny", "encoding_format": "float", "input_type": "passage"}
    end = _vectors(_post(servers["roled"], {**body, "truncate": "END"}))
    np.testing.assert_allclose(end, model.encode_document([short, long_text]), **TOL)  # the Embedder's own truncation
    tail = _start_cut(model, long_text, "passage")
    assert len(tail) < len(long_text) / 2 and long_text.endswith(tail)
    start = _vectors(_post(servers["roled"], {**body, "truncate": "START"}))
    np.testing.assert_allclose(start, model.encode_document([short, tail]), **TOL)
    assert not np.allclose(start[1], end[1], atol=1e-3)  # START and END keep different parts
    for server in ("roled", "strict"):
        response = _post(servers[server], {**body, "truncate": "NONE"})
        error = error_of(response)
        assert response.status_code == 400 and error["code"] == "context_length_exceeded" and error["param"] == "input", error
        assert f"input[1] has {whole} tokens, more than the model's maximum of {model.config.max_length}" in error["message"], error
        assert "truncate 'NONE' or truncation false" in error["message"], error


def test_the_request_overrides_the_servers_default(servers: dict[str, Running], models: dict[str, Any]) -> None:
    """--no-auto-truncate refuses a long input unless the request asks to cut it (as TEI's truncate)."""
    model, long_text = models["roled"], _long_text(2)
    refused = _post(servers["strict"], {"input": [long_text]})
    assert refused.status_code == 400 and "(the server runs with --no-auto-truncate)" in error_of(refused)["message"], refused.text
    for field, value in [("truncate", "END"), ("truncation", True), ("truncate", True)]:
        got = _vectors(_post(servers["strict"], {"input": [long_text], field: value}))
        np.testing.assert_allclose(got, model.encode([long_text]), **TOL, err_msg=f"{field}={value}")
    got = _vectors(_post(servers["strict"], {"input": [long_text], "truncate": "START"}))
    np.testing.assert_allclose(got, model.encode([_start_cut(model, long_text, None)]), **TOL)


def test_start_keeps_short_inputs_whole_and_counts_the_kept_tokens(servers: dict[str, Running], models: dict[str, Any]) -> None:
    model, texts = models["roled"], sentences(4, seed=3)
    response = _post(servers["roled"], {"input": texts, "input_type": "query", "truncate": "START"})
    np.testing.assert_allclose(_vectors(response), model.encode_query(texts), **TOL)
    long_text = _long_text(4)
    response = _post(servers["roled"], {"input": [long_text], "input_type": "query", "truncate": "START"})
    kept = _start_cut(model, long_text, "query")
    assert response.json()["usage"]["prompt_tokens"] == len(model.tokenizer(model.config.format(kept, "query"))["input_ids"]) <= model.config.max_length


def test_truncation_modes_on_a_model_that_chunks_long_texts(servers: dict[str, Running], models: dict[str, Any]) -> None:
    """No input is too long for a model that pools the windows of a long text: every mode embeds it whole."""
    long_text = _long_text(5)
    reference = models["chunked"].encode([long_text])
    for value in ("NONE", "START", "END"):
        np.testing.assert_allclose(_vectors(_post(servers["chunked"], {"input": [long_text], "truncate": value})), reference, **TOL, err_msg=value)


def test_start_without_a_backend_that_can_keep_the_end_is_a_400(servers: dict[str, Running]) -> None:
    response = _post(servers["wrapped"], {"input": [_long_text(6)], "truncate": "START"})
    assert response.status_code == 400 and error_of(response)["param"] == "truncate", response.text
    assert "truncate START" in error_of(response)["message"]
    assert _post(servers["wrapped"], {"input": ["short"], "truncate": "START"}).status_code == 200


def test_token_starts_fall_back_to_word_starts_without_offsets() -> None:
    from anglekit.serve.backends import _token_starts

    class Slow:
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("return_offset_mapping is not available when using Python tokenizers")

    assert _token_starts(Slow(), "  one two\tthree") == [0, 2, 6, 10]


# ---------------------------------------------------------------- Voyage


def test_voyage_client_body_with_its_nulls_and_base64(servers: dict[str, Running], models: dict[str, Any]) -> None:
    """voyageai.Client.embed sends every argument (None as null) and encoding_format base64 by default."""
    model, texts = models["roled"], sentences(5, seed=7)
    body = {"input": texts, "model": "tiny", "input_type": "document", "truncation": True, "output_dtype": None, "output_dimension": None,
            "encoding_format": "base64"}  # fmt: skip
    np.testing.assert_allclose(_vectors(_post(servers["roled"], body)), model.encode_document(texts), **TOL)
    cut = _vectors(_post(servers["roled"], {**body, "output_dimension": 16}))
    np.testing.assert_allclose(cut, model.encode_document(texts, truncate_dim=16), **TOL)
    same = _vectors(_post(servers["roled"], {**body, "output_dimension": 16, "encoding_format": None, "dimensions": 16}))
    np.testing.assert_allclose(same, cut, **TOL)
    long_text = _long_text(8)
    refused = _post(servers["roled"], {**body, "input": [long_text], "truncation": False})
    assert refused.status_code == 400 and error_of(refused)["code"] == "context_length_exceeded", refused.text


@pytest.mark.parametrize("dtype", ["int8", "uint8", "binary", "ubinary"])
def test_voyage_output_dtypes_are_the_quantized_formats(servers: dict[str, Running], models: dict[str, Any], dtype: str) -> None:
    """output_dtype with Voyage's base64 (the codes' bytes: int8 for int8/binary, uint8 for
    uint8/ubinary, as voyageai decodes them) and as numbers; the same codes as encoding_format."""
    from sentence_transformers.quantization import quantize_embeddings

    model, texts = models["roled"], sentences(4, seed=9)
    unit = _unit(model.encode_query(texts, truncate_dim=24))
    expected = {
        "int8": np.clip(np.round(unit * 127), -127, 127), "uint8": np.clip(np.round(unit * 127), -127, 127) + 128,
        "binary": quantize_embeddings(unit, precision="binary"), "ubinary": quantize_embeddings(unit, precision="ubinary"),
    }[dtype]  # fmt: skip
    body = {"input": texts, "input_type": "query", "output_dimension": 24, "output_dtype": dtype, "encoding_format": "base64", "truncation": True}
    response = _post(servers["roled"], body)
    numpy_type = "i1" if dtype in ("int8", "binary") else "u1"
    codes = _vectors(response, numpy_type).astype(np.int16)
    assert response.json()["quantization"]["encoding_format"] == dtype and response.json()["quantization"]["dimensions"] == 24
    close = np.abs(codes - expected) <= (1 if dtype in ("int8", "uint8") else 0)  # a rounding tie may fall either way
    assert close.mean() > 0.99 and close.all(), (codes, expected)
    as_numbers = _post(servers["roled"], {**body, "encoding_format": None})
    assert _vectors(as_numbers, "int").tolist() == codes.tolist()
    as_format = _post(servers["roled"], {"input": texts, "input_type": "query", "dimensions": 24, "encoding_format": dtype})
    assert _vectors(as_format, "int").tolist() == codes.tolist()


# ---------------------------------------------------------------- Jina


@pytest.mark.parametrize("name", ["roled", "plain"])
def test_jina_tasks_map_like_input_type(servers: dict[str, Running], models: dict[str, Any], name: str) -> None:
    """Jina's body (task, dimensions, late_chunking, embedding_type, normalized, truncate)."""
    model, texts = models[name], sentences(3, seed=10)
    table = ROLED_TASKS if name == "roled" else PLAIN_TASKS
    for task, prompt in table.items():
        body = {"model": "tiny", "input": texts, "task": task, "dimensions": 20, "late_chunking": False, "embedding_type": "float",
                "normalized": True, "truncate": True}  # fmt: skip
        response = _post(servers[name], body)
        np.testing.assert_allclose(_vectors(response), _unit(model.encode(texts, role=prompt, truncate_dim=20)), **TOL, err_msg=task)
        assert response.json()["prompt_name"] == prompt, task


def test_jina_normalized_and_embedding_types(servers: dict[str, Running], models: dict[str, Any]) -> None:
    from sentence_transformers.quantization import quantize_embeddings

    model, texts = models["roled"], sentences(4, seed=11)
    assert not model.config.normalize  # the tiny model's vectors are raw: normalized changes them
    raw = model.encode(texts, role="query")
    body = {"model": "tiny", "input": texts, "task": "retrieval.query"}
    np.testing.assert_allclose(_vectors(_post(servers["roled"], body)), raw, **TOL)
    np.testing.assert_allclose(_vectors(_post(servers["roled"], {**body, "normalized": False})), raw, **TOL)
    np.testing.assert_allclose(_vectors(_post(servers["roled"], {**body, "normalized": True})), _unit(raw), **TOL)
    np.testing.assert_allclose(_vectors(_post(servers["roled"], {**body, "embedding_type": "base64"})), raw, **TOL)
    for kind in ("binary", "ubinary"):
        got = _vectors(_post(servers["roled"], {**body, "embedding_type": kind}), "int")
        assert got.tolist() == quantize_embeddings(raw, precision=kind).astype(np.int16).tolist(), kind
    refused = _post(servers["roled"], {**body, "embedding_type": "int8", "normalized": False})
    assert refused.status_code == 400 and error_of(refused)["param"] == "normalized", refused.text


def test_late_chunking_false_is_accepted_true_is_refused(servers: dict[str, Running]) -> None:
    assert _post(servers["roled"], {"input": ["a", "b"], "late_chunking": False}).status_code == 200
    response = _post(servers["roled"], {"input": ["a", "b"], "late_chunking": True})
    error = error_of(response)
    assert response.status_code == 400 and error["param"] == "late_chunking" and "not supported" in error["message"], error


# ---------------------------------------------------------------- Cohere, conflicts, bad input


def test_cohere_v2_bodies_are_refused_with_a_pointer(servers: dict[str, Running]) -> None:
    body = {"texts": ["a"], "model": "tiny", "input_type": "search_query", "embedding_types": ["float"], "truncate": "END"}
    response = _post(servers["roled"], body)
    error = error_of(response)
    assert response.status_code == 400 and error["param"] == "texts" and "Cohere's /v2/embed" in error["message"], error


@pytest.mark.parametrize(
    ("fields", "param", "says"),
    [
        ({"input_type": "query", "task": "retrieval.passage"}, "task",
         "input_type 'query' (the model's prompt 'query') and task 'retrieval.passage' (the model's prompt 'passage') disagree"),
        ({"task": "separation", "prompt_name": "query"}, "prompt_name", "task 'separation' (the model's prompt 'clustering') and prompt_name 'query' disagree"),
        ({"truncate": "NONE", "truncation": True}, "truncation", "truncate 'NONE' and truncation true disagree"),
        ({"truncate": "START", "truncation": True}, "truncation", "truncate 'START' and truncation true disagree"),
        ({"truncate": True, "truncation": False}, "truncation", "truncate true and truncation false disagree"),
        ({"dimensions": 16, "output_dimension": 8}, "output_dimension", "dimensions 16 and output_dimension 8 disagree"),
        ({"encoding_format": "float", "embedding_type": "binary"}, "embedding_type", "encoding_format 'float' and embedding_type 'binary' disagree"),
        ({"encoding_format": "int8", "output_dtype": "binary"}, "output_dtype", "encoding_format 'int8' and output_dtype 'binary' disagree"),
        ({"embedding_type": "ubinary", "output_dtype": "float"}, "output_dtype", "embedding_type 'ubinary' and output_dtype 'float' disagree"),
    ],
)  # fmt: skip
def test_conflicting_fields_are_400s_naming_both(servers: dict[str, Running], fields: dict[str, Any], param: str, says: str) -> None:
    response = _post(servers["roled"], {"input": ["a"], **fields})
    error = error_of(response)
    assert response.status_code == 400 and error["param"] == param and says in error["message"], error


def test_agreeing_fields_are_accepted(servers: dict[str, Running], models: dict[str, Any]) -> None:
    texts = sentences(2, seed=12)
    body = {"input": texts, "input_type": "search_query", "task": "retrieval.query", "prompt_name": "query", "truncate": "END", "truncation": True,
            "dimensions": 12, "output_dimension": 12, "encoding_format": "float", "embedding_type": "float", "output_dtype": "float"}  # fmt: skip
    np.testing.assert_allclose(_vectors(_post(servers["roled"], body)), models["roled"].encode_query(texts, truncate_dim=12), **TOL)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("truncate", 1, "truncate must be 'NONE', 'START' or 'END' (NVIDIA NIM) or true/false (Jina), got a number"),
        ("truncate", "end", "truncate must be one of 'END', 'START', 'NONE'; got 'end' (did you mean 'END'?)"),
        ("truncate", "", "got an empty string"),
        ("truncation", "yes", "truncation must be true or false, got a string"),
        ("output_dimension", "16", "output_dimension must be an integer, got a string"),
        ("output_dimension", True, "output_dimension must be an integer, got a boolean"),
        ("output_dimension", 0, "output_dimension must be between 1 and the model's dimension 32, got 0"),
        ("output_dimension", 33, "output_dimension must be between 1 and the model's dimension 32, got 33"),
        ("output_dtype", "int4", "output_dtype must be one of 'float', 'int8', 'uint8', 'binary', 'ubinary'; got 'int4'"),
        ("output_dtype", "base64", "got 'base64'"),
        ("embedding_type", ["float"], "embedding_type must be a string, one of 'float', 'base64', 'int8', 'uint8', 'binary', 'ubinary'; got an array"),
        ("task", 3, "task must be a string, one of 'retrieval.query', 'retrieval.passage', 'classification', 'separation', 'text-matching'; got a number"),
        ("task", "code.query", "got 'code.query'"),
        ("task", "Retrieval.Query", "(did you mean 'retrieval.query'?)"),
        ("late_chunking", "no", "late_chunking must be true or false, got a string"),
        ("normalized", "true", "normalized must be true or false, got a string"),
    ],
)
def test_wrong_types_and_values_are_400s_naming_the_field(servers: dict[str, Running], field: str, value: Any, says: str) -> None:
    response = _post(servers["roled"], {"input": ["a"], field: value})
    error = error_of(response)
    assert response.status_code == 400 and error["param"] == field and says in error["message"], error


def test_info_lists_the_client_fields(servers: dict[str, Running]) -> None:
    for name, tasks in [("roled", ROLED_TASKS), ("plain", PLAIN_TASKS)]:
        info = httpx.get(f"{servers[name].url}/v1/info", timeout=60).json()
        fields = info["client_fields"]
        assert fields["task"] == tasks
        assert fields["truncate"] == ["END", "START", "NONE", True, False] and fields["truncation"] == [True, False]
        assert fields["output_dimension"] == [1, info["dimensions"]] and fields["late_chunking"] == [False]
        assert fields["output_dtype"] == ["float", "int8", "uint8", "binary", "ubinary"] and fields["embedding_type"] == info["encoding_formats"]


# ---------------------------------------------------------------- the openai SDK


def test_the_openai_sdk_sends_them_in_extra_body(servers: dict[str, Running], models: dict[str, Any]) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{servers['roled'].url}/v1", api_key="unused", max_retries=0, timeout=120)
    model, long_text, texts = models["roled"], _long_text(13), sentences(2, seed=13)
    # NIM's fields (the SDK asks for base64 float32 by default and decodes it)
    got = client.embeddings.create(input=[*texts, long_text], model="tiny", extra_body={"input_type": "passage", "truncate": "START"})
    expected = model.encode_document([*texts, _start_cut(model, long_text, "passage")])
    np.testing.assert_allclose(np.array([d.embedding for d in got.data], dtype=np.float32), expected, **TOL)
    # Voyage's and Jina's
    got = client.embeddings.create(input=texts, model="tiny", extra_body={"task": "retrieval.query", "output_dimension": 8, "normalized": True})
    np.testing.assert_allclose(np.array([d.embedding for d in got.data], dtype=np.float32), _unit(model.encode_query(texts, truncate_dim=8)), **TOL)
    with pytest.raises(openai.BadRequestError) as raised:
        client.embeddings.create(input=[long_text], model="tiny", extra_body={"truncate": "NONE"})
    assert raised.value.body["code"] == "context_length_exceeded" and "input[0] has" in raised.value.body["message"]
