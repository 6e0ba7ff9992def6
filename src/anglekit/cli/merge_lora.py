"""``anglekit merge-lora ADAPTERS --output-dir DIR``: fold saved LoRA adapters into their base."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from anglekit.cli.common import LOADING, add_load_settings, add_model_argument, add_output_dir, add_quiet, load_settings
from anglekit.errors import AnglekitError

NAME = "merge-lora"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="fold saved LoRA adapters into their base: a standalone model",
        description="Load a folder of LoRA adapters onto its base model, merge them into the weights and save the result.",
    )
    add_model_argument(parser, help="folder (or hub repository) of adapters written by 'anglekit train --lora' (output_dir/model)")
    add_output_dir(parser, required=True, old="--output", help="folder for the merged model")
    add_load_settings(parser, ("base_model", *LOADING), defaults={"device": "cpu"})
    add_quiet(parser, help="no summary line")
    return parser


def run(args: argparse.Namespace) -> int:
    from anglekit.model.embedder import Embedder

    adapters, output = Path(args.model), Path(args.output_dir)
    if output.resolve() == adapters.resolve():
        raise AnglekitError("--output-dir must differ from the adapter folder")
    model = Embedder.from_pretrained(args.model, settings=load_settings(args))
    if not model.has_lora:
        raise AnglekitError(f"{args.model}: no LoRA adapters there (no adapter_config.json)")
    base = model.config.base_model
    model.merge_lora().save_pretrained(output)
    if not args.quiet:
        print(f"merged the adapters in {args.model} into {base}; standalone model written to {output}")
    return 0
