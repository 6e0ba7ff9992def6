"""Prompt templates for LLM embedders: named presets, user templates with ``{text}``, and the
preprocessing the AnglE paper's evaluation applies to a sentence before it goes into a prompt.

The AnglE-LLaMA results use the prompt ``Summarize sentence "{text}" in one word:"`` and pool the
last token. The official evaluation script (``eval_nli.py``, inherited from PromptEOL) prepares
each sentence before formatting it into the prompt:

1. a full stop is appended when the sentence is non-empty and its last character is not one of
   ``. ? " '`` (so ``"wow!"`` becomes ``"wow!."``: the official rule, kept as is);
2. every double quote becomes a single quote (the template quotes the text with double quotes);
3. a final ``?`` becomes ``.``.

anglekit applies this rule (``prompt_preprocess``) to every text a template is applied to:
training, evaluation and ``encode`` alike, so that a model sees at inference exactly what it was
trained on. The official *training* code formats the template without the preprocessing; set
``prompt_preprocess=False`` to reproduce that. Texts without a prompt are never changed. When not
set explicitly, the preprocessing is on for templates that put ``{text}`` inside double quotes
(every paper preset) and off otherwise.
"""

from __future__ import annotations

import re
from typing import Any

from anglekit.errors import ConfigError

PLACEHOLDER = "{text}"
_BRACES = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")

PROMPT_PRESETS: dict[str, str | None] = {
    "paper": 'Summarize sentence "{text}" in one word:"',
    "paper-b": 'You can only output one word. Summarize "{text}":"',
    "retrieval-query": "Represent this sentence for searching relevant passages: {text}",
    "none": None,
}
"""Named templates. ``paper`` is the AnglE-LLaMA prompt (the official code's ``Prompts.A``),
``paper-b`` the official ``Prompts.B``, ``retrieval-query`` the query prompt of the official
retrieval models (``Prompts.C``: documents go without a prompt), ``none`` means no prompt."""


def resolve_prompt(value: str | None, *, field: str = "prompt") -> str | None:
    """The template for ``value``: a preset name, a template containing ``{text}``, or None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{field} must be a string, got {type(value).__name__} {value!r}")
    if value in PROMPT_PRESETS:
        return PROMPT_PRESETS[value]
    if PLACEHOLDER not in value:
        raise ConfigError(f"{field} must be a template containing '{PLACEHOLDER}' or a preset ({', '.join(PROMPT_PRESETS)}), got {value!r}")
    return value


def placeholders(value: str) -> list[str]:
    """The placeholders of ``value`` as written: its ``{...}`` fields, as ``str.format`` finds them,
    whose name (before ``!``, ``:``, ``.`` or ``[``) is empty, a number or a word: ``{}``, ``{0}``,
    ``{txt}``, ``{ text }``, ``{text!r}``. ``{{``, ``}}``, a lone brace and other braced text
    (``{"a": 1}``) are text, kept as written (prompts are applied with ``str.replace``)."""
    found = []
    for match in _BRACES.finditer(value):
        inner = match.group(1)
        if inner is None:
            continue  # {{ or }}
        name = re.split(r"[!:.\[]", inner, maxsplit=1)[0].strip()
        if name == "" or name.isdigit() or name.isidentifier():
            found.append(match.group(0))
    return found


def unknown_placeholder(value: Any) -> str | None:
    """The first placeholder of ``value`` (:func:`placeholders`) other than ``{text}``; None when
    ``value`` is a prefix (no placeholder), a ``{text}`` template or not a string."""
    if not isinstance(value, str):
        return None
    return next((found for found in placeholders(value) if found != PLACEHOLDER), None)


def check_placeholders(value: Any, where: str) -> None:
    """A ConfigError naming the placeholder when a prompt a person gave (``where``: its setting and
    value) holds one other than ``{text}``: a misspelt ``{text}`` would be applied as literal text."""
    found = unknown_placeholder(value)
    if found is not None:
        raise ConfigError(f"unknown placeholder {found} in {where}; use {PLACEHOLDER} for the text's place (a prefix has no placeholder)")


def quotes_text(template: str | None) -> bool:
    """Whether ``template`` wraps ``{text}`` in double quotes (then the preprocessing is due)."""
    return template is not None and f'"{PLACEHOLDER}"' in template


def preprocess_sentence(text: str) -> str:
    """The official evaluation's preparation of a sentence for a prompt (see the module doc)."""
    if text and text[-1] not in ".?\"'":
        text += "."
    text = text.replace('"', "'")
    if text and text[-1] == "?":
        text = text[:-1] + "."
    return text


def apply_prompt(template: str | None, text: str, *, preprocess: bool) -> str:
    """``text`` formatted into ``template`` (preprocessed first when asked); unchanged without one."""
    if template is None:
        return text
    if preprocess:
        text = preprocess_sentence(text)
    # str.replace, not str.format: texts and templates may contain braces.
    return template.replace(PLACEHOLDER, text)


__all__ = [
    "PROMPT_PRESETS",
    "apply_prompt",
    "check_placeholders",
    "placeholders",
    "preprocess_sentence",
    "quotes_text",
    "resolve_prompt",
    "unknown_placeholder",
]
