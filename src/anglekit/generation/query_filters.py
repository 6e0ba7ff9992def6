"""Clean the queries an LLM wrote for a document, counting every drop by reason.

Per answer (:func:`clean_queries`), each candidate is stripped of list markers, labels
(``Question 2:``, ``Query:``, ``Document:``) and quotes, then dropped when it is:

* ``not a query``: a line ending with ``:`` (a preamble such as "Here are 3 questions:");
* ``empty`` (nothing left) or ``no words`` (not a single letter: ``42``, ``--``);
* ``copy of document``: equal to the document once case, punctuation and spacing are ignored, holding
  the whole document (of 4 words or more), or a near-copy (``difflib`` ratio of the normalised texts
  >= ``near_duplicate_ratio``);
* ``too short`` / ``too long``: fewer than ``min_words`` or more than ``max_words`` words (split on
  whitespace), or fewer than ``min_chars`` or more than ``max_chars`` characters;
* ``duplicate``: the same normalised text as a query kept earlier for this document (by any LLM or
  style); ``near-duplicate``: a ``difflib`` ratio >= ``near_duplicate_ratio`` with one of them.

Across documents (:func:`drop_shared_queries`): a query written for two or more different documents
names none of them; every copy is dropped (``duplicate across documents``).

:data:`FILTER_OF` groups the reasons into the filters the summary counts.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from anglekit.generation.cleaning import normalize, strip_candidate

FILTER_OF = {
    "answer without a query": "parse",
    "not a query": "parse",
    "empty": "empty",
    "no words": "empty",
    "copy of document": "document copy",
    "too short": "length",
    "too long": "length",
    "duplicate": "duplicate",
    "near-duplicate": "duplicate",
    "duplicate across documents": "duplicate",
    "beyond size": "size",
    "consistency": "consistency",
}
"""Drop reason -> the filter that dropped it (the summary's ``filters``)."""
FILTERS = ("parse", "empty", "document copy", "length", "duplicate", "size", "consistency")

_QUERY_LABEL = re.compile(r"^\s*(?:(?:search\s+)?quer(?:y|ies)|questions?|keywords?|q|document)\s*\d*\s*[:\-.)]\s+", re.IGNORECASE)
"""A label before a query: ``Query 2:``, ``Question:``, ``Keywords -``, ``Q1.``, and ``Document:`` (a small model echoing the prompt)."""
_CONTAINMENT_WORDS = 4
"""A query holding the whole document counts as a copy only for documents of at least this many words."""


@dataclass(frozen=True)
class QueryLimits:
    """The length and closeness limits of :func:`clean_queries`."""

    min_words: int = 2
    max_words: int = 40
    min_chars: int = 3
    max_chars: int = 512
    near_duplicate_ratio: float = 0.95


def strip_query(text: str) -> str:
    """``text`` without list markers, labels (``Question 2:``, ``Query:``, ``Output:``) and quotes."""
    previous = None
    while previous != text:
        previous = text
        text = strip_candidate(_QUERY_LABEL.sub("", text, count=1))
    return text


def _near(a: str, b: str, ratio: float) -> bool:
    if ratio >= 1.0:
        return False
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return matcher.real_quick_ratio() >= ratio and matcher.quick_ratio() >= ratio and matcher.ratio() >= ratio


def _copies(norm: str, document_norm: str, document_words: int, ratio: float) -> bool:
    if norm == document_norm:
        return True
    if document_words >= _CONTAINMENT_WORDS and f" {document_norm} " in f" {norm} ":
        return True
    return _near(norm, document_norm, ratio)


def _problem(text: str, norm: str, limits: QueryLimits) -> str | None:
    """The reason a stripped candidate is no query by itself, or None."""
    if not text or not norm:
        return "empty"
    if not any(unicodedata.category(ch).startswith("L") for ch in text):
        return "no words"
    if text.endswith(":"):
        return "not a query"
    words = len(text.split())
    if words < limits.min_words or len(text) < limits.min_chars:
        return "too short"
    if words > limits.max_words or len(text) > limits.max_chars:
        return "too long"
    return None


def clean_queries(candidates: Iterable[str], document: str, limits: QueryLimits, kept_before: list[str] | None = None) -> tuple[list[str], Counter[str]]:
    """The usable queries among ``candidates`` (order kept) and the drops by reason.
    ``kept_before``: the normalised queries already kept for this document (extended in place)."""
    drops: Counter[str] = Counter()
    kept: list[str] = []
    document_norm = normalize(document)
    document_words = len(document_norm.split())
    seen = kept_before if kept_before is not None else []
    for raw in candidates:
        text = strip_query(raw)
        norm = normalize(text)
        reason = _problem(text, norm, limits)
        if reason is None and _copies(norm, document_norm, document_words, limits.near_duplicate_ratio):
            reason = "copy of document"
        if reason is None and norm in seen:
            reason = "duplicate"
        if reason is None and any(_near(norm, other, limits.near_duplicate_ratio) for other in seen):
            reason = "near-duplicate"
        if reason is not None:
            drops[reason] += 1
            continue
        kept.append(text)
        seen.append(norm)
    return kept, drops


def drop_shared_queries(documents_of: dict[str, set[int]]) -> set[str]:
    """The normalised queries written for more than one document (``documents_of[query]``: the
    documents it was written for): each names none of them."""
    return {query for query, documents in documents_of.items() if len(documents) > 1}


def filter_counts(drops: Counter[str]) -> dict[str, int]:
    """The drops summed per filter (:data:`FILTERS`, every one listed)."""
    counts = dict.fromkeys(FILTERS, 0)
    for reason, n in drops.items():
        counts[FILTER_OF[reason]] += n
    return counts


__all__ = ["FILTERS", "FILTER_OF", "QueryLimits", "clean_queries", "drop_shared_queries", "filter_counts", "strip_query"]
