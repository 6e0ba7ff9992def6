"""Flags generated from typed settings (:func:`anglekit.config.settings_of`).

Each setting becomes one flag ``--flat-key`` whose help is the setting's declared help (never read
from the source code), with its default; its aliases (``--model-dtype``) are accepted too, hidden
from ``--help`` but named in the flag's help. Booleans get ``--x/--no-x``. Use the parser with
``argument_default=argparse.SUPPRESS``: then only the flags given reach :func:`overrides`.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from typing import Any

from anglekit.cli.argtypes import note, ranged
from anglekit.config import OldName, Setting, settings_of
from anglekit.errors import ConfigError

SECTION_TITLES = {
    "model": "model",
    "data": "data",
    "objective": "objective",
    "lora": "LoRA",
    "trainer": "trainer",
}


def _help(s: Setting) -> str:
    text = " ".join(s.help.split())
    empty = s.default is None or (isinstance(s.default, (str, tuple, list, dict)) and not s.default)
    if not empty and "default" not in text:
        text = f"{text} (default: {s.default})"
    aliases = s.flags[1:]
    if aliases:
        text = f"{text} (also {', '.join(aliases)})"
    return text.replace("%", "%%")


def add_setting(container: Any, s: Setting, *, required: bool = False) -> None:
    """Add the flag of one setting (and its hidden aliases) to a parser or argument group;
    ``required``: the command line must give it."""
    flag, *aliases = s.flags
    if s.base is bool:
        kwargs: dict[str, Any] = {"action": argparse.BooleanOptionalAction}
    elif s.base is dict:  # a mapping setting: --flag NAME=VALUE, repeatable; its parser gives (name, value)
        kwargs = {"action": MappingFlag, "type": s.parse, "metavar": s.metavar or "NAME=VALUE"}
    else:
        kind = s.item if s.item is not None else s.base
        kwargs = {"type": kind}
        if s.bounds is not None:  # the range is checked as the flag is parsed
            kwargs["type"] = ranged(kind, s.bounds)
        if s.parse is not None:  # the setting's own parser (its messages)
            kwargs["type"] = s.parse
        if s.choices is not None:
            kwargs["choices"] = s.choices
        else:
            kwargs["metavar"] = s.metavar or kind.__name__.upper()
        if s.item is not None and s.parse is None and s.repeat:  # a list setting of one value per flag: --flag A --flag B
            kwargs["action"] = "append"
        elif s.item is not None and s.parse is None:  # a list setting: --flag 1 2 3, and repeatable (--flag 1 --flag 2); its own parser reads one argument
            kwargs["nargs"] = "+"
            kwargs["action"] = "extend"
    container.add_argument(flag, dest=s.key, help=_help(s), required=required, **kwargs)
    for alias in aliases:
        container.add_argument(alias, dest=s.key, help=argparse.SUPPRESS, **kwargs)
    for old in s.old_names:  # hidden; --old (and --no-old for a switch) set the new setting, with a warning
        dashed = "--" + old.key.replace("_", "-")
        if s.base is bool:
            for spelled, given in ((dashed, True), ("--no-" + dashed[2:], False)):
                container.add_argument(spelled, dest=s.key, action=OldFlag, old=old, new_key=s.key, nargs=0, const=given)
        else:
            container.add_argument(
                dashed, dest=s.key, action=OldFlag, old=old, new_key=s.key, **{k: v for k, v in kwargs.items() if k not in ("metavar", "action")}
            )


class MappingFlag(argparse.Action):
    """A repeatable ``--flag NAME=VALUE`` building a dict; the same name twice is an error."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        name, value = values
        mapping = dict(getattr(namespace, self.dest, None) or {})
        if name in mapping:
            parser.error(f"{option_string}: {name!r} given twice ({mapping[name]!r} and {value!r})")
        mapping[name] = value
        setattr(namespace, self.dest, mapping)


class OldFlag(argparse.Action):
    """A former flag of a setting (hidden): sets the setting, through the old name's converter, and
    warns (a DeprecationWarning, and a note on stderr) with the new spelling."""

    def __init__(self, option_strings: list[str], dest: str, *, old: OldName, new_key: str, **kwargs: Any) -> None:
        self.old, self.new_key = old, new_key
        kwargs["help"] = argparse.SUPPRESS
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        given = self.const if self.nargs == 0 else values
        flag = option_string or self.option_strings[0]
        value = self.old.value(given, self.new_key, parser.prog)
        new_flag = "--" + self.new_key.replace("_", "-")
        if self.nargs == 0 and value is False:
            new_flag = "--no-" + new_flag[2:]
        message = f"{flag} is now {new_flag} (deprecated: the old spelling will stop working in a later version)"
        warnings.warn(f"{parser.prog}: {message}", DeprecationWarning, stacklevel=2)
        note(parser.prog, message)
        setattr(namespace, self.dest, value)


def add_settings(parser: argparse.ArgumentParser, config_class: type, *, exclude: Sequence[str] = ()) -> list[Setting]:
    """Add a flag for every setting of ``config_class`` (one argument group per section); returns the settings."""
    settings = [s for s in settings_of(config_class) if s.key not in exclude]
    groups: dict[str | None, Any] = {}
    for s in settings:
        if s.section not in groups:
            groups[s.section] = parser if s.section is None else parser.add_argument_group(SECTION_TITLES.get(s.section, s.section))
        add_setting(groups[s.section], s)
    return settings


def overrides(args: argparse.Namespace, settings: Sequence[Setting]) -> dict[str, Any]:
    """{flat key: value} of the settings given on the command line (the parser suppresses the rest)."""
    return {s.key: getattr(args, s.key) for s in settings if hasattr(args, s.key)}


def overrides_with_model(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`overrides` of ``args._settings``, with the positional MODEL (``model_argument``) as the
    ``model`` setting: giving it both as MODEL and as a different ``--model`` is an error."""
    values = overrides(args, args._settings)
    positional = getattr(args, "model_argument", None)
    if positional is not None:
        if "model" in values and values["model"] != positional:
            raise ConfigError(f"the model is given twice, as MODEL {positional!r} and as --model {values['model']!r}; give one")
        values["model"] = positional
    return values


__all__ = ["add_setting", "add_settings", "overrides", "overrides_with_model"]
