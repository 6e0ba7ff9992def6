"""Print pip constraints that pin each dependency pyproject.toml declares to the lowest version it allows.

Usage: python scripts/floors.py EXTRA [EXTRA ...] > constraints.txt

Every requirement of the core dependencies and of the named extras becomes `name==floor`, the floor
being its `>=` (or `==`, `~=`) bound; a requirement that names several extras keeps the highest of
its floors. A requirement without a lower bound has no floor to test and is an error, as is an
unknown extra. Read by scripts/floors.sh; checked by tests/test_floors.py. Needs Python 3.11+
(tomllib) and `packaging`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def floor(requirement: Requirement) -> Version:
    """The lowest version a requirement allows: its `>=`, `==` or `~=` bound (the highest, if several)."""
    bounds = [Version(spec.version) for spec in requirement.specifier if spec.operator in (">=", "==", "~=")]
    if not bounds:
        raise ValueError(f"pyproject.toml: {requirement} has no lower bound (>=, == or ~=) to test")
    return max(bounds)


def requirements(project: dict, extras: list[str]) -> list[Requirement]:
    """The core dependencies and those of the named extras, an extra naming anglekit's own extras expanded."""
    declared = project.get("optional-dependencies", {})
    own = canonicalize_name(project["name"])
    found = [Requirement(line) for line in project.get("dependencies", [])]
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        if extra not in declared:
            raise ValueError(f"pyproject.toml: no extra named {extra!r} (declared: {', '.join(sorted(declared))})")
        seen.add(extra)
        for line in declared[extra]:
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == own:
                pending.extend(requirement.extras)
            else:
                found.append(requirement)
    return found


def floors(extras: list[str], pyproject: Path = PYPROJECT) -> dict[str, Version]:
    """Each requirement's canonical name mapped to its floor (the highest where it is declared twice)."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    pinned: dict[str, Version] = {}
    for requirement in requirements(project, extras):
        name = canonicalize_name(requirement.name)
        pinned[name] = max(pinned.get(name, Version("0")), floor(requirement))
    return pinned


def main(argv: list[str]) -> int:
    """Print the constraints for the extras named on the command line."""
    try:
        pinned = floors(argv)
    except ValueError as error:
        print(f"floors: {error}", file=sys.stderr)
        return 2
    for name, version in sorted(pinned.items()):
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
