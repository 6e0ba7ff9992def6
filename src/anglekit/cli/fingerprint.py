"""``anglekit fingerprint MODEL [--update PATH]``: print a model's fingerprint, or re-record it in
an index, a shard folder or an ONNX/OpenVINO export (no vector recomputed)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from anglekit.cli.common import EMBEDDING, LOADING, add_load_settings, add_model_argument, add_quiet, load_settings

NAME = "fingerprint"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="print a model's fingerprint, or re-record it in an index, shard folder or export",
        description="Print the model's fingerprint: a hash of its vector-changing settings, config, tokenizer and weights (as "
        "bfloat16 bytes), the same on every machine, thread count and fp32/bf16 load. With --update PATH, write it into the "
        "index, encode shard folder or ONNX/OpenVINO export at PATH in place of a fingerprint recorded by an older anglekit "
        "(whose value depended on the machine), after checking that the recorded settings and dimension are the model's; "
        "no vector is recomputed, and a current fingerprint of another model is never overwritten.",
    )
    add_model_argument(parser)
    parser.add_argument(
        "--update",
        metavar="PATH",
        default=None,
        help="index folder, shard folder ('anglekit encode --output-dir') or ONNX/OpenVINO export folder whose fingerprint to re-record",
    )
    add_load_settings(parser, (*EMBEDDING, "truncate_dim"))
    add_load_settings(parser, ("backend", *LOADING, "precision"), defaults={"device": "cpu"})
    add_quiet(parser, help="print the fingerprint only (no note of what --update did)")
    return parser


def run(args: argparse.Namespace) -> int:
    from anglekit.index.fingerprints import read_target, update_fingerprint
    from anglekit.model.embedder import Embedder

    if args.update is not None:
        read_target(args.update)  # a wrong path or malformed metadata is found before the model loads
    model = Embedder.from_pretrained(args.model, settings=load_settings(args))
    if args.update is None:
        print(model.fingerprint())
        return 0
    result = update_fingerprint(model, args.update)
    print(result.new)
    if not args.quiet:
        print(f"anglekit {NAME}: {result.summary()}", file=sys.stderr)
    return 0
