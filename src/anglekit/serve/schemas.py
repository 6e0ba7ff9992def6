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
from anglekit.model.config import present_role
from anglekit.serve.backends import Role
from anglekit.serve.errors import InvalidRequest
from anglekit.serve.quantized import QUANTIZED_FORMATS

ENCODING_FORMATS = ("float", "base64", *QUANTIZED_FORMATS)
INPUT_TYPES = {
    "query": "query", "document": "document",  # Voyage, most OpenAI-compatible servers
    "passage": "document",  # NVIDIA NIM (with query)
    "search_query": "query", "search_document": "document", "classification": "classification", "clustering": "clustering",  # Cohere
    "retrieval.query": "query", "retrieval.passage": "document",  # Jina
}  # fmt: skip
"""``input_type`` values of ``/v1/embeddings``, as the hosted embedding APIs name the two sides (and
Cohere's other tasks) -> the role each stands for; :func:`input_type_prompts` resolves a role to the
model's prompt, its general prompt where it lacks the role (as ``encode_query`` / ``encode_document``)."""
SHOWN_CHARS = 60
"""A value echoed in an error message is cut to this many characters."""
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


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _check_keys(data: dict[str, Any], known: tuple[str, ...]) -> None:
    unknown = [k for k in data if k not in known]
    if unknown:
        raise InvalidRequest(f"unknown field {unknown[0]!r}; known fields: {', '.join(known)}", param=unknown[0])


def _optional(data: dict[str, Any], name: str, kind: type, what: str) -> Any:
    value = data.get(name)
    if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise InvalidRequest(f"{name} must be {what}, got {_kind(value)}", param=name)
    return value


def _has_none(roles: Sequence[str]) -> str:
    return f"its prompts: {', '.join(roles) or 'none'}"


def shown(value: str) -> str:
    """``repr(value)``, cut to :data:`SHOWN_CHARS` characters (with the full length) when longer."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}... ({len(value)} characters)"


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
    return {input_type: present_role(role, roles) for input_type, role in INPUT_TYPES.items()}


def _accepted_input_types() -> str:
    return ", ".join(repr(t) for t in INPUT_TYPES)


def check_input_type(value: Any, roles: Sequence[str]) -> tuple[bool, str | None]:
    """(whether ``input_type`` was given, the prompt it applies: None for the general one); a 400
    naming the accepted values for anything but one of them (or null, as if not given)."""
    if value is None:
        return False, None
    if not isinstance(value, str):
        raise InvalidRequest(f"input_type must be a string, one of {_accepted_input_types()}; got {_kind(value)}", param="input_type")
    if value not in INPUT_TYPES:
        got = "an empty string" if not value else shown(value)
        hint = f" (did you mean {value.strip().lower()!r}?)" if value.strip().lower() in INPUT_TYPES else ""
        raise InvalidRequest(f"input_type must be one of {_accepted_input_types()}; got {got}{hint}", param="input_type")
    return True, present_role(INPUT_TYPES[value], roles)


def pick_role(data: dict[str, Any], roles: Sequence[str]) -> str | None:
    """The prompt a ``/v1/embeddings`` request asks for: ``input_type`` (any value of
    :data:`INPUT_TYPES`: the model's prompt for that role, else its general prompt) and/or
    ``prompt_name`` (one of its prompts, strictly, as text-embeddings-inference names the field);
    both given must apply the same prompt. None: the model's general prompt."""
    typed, by_type = check_input_type(data.get("input_type"), roles)
    prompt_name = check_role(data.get("prompt_name"), "prompt_name", roles)
    if typed and prompt_name is not None and prompt_name != by_type:
        raise InvalidRequest(
            f"input_type {data['input_type']!r} ({_prompt(by_type)}) and prompt_name {prompt_name!r} disagree; give one of them", param="prompt_name"
        )
    return prompt_name if prompt_name is not None else by_type


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
    index whose scale calibrates ``encoding_format`` int8/uint8), and the prompt to embed with:
    ``input_type`` (a value of :data:`INPUT_TYPES`) or ``prompt_name`` (see :func:`pick_role`)."""

    texts: list[str]
    model: str | None
    encoding_format: str
    dimensions: int | None
    user: str | None
    layer: int | None = None
    index: str | None = None
    role: Role | None = None

    FIELDS = ("input", "model", "encoding_format", "dimensions", "user", "layer", "index", "input_type", "prompt_name")

    @classmethod
    def parse(cls, data: dict[str, Any], *, max_inputs: int, dim: int, roles: Sequence[str] = ()) -> EmbeddingsRequest:
        _check_keys(data, cls.FIELDS)
        model = _optional(data, "model", str, "a string")
        encoding_format = _optional(data, "encoding_format", str, "a string") or "float"
        if encoding_format not in ENCODING_FORMATS:
            known = ", ".join(repr(f) for f in ENCODING_FORMATS)
            raise InvalidRequest(f"encoding_format must be one of {known}, got {shown(encoding_format)}", param="encoding_format")
        dimensions = _optional(data, "dimensions", int, "an integer")
        if dimensions is not None and not 1 <= dimensions <= dim:
            raise InvalidRequest(f"dimensions must be between 1 and the model's dimension {dim}, got {dimensions}", param="dimensions")
        user = _optional(data, "user", str, "a string")
        layer = _optional(data, "layer", int, "an integer")
        index = _optional(data, "index", str, "a string")
        if index is not None and encoding_format not in ("int8", "uint8"):
            raise InvalidRequest(f"index calibrates the int8 and uint8 encoding formats only; encoding_format is {encoding_format!r}", param="index")
        role = pick_role(data, roles)
        texts = parse_texts(data.get("input"), "input", max_inputs)
        return cls(texts, model, encoding_format, dimensions, user, layer, index, role)


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
    vectors: np.ndarray, *, encoding_format: str, model: str, tokens: int, role: str | None = None, quantization: dict[str, Any] | None = None
) -> bytes:
    """The OpenAI embeddings response; ``base64`` is the little-endian float32 bytes of each vector;
    quantized codes (``vectors`` holding them) come with their ``quantization`` object.
    ``prompt_name`` (a field OpenAI clients ignore) is the prompt applied, null for the general one."""
    if encoding_format == "base64":
        rows: list[Any] = [base64.b64encode(row.astype("<f4").tobytes()).decode("ascii") for row in vectors]
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
    "ENCODING_FORMATS", "INPUT_TYPES", "MAX_K", "EmbedRequest", "EmbeddingsRequest", "SearchRequest", "dumps", "embeddings_response", "finish",
    "input_type_prompts", "parse_json", "parse_texts", "prompt_headers", "search_response",
]  # fmt: skip
