"""``anglekit fingerprint MODEL [--update PATH [--verify-texts N]]``: print a model's fingerprint,
or re-record it in an index, a shard folder or an ONNX/OpenVINO export (no vector recomputed), or
make an index record another model that is shown to make its vectors."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from anglekit.cli.argtypes import ranged
from anglekit.cli.common import EMBEDDING, LOADING, add_load_settings, add_model_argument, add_quiet, load_settings
from anglekit.config import Bounds
from anglekit.errors import ConfigError

NAME = "fingerprint"
MIN_COSINE = 0.9999
"""--min-cosine's default: :data:`anglekit.index.fingerprints.DEFAULT_MIN_COSINE` (a test pins the
two equal; that module imports torch, which the parser must not)."""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="print a model's fingerprint, or re-record it in an index, shard folder or export",
        description="Print the model's fingerprint: a hash of its vector-changing settings, config, tokenizer and weights (as "
        "bfloat16 bytes), the same on every machine, thread count and fp32/bf16 load. With --update PATH, write it into the "
        "index, encode shard folder or ONNX/OpenVINO export at PATH in place of a fingerprint recorded by an older anglekit "
        "(whose value depended on the machine), after checking that the recorded settings and dimension are the model's; "
        "no vector is recomputed, and a current fingerprint of another model is never overwritten. With --verify-texts N as "
        "well, an index built by another model that makes the same vectors (say, LoRA adapters later merged by 'anglekit "
        "merge-lora') records MODEL instead, once N of its stored texts, spread over the index, re-embed with MODEL to their "
        "stored vectors (cosine >= --min-cosine each); only index.json's model record is rewritten.",
    )
    add_model_argument(parser)
    parser.add_argument(
        "--update",
        metavar="PATH",
        default=None,
        help="index folder, shard folder ('anglekit encode --output-dir') or ONNX/OpenVINO export folder whose fingerprint to re-record",
    )
    parser.add_argument(
        "--verify-texts",
        metavar="N",
        type=ranged(int, Bounds(minimum=1)),
        default=None,
        help="with --update INDEX: re-embed N stored texts with MODEL and, if each matches its stored vector, make the index "
        "record MODEL (name, folder, settings, fingerprint) in place of the model that built it",
    )
    parser.add_argument(
        "--min-cosine",
        type=ranged(float, Bounds(minimum=0, maximum=1, exclusive_minimum=True)),
        default=None,
        help=f"with --verify-texts: the cosine each re-embedded text must reach against its stored vector (default {MIN_COSINE:g})",
    )
    add_load_settings(parser, (*EMBEDDING, "truncate_dim"))
    add_load_settings(parser, ("backend", *LOADING, "precision"), defaults={"device": "cpu"})
    add_quiet(parser, help="print the fingerprint only (no note of what --update did)")
    return parser


def run(args: argparse.Namespace) -> int:
    from anglekit.index.fingerprints import adopt_model, read_target, require_index, update_fingerprint
    from anglekit.model.embedder import Embedder

    if args.verify_texts is not None and args.update is None:
        raise ConfigError("--verify-texts needs --update INDEX: the index whose stored texts to re-embed")
    if args.min_cosine is not None and args.verify_texts is None:
        raise ConfigError("--min-cosine applies with --verify-texts")
    if args.update is not None:
        target = read_target(args.update)  # a wrong path, malformed metadata or (with --verify-texts) a folder
        if args.verify_texts is not None:  # that is not an index is found before the model loads
            require_index(target, args.update)
    settings = load_settings(args)
    model = Embedder.from_pretrained(args.model, settings=settings)
    if args.update is None:
        print(model.fingerprint())
        return 0
    if args.verify_texts is not None:
        cosine = MIN_COSINE if args.min_cosine is None else args.min_cosine
        result = adopt_model(model, args.update, texts=args.verify_texts, min_cosine=cosine, name=args.model, load=settings.given())
    else:
        result = update_fingerprint(model, args.update)
    print(result.new)
    if not args.quiet:
        print(f"anglekit {NAME}: {result.summary()}", file=sys.stderr)
    return 0
