"""Side-by-side markdown report of several runs (folders of ``<suite>.json``) and published numbers.

    from anglekit.evaluation.report import report
    print(report(["runs/minilm", "runs/angle-bert"]))

Each run folder holds the JSON files written by :func:`anglekit.evaluation.suites.run_suite`. For
every suite found, one table: a row per run (named by the model name in the JSON, or the folder
name when two runs share a name), then the numbers shipped in
``anglekit/evaluation/published/published.json`` for that suite, marked with their source.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, DataError, InputPathError
from anglekit.evaluation.tables import markdown_table
from anglekit.io.read import describe, read_json, require_object

SUITE_ORDER = ("sts", "non-transfer", "transfer", "retrieval", "geometry")
SUITE_TITLES = {
    "sts": "STS (Spearman x 100; AnglE Table 2 layout)",
    "non-transfer": "Non-transfer tasks (Spearman x 100; AnglE Table 3 layout)",
    "transfer": "Transfer tasks (accuracy x 100; AnglE Table 6 layout)",
    "retrieval": "Flickr30k caption retrieval (%)",
    "geometry": "Embedding geometry (lower alignment / uniformity is better)",
}


def published_rows(suite: str | None = None) -> list[dict[str, Any]]:
    """The shipped reference rows (optionally of one suite)."""
    text = resources.files("anglekit.evaluation").joinpath("published/published.json").read_text(encoding="utf-8")
    rows = json.loads(text)["rows"]
    return [r for r in rows if suite is None or r["suite"] == suite]


def load_run(run_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """``{suite: result}`` of the suite JSON files in ``run_dir``."""
    directory = Path(run_dir)
    if directory.is_file():
        raise InputPathError(
            "is a file; expected a folder of <suite>.json files written by 'anglekit eval --suite "
            "NAME --output-dir DIR' (the JSON of 'eval --data --output' is not a suite result)",
            source=str(directory),
        )
    if not directory.is_dir():
        raise InputPathError("run folder not found; expected a folder of <suite>.json files written by run_suite", source=str(directory))
    results: dict[str, dict[str, Any]] = {}
    for suite in SUITE_ORDER:
        path = directory / f"{suite}.json"
        if not path.exists():
            continue
        results[suite] = _check_result(read_json(path, expected=_EXPECTED), str(path))
    if not results:
        raise DataError(f"no suite results here; expected one of {', '.join(f'{s}.json' for s in SUITE_ORDER)}", source=str(directory))
    return results


_EXPECTED = "a suite result written by 'anglekit eval --suite' (an object with 'columns', a list of names, and 'scores', an object of numbers)"


def _check_result(data: Any, source: str) -> dict[str, Any]:
    """``data`` if it has the shape :func:`anglekit.evaluation.suites.run_suite` writes, else a
    :class:`DataError` naming the key and what it expected."""
    require_object(data, source=source, expected=_EXPECTED)
    missing = [key for key in ("columns", "scores") if key not in data]
    if missing:
        raise DataError(f"no {' or '.join(repr(k) for k in missing)} key (keys: {', '.join(map(repr, data)) or 'none'}); expected {_EXPECTED}", source=source)
    columns = data["columns"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise DataError(f"expected a list of column names, got {describe(columns)}", source=source, field="columns")
    scores = require_object(data["scores"], source=source, field="scores", expected="an object of column name -> number")
    for name, value in scores.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise DataError(f"expected a number or null, got {describe(value)}", source=source, field=f"scores.{name}")
    for key, kind in (("model", dict), ("variant", str)):
        value = data.get(key)
        if value is not None and not isinstance(value, kind):
            what = "an object" if kind is dict else "a string"
            raise DataError(f"expected {what} or null, got {describe(value)}", source=source, field=key)
    return data


def _run_names(runs: Sequence[tuple[Path, dict[str, Any]]]) -> list[str]:
    """Each run's name in the tables: its model's name (else its folder's), with the folder where two share one."""
    names = []
    for directory, results in runs:
        first = next(iter(results.values()))
        names.append(str((first.get("model") or {}).get("name") or directory.name))
    for i, name in enumerate(names):
        if names.count(name) > 1:
            names[i] = f"{name} ({runs[i][0].name})"
    return names


def _suite_rows(suite: str, names: Sequence[str], runs: Sequence[tuple[Path, dict[str, Any]]], notes: list[str] | None) -> tuple[list[str], list[list[Any]]]:
    """(columns, rows) of ``suite``'s table: each run that has it, then (with ``notes``, where
    their sources are appended) the published rows."""
    columns: list[str] = []
    for _, results in runs:
        for c in results.get(suite, {}).get("columns", []):
            if c not in columns:
                columns.append(c)
    rows = []
    for name, (_, results) in zip(names, runs, strict=True):
        if suite in results:
            scores = results[suite]["scores"]
            variant = results[suite].get("variant")
            label = f"{name} [{variant}]" if variant else name
            rows.append([label, *[scores.get(c) for c in columns]])
    if notes is not None:
        for pub in published_rows(suite):
            notes.append(f"{pub['name']}: {pub['source']}")
            marker = "†" if pub["kind"] == "paper" else "‡"
            data = f" [{pub['data']}]" if pub.get("data") else ""
            rows.append([f"{pub['name']}{data} {marker}", *[pub["scores"].get(c) for c in columns]])
    return columns, rows


def report(run_dirs: Sequence[str | os.PathLike[str]], *, suites: Sequence[str] | None = None, include_published: bool = True, digits: int = 2) -> str:
    """A markdown document comparing ``run_dirs`` suite by suite (see the module doc)."""
    if not run_dirs:
        raise ConfigError("report needs at least one run folder")
    if suites is not None:
        unknown = [s for s in suites if s not in SUITE_ORDER]
        if unknown:
            raise ConfigError(f"unknown suite(s) {unknown}; choose from {', '.join(SUITE_ORDER)}")
    runs = [(Path(d), load_run(d)) for d in run_dirs]
    names = _run_names(runs)
    wanted = [s for s in SUITE_ORDER if (suites is None or s in suites) and any(s in r for _, r in runs)]
    sections = ["# Evaluation report", ""]
    notes: list[str] = []
    for suite in wanted:
        columns, rows = _suite_rows(suite, names, runs, notes if include_published else None)
        sections += [f"## {SUITE_TITLES[suite]}", "", markdown_table(["model", *columns], rows, digits=digits), ""]
    if notes:
        sections += ["† reported in a paper; ‡ reference measurement shipped with anglekit. Sources:", ""]
        sections += [f"- {n}" for n in dict.fromkeys(notes)]
        sections.append("")
    sections += ["Runs:", ""]
    for name, (directory, results) in zip(names, runs, strict=True):
        model = next(iter(results.values())).get("model") or {}
        sections.append(f"- {name}: `{directory}` (fingerprint {model.get('fingerprint')}, max_length {model.get('max_length')}; suites {', '.join(results)})")
    return "\n".join(sections) + "\n"
