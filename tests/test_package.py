"""The package root holds only the public API; no import cycles; one version."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

import anglekit

SRC = Path(anglekit.__file__).resolve().parent
CYCLES_TOOL = Path(__file__).resolve().parents[2] / "shared" / "tools" / "import_cycles.py"


def test_the_root_holds_only_the_public_api() -> None:
    assert sorted(p.name for p in SRC.glob("*.py")) == ["__init__.py", "__main__.py", "errors.py", "version.py"]
    for name in anglekit.__all__:
        assert getattr(anglekit, name) is not None


def test_every_package_is_named_for_a_concept_and_imports() -> None:
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())
    assert packages == [
        "adapt",
        "cli",
        "config",
        "corpus",
        "data",
        "evaluation",
        "export",
        "generation",
        "github_issues",
        "index",
        "io",
        "llm",
        "losses",
        "metrics",
        "mining",
        "model",
        "plugins",
        "reproduce",
        "scale",
        "serve",
        "training",
    ]
    for name in packages:
        importlib.import_module(f"anglekit.{name}")


def test_the_package_docstring_names_every_subpackage() -> None:
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())
    listed = [line.split("``")[1] for line in (anglekit.__doc__ or "").splitlines() if line.startswith("- ``")]
    assert sorted(listed) == packages


def test_the_installed_version_is_the_package_version() -> None:
    assert importlib.metadata.version("anglekit") == anglekit.__version__


@pytest.mark.skipif(not CYCLES_TOOL.is_file(), reason="../shared/tools/import_cycles.py is not beside the checkout")
def test_no_import_cycles() -> None:
    out = subprocess.run([sys.executable, str(CYCLES_TOOL), str(SRC.parent), "anglekit"], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "cycles 0", out.stdout


MAX_FUNCTION_LINES = 80
DATA_TABLES = {("reproduce/tables.py", "build_tables")}
"""Functions that are data tables (one entry per line), exempt from the length limit."""


def test_no_function_is_longer_than_80_lines() -> None:
    import ast

    long = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (relative, node.name) not in DATA_TABLES:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{relative}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "split these into named steps: " + "; ".join(long)
