"""The ``anglekit`` command line: a thin face over the library, one module per command.

Every command module has ``add_parser(commands)`` (registers its subcommand, returns its parser)
and ``run(args) -> int`` (the exit status); :data:`COMMANDS` lists them, so a new command is one
module and one line here. The conventions they share (MODEL first, ``--device``/``--dtype``/
``--revision``/``--trust-remote-code`` wherever a model is loaded, ``--quiet``, ``--output`` a file
and ``--output-dir`` a folder, one default batch size) live in :mod:`anglekit.cli.common`; train's
flags are generated from typed settings by :mod:`anglekit.cli.fields`.

``anglekit --help`` and ``anglekit COMMAND --help`` import no torch.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from anglekit.cli import encode, eval, generate, github_issues, merge_lora, plot_dynamics, report, train
from anglekit.errors import AnglekitError
from anglekit.version import __version__

COMMANDS = (train, eval, report, encode, merge_lora, plot_dynamics, generate, github_issues)
"""The command modules, in the order ``anglekit --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="anglekit", description="Train, evaluate and use AnglE text embeddings.", allow_abbrev=False
    )
    parser.add_argument("--version", action="version", version=f"anglekit {__version__}")
    parser.add_argument("--verbose", action="store_true", help="log more")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(commands).set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``anglekit ARGV`` (default: ``sys.argv[1:]``); the exit status. Errors anglekit raises on
    purpose print one line and give 2; argparse exits 2 on a bad command line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    try:
        return args._run(args)
    except AnglekitError as exc:
        print(f"anglekit {args.command}: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["COMMANDS", "build_parser", "main"]
