"""``anglekit generate``'s flags are generated from typed settings: every setting of GenerationConfig
(those of GenerationParams, CleaningConfig and RetryPolicy it holds flat included) that the command
line reaches has one flag made from its metadata, whose default is the dataclass default, and the
parsed flags build the configs by name, with no field mapped by hand."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import pytest

from anglekit.cli import build_parser
from anglekit.cli.generate import DERIVED, QUERY_DERIVED, GenerateFlags, config_from_args, flags_from_args, query_config_from_args
from anglekit.config import Setting, settings_of
from anglekit.generation.backends import GenerationParams
from anglekit.generation.backends.openai_compat import RetryPolicy
from anglekit.generation.cleaning import CleaningConfig
from anglekit.generation.pipeline import GenerationConfig
from anglekit.generation.queries import QueryConfig

import helpers

MINIMAL = ["generate", "--input", "in.txt", "--output", "out.jsonl", "--llm", "openai:m@http://127.0.0.1:9/v1"]
PARTS = (GenerationParams, CleaningConfig, RetryPolicy)
"""The classes whose settings GenerationConfig holds flat (declared once, there)."""


def _parser_actions() -> dict[str, argparse.Action]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {flag: action for action in commands.choices["generate"]._actions for flag in action.option_strings}


def _flagged() -> list[Setting]:
    return [s for s in settings_of(GenerationConfig) if s.name not in DERIVED] + settings_of(GenerateFlags)


def _query_flagged() -> list[Setting]:
    return [s for s in settings_of(QueryConfig) if s.name not in QUERY_DERIVED]


def test_every_setting_reachable_from_the_cli_has_a_flag_made_from_its_metadata() -> None:
    actions = _parser_actions()
    for s in _flagged():
        action = actions[s.flags[0]]
        assert action.dest == s.key, s.key
        assert " ".join(s.help.split()) in action.help, s.key  # the help is the setting's own
        if s.choices is not None:
            assert tuple(action.choices) == tuple(s.choices), s.key
    # The settings GenerationConfig holds flat are the parts' own fields (the same metadata, declared once).
    mine = {f.name: f for f in dataclasses.fields(GenerationConfig)}
    for part in PARTS:
        for f in dataclasses.fields(part):
            if f.name == "max_retry_after":  # a RetryPolicy setting the command line does not reach
                assert f.name not in mine
                continue
            assert dict(mine[f.name].metadata) == dict(f.metadata), (part.__name__, f.name)
            if f.name != "seed":  # a run is seeded (0) unless told otherwise; GenerationParams() is unseeded
                assert mine[f.name].default == f.default, (part.__name__, f.name)
            assert f"--{f.name.replace('_', '-')}" in actions
    # The settings given through GenerateFlags (--kind, --*-template, --quiet) are exactly the derived ones.
    assert set(DERIVED) == set(GenerateFlags(input="x").config_values())
    assert set(mine) - {s.name for s in _flagged()} == set(DERIVED)
    # QueryConfig's settings: each its flag, from its metadata; those given through GenerateFlags are the derived ones
    for s in _query_flagged():
        action = actions[s.flags[0]]
        assert action.dest == s.key and " ".join(s.help.split()) in action.help, s.key
    assert set(QUERY_DERIVED) == set(GenerateFlags(input="x", kind="queries").query_values())
    assert {f.name for f in dataclasses.fields(QueryConfig)} - {s.name for s in _query_flagged()} == set(QUERY_DERIVED)


def test_help_lists_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = helpers.run_cli(["generate", "--help"], capsys)
    assert code == 0
    flat = " ".join(out.split())
    for s in _flagged() + _query_flagged():
        assert s.flags[0] in flat, s.key
    for flag in ("--output", "--llm SPEC", "--kind {synonym,antonym,both,queries}", "--query-style {question,keyword,both}", "--quiet"):
        assert flag in flat


def test_flag_defaults_are_the_dataclass_defaults() -> None:
    args = build_parser().parse_args(MINIMAL)
    config = config_from_args(args)
    expected = GenerationConfig(llms=["openai:m@http://127.0.0.1:9/v1"])
    for f in dataclasses.fields(GenerationConfig):
        assert getattr(config, f.name) == getattr(expected, f.name), f.name
    assert config.params() == GenerationParams(**{f.name: getattr(expected, f.name) for f in dataclasses.fields(GenerationParams)})
    assert config.cleaning() == CleaningConfig() and config.retry() == RetryPolicy()
    # --help shows each default as the dataclass holds it
    actions = _parser_actions()
    for s in _flagged():
        shown = s.default is not None and not (isinstance(s.default, (str, list, tuple)) and not s.default) and "default" not in s.help
        if shown:
            assert f"(default: {s.default})" in actions[s.flags[0]].help, s.key
    flags = flags_from_args(args)
    assert flags == GenerateFlags(input="in.txt")
    assert {name: getattr(expected, name) for name in DERIVED} == flags.config_values()
    assert query_config_from_args(args) == QueryConfig()
    for s in _query_flagged():
        shown = s.default is not None and "default" not in s.help
        if shown:
            assert f"(default: {s.default})" in actions[s.flags[0]].help, s.key


def _other_value(s: Setting) -> tuple[list[str], Any]:
    """Flags giving ``s`` a value other than its default, and that value."""
    flag = s.flags[0]
    if s.base is bool:
        return ([flag] if not s.default else [f"--no-{flag[2:]}"]), not s.default
    if s.choices is not None:
        value = next(c for c in s.choices if c != s.default)
    elif s.base is int:
        value = (s.default or 1) + 1
    elif s.base is float:
        value = 2.5 if s.default is None else (s.default / 2 if s.bounds is not None and s.bounds.maximum is not None else s.default + 1.5)
    else:
        candidates = ("value-1", "cpu")
        value = next(c for c in candidates if s.parse is None or _parses(s, c))
    return [flag, str(value)], value


def _parses(s: Setting, text: str) -> bool:
    try:
        s.parse(text)  # type: ignore[misc]
    except argparse.ArgumentTypeError:
        return False
    return True


def test_the_parsed_flags_build_the_configs_by_name() -> None:
    argv = ["generate", "--output", "out.jsonl"]
    expected: dict[str, Any] = {}
    for s in _flagged():
        if s.key == "llm":
            flags, value = ["--llm", "hf:a", "--llm", "openai:b@http://127.0.0.1:9/v1"], ["hf:a", "openai:b@http://127.0.0.1:9/v1"]
        else:
            flags, value = _other_value(s)
        argv += flags
        expected[s.name] = value
    args = build_parser().parse_args(argv)
    config, flags = config_from_args(args), flags_from_args(args)
    for s in settings_of(GenerateFlags):
        assert getattr(flags, s.name) == expected[s.name], s.key
    for s in settings_of(GenerationConfig):
        if s.name not in DERIVED:
            assert getattr(config, s.name) == expected[s.name], s.key
            assert getattr(config, s.name) != s.default, s.key  # every value came from its flag
    assert config.kinds == (expected["kind"],) and config.progress is not expected["quiet"]
    assert config.templates == {"synonym": expected["synonym_template"], "antonym": expected["antonym_template"]}
    for part, built in ((GenerationParams, config.params()), (CleaningConfig, config.cleaning()), (RetryPolicy, config.retry())):
        for f in dataclasses.fields(part):
            if f.name in expected:
                assert getattr(built, f.name) == expected[f.name], (part.__name__, f.name)


def test_the_parsed_query_flags_build_the_query_config_by_name(tmp_path: Any) -> None:
    template = tmp_path / "keyword.txt"
    template.write_text("Keywords for {document}")
    argv = [*MINIMAL, "--kind", "queries", "--query-style", "both", "--question-template", "Ask {size}: {document}", "--keyword-template", f"@{template}"]
    expected: dict[str, Any] = {}
    for s in _query_flagged():
        flags, value = _other_value(s)
        if s.key == "max_words":  # above --min-words' other value
            flags, value = [flags[0], "41"], 41
        argv += flags
        expected[s.name] = value
    queries = query_config_from_args(build_parser().parse_args(argv))
    for s in _query_flagged():
        assert getattr(queries, s.name) == expected[s.name] != s.default, s.key
    assert queries.styles == ("question", "keyword")
    assert queries.templates == {"question": "Ask {size}: {document}", "keyword": "Keywords for {document}"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--top-p", "0"], "argument --top-p: must be > 0, got 0.0"),
        (["--near-duplicate-ratio", "0"], "argument --near-duplicate-ratio: must be > 0, got 0.0"),
        (["--max-repeated-errors", "0"], "argument --max-repeated-errors: must be >= 1, got 0"),
        (["--limit", "0"], "argument --limit: expected a positive integer, got 0"),
        (["--device", "gpu"], "argument --device: expected cpu, cuda, cuda:N or mps, got 'gpu'"),
        (["--kind", "paraphrase"], "argument --kind: invalid choice: 'paraphrase'"),
    ],
)
def test_ranges_and_choices_declared_once_are_checked_as_flags_are_parsed(flags: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = helpers.run_cli([*MINIMAL, *flags], capsys)
    assert code == 2 and message in err, err


def test_input_and_llm_are_required(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = helpers.run_cli(["generate", "--output", "o.jsonl"], capsys)
    assert code == 2 and "the following arguments are required: --input, --llm" in err, err
