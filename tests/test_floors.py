"""scripts/floors.py: the pins of the floors leg (scripts/floors.sh) are pyproject.toml's lower bounds."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytest.importorskip("tomllib")
ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("floors", ROOT / "scripts" / "floors.py")
floors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(floors)


def test_every_declared_range_is_pinned_at_its_lower_bound() -> None:
    """Read with a regex, independently of packaging: each `name>=x` of the core and the extras."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    expected: dict[str, str] = {}
    for name, bound in re.findall(r'"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?>=([0-9][0-9.]*)', text):
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key not in expected or tuple(map(int, bound.split("."))) > tuple(map(int, expected[key].split("."))):
            expected[key] = bound
    expected.pop("setuptools")  # the build system's, not the project's
    extras = ["data", "eval", "llm", "bench", "serve", "test", "index", "scale", "spark", "onnx", "openvino", "docs"]
    pinned = {name: str(version) for name, version in floors.floors(extras).items()}
    assert {k: floors.Version(v) for k, v in pinned.items()} == {k: floors.Version(v) for k, v in expected.items()}


def _pyproject(tmp_path: Path, dependencies: str, extras: str = "") -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(f'[project]\nname = "demo"\ndependencies = [{dependencies}]\n[project.optional-dependencies]\n{extras}\n', encoding="utf-8")
    return path


def test_own_extras_expand_and_the_highest_floor_wins(tmp_path: Path) -> None:
    path = _pyproject(tmp_path, '"numpy>=1.24,<3"', 'a = ["httpx>=0.27"]\nb = ["demo[a]", "httpx>=0.28,<1", "onnx~=1.17.0"]')
    assert {k: str(v) for k, v in floors.floors(["b"], path).items()} == {"numpy": "1.24", "httpx": "0.28", "onnx": "1.17.0"}


@pytest.mark.parametrize(
    ("dependencies", "extras", "message"),
    [('"numpy<3"', [], "numpy<3 has no lower bound"), ('"numpy"', [], "numpy has no lower bound"), ('"numpy>=1"', ["nope"], "no extra named 'nope'")],
)
def test_bad_input_is_a_clear_error(tmp_path: Path, dependencies: str, extras: list[str], message: str) -> None:
    path = _pyproject(tmp_path, dependencies)
    with pytest.raises(ValueError, match=re.escape(message)):
        floors.floors(extras, path)


def test_the_command_line_exits_2_on_an_unknown_extra(capsys: pytest.CaptureFixture[str]) -> None:
    assert floors.main(["no-such-extra"]) == 2
    assert "no extra named 'no-such-extra'" in capsys.readouterr().err
    assert floors.main(["onnx"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{name}=={version}" for name, version in sorted(floors.floors(["onnx"]).items())]
