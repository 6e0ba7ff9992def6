"""The AnglE paper's published tables, shipped with the package, as numbers.

``anglekit/evaluation/published/angle_paper.md`` is a copy of the project's transcription of the
paper's tables (``shared/paper/README.md``; a test keeps the two equal). :func:`paper_table`
parses one "## Table N" section into rows of ``{column: value}`` (numbers as floats, ``–`` and
empty cells as None), so reports put the published figure beside each measured row.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Any

from anglekit.errors import ConfigError, DataError

PAPER_FILE = "published/angle_paper.md"
PAPER_SCALE = "paper scale: BERT-base (110M) or LLaMA2-7B with LoRA, NLI (MNLI + SNLI) for transfer, max length 128, GPU, the paper's batch and epochs"
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


@lru_cache(maxsize=1)
def paper_text() -> str:
    """The shipped transcription of the paper's tables (markdown)."""
    return resources.files("anglekit.evaluation").joinpath(PAPER_FILE).read_text(encoding="utf-8")


def _cell(text: str) -> Any:
    value = text.strip().strip("*").strip()
    if value in ("", "–", "-"):
        return None
    return float(value) if _NUMBER.match(value) else value


def parse_tables(text: str) -> dict[str, list[dict[str, Any]]]:
    """``{"Table 4": [{column: value}, ...], ...}`` from the markdown: every ``## Table N`` section's
    first pipe table (header, rule, rows). A repeated column name gets a suffix: ``Spearman (2)``."""
    tables: dict[str, list[dict[str, Any]]] = {}
    section: str | None = None
    header: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        heading = re.match(r"^##\s+(Table\s+\d+)\b", line)
        if heading:
            section, header = heading.group(1), None
            tables[section] = []
            continue
        if line.startswith("## "):
            section, header = None, None
            continue
        if section is None or not line.startswith("|"):
            if header is not None and tables.get(section or ""):
                section, header = None, None  # the section's first table ended
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = []
            for c in cells:  # Table 4 repeats "Spearman": the second becomes "Spearman (2)"
                header.append(c if c not in header else f"{c} ({header.count(c) + sum(h.startswith(c + ' (') for h in header) + 1})")
        elif all(set(c) <= set("-: ") for c in cells):
            continue
        else:
            if len(cells) != len(header):
                raise DataError(f"a row of {section} has {len(cells)} cells, its header {len(header)}", source=PAPER_FILE)
            tables[section].append({h: _cell(c) for h, c in zip(header, cells, strict=True)})
    return tables


@lru_cache(maxsize=1)
def _tables() -> dict[str, list[dict[str, Any]]]:
    return parse_tables(paper_text())


def paper_table(number: int) -> list[dict[str, Any]]:
    """The rows of the paper's Table ``number`` (1-6)."""
    tables = _tables()
    key = f"Table {number}"
    if key not in tables:
        raise ConfigError(f"the shipped paper tables have no {key}; they have {', '.join(tables)}")
    return [dict(row) for row in tables[key]]


def paper_row(number: int, row: str, *, key: str | None = None) -> dict[str, Any]:
    """The row of the paper's Table ``number`` whose first column (or ``key``) equals ``row``
    (bold markers and the "* " of starred rows ignored)."""
    rows = paper_table(number)
    first = key or next(iter(rows[0]))
    for r in rows:
        if str(r.get(first)).strip("* ") == row:
            return r
    raise ConfigError(f"Table {number} has no row {row!r} in its column {first!r}")


def paper_value(number: int, row: str, column: str, *, key: str | None = None) -> float | None:
    """One published figure: :func:`paper_row`'s ``column`` (None for a cell without a number)."""
    r = paper_row(number, row, key=key)
    if column not in r:
        raise ConfigError(f"Table {number} has no column {column!r}; it has {', '.join(r)}")
    value = r[column]
    return value if isinstance(value, float) else None


def paper_note(pattern: str) -> str | None:
    """The first line of the shipped text matching ``pattern`` (a regular expression), e.g. the
    identical-sentence detection remark under Table 4."""
    for line in paper_text().splitlines():
        if re.search(pattern, line):
            return line.strip()
    return None
