"""What the clients of the hosted embedding APIs send to ``POST /v1/embeddings``, besides OpenAI's
fields: each is mapped onto what the server already does, or refused with a 400 that says why.

- ``input_type`` (Voyage, OpenAI-compatible servers, NVIDIA NIM, Cohere, Jina's values too) and
  ``task`` (Jina): the prompt to embed with (:data:`INPUT_TYPES`, :data:`TASKS`).
- ``truncate`` (NVIDIA NIM: ``NONE`` / ``START`` / ``END``; Jina: a boolean) and ``truncation``
  (Voyage: a boolean): what happens to an input longer than the model's max length
  (:data:`TRUNCATIONS`).
- ``output_dimension`` (Voyage): OpenAI's ``dimensions``.
- ``output_dtype`` (Voyage) and ``embedding_type`` (Jina): the quantized outputs of
  ``encoding_format`` (:mod:`anglekit.serve.quantized`); Voyage's ``base64`` of a quantized type is
  the base64 of the codes' bytes.
- ``normalized`` (Jina): L2-normalise the vectors or not; ``late_chunking`` (Jina): ``false`` only.

Two fields that say the same thing must agree, else a 400 naming both. Cohere's ``/v2/embed``
(``texts``, ``embedding_types``) is another route with another response: not served.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from anglekit.model.config import present_role
from anglekit.serve.errors import InvalidRequest
from anglekit.serve.fields import kind_of, one_of, optional
from anglekit.serve.quantized import QUANTIZED_FORMATS

ENCODING_FORMATS = ("float", "base64", *QUANTIZED_FORMATS)
"""``encoding_format`` (and Jina's ``embedding_type``): float, base64 float32, or quantized codes."""
OUTPUT_DTYPES = ("float", *QUANTIZED_FORMATS)
"""Voyage's ``output_dtype``."""
TRUNCATIONS = ("END", "START", "NONE")
"""What to do with an input longer than the model's max length, as NVIDIA NIM names it: ``END``
cut its end (the server's default, ``--auto-truncate``), ``START`` cut its start (keep its end),
``NONE`` refuse it (400 with its index and token count; ``--no-auto-truncate``)."""
INPUT_TYPES = {
    "query": "query", "document": "document",  # Voyage, most OpenAI-compatible servers
    "passage": "document",  # NVIDIA NIM (with query)
    "search_query": "query", "search_document": "document", "classification": "classification", "clustering": "clustering",  # Cohere
    "retrieval.query": "query", "retrieval.passage": "document",  # Jina
}  # fmt: skip
"""``input_type`` values of ``/v1/embeddings``, as the hosted embedding APIs name the two sides (and
Cohere's other tasks) -> the role each stands for; :func:`prompts_of` resolves a role to the
model's prompt, its general prompt where it lacks the role (as ``encode_query`` / ``encode_document``)."""
TASKS: dict[str, str | None] = {
    **{task: INPUT_TYPES[task] for task in ("retrieval.query", "retrieval.passage", "classification")},
    "separation": "clustering",  # Jina: "for clustering and reranking", Cohere's clustering
    "text-matching": None,  # symmetric similarity: both sides embedded alike, with the general prompt
}
"""Jina's ``task`` values -> the role each stands for (None: the general prompt)."""
FOREIGN_FIELDS = {
    "texts": "Cohere's /v2/embed field; POST /v1/embeddings takes OpenAI's 'input' (docs/serve.md, Clients)",
    "embedding_types": "Cohere's /v2/embed field; send 'encoding_format' (or Voyage's 'output_dtype') with one type",
    "inputs": "the field of POST /embed (and of text-embeddings-inference's /embed); POST /v1/embeddings takes 'input'",
}
"""Fields of other routes that a client pointed at the wrong one sends: the hint of their 400."""


def prompts_of(table: dict[str, str | None], roles: Sequence[str]) -> dict[str, str | None]:
    """Each value of ``table`` (:data:`INPUT_TYPES`, :data:`TASKS`) -> the prompt it applies on a
    model with the prompts ``roles`` (None: the general prompt, where the model lacks the role)."""
    return {value: None if role is None else present_role(role, roles) for value, role in table.items()}


def check_prompt_field(data: dict[str, Any], name: str, table: dict[str, str | None], roles: Sequence[str]) -> tuple[bool, str | None]:
    """(whether ``data[name]`` was given, the prompt it applies: None for the general one); a 400
    naming the accepted values for anything but one of ``table``'s (or null, as if not given)."""
    value = one_of(data, name, tuple(table))
    if value is None:
        return False, None
    role = table[value]
    return True, None if role is None else present_role(role, roles)


def _truncate(value: Any) -> str | None:
    """NIM's ``truncate`` (a string of :data:`TRUNCATIONS`) or Jina's (a boolean: END or NONE)."""
    if value is None or isinstance(value, bool):
        return None if value is None else ("END" if value else "NONE")
    if not isinstance(value, str):
        raise InvalidRequest(f"truncate must be 'NONE', 'START' or 'END' (NVIDIA NIM) or true/false (Jina), got {kind_of(value)}", param="truncate")
    return one_of({"truncate": value}, "truncate", TRUNCATIONS)


def _shown_value(value: Any) -> str:
    return "true" if value is True else "false" if value is False else repr(value)


def pick_truncation(data: dict[str, Any]) -> str | None:
    """The request's :data:`TRUNCATIONS` mode from ``truncate`` and/or ``truncation`` (None: neither
    given, the server's ``--auto-truncate`` setting applies)."""
    by_truncate = _truncate(data.get("truncate"))
    truncation = optional(data, "truncation", bool, "true or false")
    by_truncation = None if truncation is None else ("END" if truncation else "NONE")
    if by_truncate is not None and by_truncation is not None and by_truncate != by_truncation:
        raise InvalidRequest(
            f"truncate {_shown_value(data['truncate'])} and truncation {_shown_value(truncation)} disagree; give one of them", param="truncation"
        )
    return by_truncate or by_truncation


def _dimension(data: dict[str, Any], name: str, dim: int) -> int | None:
    value = optional(data, name, int, "an integer")
    if value is not None and not 1 <= value <= dim:
        raise InvalidRequest(f"{name} must be between 1 and the model's dimension {dim}, got {value}", param=name)
    return value


def pick_dimensions(data: dict[str, Any], dim: int) -> int | None:
    """OpenAI's ``dimensions`` or Voyage's ``output_dimension``: keep that many leading coordinates."""
    dimensions, output_dimension = _dimension(data, "dimensions", dim), _dimension(data, "output_dimension", dim)
    if dimensions is not None and output_dimension is not None and dimensions != output_dimension:
        raise InvalidRequest(f"dimensions {dimensions} and output_dimension {output_dimension} disagree; give one of them", param="output_dimension")
    return dimensions if dimensions is not None else output_dimension


@dataclass(frozen=True)
class Encoding:
    """How a response carries its vectors: ``dtype`` ``float`` or a quantized format, as numbers or
    (``base64``) as the base64 of their bytes (little-endian float32, or the int8/uint8 codes)."""

    dtype: str = "float"
    base64: bool = False

    @property
    def quantized(self) -> bool:
        return self.dtype in QUANTIZED_FORMATS


def pick_encoding(data: dict[str, Any]) -> Encoding:
    """The :class:`Encoding` of ``encoding_format`` (OpenAI), ``embedding_type`` (Jina, the same
    values) and ``output_dtype`` (Voyage: the type, with ``encoding_format`` null or ``base64``)."""
    fmt = one_of(data, "encoding_format", ENCODING_FORMATS)
    jina = one_of(data, "embedding_type", ENCODING_FORMATS)
    if fmt is not None and jina is not None and fmt != jina:
        raise InvalidRequest(f"encoding_format {fmt!r} and embedding_type {jina!r} disagree; give one of them", param="embedding_type")
    fmt, field = (fmt, "encoding_format") if fmt is not None else (jina, "embedding_type")
    dtype = one_of(data, "output_dtype", OUTPUT_DTYPES)
    if fmt in QUANTIZED_FORMATS:
        if dtype is not None and dtype != fmt:
            raise InvalidRequest(f"{field} {fmt!r} and output_dtype {dtype!r} disagree; give one of them", param="output_dtype")
        return Encoding(fmt)
    return Encoding(dtype or "float", fmt == "base64")


def check_late_chunking(data: dict[str, Any]) -> None:
    """Jina's ``late_chunking``: ``false`` (or absent) only."""
    if optional(data, "late_chunking", bool, "true or false"):
        raise InvalidRequest(
            "late_chunking is not supported: each input is embedded on its own (send false or leave it out; "
            "to embed a long text whole, serve the model with --long-text chunk-mean)",
            param="late_chunking",
        )


def client_fields(dim: int, roles: Sequence[str]) -> dict[str, Any]:
    """What ``GET /v1/info`` says of the fields above: each one's accepted values."""
    return {
        "truncate": [*TRUNCATIONS, True, False], "truncation": [True, False], "output_dimension": [1, dim],
        "output_dtype": list(OUTPUT_DTYPES), "embedding_type": list(ENCODING_FORMATS), "normalized": [True, False],
        "late_chunking": [False], "task": prompts_of(TASKS, roles),
    }  # fmt: skip


__all__ = [
    "ENCODING_FORMATS", "FOREIGN_FIELDS", "INPUT_TYPES", "OUTPUT_DTYPES", "TASKS", "TRUNCATIONS", "Encoding", "check_late_chunking",
    "check_prompt_field", "client_fields", "pick_dimensions", "pick_encoding", "pick_truncation", "prompts_of",
]  # fmt: skip
