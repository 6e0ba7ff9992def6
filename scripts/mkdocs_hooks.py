"""MkDocs hooks (mkdocs.yml `hooks:`): the history page is benchmarks/README.md itself, and the
benchmarks' charts are the files under benchmarks/results/.

The dated lab notes stay where the benchmarks are (engineers append to them beside their runs);
the site shows them as `history.md`, with links into docs/ rewritten to the site's pages, and the
docs' links to `../benchmarks/README.md` (which work in the repository's view) lead to that page.
Likewise a docs page's image `../benchmarks/results/X.png` (a chart a benchmark or `anglekit
reproduce` wrote beside its results) is published as `results-files/X.png` and the link follows.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

SOURCE = Path(__file__).resolve().parent.parent / "benchmarks" / "README.md"
RESULTS = SOURCE.parent / "results"
PUBLISHED = "results-files"
INTRO = (
    "# Benchmark history\n\n"
    "The dated lab notes of every benchmark run, as `benchmarks/README.md` keeps them: how each benchmark runs, and\n"
    "figures that later runs superseded. The current standing of each claim is on the [results page](results.md).\n\n"
)


def history_markdown(text: str) -> str:
    """benchmarks/README.md as a docs page: its own title dropped, `../docs/X.md` links made site-relative."""
    body = re.sub(r"\A# [^\n]*\n", "", text)
    body = re.sub(r"\]\(\.\./docs/([^)]+)\)", r"](\1)", body)
    return INTRO + body.lstrip("\n")


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "history.md", content=history_markdown(SOURCE.read_text(encoding="utf-8"))))
    for chart in sorted(RESULTS.rglob("*.png")):
        files.append(File.generated(config, f"{PUBLISHED}/{chart.relative_to(RESULTS).as_posix()}", abs_src_path=str(chart)))
    return files


def site_links(markdown: str) -> str:
    """A docs page's links to ``../benchmarks/README.md`` (anchors kept) made links to the history page,
    and its images ``../benchmarks/results/X.png`` links to their published copies."""
    markdown = re.sub(r"\]\(\.\./benchmarks/README\.md(#[^)]*)?\)", lambda m: f"](history.md{m.group(1) or ''})", markdown)
    return re.sub(r"\]\(\.\./benchmarks/results/([^)\s]+\.png)\)", rf"]({PUBLISHED}/\1)", markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return site_links(markdown)
