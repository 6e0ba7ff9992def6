"""benchmarks/bench_train.py's row selection (--only, --list) and benchmarks/profile_train_step.py's
argument errors; the rows themselves are run by the benchmark, not here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from helpers import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("bench_train")


def listed(bench: ModuleType, capsys: pytest.CaptureFixture[str], *only: str) -> list[str]:
    argv = ["--list"] + [a for s in only for a in ("--only", s)]
    assert bench.main(argv) == 0
    return capsys.readouterr().out.split()


def test_a_whole_row_name_picks_that_row_alone(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    names = {row.name for row in bench.ROWS}
    assert {"sentence-transformers:cosent:grouped", "sentence-transformers:cosent:grouped:bf16"} <= names
    assert listed(bench, capsys, "sentence-transformers:cosent:grouped") == ["sentence-transformers:cosent:grouped"]
    assert listed(bench, capsys, "anglekit:paper:grouped:auto", "sentence-transformers:cosent:grouped") == [
        "sentence-transformers:cosent:grouped",
        "anglekit:paper:grouped:auto",
    ]


def test_a_shorter_selector_picks_every_row_it_begins(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    got = listed(bench, capsys, "sentence-transformers:cosent")
    assert got == [r.name for r in bench.ROWS if r.name.startswith("sentence-transformers:cosent:")] and len(got) >= 3
    assert listed(bench, capsys) == [r.name for r in bench.ROWS]


def test_a_selector_matching_nothing_is_an_error(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(["--list", "--only", "sentence-transformers:cosnet"])
    assert exc.value.code == 2 and "--only matched no row" in capsys.readouterr().err


def test_profile_script_refuses_missing_arguments_and_scripts(tmp_path: Path) -> None:
    script = ROOT / "benchmarks" / "profile_train_step.py"
    none = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert none.returncode == 2 and "Profile a training benchmark row" in none.stderr
    missing = subprocess.run([sys.executable, str(script), str(tmp_path / "nope.py"), str(tmp_path / "out.txt")], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no such script" in missing.stderr and not (tmp_path / "out.txt").exists()
