"""``anglekit export MODEL --format sentence-transformers --output-dir DIR``: a folder other tools load.
The flags of the formats' own options are generated from each format module's ``Options``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from anglekit.cli.common import add_loading_options, add_model_argument, add_output_dir, add_quiet, model_kwargs
from anglekit.cli.fields import add_setting
from anglekit.config import Setting, settings_of
from anglekit.errors import ConfigError
from anglekit.export import FORMATS, format_module, format_options

NAME = "export"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="write a model in a format other tools load (sentence-transformers, TEI, infinity)",
        description=(
            "Write MODEL in another format: a folder that embeds exactly like it in the target runtime, "
            "or a refusal that names what the format cannot express. LoRA adapters are merged first. When the "
            "runtime is installed, the folder is checked against the model before it is written."
        ),
    )
    add_model_argument(parser, help="model: folder written by anglekit, hub name, .gguf file, pypi:NAME or a folder of LoRA adapters")
    parser.add_argument("--format", required=True, choices=sorted(FORMATS), help=_format_help())
    options = parser.add_argument_group("format options", "each format's own options, declared by its module (the format named before each help)")
    settings = format_option_settings()
    for s in settings:
        _add_option(options, s)
    parser.set_defaults(_format_options=settings)
    add_output_dir(
        parser,
        required=True,
        help="folder to write (must be new or empty, unless --overwrite; never the model's own folder or one holding it, "
        "nor inside it, but for onnx and openvino: a new or empty subfolder of the model, or an earlier export of the format, "
        "which 'anglekit serve MODEL' serves when int8)",
    )
    parser.add_argument("--overwrite", action="store_true", default=False, help="replace a folder that is not empty")
    parser.add_argument(
        "--verify",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check the folder against the model with the target runtime when it is installed (default: on)",
    )
    parser.add_argument("--push-to-hub", default=None, metavar="REPO", help="then upload the folder to this hub repository (owner/name)")
    parser.add_argument("--private", action="store_true", default=None, help="with --push-to-hub: create the repository private")
    parser.add_argument("--base-model", default=None, help="for a folder of adapters: the base to merge them into (default: the recorded one)")
    add_loading_options(parser, device_default="cpu")
    add_quiet(parser, help="print only errors")
    return parser


def format_option_settings() -> list[Setting]:
    """The options every format declares (its ``Options``), one flag per key: a key two formats
    declare is one flag (the same field, type and default; their choices together, each format's help)."""
    merged: dict[str, Setting] = {}
    for name in sorted(FORMATS):
        declared = format_options(name)
        for s in settings_of(declared) if declared is not None else ():
            first = merged.get(s.key)
            if first is None:
                merged[s.key] = dataclasses.replace(s, help=f"{name}: {s.help}")
                continue
            if (first.name, first.base, first.item, first.default, first.bounds) != (s.name, s.base, s.item, s.default, s.bounds):
                raise TypeError(f"export option {s.key!r}: the {name} format declares it unlike another format (field, type, default or range)")
            choices = None if first.choices is None or s.choices is None else tuple(dict.fromkeys((*first.choices, *s.choices)))
            merged[s.key] = dataclasses.replace(first, help=f"{first.help}; {name}: {s.help}", choices=choices)
    return list(merged.values())


def _add_option(group: Any, s: Setting) -> None:
    """One format option's flag; an option that is a list of texts is given as a file of texts
    (``--KEY FILE``, read with :func:`anglekit.data.readers.read_texts`) and its column (``--KEY-column``)."""
    if s.item is not str:
        add_setting(group, s)
        return
    flag = s.flags[0]
    group.add_argument(flag, dest=s.key, metavar="TEXTS", help=f"{s.help} (a file: .txt one per line, or a csv/tsv/jsonl/parquet column)")
    group.add_argument(
        f"{flag}-column", dest=f"{s.key}_column", metavar="COLUMN", help=f"column of {flag} holding the texts (default: text, sentence, or the only one)"
    )


def _option_values(args: argparse.Namespace) -> dict[str, Any]:
    """{option: value} of the format options given (texts read from their file)."""
    values: dict[str, Any] = {}
    for s in args._format_options:
        value = getattr(args, s.key, None)
        if s.item is str:
            column = getattr(args, f"{s.key}_column", None)
            if value is None:
                if column is not None:
                    raise ConfigError(f"{s.flags[0]}-column needs {s.flags[0]}")
                continue
            from anglekit.data.readers import read_texts

            value = read_texts(value, column=column)
        if value is not None:
            values[s.name] = value
    return values


def _format_help() -> str:
    """``--format``'s help from each format module's own DESCRIPTION (none of them imports torch)."""
    return "; ".join(f"{name}: {format_module(name).DESCRIPTION}" for name in sorted(FORMATS))


def run(args: argparse.Namespace) -> int:
    from anglekit.export import export

    load = model_kwargs(args)
    options = _option_values(args)
    if args.base_model is not None:
        load["base_model"] = args.base_model
    result = export(
        args.model,
        args.format,
        args.output_dir,
        overwrite=args.overwrite,
        verify=args.verify,
        push_to_hub=args.push_to_hub,
        private=args.private,
        options=options,  # the export refuses an option its format lacks
        **load,
    )
    if not args.quiet:
        check = result.check if result.max_difference is None else f"{result.check}: max difference {result.max_difference:.1e}"
        print(f"exported {args.model} to {result.folder} ({result.format}; {check})")
        if result.trust_remote_code:
            print("it carries anglekit_modules.py: load it with trust_remote_code=True (TEI cannot run it)")
        if result.url:
            print(f"pushed to {result.url}")
    return 0
