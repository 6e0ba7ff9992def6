"""Checks of single request fields shared by the request parsers (:mod:`~anglekit.serve.schemas`,
:mod:`~anglekit.serve.clients`): each failure is an :class:`InvalidRequest` naming its field."""

from __future__ import annotations

from typing import Any

from anglekit.serve.errors import InvalidRequest

SHOWN_CHARS = 60
"""A value echoed in an error message is cut to this many characters."""


def kind_of(value: Any) -> str:
    """How an error message names the JSON type of ``value``."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def optional(data: dict[str, Any], name: str, kind: type, what: str) -> Any:
    """``data[name]`` (None when absent or null) when it is a ``kind`` (an int is never a bool), else a 400."""
    value = data.get(name)
    if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise InvalidRequest(f"{name} must be {what}, got {kind_of(value)}", param=name)
    return value


def shown(value: str) -> str:
    """``repr(value)``, cut to :data:`SHOWN_CHARS` characters (with the full length) when longer."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}... ({len(value)} characters)"


def one_of(data: dict[str, Any], name: str, accepted: tuple[str, ...]) -> str | None:
    """``data[name]`` when it is one of the strings ``accepted`` (None when absent or null), else a
    400 listing them (with a hint when only the case or surrounding spaces differ)."""
    listed = ", ".join(repr(a) for a in accepted)
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string, one of {listed}; got {kind_of(value)}", param=name)
    if value is None or value in accepted:
        return value
    near = [a for a in accepted if a.lower() == value.strip().lower()]
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    got = "an empty string" if not value else shown(value)
    raise InvalidRequest(f"{name} must be one of {listed}; got {got}{hint}", param=name)


__all__ = ["SHOWN_CHARS", "kind_of", "one_of", "optional", "shown"]
