"""What the flags' texts become (argparse types) and the notes commands print, shared by
:mod:`anglekit.cli.common` (the commands' conventions) and :mod:`anglekit.cli.fields` (flags
generated from typed settings). Nothing here imports torch."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def ranged(kind: type, bounds: Any = None) -> Any:
    """argparse type: an int or float within ``bounds`` (an :class:`anglekit.config.Bounds` or
    None), checked when the flag is parsed, so a bad value fails at once with exit 2 and the range
    in the message."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        problem = bounds.problem(value) if bounds is not None else None
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def note(prog: str, message: str) -> None:
    """``PROG: note: MESSAGE`` on stderr."""
    print(f"{prog}: note: {message}", file=sys.stderr)


__all__ = ["note", "ranged"]
