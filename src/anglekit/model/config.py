"""EmbedderConfig: everything that decides how text becomes a vector, saved with the model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError
from anglekit.io.atomic import atomic_write_json
from anglekit.llm.prompts import apply_prompt, quotes_text, resolve_prompt
from anglekit.model.encoding import LONG_TEXT_MODES
from anglekit.model.pooling import check_strategy

CONFIG_NAME = "anglekit_config.json"
FORMAT_VERSION = 1
ROLES = ("query", "document")
"""The two usual roles (named prompts), stored in ``query_prompt`` / ``document_prompt``."""
_ROLE_FIELDS = {"query": "query_prompt", "document": "document_prompt"}
DOCUMENT_ROLES = ("document", "passage", "corpus")
"""The names a document prompt goes by, in the order sentence-transformers' ``encode_document`` tries them."""
VECTOR_NEUTRAL = ("early_exit",)
"""EmbedderConfig keys that change no vector (left out of fingerprints, so indexes built before
they existed still match)."""


@dataclass
class EmbedderConfig:
    """How an :class:`~anglekit.model.embedder.Embedder` turns text into a vector.

    Saved as ``anglekit_config.json`` beside the backbone's weights and restored on load, so a
    loaded model embeds exactly like the trained one. Keys added after format 1 all have defaults
    that reproduce the older behaviour, so older files load unchanged.
    """

    pooling: str = "cls"
    prompt: str | None = None
    """Template with a ``{text}`` placeholder applied to every input, or None. A preset name
    (``paper``, ``paper-b``, ``retrieval-query``, ``none``) is replaced by its template."""
    normalize: bool = False
    """Default for ``encode(normalize=None)``: L2-normalise the output vectors."""
    max_length: int = 512
    """Inputs are truncated to this many tokens (prompt included)."""
    padding_side: str | None = None
    """"left" or "right"; None keeps the tokenizer's own choice."""
    query_prompt: str | None = None
    """Template for ``encode(..., role="query")`` (retrieval): the named prompt ``query``."""
    document_prompt: str | None = None
    """Template for ``encode(..., role="document")``: the named prompt ``document``."""
    prompts: dict[str, str] | None = None
    """Named prompts (roles) beside ``query`` and ``document``, as sentence-transformers names them:
    ``encode(..., role=NAME)`` applies one. A value with ``{text}`` is a template, any other a
    prefix (sentence-transformers' prompts are prefixes). ``query`` and ``document`` entries given
    here are stored in ``query_prompt`` / ``document_prompt``; None: no other named prompt."""
    prompt_preprocess: bool | None = None
    """Apply the paper's sentence preprocessing before a template (see :mod:`anglekit.llm.prompts`).
    None (only at construction) means: on when a template quotes ``{text}`` with double quotes."""
    bidirectional: bool = False
    """Decoder backbones only: drop the causal mask so every token attends to every other (BiLLM)."""
    base_model: str | None = None
    """Set for a directory of LoRA adapters: the model (hub name, path, ``pypi:NAME`` or a .gguf
    file) the adapters are loaded onto."""
    base_gguf_file: str | None = None
    """With ``base_model`` a hub repository or folder: the GGUF file in it to load."""
    truncate_dim: int | None = None
    """Default for ``encode(truncate_dim=None)``: keep the first this many coordinates of each
    vector (then normalise, when normalising); for models trained with nested dimensions
    (Matryoshka, ESE). None keeps every coordinate."""
    layer: int | None = None
    """Embed from this transformer layer (1 = the first) instead of the last, as if the model
    stopped there (ESE layer truncation); pooling applies to that layer. None: the last layer."""
    early_exit: bool = False
    """Trained with ESE (every layer's pooled output was trained): an earlier layer's vector is
    usable on its own, so a request may stop at an earlier layer (the server's per-request
    ``layer``). It changes no vector, so it is not part of the model's fingerprint."""
    long_text: str = "truncate"
    """Texts longer than the window: ``truncate`` (cut at ``max_length``), ``chunk-mean`` or
    ``chunk-max`` (embed overlapping windows and pool their vectors: anglekit's substitute for
    the paper's recurrent attention network, AnglE-RAN; :mod:`anglekit.model.long_text`)."""
    long_text_window: int | None = None
    """Tokens per chunk, special tokens included (None: ``max_length``)."""
    long_text_stride: int | None = None
    """Content tokens between chunk starts (None: half a window's content, i.e. 50% overlap)."""
    long_text_max_chunks: int | None = None
    """At most this many chunks per text, spread over it (None: as many as the text needs)."""
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        check_strategy(self.pooling)
        for name in ("prompt", "query_prompt", "document_prompt"):
            setattr(self, name, resolve_prompt(getattr(self, name), field=name))
        self._fold_prompts()
        if not isinstance(self.max_length, int) or isinstance(self.max_length, bool) or self.max_length < 1:
            raise ConfigError(f"max_length must be a positive integer, got {self.max_length!r}")
        if self.padding_side not in (None, "left", "right"):
            raise ConfigError(f"padding_side must be 'left', 'right' or None, got {self.padding_side!r}")
        for name in ("normalize", "bidirectional", "early_exit"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.prompt_preprocess is None:
            self.prompt_preprocess = any(quotes_text(t) for t in (self.prompt, *self.named_prompts.values()))
        elif not isinstance(self.prompt_preprocess, bool):
            raise ConfigError(f"prompt_preprocess must be true, false or null, got {self.prompt_preprocess!r}")
        for name in ("base_model", "base_gguf_file"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{name} must be a non-empty string or null, got {value!r}")
        if self.base_gguf_file is not None and self.base_model is None:
            raise ConfigError("base_gguf_file needs base_model (the repository or folder holding it)")
        if self.long_text not in LONG_TEXT_MODES:
            raise ConfigError(f"long_text must be one of {', '.join(LONG_TEXT_MODES)}, got {self.long_text!r}")
        for name in ("truncate_dim", "layer", "long_text_window", "long_text_stride", "long_text_max_chunks"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} must be an integer >= 1 or null, got {value!r}")

    def _fold_prompts(self) -> None:
        """Check ``prompts`` and move its ``query`` / ``document`` entries to their own fields."""
        if self.prompts is None:
            return
        if not isinstance(self.prompts, dict):
            raise ConfigError(f"prompts must map role names to prompts, got {type(self.prompts).__name__} {self.prompts!r}")
        others: dict[str, str] = {}
        for name, value in self.prompts.items():
            template = named_template(name, value)
            own = _ROLE_FIELDS.get(name)
            if own is None:
                others[name] = template
            elif getattr(self, own) not in (None, template):
                raise ConfigError(f"prompts.{name} {template!r} disagrees with {own} {getattr(self, own)!r}; give one of them")
            else:
                setattr(self, own, template)
        self.prompts = others or None

    @property
    def named_prompts(self) -> dict[str, str]:
        """Every named prompt (role) of the model, name -> template: ``query`` and ``document`` first."""
        named = {name: getattr(self, own) for name, own in _ROLE_FIELDS.items() if getattr(self, own) is not None}
        return {**named, **(self.prompts or {})}

    @property
    def roles(self) -> tuple[str, ...]:
        """The names of the model's prompts, the roles ``encode(..., role=...)`` takes."""
        return tuple(self.named_prompts)

    def has_role(self, role: str) -> bool:
        """Whether the model has a prompt named ``role``."""
        return role in self.named_prompts

    def role_if_present(self, role: str) -> str | None:
        """``role`` when the model has that prompt (for ``document``: else ``passage`` or ``corpus``,
        as sentence-transformers' ``encode_document``), else None, its general prompt: what index
        building, search, training and ``encode_query`` use, so a model without roles embeds as before."""
        return present_role(role, self.roles)

    def template(self, role: str | None = None) -> str | None:
        """The template for ``role`` (a named prompt), or the general ``prompt`` for None; a role
        the model does not have is a ConfigError naming the ones it has."""
        if role is None:
            return self.prompt
        if not isinstance(role, str):
            raise ConfigError(f"role must be a prompt name (a string) or None, got {type(role).__name__} {role!r}")
        named = self.named_prompts
        if role not in named:
            raise ConfigError(f"role {role!r}: the model has no prompt of that name; its prompts: {', '.join(named) or 'none'}")
        return named[role]

    def format(self, text: str, role: str | None = None) -> str:
        """Apply the (role's) prompt template to one text, preprocessing it first when configured."""
        return apply_prompt(self.template(role), text, preprocess=bool(self.prompt_preprocess))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["prompts"] is None:  # files (and fingerprints) of models without named prompts stay as they were
            del data["prompts"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> EmbedderConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown embedder config key(s) {unknown}; known: {sorted(known)}")
        if data.get("format_version", FORMAT_VERSION) > FORMAT_VERSION:
            raise ConfigError(f"{source}: written by a newer anglekit (format {data['format_version']}); upgrade anglekit")
        try:
            return cls(**data)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    def save(self, directory: str | Path) -> None:

        atomic_write_json(Path(directory) / CONFIG_NAME, self.to_dict())

    @classmethod
    def load(cls, directory: str | Path) -> EmbedderConfig:
        path = Path(directory) / CONFIG_NAME
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
        # Files written before prompt_preprocess existed applied templates literally.
        data.setdefault("prompt_preprocess", False)
        return cls.from_dict(data, source=str(path))


def present_role(role: str, roles: Sequence[str]) -> str | None:
    """The prompt of ``roles`` (a model's prompt names) that stands for ``role``: ``role`` itself
    (for ``document``: else ``passage`` or ``corpus``), else None, the general prompt."""
    candidates = DOCUMENT_ROLES if role == "document" else (role,)
    return next((name for name in candidates if name in roles), None)


def named_template(name: Any, value: Any) -> str:
    """The template of the named prompt ``name``: ``value`` when it holds ``{text}``, else the prefix
    ``value`` before the text (as sentence-transformers applies its prompts)."""
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ConfigError(f"prompts: a role name must be a non-empty string without surrounding spaces, got {name!r}")
    if not isinstance(value, str):
        raise ConfigError(f"prompts.{name} must be a string (a prefix or a template with {{text}}), got {type(value).__name__} {value!r}")
    return value if "{text}" in value else value + "{text}"


_TEMPLATES = ("prompt", "query_prompt", "document_prompt", "prompts")


@dataclass(frozen=True)
class EmbedderSettings:
    """Some of an :class:`EmbedderConfig`'s settings, as one source gives them (None: not given).

    A model's settings come from several sources, in increasing priority: the architecture's
    defaults, a sentence-transformers folder, a saved ``anglekit_config.json`` (an adapter folder's
    over its base's) and the caller's arguments. Each is one ``EmbedderSettings``; :meth:`over`
    lays one on another and :meth:`resolve` validates the result into an :class:`EmbedderConfig`.
    """

    pooling: str | None = None
    prompt: str | None = None
    query_prompt: str | None = None
    document_prompt: str | None = None
    prompts: dict[str, str] | None = None
    prompt_preprocess: bool | None = None
    normalize: bool | None = None
    max_length: int | None = None
    padding_side: str | None = None
    bidirectional: bool | None = None
    base_model: str | None = None
    base_gguf_file: str | None = None
    truncate_dim: int | None = None
    layer: int | None = None
    early_exit: bool | None = None
    long_text: str | None = None
    long_text_window: int | None = None
    long_text_stride: int | None = None
    long_text_max_chunks: int | None = None

    @classmethod
    def of(cls, config: EmbedderConfig) -> EmbedderSettings:
        """Every setting of a complete config."""
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})

    def folded(self) -> EmbedderSettings:
        """These settings with ``prompts``' ``query`` / ``document`` entries moved to their fields
        (so that a source's ``prompts={"query": ...}`` replaces a lower source's ``query_prompt``)."""
        if self.prompts is None or not isinstance(self.prompts, dict):
            return self
        moved: dict[str, Any] = {}
        for name, own in _ROLE_FIELDS.items():
            if name in self.prompts:
                template = named_template(name, self.prompts[name])
                if getattr(self, own) not in (None, template):
                    raise ConfigError(f"prompts.{name} {template!r} disagrees with {own} {getattr(self, own)!r}; give one of them")
                moved[own] = template
        others = {k: v for k, v in self.prompts.items() if k not in _ROLE_FIELDS}
        return replace(self, prompts=others or None, **moved)

    def given(self) -> dict[str, Any]:
        """The settings this source gives."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def over(self, lower: EmbedderSettings) -> EmbedderSettings:
        """These settings laid over ``lower``. A new prompt template without ``prompt_preprocess``
        lets the preprocessing be decided again for it (see :class:`EmbedderConfig`)."""
        upper, lower = self.folded(), lower.folded()
        merged = replace(lower, **upper.given())
        if upper.prompts is not None and lower.prompts is not None:  # named prompts merge name by name
            merged = replace(merged, prompts={**lower.prompts, **upper.prompts})
        if self.prompt_preprocess is None and any(getattr(self, name) is not None for name in _TEMPLATES):
            merged = replace(merged, prompt_preprocess=None)
        return merged

    def resolve(self, *, source: str = "config") -> EmbedderConfig:
        """The complete, validated config (defaults where nothing was given)."""
        return EmbedderConfig.from_dict(self.given(), source=source)
