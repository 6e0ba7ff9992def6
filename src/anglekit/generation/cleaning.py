"""Clean candidate sentences: strip leftover markers and quotes, then drop what is unusable, counting
every drop by reason (nothing is dropped silently).

Reasons (keys of the returned counter): ``empty``, ``no words`` (not a single letter: ``42``,
``3.5``, ``--``), ``too short``, ``too long``, ``copy of input``
(same as the input once case, punctuation and spacing are ignored), ``duplicate`` (same normalised
text as an earlier candidate), ``near-duplicate of input`` (``difflib`` similarity ratio of the
normalised texts >= ``near_duplicate_ratio`` with the input; synonyms only: an antonym is *meant*
to be close to its input -- "A man is not spreading cheese" for "A man is spreading cheese" -- so
antonyms are never compared with it), ``near-duplicate of a candidate`` (the same ratio with an
earlier kept candidate of the same answer).
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from anglekit.config import setting
from anglekit.errors import ConfigError

DROP_REASONS = ("empty", "no words", "too short", "too long", "copy of input", "duplicate", "near-duplicate of input", "near-duplicate of a candidate")

_MARKER = re.compile(r"^\s*(?:\(\d{1,3}\)|\[\d{1,3}\]|\d{1,3}\s*[.):\]]|[-*•·–—+>])\s*")
_LABEL = re.compile(
    r"^\s*(?:output|answer|sentence|synonym(?:ous)?(?: sentence)?|antonym(?:ous)?(?: sentence)?|paraphrase)\s*\d*\s*[:\-]\s*",
    re.IGNORECASE,
)
_QUOTES = "\"'“”‘’«»`"
_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class CleaningConfig:
    """Which generated sentences are dropped; the fields are settings (``anglekit generate`` flags)."""

    min_chars: int = setting(3, minimum=0, help="drop generated sentences shorter than this many characters (after stripping)")
    max_chars: int = setting(512, minimum=1, help="drop generated sentences longer than this many characters")
    near_duplicate_ratio: float = setting(
        0.95,
        minimum=0,
        exclusive_minimum=True,
        maximum=1,
        help="difflib ratio for near-duplicates: a synonym vs its input, a sentence vs the earlier ones of its "
        "answer; antonyms are never compared with their input (1 disables)",
    )

    def __post_init__(self) -> None:
        if self.min_chars < 0 or self.max_chars < 1 or self.min_chars > self.max_chars:
            raise ConfigError(f"need 0 <= min_chars <= max_chars and max_chars >= 1, got {self.min_chars}, {self.max_chars}")
        if not 0.0 < self.near_duplicate_ratio <= 1.0:
            raise ConfigError(f"near_duplicate_ratio must be in (0, 1], got {self.near_duplicate_ratio}")


def strip_candidate(text: str) -> str:
    """Remove a leading list marker or label ("2.", "- ", "Output:") and surrounding quotes/blanks."""
    previous = None
    text = text.strip()
    while previous != text:
        previous = text
        text = _MARKER.sub("", text, count=1)
        text = _LABEL.sub("", text, count=1)
        text = text.strip().strip(_QUOTES).strip()
        if text.endswith(",") and text.count(",") == 1:  # a JSON-ish list line
            text = text[:-1].strip().strip(_QUOTES).strip()
    return _SPACE.sub(" ", text)


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", text)).strip()


def _near(a: str, b: str, ratio: float) -> bool:
    return ratio < 1.0 and difflib.SequenceMatcher(None, a, b).ratio() >= ratio


def clean_candidates(candidates: Iterable[str], source: str, config: CleaningConfig | None = None, *, kind: str = "synonym") -> tuple[list[str], Counter[str]]:
    """Kept candidates (order preserved) and the drops counted by reason. ``kind="antonym"``: no
    near-duplicate check against ``source`` (an antonym may differ from its input by one word)."""
    config = config or CleaningConfig()
    drops: Counter[str] = Counter()
    kept: list[str] = []
    source_norm = normalize(source)
    seen: set[str] = set()
    kept_norm: list[str] = []
    for raw in candidates:
        text = strip_candidate(raw)
        norm = normalize(text)
        if not text or not norm:
            drops["empty"] += 1
        elif not any(unicodedata.category(ch).startswith("L") for ch in text):
            drops["no words"] += 1
        elif len(text) < config.min_chars:
            drops["too short"] += 1
        elif len(text) > config.max_chars:
            drops["too long"] += 1
        elif norm == source_norm:
            drops["copy of input"] += 1
        elif norm in seen:
            drops["duplicate"] += 1
        elif kind != "antonym" and _near(norm, source_norm, config.near_duplicate_ratio):
            drops["near-duplicate of input"] += 1
        elif any(_near(norm, other, config.near_duplicate_ratio) for other in kept_norm):
            drops["near-duplicate of a candidate"] += 1
        else:
            kept.append(text)
            kept_norm.append(norm)
        seen.add(norm)
    return kept, drops


__all__ = ["DROP_REASONS", "CleaningConfig", "clean_candidates", "normalize", "strip_candidate"]
