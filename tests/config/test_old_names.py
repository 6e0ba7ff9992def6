"""Renamed settings keep working for a minor version: old YAML keys and flags are accepted with a
deprecation warning naming the new spelling, through a converter where the meaning changed
(``progress: true`` is ``quiet: false``)."""

from __future__ import annotations

import argparse
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from anglekit.cli import build_parser
from anglekit.cli.fields import add_settings, overrides
from anglekit.config import OldName, check_fields, negate, read_sections, setting, settings_of
from anglekit.errors import ConfigError
from anglekit.training.config import TrainConfig


@dataclass
class _Run:
    quiet: bool = setting(False, help="no bar", old_names=(OldName("progress", negate),))
    batch: int = setting(8, minimum=1, help="batch", old_names=("old_batch",))

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class _Config:
    run: _Run = field(default_factory=_Run)


def _read(data: dict[str, object]) -> dict[str, object]:
    return read_sections(_Config, data, source="cfg.yaml")["run"]


@pytest.mark.parametrize(("data", "expected"), [
    ({"progress": True}, {"quiet": False}),
    ({"progress": False}, {"quiet": True}),
    ({"old_batch": 3}, {"batch": 3}),
    ({"old-batch": 3}, {"batch": 3}),
    ({"run": {"progress": True}}, {"quiet": False}),
])  # fmt: skip
def test_old_keys_map_to_the_new_setting_with_a_warning(data: dict[str, object], expected: dict[str, object], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="anglekit.config.fields"), pytest.warns(DeprecationWarning) as caught:
        assert _read(data) == expected
    message = str(caught[0].message)
    new = next(iter(expected))
    assert message.startswith("cfg.yaml: ") and "is deprecated, it is now" in message and new in message
    assert caplog.records and caplog.records[0].getMessage() == message
    if "progress" in str(data):
        value = "true" if "True" in str(data) else "false"
        inverse = "false" if value == "true" else "true"
        assert f"progress: {value} is " in message and f"quiet: {inverse})" in message


def test_new_keys_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _read({"quiet": True, "batch": 2}) == {"quiet": True, "batch": 2}


@pytest.mark.parametrize(("data", "match"), [
    ({"progress": "yes"}, r"cfg.yaml: progress \(now quiet\) must be true or false, got str 'yes'"),
    ({"progress": 1}, r"progress \(now quiet\) must be true or false, got int 1"),
    ({"progress": True, "quiet": True}, "given twice"),
    ({"progres": True}, r"unknown setting\(s\) \['progres'\]"),
    ({"run": {"old_batch": 2, "batch": 2}}, "given twice"),
])  # fmt: skip
def test_bad_old_values_name_both_spellings(data: dict[str, object], match: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ConfigError, match=match):
            _read(data)


def test_an_old_value_is_checked_like_a_new_one() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        sections = read_sections(_Config, {"old_batch": 0}, source="cfg.yaml")
    with pytest.raises(ConfigError, match="batch must be >= 1, got 0"):
        _Run(**sections["run"])


def test_an_old_name_may_not_collide_with_a_key() -> None:
    @dataclass
    class Clash:
        a: int = setting(1, help="a", old_names=("b",))
        b: int = setting(2, help="b")

    with pytest.raises(TypeError, match="'b' is used by two settings"):
        settings_of(Clash)


def _parser() -> tuple[argparse.ArgumentParser, list]:  # type: ignore[type-arg]
    parser = argparse.ArgumentParser(prog="anglekit demo", argument_default=argparse.SUPPRESS)
    return parser, add_settings(parser, _Config)


@pytest.mark.parametrize(("argv", "expected", "note"), [
    (["--progress"], {"quiet": False}, "--progress is now --no-quiet"),
    (["--no-progress"], {"quiet": True}, "--no-progress is now --quiet"),
    (["--old-batch", "4"], {"batch": 4}, "--old-batch is now --batch"),
])  # fmt: skip
def test_old_flags(argv: list[str], expected: dict[str, object], note: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser, settings = _parser()
    with pytest.warns(DeprecationWarning, match=note):
        assert overrides(parser.parse_args(argv), settings) == expected
    assert f"anglekit demo: note: {note}" in capsys.readouterr().err
    assert "progress" not in parser.format_help() and "old-batch" not in parser.format_help()


def test_old_flag_values_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    parser, _ = _parser()
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--old-batch", "0"])
    assert exited.value.code == 2 and "--old-batch" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["--progress", "yes"])  # a switch takes no value


def test_train_reads_an_old_config_and_old_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = "model: m\ntrain_data: d.jsonl\n"
    for yaml_value, quiet in (("true", False), ("false", True)):
        path = tmp_path / f"old-{yaml_value}.yaml"
        path.write_text(base + f"progress: {yaml_value}\n")
        with pytest.warns(DeprecationWarning, match=f"progress: {yaml_value} is quiet: {str(quiet).lower()}"):
            assert TrainConfig.from_yaml(path).trainer.quiet is quiet
    nested = tmp_path / "nested.yaml"
    nested.write_text(base + "trainer:\n  progress: false\n")
    with pytest.warns(DeprecationWarning, match="trainer.progress is deprecated, it is now trainer.quiet"):
        assert TrainConfig.from_yaml(nested).trainer.quiet is True
    with pytest.warns(DeprecationWarning):
        assert TrainConfig.from_yaml(tmp_path / "old-true.yaml", {"quiet": True}).trainer.quiet is True  # flags win
    bad = tmp_path / "bad.yaml"
    bad.write_text(base + "progress: maybe\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: progress \(now quiet\) must be true or false"):
        TrainConfig.from_yaml(bad)
    parser = build_parser()
    with pytest.warns(DeprecationWarning):
        assert parser.parse_args(["train", "--progress"]).quiet is False
    assert "--progress" not in capsys.readouterr().out
