"""Turn an LLM's answer into candidate sentences, whatever shape the answer takes.

Recognised shapes (``ParsedAnswer.format``):

* ``json``: a JSON array of strings, an array of objects (the first string field, preferring
  ``sentence``/``text``/``output``), or an object holding such an array, nested to any depth
  (``{"result": {"synonyms": [...]}}``, ``[{"sentences": [...]}]``, ``[["a"], ["b"]]``); a Markdown
  code fence around it is removed;
* ``json-malformed``: text that starts like JSON but does not parse (truncated, trailing commas):
  the double-quoted strings that are not object keys are taken;
* ``numbered`` (``1.``, ``1)``, ``(1)``, ``1:``), ``bulleted`` (``-``, ``*``, ``•``): only the marked
  lines are kept, so a chatty preamble ("Here are 3 sentences:") is not taken for a sentence;
  numbers run together on one line ("1. A. 2. B.") are split;
* ``quoted``: one line holding several quoted sentences;
* ``lines``: anything else, one candidate per non-empty line;
* ``non-text``: no sentence at all: a bare JSON number, ``true``/``false``/``null``, JSON without
  any string, or text without a single letter (``42``, ``3.5``, ``1. 2. 3.``);
* ``empty``: nothing at all.

Parsing never raises: a malformed answer yields what can be read, and cleaning counts the rest.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

FORMATS = ("json", "json-malformed", "numbered", "bulleted", "quoted", "lines", "non-text", "empty")

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_NUMBERED = re.compile(r"^\s*(?:\(\d{1,3}\)|\d{1,3}\s*[.):\]]|\[\d{1,3}\])\s*")
_BULLET = re.compile(r"^\s*(?:[-*•·–—+]|>)\s+")
_INLINE_NUMBER = re.compile(r"(?:^|(?<=\s))\(?\d{1,3}[.)]\s+")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"|“([^”]*)”')
_JSON_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"(\s*:)?')
_PREFERRED_KEYS = ("sentence", "text", "output", "paraphrase", "synonym", "antonym", "content")
_MAX_DEPTH = 32
"""JSON nested deeper than this is not searched for strings."""


@dataclass(frozen=True)
class ParsedAnswer:
    items: tuple[str, ...]
    format: str


def _strings_from_json(obj: Any, depth: int = 0, *, item: bool = False) -> list[str] | None:
    """The candidate strings in parsed JSON, at any depth; None when it holds no string at all.
    ``item``: ``obj`` is an element of an array, where an object is one candidate (its first string)."""
    if isinstance(obj, str):
        return [obj]
    if depth >= _MAX_DEPTH:
        return None
    if isinstance(obj, list):
        found = [_strings_from_json(element, depth + 1, item=True) for element in obj]
        if all(f is None for f in found):
            return None
        return [s for f in found if f is not None for s in f]
    if isinstance(obj, dict):
        preferred = _preferred_string(obj)
        if preferred is not None:  # {"sentence": "...", "explanation": "..."}: one candidate
            return [preferred]
        for value in obj.values():  # the first container holding strings: {"synonyms": [...], "count": 3}
            if isinstance(value, (list, dict)):
                inner = _strings_from_json(value, depth + 1)
                if inner:
                    return inner
        values = [v for v in obj.values() if isinstance(v, str)]
        if item:  # one candidate: the first sentence-like string ({"id": "x1", "s": "A sentence."})
            values = [v for v in values if " " in v.strip()][:1] or values[:1]
        return values or None
    return None


def _preferred_string(obj: dict[str, Any]) -> str | None:
    for key in _PREFERRED_KEYS:
        for k, v in obj.items():
            if k.lower() == key and isinstance(v, str):
                return v
    return None


def _has_letter(text: str) -> bool:
    return any(unicodedata.category(ch).startswith("L") for ch in text)


def _unescape(raw: str) -> str:
    try:
        return json.loads(f'"{raw}"')
    except json.JSONDecodeError:
        return raw


def _from_malformed_json(text: str) -> list[str]:
    return [_unescape(m.group(1)) for m in _JSON_STRING.finditer(text) if m.group(2) is None]


def parse_answer(answer: str | None) -> ParsedAnswer:
    """Candidate sentences in ``answer`` (not yet cleaned: see :mod:`anglekit.generation.cleaning`)."""
    if answer is None or not answer.strip():
        return ParsedAnswer((), "empty")
    text = _unfenced(answer.strip())
    if text[:1] in ("[", "{"):
        parsed = _parse_json(text)
        if parsed is not None:
            return parsed
    if not _has_letter(text):  # 42, 3.5, "1. 2. 3.", ---: no sentence in it
        return ParsedAnswer((), "non-text")
    if text in ("true", "false", "null"):
        return ParsedAnswer((), "non-text")
    return _parse_lines([line.strip() for line in text.splitlines() if line.strip()])


def _unfenced(text: str) -> str:
    """``text`` without a Markdown code fence around it (and a ``json`` tag after the fence)."""
    fence = _FENCE.search(text)
    if fence is not None and fence.group(1).strip()[:1] in ("[", "{"):
        return fence.group(1).strip()
    if text.startswith("```"):
        text = text.strip("`").strip()
        if text.lower().startswith("json"):
            text = text[4:].strip()
    return text


def _parse_json(text: str) -> ParsedAnswer | None:
    """The strings of JSON ``text`` (or of what can be read of malformed JSON); None when nothing
    can be read from it and the text is to be read as lines."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        found = _from_malformed_json(text)
        return ParsedAnswer(tuple(found), "json-malformed") if found else None
    strings = _strings_from_json(value)
    if strings is not None:
        return ParsedAnswer(tuple(strings), "json")
    return ParsedAnswer((), "non-text")  # [1, 2, 3], {"n": 3}: JSON without a single string


def _parse_lines(lines: list[str]) -> ParsedAnswer:
    """The items of a numbered or bulleted list, of several quoted strings on one line, or the lines."""
    numbered = [line for line in lines if _NUMBERED.match(line)]
    bulleted = [line for line in lines if _BULLET.match(line)]
    if numbered and len(numbered) >= len(bulleted):
        items: list[str] = []
        for line in numbered:
            body = _NUMBERED.sub("", line, count=1)
            parts = [p for p in _INLINE_NUMBER.split(body) if p.strip()]
            items.extend(parts if len(parts) > 1 else [body])
        return ParsedAnswer(tuple(items), "numbered")
    if bulleted:
        return ParsedAnswer(tuple(_BULLET.sub("", line, count=1) for line in bulleted), "bulleted")
    if len(lines) == 1:
        quoted = [a or b for a, b in _QUOTED.findall(lines[0])]
        if len(quoted) > 1:
            return ParsedAnswer(tuple(quoted), "quoted")
    return ParsedAnswer(tuple(lines), "lines")


__all__ = ["FORMATS", "ParsedAnswer", "parse_answer"]
