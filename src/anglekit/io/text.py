"""What counts as an empty text: the one rule every reader, the server, search and corpus encode use.

A text is *blank* when nothing visible is left once whitespace and invisible characters go:
format characters (Unicode category Cf: zero-width space U+200B, the BOM U+FEFF, word joiner
U+2060, bidi marks, ...), control characters (Cc), and the characters Unicode calls default
ignorable although they are letters or marks (Hangul fillers U+115F, U+1160, U+3164, U+FFA0,
the combining grapheme joiner U+034F, variation selectors, ...). Such a text tokenizes to nothing
but special tokens, so its embedding says nothing about it. Nothing here imports anything.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["INVISIBLE_EXTRA", "is_blank", "is_invisible"]

INVISIBLE_EXTRA = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0"
    + "".join(map(chr, range(0x180B, 0x1810)))  # Mongolian free variation selectors (Mn) and vowel separator
    + "".join(map(chr, range(0xFE00, 0xFE10)))  # variation selectors
    + "".join(map(chr, range(0xE0100, 0xE01F0)))  # variation selectors supplement
)
"""Default-ignorable code points outside the Cf and Cc categories (Unicode's DerivedCoreProperties)."""


def is_invisible(ch: str) -> bool:
    """Whether the character ``ch`` shows nothing: whitespace, a format or control character, or
    one of :data:`INVISIBLE_EXTRA`."""
    return ch.isspace() or ch in INVISIBLE_EXTRA or unicodedata.category(ch) in ("Cf", "Cc")


_ASCII_VISIBLE = re.compile(r"[!-~]")
"""A printable ASCII character: a text holding one is not blank (the common case, decided in C)."""


def is_blank(text: str) -> bool:
    """Whether ``text`` is empty, or holds only whitespace and invisible characters (:func:`is_invisible`)."""
    first = text[:1]
    if first.isalnum() and first not in INVISIBLE_EXTRA:  # the common case: one check of the first character
        return False
    if _ASCII_VISIBLE.search(text):
        return False
    return all(ch.isspace() or ch in INVISIBLE_EXTRA or unicodedata.category(ch) in ("Cf", "Cc") for ch in text)
