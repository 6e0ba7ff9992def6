"""docs/layout.md is written from the packages that exist: every package under src/anglekit has its
entry, no entry names a package that is not there, every subpackage that exists is named on its
package's entry, and the root modules' line lists the root modules."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "anglekit"
ENTRY = re.compile(r"^  ([a-z_]+)/ ")


def layout_entries(text: str) -> tuple[list[str], dict[str, str]]:
    """(the root modules' line, {package: its entry's text}) of the layout page's tree."""
    tree = text.split("```\nsrc/anglekit/\n", 1)[1].split("```", 1)[0]
    roots: list[str] = []
    entries: dict[str, str] = {}
    current = None
    for line in tree.splitlines():
        if line.startswith("tests/"):
            break
        match = ENTRY.match(line)
        if match:
            current = match.group(1)
            assert current not in entries, f"docs/layout.md names {current}/ twice"
            entries[current] = line[match.end() :]
        elif line.startswith("  ") and not line.startswith("   "):  # the root modules' line
            roots = re.findall(r"[a-z_]+\.py", line.split("   ", 1)[0])
            current = None
        elif current is not None:
            entries[current] += " " + line.strip()
    return roots, entries


def packages(folder: Path) -> set[str]:
    return {path.parent.name for path in folder.glob("*/__init__.py")}


def problems(text: str, src: Path) -> list[str]:
    roots, entries = layout_entries(text)
    found = [f"{name}/ is a package with no entry" for name in sorted(packages(src) - set(entries))]
    found += [f"{name}/ has an entry but is no package" for name in sorted(set(entries) - packages(src))]
    for name in sorted(set(entries) & packages(src)):
        found += [f"{name}/{sub}/ is a subpackage its entry does not name" for sub in sorted(packages(src / name)) if f"{sub}/" not in entries[name]]
    modules = sorted(path.name for path in src.glob("*.py"))
    if sorted(roots) != modules:
        found.append(f"the root modules' line lists {sorted(roots)}, the package holds {modules}")
    return found


def test_layout_page_names_the_packages_that_exist() -> None:
    assert problems((ROOT / "docs" / "layout.md").read_text(encoding="utf-8"), SRC) == []


def test_layout_check_fails_on_a_missing_or_a_stale_entry(tmp_path: Path) -> None:
    src = tmp_path / "anglekit"
    for package in ("data", "model", "model/sub", "gone_soon"):
        (src / package).mkdir(parents=True)
        (src / package / "__init__.py").write_text("")
    (src / "__init__.py").write_text("")
    (src / "errors.py").write_text("")
    page = "# Layout\n\n```\nsrc/anglekit/\n  __init__.py, errors.py   the API\n  data/    records\n  model/   the model; sub/ (a part)\n  ghost/   nothing\ntests/   tests\n```\n"
    assert problems(page, src) == ["gone_soon/ is a package with no entry", "ghost/ has an entry but is no package"]
    (src / "model" / "other").mkdir()
    (src / "model" / "other" / "__init__.py").write_text("")
    (src / "version.py").write_text("")
    assert "model/other/ is a subpackage its entry does not name" in problems(page, src)
    assert any("root modules" in problem for problem in problems(page, src))
