"""The strict docs build that CI runs (scripts/build_docs.sh) fails on a warning: a broken link or
anchor planted in a copy of the docs must fail it, and nothing else in the copy may warn."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ci_builds_the_docs_through_the_strict_script() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash scripts/build_docs.sh || exit $?" in ci
    # mkdocs 1.6 counts no warning under --quiet, so strict mode would pass anything.
    for text in (ci, (ROOT / "scripts" / "build_docs.sh").read_text(encoding="utf-8")):
        commands = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        assert not [line for line in commands if "mkdocs" in line and ("--quiet" in line or " -q" in line)]


def test_docs_build_fails_on_a_planted_broken_link_and_anchor(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("the docs extra is not installed")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    assert mkdocs.is_file(), f"the docs extra is installed but {mkdocs} is missing"
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "docs", tree / "docs")
    shutil.copytree(ROOT / "scripts", tree / "scripts")
    shutil.copy(ROOT / "mkdocs.yml", tree / "mkdocs.yml")
    (tree / "benchmarks").mkdir()
    shutil.copy(ROOT / "benchmarks" / "README.md", tree / "benchmarks" / "README.md")
    (tree / "benchmarks" / "results").symlink_to(ROOT / "benchmarks" / "results")
    (tree / "src").symlink_to(ROOT / "src")
    page = tree / "docs" / "training.md"
    page.write_text(
        page.read_text(encoding="utf-8") + "\nSee [nowhere](no-such-page.md) and [no heading](objectives.md#no-such-heading).\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        ["bash", str(tree / "scripts" / "build_docs.sh")],
        env={**os.environ, "MKDOCS": str(mkdocs)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "no-such-page.md" in output and "#no-such-heading" in output, output
    assert "Aborted with 2 warnings in strict mode" in output, output  # the planted two, nothing else
    assert not any(line.startswith("INFO") for line in output.splitlines()), output


def test_ci_fails_when_the_slow_marker_selects_no_test() -> None:
    """pytest exits 5 when it selects no test; with slow tests in the suite that means something broke."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "-ne 5" not in ci
    slow = [path for path in (ROOT / "tests").rglob("test_*.py") if "pytest.mark.slow" in path.read_text(encoding="utf-8")]
    assert slow, "no slow-marked test: .ci/run's `-m slow` leg would select nothing"
