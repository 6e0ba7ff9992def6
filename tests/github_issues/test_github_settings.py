"""``anglekit github-issues`` flags come from the typed settings (as the other commands'): each
setting is one flag, a bad value is exit 2 naming the flag, and the settings refuse wrong types."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from anglekit.config import settings_of
from anglekit.errors import ConfigError
from anglekit.github_issues.build import PAPER_NEGATIVE_RATIO, PAPER_SPLIT_SHARES
from anglekit.github_issues.duplicates import PROJECT_ASSOCIATIONS
from anglekit.github_issues.settings import BuildSettings, CollectSettings, parse_shares

from helpers import run_cli


def _subparser(command: str) -> argparse.ArgumentParser:
    from anglekit.cli import build_parser

    top = build_parser()._subparsers._group_actions[0].choices["github-issues"]  # type: ignore[union-attr]
    return top._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr, no-any-return]


@pytest.mark.parametrize(("command", "settings_class"), [("collect", CollectSettings), ("build", BuildSettings)])
def test_every_setting_is_a_flag_with_its_help(command: str, settings_class: type) -> None:
    flags = {option: action for action in _subparser(command)._actions for option in action.option_strings}
    for s in settings_of(settings_class):
        assert s.flags[0] in flags, s.key
        assert " ".join(s.help.split())[:30] in " ".join(str(flags[s.flags[0]].help).split())


def test_the_flags_parse_into_the_settings_the_command_used_before() -> None:
    args = _subparser("build").parse_args(["c", "--output-dir", "o", "--split-shares", "0.8,0.1,0.1", "--no-plot", "--duplicate-authors", "owner,member"])
    given = {s.key: getattr(args, s.key) for s in settings_of(BuildSettings) if getattr(args, s.key, None) is not None}
    settings = BuildSettings(**given)
    assert settings.split_shares == (0.8, 0.1, 0.1) and settings.plot is False and settings.duplicate_authors == ("OWNER", "MEMBER")
    assert BuildSettings().negative_ratio == PAPER_NEGATIVE_RATIO and BuildSettings().split_shares == PAPER_SPLIT_SHARES
    args = _subparser("collect").parse_args(["--output-dir", "o", "--no-originals", "--no-rate-limit", "--per-page", "7"])
    given = {s.key: getattr(args, s.key) for s in settings_of(CollectSettings) if getattr(args, s.key, None) is not None}
    settings = CollectSettings(**given)
    assert (settings.originals, settings.rate_limit, settings.per_page, settings.candidates) == (False, False, 7, "signals")
    assert CollectSettings().duplicate_authors is None and PROJECT_ASSOCIATIONS


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["collect", "--per-page", "0"], "--per-page"),
        (["collect", "--per-page", "101"], "--per-page"),
        (["collect", "--max-issues", "x"], "--max-issues"),
        (["collect", "--candidates", "some"], "--candidates"),
        (["collect", "--duplicate-authors", "nobody"], "--duplicate-authors"),
        (["build", "c", "--split-shares", "0.5,0.5"], "--split-shares"),
        (["build", "c", "--split-shares", "a,b,c"], "--split-shares"),
        (["build", "c", "--negative-ratio", "-1"], "--negative-ratio"),
        (["build", "c", "--seed", "1.5"], "--seed"),
    ],
)
def test_a_bad_flag_is_exit_2_naming_it(argv: list[str], flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["github-issues", *argv, "--output-dir", str(tmp_path / "out")], capsys)
    assert code == 2 and flag in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("cls", "values", "match"),
    [
        (BuildSettings, {"seed": "42"}, "seed"),
        (BuildSettings, {"split_shares": (0.5, 0.5)}, "three numbers"),
        (BuildSettings, {"split_shares": ()}, "split_shares"),
        (BuildSettings, {"max_chars": 0}, "max_chars"),
        (CollectSettings, {"per_page": 500}, "per_page"),
        (CollectSettings, {"originals": "no"}, "originals"),
        (CollectSettings, {"candidates": "every"}, "candidates"),
    ],
)
def test_wrongly_typed_settings_are_config_errors(cls: type, values: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cls(**values)


def test_parse_shares_reads_three_numbers() -> None:
    assert parse_shares("0.7,0.2,0.1") == (0.7, 0.2, 0.1)
    for bad in ("", "1,2", "1,2,3,4", "x,y,z"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_shares(bad)
