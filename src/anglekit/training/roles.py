"""The role (named prompt) each training column is embedded with.

Retrieval data trains queries and documents apart: by default a triplet's ``anchor`` is embedded
with the model's ``query`` prompt and its ``positive`` and ``negative`` with its ``document``
prompt, each only when the model has that prompt (else its general prompt, as before roles
existed). Pair data (STS: ``text1``, ``text2``) is symmetric and sentence data has one column, so
they use no role unless configured. ``column_roles`` (the training config's typed field) overrides
a column: a role name, which the model must have, or ``none`` for its general prompt.

Training applies the roles before tokenizing: each column's texts are formatted with their
prompt (so an anchor and a positive with the same text are two distinct inputs), then tokenized
verbatim (:class:`PromptedTokenizing`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from anglekit.errors import ConfigError
from anglekit.model.encoding import tokenize_texts

NO_ROLE = "none"
"""``column_roles`` value: the column uses the model's general prompt."""
COLUMNS = {"pairs": ("text1", "text2"), "triplets": ("anchor", "positive", "negative"), "sentences": ("text",)}
"""The columns of each batch kind, by the names training data is read into."""
DEFAULT_ROLES = {"triplets": {"anchor": "query", "positive": "document", "negative": "document"}}
"""The roles used, when the model has those prompts, for columns ``column_roles`` leaves out."""


def column_role(text: str) -> tuple[str, str]:
    """A flag's parser (argparse type): ``COLUMN=ROLE`` as (column, role)."""
    import argparse

    column, sep, role = text.partition("=")
    if not sep or not column.strip() or not role.strip():
        raise argparse.ArgumentTypeError(f"expected COLUMN=ROLE (e.g. anchor=query, or positive={NO_ROLE}), got {text!r}")
    return column.strip(), role.strip()


def check_column_roles(value: Any, *, name: str = "column_roles") -> None:
    """A ConfigError unless ``value`` maps column names to role names (or ``none``)."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must map columns to roles, e.g. {{anchor: query, positive: document}}, got {type(value).__name__} {value!r}")
    known = sorted({c for columns in COLUMNS.values() for c in columns})
    for column, role in value.items():
        if column not in known:
            raise ConfigError(f"{name}: unknown column {column!r}; columns: {', '.join(known)}")
        if not isinstance(role, str) or not role.strip():
            raise ConfigError(f"{name}.{column} must be a role name (one of the model's prompts) or {NO_ROLE!r}, got {role!r}")


def column_roles(kind: str, configured: Mapping[str, str] | None, config: Any, *, partial: bool = False) -> dict[str, str | None]:
    """The role of each column of a ``kind`` batch (None: the general prompt) for a model whose
    :class:`~anglekit.model.config.EmbedderConfig` is ``config``. A configured role the model
    does not have is a ConfigError naming its prompts; one for a column ``kind`` lacks too, unless
    ``partial`` (one of several datasets: :func:`check_roles_used` checks the run as a whole)."""
    check_column_roles(configured)
    columns = COLUMNS.get(kind, ())
    configured = dict(configured or {})
    unused = sorted(set(configured) - set(columns))
    if partial:
        configured = {column: role for column, role in configured.items() if column in columns}
    elif unused:
        raise ConfigError(f"column_roles: {kind} data has no column {unused[0]!r}; its columns: {', '.join(columns) or 'none'}")
    roles: dict[str, str | None] = {}
    for column in columns:
        if column in configured:
            role = configured[column]
            if role != NO_ROLE:
                config.template(role)  # a role the model lacks: an error naming the ones it has
            roles[column] = None if role == NO_ROLE else role
        else:
            default = DEFAULT_ROLES.get(kind, {}).get(column)
            roles[column] = config.role_if_present(default) if default is not None else None
    return roles


def check_roles_used(configured: Mapping[str, str] | None, kinds: Sequence[str]) -> None:
    """A ConfigError when a configured column is a column of none of a run's datasets (``kinds``)."""
    columns = {column for kind in kinds for column in COLUMNS.get(kind, ())}
    unused = sorted(set(configured or {}) - columns)
    if unused:
        raise ConfigError(f"column_roles: none of the datasets has a column {unused[0]!r}; their columns: {', '.join(sorted(columns)) or 'none'}")


def prompted_columns(train_set: Any, roles: Mapping[str, str | None], config: Any) -> Any:
    """``train_set`` with each column's texts formatted with its role's prompt (the general one for
    None), for :class:`PromptedTokenizing`. The ``negative`` role covers every negative of n-tuple
    rows (``negatives``) too."""
    changes: dict[str, Any] = {}
    for column, role in roles.items():
        attribute = "texts" if column == "text" else column
        texts = getattr(train_set, attribute, None)
        if texts is not None:
            changes[attribute] = _formatted(texts, role, config)
        if column == "negative" and getattr(train_set, "negatives", None) is not None:
            changes["negatives"] = [type(row)(_formatted(row, role, config)) for row in train_set.negatives]
    return replace(train_set, **changes)


def _formatted(texts: Sequence[str], role: str | None, config: Any) -> list[str]:
    return [config.format(text, role) for text in texts]


class _VerbatimConfig:
    """An EmbedderConfig whose prompts are already applied: ``format`` leaves a text as it is."""

    def __init__(self, config: Any) -> None:
        self._config = config

    def format(self, text: str, role: str | None = None) -> str:
        return text

    def template(self, role: str | None = None) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, name)


class PromptedTokenizing:
    """The embedder as a training task tokenizes with it, for texts :func:`prompted_columns` already
    formatted: the same tokenizer, truncation and long-text handling, no prompt applied again."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self.config = _VerbatimConfig(embedder.config)

    def tokenize_unpadded(self, texts: Sequence[str], role: str | None = None) -> list[list[int]]:
        return tokenize_texts(self._embedder.tokenizer, self.config, texts, None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)


def apply_column_roles(
    kind: str, configured: Mapping[str, str] | None, train_set: Any, embedder: Any, *, partial: bool = False
) -> tuple[Any, Any, dict[str, str | None]]:
    """(train set, what to tokenize it with, the roles) for a run, or for one of its datasets
    (``partial``, see :func:`column_roles`): unchanged when no column has a role."""
    roles = column_roles(kind, configured, embedder.config, partial=partial)
    if all(role is None for role in roles.values()):
        return train_set, embedder, roles
    from anglekit.data.stream import ArrowRows

    if isinstance(train_set, ArrowRows):
        return streamed_prompted_columns(train_set, roles, embedder.config), PromptedTokenizing(embedder), roles
    return prompted_columns(train_set, roles, embedder.config), PromptedTokenizing(embedder), roles


def streamed_prompted_columns(rows: Any, roles: Mapping[str, str | None], config: Any) -> Any:
    """:func:`prompted_columns` for streamed rows (an :class:`~anglekit.data.stream.ArrowRows`):
    each column's texts are formatted as they are read; the ``negative`` role covers ``negatives``."""
    formats = {}
    for column, role in roles.items():
        for name in (column, "negatives") if column == "negative" else (column,):
            if name in rows.columns:
                formats[name] = partial(config.format, role=role)
    return rows.formatted(formats)


__all__ = [
    "COLUMNS",
    "DEFAULT_ROLES",
    "NO_ROLE",
    "PromptedTokenizing",
    "apply_column_roles",
    "check_column_roles",
    "check_roles_used",
    "column_role",
    "column_roles",
    "prompted_columns",
    "streamed_prompted_columns",
]
