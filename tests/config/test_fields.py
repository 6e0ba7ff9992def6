"""anglekit.config: settings declared as dataclass fields, read from flat keys or sections."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from anglekit.config import check_fields, read_sections, setting, setting_group, settings_of
from anglekit.errors import ConfigError


@dataclass
class _Inner:
    name: str = setting("", key="thing", help="the thing")
    size: int | None = setting(None, aliases=("size_of_it", "big-size"), help="how big", choices=(1, 2, 3))

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class _Other:
    rate: float = setting(0.5, help="a rate")
    on: bool = setting(False, key="other_on", help="switch")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class _Config:
    thing: _Inner = field(default_factory=_Inner)
    other: _Other = field(default_factory=_Other)


def test_settings_list_flat_keys_flags_and_help() -> None:
    listed = {s.key: s for s in settings_of(_Config)}
    assert list(listed) == ["thing", "size", "rate", "other_on"]
    assert listed["size"].flags == ("--size", "--size_of_it", "--big-size")
    assert listed["size"].keys == ("size", "size_of_it", "big_size")
    assert (listed["size"].base, listed["size"].optional, listed["size"].choices) == (int, True, (1, 2, 3))
    assert (listed["rate"].section, listed["rate"].name, listed["rate"].default, listed["rate"].help) == ("other", "rate", 0.5, "a rate")


def test_a_field_without_help_is_refused() -> None:
    @dataclass
    class Bare:
        x: int = 1

    with pytest.raises(TypeError, match="setting"):
        settings_of(Bare)


@dataclass
class _SameA:
    x: int = setting(1, key="same", help="x")


@dataclass
class _SameB:
    y: int = setting(1, key="same", help="y")


@dataclass
class _Both:
    a: _SameA = field(default_factory=_SameA)
    b: _SameB = field(default_factory=_SameB)


def test_two_settings_with_one_key_are_refused() -> None:
    with pytest.raises(TypeError, match="same"):
        settings_of(_Both)


@pytest.mark.parametrize(
    "data",
    [
        {"thing": "t", "size_of_it": 2, "rate": 1, "other_on": True},
        {"thing": {"name": "t", "size": 2}, "other": {"rate": 1, "on": True}},
        {"thing": "t", "big-size": 2, "other": {"rate": 1}, "other-on": True},
    ],
)
def test_flat_keys_aliases_and_sections_read_the_same(data: dict[str, Any]) -> None:
    assert read_sections(_Config, data, source="s") == {"thing": {"name": "t", "size": 2}, "other": {"rate": 1, "on": True}}


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"bogus": 1}, r"s: unknown setting\(s\) \['bogus'\]"),
        ({"thing": {"bogus": 1}}, r"thing\.bogus"),
        ({"size": 1, "size_of_it": 2}, "given twice"),
        ({"size": 1, "thing": {"size": 2}}, "given twice"),
        (["thing"], "expected a mapping"),
    ],
)
def test_unknown_duplicate_and_malformed_input_are_config_errors(data: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        read_sections(_Config, data, source="s")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": 3}, "thing must be str"),
        ({"size": True}, "size/size_of_it/big_size must be an integer"),
        ({"size": 2.0}, "size/size_of_it/big_size must be int"),
        ({"size": 7}, "size/size_of_it/big_size must be one of 1, 2, 3"),
        ({"name": None}, "thing may not be empty"),
    ],
)
def test_check_fields_names_the_flat_key(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _Inner(**kwargs)


def test_an_int_is_a_float_but_a_bool_is_not_an_int() -> None:
    assert _Other(rate=1).rate == 1
    with pytest.raises(ConfigError, match="rate must be float"):
        _Other(rate="1")  # type: ignore[arg-type]
    assert dataclasses.asdict(_Inner(size=None)) == {"name": "", "size": None}


def test_nan_is_outside_every_range() -> None:
    """nan compares False with everything, so a plain range check let it through (--learning-rate nan)."""
    from anglekit.config import Bounds

    nan = float("nan")
    for bounds in (Bounds(0, None, True), Bounds(None, 1), Bounds(0, 1), Bounds(-1, None)):
        assert "got nan" in (bounds.problem(nan) or "")
        assert bounds.problem(0.5) is None
    from anglekit.training.config import TrainConfig

    with pytest.raises(ConfigError, match="learning_rate must be a number > 0, got nan"):
        TrainConfig.from_dict({"learning_rate": nan})


# ------------------------------------------------------------------ groups: settings declared elsewhere

_DECLARED: list[Any] = []
"""What the group's provider lists: settings of a class declared elsewhere (a plugin's, say)."""


@dataclass(frozen=True)
class _Knobs:
    speed: float = setting(1.0, minimum=0, help="how fast")
    mode: str = setting("a", key="knob_mode", choices=("a", "b"), help="which way")
    plain: int = 0  # not declared with setting(): not listed with declared_only


@dataclass
class _Grouped:
    name: str = setting("", help="a name")
    knobs: dict[str, Any] = setting_group(lambda: list(_DECLARED), help="the knobs")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class _GroupConfig:
    main: _Grouped = field(default_factory=_Grouped)


def test_a_group_lists_what_its_provider_lists_when_asked() -> None:
    assert [s.key for s in settings_of(_GroupConfig)] == ["name"]
    _DECLARED[:] = settings_of(_Knobs, declared_only=True)
    try:
        listed = {s.key: s for s in settings_of(_GroupConfig)}
        assert list(listed) == ["name", "speed", "knob_mode"]
        assert (listed["knob_mode"].section, listed["knob_mode"].group, listed["knob_mode"].name) == ("main", "knobs", "knob_mode")
        for data in ({"speed": 2.0, "knob_mode": "b"}, {"main": {"speed": 2.0, "knob_mode": "b"}}, {"main": {"knobs": {"speed": 2.0, "knob-mode": "b"}}}):
            assert read_sections(_GroupConfig, data, source="s") == {"main": {"knobs": {"speed": 2.0, "knob_mode": "b"}}}
        grouped = _Grouped(knobs={"speed": 2.0})
        assert listed["speed"].value_in(grouped) == 2.0 and listed["knob_mode"].value_in(grouped) is None
        with pytest.raises(ConfigError, match=r"unknown setting\(s\) \['plain'\] in knobs; valid ones: speed, knob_mode"):
            _Grouped(knobs={"plain": 1})
        with pytest.raises(ConfigError, match="knob_mode must be one of a, b"):
            _Grouped(knobs={"knob_mode": "c"})
        with pytest.raises(ConfigError, match="speed must be >= 0"):
            _Grouped(knobs={"speed": -1.0})
        with pytest.raises(ConfigError, match=r"main\.knobs\.plain"):
            read_sections(_GroupConfig, {"main": {"knobs": {"plain": 1}}}, source="s")
    finally:
        _DECLARED.clear()
