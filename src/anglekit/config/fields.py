"""Settings as dataclass fields: metadata, type checks, flat keys, and reading mappings.

Declare a field with :func:`setting`; :func:`settings_of` lists a (sectioned) config class's
settings with their flat keys, flags and help; :func:`check_fields` checks an instance's values
against the annotations; :func:`read_sections` turns flat keys and/or nested section mappings into
the keyword arguments of each section. A :func:`setting_group` field holds settings declared
elsewhere and listed when asked (e.g. the knobs of the registered objective families): each is a
flat key and a flag like a field's own, and the field's dict holds the ones given.

A renamed setting declares its former names (:class:`OldName`, ``setting(..., old_names=...)``):
for a minor version they keep working, as YAML keys and as flags, with a DeprecationWarning (and a
logged warning) that names the new spelling; a converter maps an old value whose meaning changed
(``progress: true`` is ``quiet: false``: :func:`negate`).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import types
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass
from typing import Any

from anglekit.errors import ConfigError

logger = logging.getLogger(__name__)


def negate(value: Any) -> bool:
    """The converter of a switch renamed to its opposite (``progress`` -> ``quiet``)."""
    if not isinstance(value, bool):
        raise TypeError(f"must be true or false, got {type(value).__name__} {value!r}")
    return not value


@dataclass(frozen=True)
class OldName:
    """A former key of a setting, still accepted (YAML key and flag) with a deprecation warning.

    ``convert`` maps a value given under the old name to the new setting's value (None: the same
    value); it raises TypeError or ValueError for a value it cannot map.
    """

    key: str
    convert: Callable[[Any], Any] | None = None

    def value(self, value: Any, new_key: str, source: str) -> Any:
        """``value`` (given as this old key) for the new setting; a ConfigError naming both keys."""
        if self.convert is None:
            return value
        try:
            return self.convert(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: {self.key} (now {new_key}) {exc}") from None

    def message(self, new_key: str, source: str, value: Any = MISSING) -> str:
        """The deprecation message: the old and the new key (and how the value maps, if it does)."""
        mapped = ""
        if self.convert is not None and value is not MISSING:
            try:
                mapped = f" ({self.key}: {_show(value)} is {new_key}: {_show(self.convert(value))})"
            except (TypeError, ValueError):
                mapped = ""
        return f"{source}: {self.key} is deprecated, it is now {new_key}{mapped}; the old spelling will stop working in a later version"


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value)


def warn_old_name(message: str) -> None:
    """Say that an old spelling was used: a DeprecationWarning and a logged warning."""
    warnings.warn(message, DeprecationWarning, stacklevel=3)
    logger.warning("%s", message)


def setting(
    default: Any = MISSING,
    *,
    help: str,
    key: str | None = None,
    aliases: tuple[str, ...] = (),
    choices: tuple[Any, ...] | Callable[[], tuple[Any, ...]] | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
    default_factory: Any = MISSING,
    old_names: tuple[OldName | str, ...] = (),
    parse: Callable[[str], Any] | None = None,
    metavar: str | None = None,
    repeat: bool = False,
) -> Any:
    """A dataclass field with its help text (``--help`` and docs), its flat key (default: the
    field's name), alias keys (other spellings accepted in YAML and as flags, e.g. transformers'
    ``per_device_train_batch_size``), allowed values and, for numbers, their range (inclusive
    unless ``exclusive_*``), checked in configs and when a flag is parsed. ``choices`` may be a
    function returning them, asked each time the settings are listed or checked (the names of a
    registry that grows, e.g. the inference backends). ``old_names``: former keys (a string, or an
    :class:`OldName` with a converter), accepted with a deprecation warning. ``parse``: how the
    flag's text becomes the value (an argparse type such as :func:`positive_int`; default: the
    field's type, within its range); ``metavar``: the flag's placeholder in ``--help``. ``repeat``
    (a list setting): one value per flag, the flag repeated for more, so a positional argument after
    it is not taken as another value (default: ``--flag A B C`` and repeatable)."""
    bounds = Bounds(minimum, maximum, exclusive_minimum, exclusive_maximum) if (minimum, maximum) != (None, None) else None
    olds = tuple(OldName(o) if isinstance(o, str) else o for o in old_names)
    metadata = {"help": help, "key": key, "aliases": tuple(aliases), "choices": choices, "bounds": bounds, "old_names": olds,
                "parse": parse, "metavar": metavar, "repeat": repeat}  # fmt: skip
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def same_setting(cls: type, name: str, *, default: Any = MISSING) -> Any:
    """The setting ``name`` of the dataclass ``cls`` declared again, on a config that holds it flat
    (its help, range, choices and default live once, on ``cls``); ``default``: this config's own
    default, where it differs on purpose."""
    found = {f.name: f for f in dataclasses.fields(cls)}.get(name)
    if found is None or "help" not in found.metadata:
        raise TypeError(f"{cls.__name__}.{name} is not a setting declared with anglekit.config.setting(help=...)")
    if default is not MISSING:
        return dataclasses.field(default=default, metadata=found.metadata)
    if found.default_factory is not MISSING:
        return dataclasses.field(default_factory=found.default_factory, metadata=found.metadata)
    return dataclasses.field(default=found.default, metadata=found.metadata)


def setting_group(provider: Callable[[], Sequence[Setting]], *, help: str) -> Any:
    """A ``dict[str, Any]`` field of settings declared elsewhere: ``provider()`` lists them when asked
    (so settings registered later, e.g. by a plugin, count). Each is a flat key, YAML key and flag
    like a field's own; the dict maps the key of each one given to its value."""
    return dataclasses.field(default_factory=dict, metadata={"help": help, "group": provider})


def positive_int(text: str) -> int:
    """A flag's parser (argparse type): an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def choices_of(metadata: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A field's allowed values (its ``choices``, called when it is a function); None: any value."""
    choices = metadata.get("choices")
    return tuple(choices()) if callable(choices) else choices


@dataclass(frozen=True)
class Bounds:
    """The range of a numeric setting."""

    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False

    def problem(self, value: float) -> str | None:
        """What is wrong with ``value`` (None when it is in range)."""
        low, high = self.minimum, self.maximum
        if value != value:  # nan: every comparison below is False, so it would pass any range
            return f"must be a number {self}, got nan"
        if low is not None and (value <= low if self.exclusive_minimum else value < low):
            return f"must be {'>' if self.exclusive_minimum else '>='} {low:g}, got {value!r}"
        if high is not None and (value >= high if self.exclusive_maximum else value > high):
            return f"must be {'<' if self.exclusive_maximum else '<='} {high:g}, got {value!r}"
        return None

    def __str__(self) -> str:
        parts = []
        if self.minimum is not None:
            parts.append(f"{'>' if self.exclusive_minimum else '>='} {self.minimum:g}")
        if self.maximum is not None:
            parts.append(f"{'<' if self.exclusive_maximum else '<='} {self.maximum:g}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Setting:
    """One setting of a config class, as flags and YAML see it."""

    section: str | None
    """Attribute of the section holding it in a sectioned config (None for a flat config)."""
    name: str
    """The field's name in its (section) class."""
    key: str
    """Flat key, unique across sections: the YAML key and, with dashes, the flag."""
    base: type
    optional: bool
    default: Any
    help: str
    aliases: tuple[str, ...]
    choices: tuple[Any, ...] | None
    bounds: Bounds | None = None
    item: type | None = None
    """For a list setting (``tuple[int, ...]``): the type of its items (choices and bounds apply to each)."""
    old_names: tuple[OldName, ...] = ()
    """Former keys, accepted with a deprecation warning (flags ``--old-key``, hidden from --help)."""
    parse: Callable[[str], Any] | None = None
    """How the flag's text becomes the value (an argparse type); None: the type, within the bounds."""
    metavar: str | None = None
    """The flag's placeholder in ``--help`` (None: the type's name)."""
    repeat: bool = False
    """A list setting whose flag takes one value and is repeated for more (``--train-data A --train-data B``)."""
    annotation: Any = None
    """The declared type (what :func:`check_value` checks a value against)."""
    group: str | None = None
    """The :func:`setting_group` field holding it (its value is ``group[key]``); None for a field of its own."""

    def value_in(self, obj: Any) -> Any:
        """Its value in ``obj`` (an instance of the class declaring it; None for an unset group setting)."""
        if self.group is None:
            return getattr(obj, self.name)
        return getattr(obj, self.group).get(self.name)

    @property
    def flags(self) -> tuple[str, ...]:
        """``--flat-key`` first, then the aliases as written (``--model-dtype``, ``--num_train_epochs``)."""
        dashed = "--" + self.key.replace("_", "-")
        return (dashed, *("--" + a for a in self.aliases if "--" + a != dashed))

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key accepted in a mapping: the flat key and the aliases (dashes read as underscores)."""
        return (self.key, *(a.replace("-", "_") for a in self.aliases))


def base_type(annotation: Any) -> tuple[type, bool]:
    """(base type, optional?) of an annotation such as ``int | None``; ``tuple[int, ...]`` gives ``tuple``."""
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        base = [a for a in args if a is not type(None)]
        return base_type(base[0])[0], type(None) in args
    if typing.get_origin(annotation) in (tuple, list, dict):  # tuple[int, ...], list[str], dict[str, str]
        return typing.get_origin(annotation), False
    return annotation, False


def item_type(annotation: Any) -> type | None:
    """The item type of a ``tuple[X, ...]`` (or ``list[X]``) setting (optional or not), None for a scalar one."""
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = [a for a in args if a is not type(None)][0]
    if typing.get_origin(annotation) is list:
        return typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is tuple:
        inner = typing.get_args(annotation)
        if len(inner) != 2 or inner[1] is not Ellipsis:
            raise TypeError(f"a list setting is declared as tuple[X, ...], got {annotation!r}")
        return inner[0]
    return None


def _is_section(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def _settings_of_flat(cls: type, section: str | None, declared_only: bool = False) -> list[Setting]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if "help" not in f.metadata:
            if declared_only:
                continue
            raise TypeError(f"{cls.__name__}.{f.name}: declare it with anglekit.config.setting(help=...)")
        if "group" in f.metadata:
            out += [dataclasses.replace(s, section=section, name=s.key, group=f.name) for s in f.metadata["group"]()]
            continue
        base, optional = base_type(hints[f.name])
        default = f.default if f.default is not MISSING else (f.default_factory() if f.default_factory is not MISSING else None)
        out.append(
            Setting(
                section=section,
                name=f.name,
                key=f.metadata["key"] or f.name,
                base=base,
                optional=optional,
                default=default,
                help=f.metadata["help"],
                aliases=f.metadata["aliases"],
                choices=choices_of(f.metadata),
                bounds=f.metadata.get("bounds"),
                item=item_type(hints[f.name]),
                old_names=f.metadata.get("old_names", ()),
                annotation=hints[f.name],
                parse=f.metadata.get("parse"),
                metavar=f.metadata.get("metavar"),
                repeat=f.metadata.get("repeat", False),
            )
        )
    return out


def settings_of(cls: type, *, declared_only: bool = False) -> list[Setting]:
    """Every setting of ``cls``: its own fields, or, for a config made of sections (fields whose
    type is a dataclass), the fields of each section in order; a :func:`setting_group` field gives
    the settings its provider lists now. Flat keys must be unique. ``declared_only``: skip the
    fields not declared with :func:`setting` (a class whose settings are some of its fields)."""
    hints = typing.get_type_hints(cls)
    out: list[Setting] = []
    for f in dataclasses.fields(cls):
        if _is_section(hints[f.name]):
            out += _settings_of_flat(hints[f.name], f.name, declared_only)
        else:
            out += _settings_of_flat(cls, None, declared_only)
            break
    seen: dict[str, Setting] = {}
    for s in out:
        for k in (*s.keys, *(o.key for o in s.old_names)):
            if k in seen and seen[k] is not s:
                raise TypeError(f"{cls.__name__}: key {k!r} is used by two settings")
            seen[k] = s
    return out


def check_value(name: str, value: Any, annotation: Any, choices: tuple[Any, ...] | None = None, bounds: Bounds | None = None) -> None:
    """A ConfigError naming ``name`` unless ``value`` fits ``annotation`` (ints pass as floats,
    bools never as ints), ``choices`` and ``bounds``."""
    base, optional = base_type(annotation)
    if value is None:
        if not optional:
            raise ConfigError(f"{name} may not be empty")
        return
    item = item_type(annotation)
    if item is not None:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list of {item.__name__} values, got {type(value).__name__} {value!r}")
        if not value:
            raise ConfigError(f"{name} must not be an empty list")
        for position, element in enumerate(value):
            check_value(f"{name}[{position}]", element, item, choices, bounds)
        return
    if base is int and isinstance(value, bool):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if not isinstance(value, base) and not (base is float and isinstance(value, int) and not isinstance(value, bool)):
        raise ConfigError(f"{name} must be {base.__name__}, got {type(value).__name__} {value!r}")
    if bounds is not None:
        problem = bounds.problem(value)
        if problem is not None:
            raise ConfigError(f"{name} {problem}")
    if choices is not None and value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}")


def check_fields(obj: Any, *, exclude: tuple[str, ...] = ()) -> None:
    """Check every field of a dataclass instance declared with :func:`setting` (but those named in
    ``exclude``, which the class checks itself); an error names the setting by its flat key and
    aliases (``dtype/model_dtype``), as a user may have written either."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        if f.name in exclude:
            continue
        if "group" in f.metadata:
            _check_group(f.name, getattr(obj, f.name), f.metadata["group"]())
        elif "help" in f.metadata:
            spellings = (f.metadata["key"] or f.name, *(a.replace("-", "_") for a in f.metadata["aliases"]))
            name = "/".join(dict.fromkeys(spellings))
            check_value(name, getattr(obj, f.name), hints[f.name], choices_of(f.metadata), f.metadata.get("bounds"))


def _check_group(name: str, values: Any, settings: Sequence[Setting]) -> None:
    """A ConfigError unless ``values`` maps keys of ``settings`` to values that fit them (None: unset)."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{name} must be a mapping of settings, got {type(values).__name__} {values!r}")
    by_key = {s.key: s for s in settings}
    unknown = sorted(str(key) for key in values if key not in by_key)
    if unknown:
        raise ConfigError(f"unknown setting(s) {unknown} in {name}; valid ones: {', '.join(by_key)}")
    for key, value in values.items():
        if value is not None:
            s = by_key[key]
            check_value(s.key, value, s.annotation, s.choices, s.bounds)


def _read_section(every: Sequence[Setting], key: str, value: Mapping[str, Any], put: Callable[..., None], put_old: Callable[..., None],
                  unknown: list[str]) -> None:  # fmt: skip
    """The settings of section ``key`` given as a mapping (``lora: {rank: 8}``; a group as a nested
    mapping, as ``to_dict`` writes it) passed to ``put``/``put_old``; the keys it does not know
    appended to ``unknown``."""
    names = {s.name: s for s in every if s.section == key}
    olds = {o.key: (s, o) for s in every if s.section == key for o in s.old_names}
    groups = {s.group for s in every if s.section == key and s.group is not None}
    for inner_raw, inner in value.items():
        inner_key = str(inner_raw).replace("-", "_")
        if inner_key in groups and isinstance(inner, Mapping):  # a group as a mapping (what to_dict writes)
            for group_raw, group_value in inner.items():
                group_key = str(group_raw).replace("-", "_")
                if group_key in names and names[group_key].group == inner_key:
                    put(names[group_key], group_value, f"{key}.{inner_key}.{group_key}")
                else:
                    unknown.append(f"{key}.{inner_key}.{group_key}")
        elif inner_key in names:
            put(names[inner_key], inner, f"{key}.{inner_key}")
        elif inner_key in olds:
            put_old(*olds[inner_key], inner, f"{key}.{inner_key}")
        else:
            unknown.append(f"{key}.{inner_key}")


def read_sections(cls: type, data: Mapping[str, Any], *, source: str, hint: str = "") -> dict[str, dict[str, Any]]:
    """Keyword arguments of each section of ``cls`` from ``data``: flat keys (``lora_rank``), their
    aliases, dashes for underscores, or section mappings (``lora: {rank: 8}``). A section's key
    given a scalar sets the setting of that flat key (``model: name``). Unknown keys, and one
    setting given twice, are ConfigErrors naming ``source``."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of settings, got {type(data).__name__}")
    every = settings_of(cls)
    by_key = {k: s for s in every for k in s.keys}
    old_by_key = {o.key: (s, o) for s in every for o in s.old_names}
    sections = {s.section for s in every}
    out: dict[str, dict[str, Any]] = {name: {} for name in sections}
    given: dict[tuple[str, str], str] = {}

    def put(s: Setting, value: Any, spelled: str) -> None:
        where = (s.section or "", s.name)
        if where in given and given[where] != spelled:
            raise ConfigError(f"{source}: {s.key!r} is given twice (as {given[where]!r} and {spelled!r})")
        given[where] = spelled
        if s.group is None:
            out[s.section][s.name] = value
        else:
            out[s.section].setdefault(s.group, {})[s.name] = value

    def put_old(s: Setting, old: OldName, value: Any, spelled: str) -> None:
        new = spelled[: -len(old.key)] + (s.name if "." in spelled else s.key)
        converted = old.value(value, new, source)
        warn_old_name(OldName(spelled, old.convert).message(new, source, value))
        put(s, converted, spelled)

    unknown: list[str] = []
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key in sections and isinstance(value, Mapping):
            _read_section(every, key, value, put, put_old, unknown)
        elif key in by_key:
            put(by_key[key], value, key)
        elif key in old_by_key:
            put_old(*old_by_key[key], value, key)
        else:
            unknown.append(key)
    if unknown:
        raise ConfigError(f"{source}: unknown setting(s) {sorted(unknown)}" + (f"; {hint}" if hint else ""))
    return out
