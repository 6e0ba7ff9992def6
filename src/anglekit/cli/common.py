"""Pieces every command shares: argument types, the model's flags, renamed flags.

The conventions of the command line live here, so that each command follows them the same way:

- the model is the first positional argument (``MODEL``);
- how a model loads (``--device``, ``--dtype``, ``--revision``, ``--trust-remote-code``,
  ``--backend``, ``--precision``, ``--max-length``, ``--pooling``, ``--prompt``, ...) is one
  :class:`~anglekit.model.load_settings.LoadSettings`: each command generates the flags of the
  fields it takes from their metadata (:func:`add_load_settings`: one help text each, choices
  such as the registered backends asked when the parser is built) and reads them back with
  :func:`load_settings`;
- ``--quiet`` on every command;
- ``--output`` is always a file, ``--output-dir`` always a folder;
- one default batch size for inference (:data:`anglekit.model.DEFAULT_BATCH_SIZE`).

Nothing here imports torch: ``anglekit --help`` stays fast.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from anglekit.cli.argtypes import note, ranged
from anglekit.cli.fields import add_setting
from anglekit.config.fields import Setting, positive_int, settings_of
from anglekit.model import DEFAULT_BATCH_SIZE
from anglekit.model.load_settings import DTYPE_CHOICES, LoadSettings, device_name

LOADING = ("device", "dtype", "revision", "trust_remote_code", "gguf_file")
"""The :class:`LoadSettings` of how the weights load, on every command that loads a model."""
LONG_TEXT = ("long_text", "long_text_window", "long_text_stride", "long_text_max_chunks")
"""How texts longer than the window are embedded."""
EMBEDDING = ("max_length", "pooling", "prompt", "prompts", *LONG_TEXT)
"""The :class:`LoadSettings` of how the model embeds, over its own settings."""
_GIVEN_KEYS = "_load_settings"
"""The namespace attribute listing the LoadSettings fields a parser has flags for."""
_DEFAULT_CLAUSE = re.compile(r"\s*\(default: [^)]*\)")


def number(kind: type, minimum: float | None = None, maximum: float | None = None, *, exclusive_minimum: bool = False) -> Any:
    """:func:`ranged` with the range given inline (inclusive unless ``exclusive_minimum``)."""
    from anglekit.config import Bounds

    return ranged(kind, Bounds(minimum, maximum, exclusive_minimum))


def add_model_argument(parser: argparse.ArgumentParser, help: str = "model: hub name, local folder, .gguf file or pypi:NAME") -> None:
    """The model, first positional argument of every command that loads one."""
    parser.add_argument("model", metavar="MODEL", help=help)


def load_setting(key: str) -> Setting:
    """The :class:`LoadSettings` field ``key`` as a setting (flag, help, choices, parser)."""
    return next(s for s in settings_of(LoadSettings) if s.key == key)


def add_load_settings(container: argparse.ArgumentParser | Any, keys: Sequence[str], *, defaults: Mapping[str, Any] | None = None) -> None:
    """The flags of the :class:`LoadSettings` fields ``keys``, generated from their metadata, on a
    parser or argument group; :func:`load_settings` reads them back. ``defaults``: this command's
    own defaults (e.g. ``device="cpu"``), shown in the help instead of the field's."""
    for key in keys:
        s = load_setting(key)
        if defaults and key in defaults:
            s = replace(s, default=defaults[key], help=_DEFAULT_CLAUSE.sub("", s.help))
            add_setting(container, s)
            container.set_defaults(**{key: defaults[key]})
        else:
            add_setting(container, s)
    container.set_defaults(**{_GIVEN_KEYS: (*(container.get_default(_GIVEN_KEYS) or ()), *keys)})


def load_settings(args: argparse.Namespace, **overrides: Any) -> LoadSettings:
    """The :class:`LoadSettings` of the flags :func:`add_load_settings` generated (those given, and
    the command's defaults), with ``overrides`` over them."""
    values = {key: getattr(args, key) for key in getattr(args, _GIVEN_KEYS, ()) if getattr(args, key, None) is not None}
    return LoadSettings(**{**values, **overrides})


def model_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`load_settings` as keyword arguments (the settings given) of
    :meth:`~anglekit.model.embedder.Embedder.from_pretrained` or :func:`anglekit.export.export`."""
    return load_settings(args).given()


def add_loading_options(parser: argparse.ArgumentParser | Any, *, device_default: str | None = None, gguf: bool = True) -> None:
    """The :data:`LOADING` flags (without ``--gguf-file`` unless ``gguf``); ``device_default``: this
    command's device (default: the best available). Each flag has one help text, the same on
    every command."""
    keys = LOADING if gguf else tuple(key for key in LOADING if key != "gguf_file")
    add_load_settings(parser, keys, defaults={"device": device_default} if device_default is not None else None)


def add_embedding_options(parser: argparse.ArgumentParser | Any) -> None:
    """How the model embeds: ``--batch-size`` and the :data:`EMBEDDING` flags."""
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"texts per forward pass (default: {DEFAULT_BATCH_SIZE})",
    )
    add_load_settings(parser, EMBEDDING)


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """MODEL and every option of a command that loads a model to embed texts (eval, encode, index build)."""
    add_model_argument(parser)
    add_embedding_options(parser)
    add_load_settings(parser, (*LOADING, "precision"))
    add_quiet(parser)


def add_quiet(parser: argparse.ArgumentParser | Any, help: str = "no progress bar") -> None:
    parser.add_argument("--quiet", action="store_true", default=False, help=help)


class RenamedFlag(argparse.Action):
    """An old spelling of a flag, kept working (hidden from --help): it sets the new flag's dest and
    says once, on stderr, what the flag is now called."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        kwargs["help"] = argparse.SUPPRESS
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        note(parser.prog, f"{option_string} is now {self.new}")
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_renamed(parser: argparse.ArgumentParser | Any, old: str, new: str, dest: str, **kwargs: Any) -> None:
    """Accept ``old`` as a hidden spelling of ``new`` (same ``dest``); ``nargs=0, const=...`` for a switch."""
    parser.add_argument(old, dest=dest, action=RenamedFlag, new=new, **kwargs)


def add_output_dir(parser: argparse.ArgumentParser | Any, *, help: str, required: bool = False, old: str | None = None, **kwargs: Any) -> None:
    """``--output-dir DIR`` (always a folder), with ``old`` (e.g. ``--out``) kept as a hidden alias."""
    _add_renamable(parser, "--output-dir", "output_dir", "DIR", help=help, required=required, old=old, **kwargs)


def add_output(
    parser: argparse.ArgumentParser | Any,
    *,
    help: str,
    required: bool = False,
    old: str | None = None,
    metavar: str = "FILE",
    **kwargs: Any,
) -> None:
    """``--output FILE`` (always a file), with ``old`` kept as a hidden alias."""
    _add_renamable(parser, "--output", "output", metavar, help=help, required=required, old=old, **kwargs)


def _add_renamable(parser: Any, flag: str, dest: str, metavar: str, *, help: str, required: bool, old: str | None, **kwargs: Any) -> None:
    if old is None:
        parser.add_argument(flag, dest=dest, metavar=metavar, required=required, help=help, **kwargs)
        return
    # One of the two spellings is required, not both: a required mutually exclusive group (whose
    # error names only the visible flag).
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument(flag, dest=dest, metavar=metavar, help=help, **kwargs)
    add_renamed(group, old, flag, dest, metavar=metavar, **kwargs)


__all__ = [
    "DTYPE_CHOICES",
    "EMBEDDING",
    "LOADING",
    "LONG_TEXT",
    "RenamedFlag",
    "add_embedding_options",
    "add_load_settings",
    "add_loading_options",
    "add_model_argument",
    "add_model_options",
    "add_output",
    "add_output_dir",
    "add_quiet",
    "add_renamed",
    "device_name",
    "load_setting",
    "load_settings",
    "model_kwargs",
    "note",
    "number",
    "positive_int",
    "ranged",
]
