"""Reading a file the user gave: every failure is a :class:`~anglekit.errors.DataError` that names
the file and says what was expected (a folder, an empty file, binary bytes, bad UTF-8, truncated
or malformed JSON), never a bare ``UnicodeDecodeError`` or ``JSONDecodeError``.

    from anglekit.io.read import read_json, read_jsonl

    result = read_json(path, expected="a suite result (an object with 'columns' and 'scores')")
    for row, record in read_jsonl(path, expected="one training log record per line"):
        ...
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from anglekit.errors import DataError

__all__ = ["describe", "read_json", "read_jsonl", "read_user_text", "require_object"]


def read_user_text(path: str | os.PathLike[str], *, expected: str, allow_empty: bool = False) -> str:
    """The UTF-8 text of ``path``; a :class:`DataError` naming the file and ``expected`` (what the
    file should hold) when it is missing, a folder, unreadable, empty, binary or not UTF-8."""
    file = Path(path)
    source = os.fspath(path)
    if file.is_dir():
        raise DataError(f"is a folder; expected a file holding {expected}", source=source)
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise DataError(f"no such file; expected a file holding {expected}", source=source) from None
    except OSError as exc:
        raise DataError(f"cannot be read ({exc.strerror or type(exc).__name__}); expected {expected}", source=source) from None
    if not data.strip() and not allow_empty:
        raise DataError(f"file is empty; expected {expected}", source=source)
    if b"\x00" in data:
        raise DataError(f"file contains NUL bytes: it looks binary, not UTF-8 text; expected {expected}", source=source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"not UTF-8 text (byte {exc.start}, line {line}); expected {expected}", source=source) from None


def read_json(path: str | os.PathLike[str], *, expected: str) -> Any:
    """The JSON document in ``path`` (see :func:`read_user_text` for the errors); a truncated or
    malformed document names its line and column."""
    text = read_user_text(path, expected=expected)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        cut = " (the file looks truncated)" if exc.pos >= len(text.rstrip()) else ""
        raise DataError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}{cut}; expected {expected}", source=os.fspath(path)) from None


def read_jsonl(path: str | os.PathLike[str], *, expected: str, allow_empty: bool = False) -> Iterator[tuple[int, Any]]:
    """``(row, value)`` of each non-blank line of the JSON Lines file ``path`` (rows count from 1)."""
    text = read_user_text(path, expected=expected, allow_empty=allow_empty)
    for row, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield row, json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"malformed JSON: {exc.msg} at column {exc.colno}; expected {expected}", source=os.fspath(path), row=row) from None


def require_object(value: Any, *, source: str, expected: str, row: int | None = None, field: str | None = None) -> dict[str, Any]:
    """``value`` when it is a JSON object, else a :class:`DataError` naming what it was instead."""
    if not isinstance(value, dict):
        raise DataError(f"expected {expected}, got {describe(value)}", source=source, row=row, field=field)
    return value


def describe(value: Any) -> str:
    """A JSON value as an error message shows it: its JSON type and a short excerpt ("a string \"x\"", "null")."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    name = "null" if value is None else names.get(type(value), type(value).__name__)
    shown = json.dumps(value, default=str)
    return name if value is None else f"{name} {shown[:60] + ('...' if len(shown) > 60 else '')}"
