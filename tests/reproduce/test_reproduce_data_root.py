"""``anglekit reproduce`` finds its data by the one data-root rule, never from the current directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from anglekit.data import DATA_ENV_VAR, user_data_dir
from anglekit.errors import ConfigError
from anglekit.reproduce.runner import data_root

from helpers import run_cli


@pytest.fixture
def cwd_with_shared_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current directory with shared/data and ../shared/data beside it, no $ANGLEKIT_DATA and an
    empty per-user folder: the layout the old cwd lookup picked up."""
    work = tmp_path / "work" / "main"
    for folder in (work / "shared" / "data" / "stsb", tmp_path / "work" / "shared" / "data" / "stsb"):
        folder.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path


def test_the_current_directory_is_never_a_data_root(cwd_with_shared_data: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        data_root(None)
    message = str(caught.value)
    assert "--data-root" in message and f"${DATA_ENV_VAR}" in message and str(user_data_dir()) in message


def test_the_rule_given_then_env_then_user_folder(cwd_with_shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = user_data_dir()
    user.mkdir(parents=True)
    assert data_root(None) == user.resolve()
    env = cwd_with_shared_data / "env-data"
    env.mkdir()
    monkeypatch.setenv(DATA_ENV_VAR, str(env))
    assert data_root(None) == env.resolve()
    given = cwd_with_shared_data / "given"
    given.mkdir()
    assert data_root(str(given)) == given.resolve()
    assert data_root("shared/data") == (cwd_with_shared_data / "work" / "main" / "shared" / "data").resolve()  # explicit: fine


@pytest.mark.parametrize("bad", ["", "  ", "no-such-folder"])
def test_a_bad_data_root_is_named(cwd_with_shared_data: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match="--data-root"):
        data_root(bad)


def test_bad_env_is_named(cwd_with_shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_ENV_VAR, str(cwd_with_shared_data / "missing"))
    with pytest.raises(ConfigError, match=DATA_ENV_VAR):
        data_root(None)


def test_cli_without_a_data_root_is_one_line_and_writes_nothing(cwd_with_shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = cwd_with_shared_data / "repro"
    code, _, err = run_cli(["reproduce", "objectives", "--output-dir", str(out), "--report-only"], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("anglekit reproduce: error: ") and "--data-root" in lines[0]
    assert not out.exists()
