"""The packages' import direction (docs/layout.md): data -> model -> losses -> training, with the faces
(cli, serve, evaluation, export, reproduce, adapt) on top; nothing below a face imports one.

Every import counts, deferred ones inside functions and ``importlib.import_module("anglekit...")``
included, so a lazy import cannot hide a wrong-way edge. The cycle counters in ../shared/tools
check cycles; this checks direction, which a one-way edge breaks without making a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "anglekit"

FACES = frozenset({"cli", "serve", "evaluation", "export", "reproduce", "adapt"})
"""Packages on top: only other faces (and ``anglekit/__main__.py``) may import them."""

LATER = {
    "data": frozenset({"model", "losses", "training", "metrics", "index", "corpus", "mining"}),
    "model": frozenset({"losses", "training", "metrics"}),
    "losses": frozenset({"training", "model", "metrics"}),
    "metrics": frozenset({"losses", "training"}),
}
"""What each package of the chain may not import: what comes after it."""


def _imported(tree: ast.AST) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, node.lineno))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append((node.args[0].value, node.lineno))
    return out


def wrong_way_imports(root: Path) -> list[str]:
    """``file:line: package -> package`` for every import against the direction, under ``root`` (the
    ``anglekit`` package folder)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if len(parts) == 1:  # the root modules: the public API and the ``python -m anglekit`` entry
            continue
        package = parts[0]
        for name, line in _imported(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not name.startswith("anglekit."):
                continue
            target = name.split(".")[1]
            if target == package:
                continue
            if (target in FACES and package not in FACES) or target in LATER.get(package, ()):
                found.append(f"{path.relative_to(root.parent)}:{line}: {package} -> {target}")
    return found


def test_no_package_imports_against_the_direction():
    assert SRC.is_dir()
    assert wrong_way_imports(SRC) == []


@pytest.mark.parametrize(
    ("package", "code", "edge"),
    [
        ("training", "from anglekit.evaluation.suites import run_suite\n", "training -> evaluation"),
        ("metrics", "def f():\n    import anglekit.training.run\n", "metrics -> training"),
        ("data", "import importlib\nm = importlib.import_module('anglekit.model.embedder')\n", "data -> model"),
        ("index", "from anglekit.serve import app\n", "index -> serve"),
    ],
)
def test_a_wrong_way_import_is_found(tmp_path, package, code, edge):
    root = tmp_path / "anglekit"
    (root / package).mkdir(parents=True)
    (root / package / "m.py").write_text(code, encoding="utf-8")
    (root / "cli").mkdir()
    (root / "cli" / "ok.py").write_text("from anglekit.evaluation import x\nfrom anglekit.training import y\n", encoding="utf-8")
    (root / "__main__.py").write_text("from anglekit.cli import main\n", encoding="utf-8")
    found = wrong_way_imports(root)
    assert len(found) == 1 and found[0].endswith(edge) and f"{package}/m.py:" in found[0]
