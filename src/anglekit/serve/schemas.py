"""Requests and responses of the routes: checked by hand, so that every error names its field,
and rendered with orjson (vectors straight from numpy)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import numpy as np
import orjson

from anglekit.io.text import is_blank
from anglekit.serve.backends import Role
from anglekit.serve.clients import (
    ENCODING_FORMATS,
    FOREIGN_FIELDS,
    INPUT_TYPES,
    TASKS,
    Encoding,
    check_late_chunking,
    check_prompt_field,
    pick_dimensions,
    pick_encoding,
    pick_truncation,
    prompts_of,
)
from anglekit.serve.errors import InvalidRequest
from anglekit.serve.fields import kind_of as _kind
from anglekit.serve.fields import optional as _optional
from anglekit.serve.fields import shown

MAX_K = 10_000
"""Results per search query at most."""


def parse_json(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object, else :class:`InvalidRequest`."""
    if not body.strip():
        raise InvalidRequest("the request body is empty; send a JSON object")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidRequest(f"the request body must be a JSON object, got {_kind(data)}")
    return data


def _check_keys(data: dict[str, Any], known: tuple[str, ...]) -> None:
    unknown = [k for k in data if k not in known]
    if unknown:
        name = unknown[0]
        hint = f" ({FOREIGN_FIELDS[name]})" if name in FOREIGN_FIELDS and name not in known else ""
        raise InvalidRequest(f"unknown field {name!r}{hint}; known fields: {', '.join(known)}", param=name)


def _has_none(roles: Sequence[str]) -> str:
    return f"its prompts: {', '.join(roles) or 'none'}"


def _prompt(role: str | None) -> str:
    return "the general prompt" if role is None else f"the model's prompt {role!r}"


def check_role(value: Any, name: str, roles: Sequence[str]) -> str | None:
    """``value`` (the field ``name``) when it names one of the model's prompts ``roles``; a 400 naming them otherwise."""
    value = _optional({name: value}, name, str, f"a string (the name of one of the model's prompts; {_has_none(roles)})")
    if value is not None and value not in roles:
        raise InvalidRequest(f"{name} {shown(value)}: the model has no prompt of that name; {_has_none(roles)}", param=name)
    return value


def input_type_prompts(roles: Sequence[str]) -> dict[str, str | None]:
    """Each accepted ``input_type`` -> the prompt it applies on a model with the prompts ``roles``
    (None: the general prompt, where the model lacks the role; as :func:`present_role`)."""
    return prompts_of(INPUT_TYPES, roles)


def _shown_field(data: dict[str, Any], name: str) -> str:
    return f"{name} {data[name]!r}"


def pick_role(data: dict[str, Any], roles: Sequence[str]) -> str | None:
    """The prompt a ``/v1/embeddings`` request asks for: ``input_type`` (any value of
    :data:`INPUT_TYPES`: the model's prompt for that role, else its general prompt), Jina's ``task``
    (:data:`TASKS`, the same) and/or ``prompt_name`` (one of its prompts, strictly, as
    text-embeddings-inference names the field); any of them given must apply the same prompt, else
    a 400 naming two that disagree. None: the model's general prompt."""
    given: list[tuple[str, str | None]] = []
    for name, table in (("input_type", INPUT_TYPES), ("task", TASKS)):
        typed, prompt = check_prompt_field(data, name, table, roles)
        if typed:
            given.append((f"{_shown_field(data, name)} ({_prompt(prompt)})", prompt))
    prompt_name = check_role(data.get("prompt_name"), "prompt_name", roles)
    if prompt_name is not None:
        given.append((f"prompt_name {prompt_name!r}", prompt_name))
    for said, prompt in given[1:]:
        if prompt != given[0][1]:
            param = "prompt_name" if said.startswith("prompt_name") else "task"
            raise InvalidRequest(f"{given[0][0]} and {said} disagree; give one of them", param=param)
    return given[0][1] if given else None


def parse_texts(value: Any, name: str, max_inputs: int) -> list[str]:
    """A string or a non-empty array of non-empty strings, at most ``max_inputs`` of them."""
    if value is None:
        raise InvalidRequest(f"{name} is required: a string or an array of strings", param=name)
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list):
        raise InvalidRequest(f"{name} must be a string or an array of strings, got {_kind(value)}", param=name)
    if not texts:
        raise InvalidRequest(f"{name} is an empty array; send at least one string", param=name)
    if len(texts) > max_inputs:
        raise InvalidRequest(f"{name} has {len(texts)} items, more than the limit of {max_inputs} per request (--max-client-batch)", param=name)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            hint = "; token ids are not accepted, send the texts" if isinstance(text, (int, list)) and not isinstance(text, bool) else ""
            raise InvalidRequest(f"{name}[{i}] must be a string, got {_kind(text)}{hint}", param=name)
        if not text:
            where = name if isinstance(value, str) else f"{name}[{i}]"
            raise InvalidRequest(f"{where} is an empty string", param=name)
        if is_blank(text):
            where = name if isinstance(value, str) else f"{name}[{i}]"
            raise InvalidRequest(f"{where} is blank (only whitespace or invisible characters); send some text", param=name)
    return texts


@dataclass
class EmbeddingsRequest:
    """``POST /v1/embeddings`` (OpenAI), with fields of anglekit's: ``layer`` (a model trained
    with ESE embeds from that layer, the layers after it not run), ``index`` (the served int8
    index whose scale calibrates ``encoding_format`` int8/uint8), the prompt to embed with
    (``input_type`` or ``prompt_name``, see :func:`pick_role`), and the fields of other APIs'
    clients (:mod:`anglekit.serve.clients`): ``task``, ``truncate`` / ``truncation``,
    ``output_dimension``, ``output_dtype`` / ``embedding_type``, ``normalized``, ``late_chunking``."""

    texts: list[str]
    model: str | None
    encoding: Encoding
    dimensions: int | None
    user: str | None
    layer: int | None = None
    index: str | None = None
    role: Role | None = None
    truncation: str | None = None
    """``END``, ``START`` or ``NONE`` (:data:`~anglekit.serve.clients.TRUNCATIONS`); None: the server's setting."""
    normalize: bool | None = None
    """Jina's ``normalized``; None: the model's own setting (quantized outputs are always normalised)."""

    FIELDS = (
        "input", "model", "encoding_format", "dimensions", "user", "layer", "index", "input_type", "prompt_name",
        "task", "truncate", "truncation", "output_dimension", "output_dtype", "embedding_type", "normalized", "late_chunking",
    )  # fmt: skip

    @classmethod
    def parse(cls, data: dict[str, Any], *, max_inputs: int, dim: int, roles: Sequence[str] = ()) -> EmbeddingsRequest:
        _check_keys(data, cls.FIELDS)
        model = _optional(data, "model", str, "a string")
        encoding = pick_encoding(data)
        dimensions = pick_dimensions(data, dim)
        user = _optional(data, "user", str, "a string")
        layer = _optional(data, "layer", int, "an integer")
        index = _optional(data, "index", str, "a string")
        if index is not None and encoding.dtype not in ("int8", "uint8"):
            raise InvalidRequest(f"index calibrates the int8 and uint8 encoding formats only; the request asks for {encoding.dtype}", param="index")
        normalize = _optional(data, "normalized", bool, "true or false")
        if normalize is False and encoding.quantized:
            raise InvalidRequest(f"normalized is false, but {encoding.dtype} codes are always those of the L2-normalised vectors", param="normalized")
        check_late_chunking(data)
        truncation = pick_truncation(data)
        role = pick_role(data, roles)
        texts = parse_texts(data.get("input"), "input", max_inputs)
        return cls(texts, model, encoding, dimensions, user, layer, index, role, truncation, normalize)


@dataclass
class SearchRequest:
    """``POST /v1/search`` (anglekit's): ``index`` (optional when one is served), ``query`` (a string
    or an array of them), ``k`` (default 10), ``model``."""

    index: str | None
    queries: list[str]
    single: bool
    k: int
    model: str | None

    FIELDS = ("index", "query", "k", "model")

    @classmethod
    def parse(cls, data: dict[str, Any], *, max_inputs: int) -> SearchRequest:
        _check_keys(data, cls.FIELDS)
        index = _optional(data, "index", str, "a string")
        model = _optional(data, "model", str, "a string")
        k = _optional(data, "k", int, "an integer")
        k = 10 if k is None else k
        if not 1 <= k <= MAX_K:
            raise InvalidRequest(f"k must be between 1 and {MAX_K}, got {k}", param="k")
        query = data.get("query")
        return cls(index, parse_texts(query, "query", max_inputs), isinstance(query, str), k, model)


@dataclass
class EmbedRequest:
    """``POST /embed`` (native)."""

    texts: list[str]
    normalize: bool | None
    role: Role | None

    FIELDS = ("inputs", "normalize", "role")

    @classmethod
    def parse(cls, data: dict[str, Any], *, max_inputs: int, roles: Sequence[str] = ()) -> EmbedRequest:
        _check_keys(data, cls.FIELDS)
        normalize = _optional(data, "normalize", bool, "true or false")
        role = check_role(data.get("role"), "role", roles)
        texts = parse_texts(data.get("inputs"), "inputs", max_inputs)
        return cls(texts, normalize, role)


def finish(vectors: np.ndarray, *, normalize: bool, dimensions: int | None = None) -> np.ndarray:
    """Keep the first ``dimensions`` coordinates, then L2-normalise when ``normalize`` (as
    :meth:`~anglekit.model.embedder.Embedder.encode` does: ``v / max(|v|, 1e-12)``)."""
    if dimensions is not None:
        vectors = vectors[:, :dimensions]
    if normalize:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.maximum(norms, np.float32(1e-12))
    return np.ascontiguousarray(vectors, dtype=np.float32)


def prompt_headers(role: str | None) -> dict[str, str]:
    """The headers that say which prompt a response's vectors were embedded with:
    ``X-Anglekit-Prompt`` ``general`` or ``named``, and for a named one ``X-Anglekit-Prompt-Name``
    (percent-encoded UTF-8, as a name need not be ASCII)."""
    if role is None:
        return {"X-Anglekit-Prompt": "general"}
    return {"X-Anglekit-Prompt": "named", "X-Anglekit-Prompt-Name": quote(role, safe="")}


def embeddings_response(
    vectors: np.ndarray, *, base64_rows: bool, model: str, tokens: int, role: str | None = None, quantization: dict[str, Any] | None = None
) -> bytes:
    """The OpenAI embeddings response; ``base64_rows``: each row as the base64 of its bytes (the
    little-endian float32 of a vector, the int8/uint8 of codes, as Voyage's ``base64``); quantized
    codes (``vectors`` holding them) come with their ``quantization`` object. ``prompt_name`` (a
    field OpenAI clients ignore) is the prompt applied, null for the general one."""
    if base64_rows:
        little = vectors.astype("<f4") if vectors.dtype.kind == "f" else vectors
        rows: list[Any] = [base64.b64encode(row.tobytes()).decode("ascii") for row in little]
    else:
        rows = list(vectors)
    data = [{"object": "embedding", "embedding": row, "index": i} for i, row in enumerate(rows)]
    body: dict[str, Any] = {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}, "prompt_name": role}
    if quantization is not None:
        body["quantization"] = quantization
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


def search_response(queries: list[str], results: list[list[Any]], *, index: str, model: str, tokens: int, role: str | None = None) -> bytes:
    """The search response: for each query, its results as ``anglekit search --json`` prints them
    (rank, id, score, text); ``prompt_name``: the queries' prompt (null: the general one)."""
    data = [
        {"object": "search_result", "index": i, "query": q, "results": [{"rank": r + 1, "id": h.id, "score": h.score, "text": h.text}
                                                                        for r, h in enumerate(hits)]}
        for i, (q, hits) in enumerate(zip(queries, results, strict=True))
    ]  # fmt: skip
    body = {"object": "list", "index": index, "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}, "prompt_name": role}
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)


__all__ = [
    "ENCODING_FORMATS", "INPUT_TYPES", "MAX_K", "TASKS", "EmbedRequest", "EmbeddingsRequest", "SearchRequest", "dumps", "embeddings_response", "finish",
    "input_type_prompts", "parse_json", "parse_texts", "prompt_headers", "search_response",
]  # fmt: skip
