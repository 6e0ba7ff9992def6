"""Small helpers shared by the suites: markdown tables and number formatting."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def fmt(value: Any, digits: int = 2) -> str:
    """``72.3712`` -> ``"72.37"``; None / NaN -> ``"-"``; other values as ``str``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, digits: int = 2, align_first_left: bool = True) -> str:
    """A GitHub-flavoured markdown table; numbers right-aligned, the first column left-aligned."""
    cells = [[fmt(c, digits) for c in row] for row in rows]
    head = [str(h) for h in header]
    widths = [max([len(head[i])] + [len(r[i]) for r in cells]) for i in range(len(head))]

    def line(values: Sequence[str]) -> str:
        parts = []
        for i, v in enumerate(values):
            parts.append(v.ljust(widths[i]) if (i == 0 and align_first_left) else v.rjust(widths[i]))
        return "| " + " | ".join(parts) + " |"

    rule = []
    for i, w in enumerate(widths):
        rule.append(":" + "-" * (w - 1) if (i == 0 and align_first_left) else "-" * (w - 1) + ":")
    return "\n".join([line(head), "| " + " | ".join(rule) + " |", *(line(r) for r in cells)])


def mean(values: Sequence[float]) -> float:
    vals = [float(v) for v in values]
    return sum(vals) / len(vals) if vals else float("nan")
