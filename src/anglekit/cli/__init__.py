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

from anglekit.cli import (
    adapt,
    encode,
    eval,
    export,
    fingerprint,
    generate,
    github_issues,
    index,
    merge,
    merge_lora,
    mine,
    plot_dynamics,
    report,
    reproduce,
    search,
    serve,
    train,
)
from anglekit.errors import EXIT_INTERRUPTED, EXIT_UNEXPECTED, EXIT_USAGE, AnglekitError
from anglekit.io.atomic import check_writable, out_of_space
from anglekit.version import __version__

COMMANDS = (
    train,
    eval,
    report,
    encode,
    index,
    search,
    mine,
    adapt,
    fingerprint,
    merge,
    merge_lora,
    export,
    plot_dynamics,
    generate,
    github_issues,
    serve,
    reproduce,
)
"""The command modules, in the order ``anglekit --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="anglekit",
        description="Train, evaluate and use AnglE text embeddings.",
        epilog=plugins_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"anglekit {__version__}")
    parser.add_argument("--verbose", action="store_true", help="log more")
    parser.add_argument("--debug", action="store_true", help="print the traceback of an unexpected error (it is saved to a file either way)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(commands).set_defaults(_run=module.run)
    return parser


def plugins_epilog() -> str | None:
    """The installed plugins by kind (read from the entry points' metadata, nothing imported), or
    None when there is none."""
    from anglekit.plugins import GROUPS, installed_plugins

    lines = []
    for kind, group in GROUPS.items():
        found = installed_plugins(group)
        if found:
            lines.append(f"  {kind.replace('_', ' ')}: " + ", ".join(f"{name} ({dist})" for name, dist in found))
    return "installed plugins (docs/plugins.md):\n" + "\n".join(lines) if lines else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``anglekit ARGV`` (default: ``sys.argv[1:]``); the exit status.

    The one error boundary of the command line: argparse exits 2 on a bad command line; errors
    anglekit raises on purpose print one line ``anglekit CMD: error: ...`` and give their type's
    ``exit_status`` (1 for the input data, 2 for usage: :mod:`anglekit.errors`); errors of the
    system (a missing file, a full disk) print the same line and give 2; anything unexpected prints
    one line with the path of its saved traceback and gives 70 (``--debug`` prints the traceback
    too); Ctrl-C gives 130.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    prefix = f"anglekit {args.command}"
    try:
        _check_outputs(args)
        return args._run(args)
    except AnglekitError as exc:
        print(f"{prefix}: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        where = _save_traceback(args.command, args.debug)

        full = out_of_space(exc.filename or "a file being written", exc)  # a write outside the atomic helpers
        print(f"{prefix}: error: {full or exc}{where}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - the boundary: one line, the traceback in a file
        where = _save_traceback(args.command, args.debug)
        print(f"{prefix}: unexpected error: {type(exc).__name__}: {exc}{where}", file=sys.stderr)
        return EXIT_UNEXPECTED


def _check_outputs(args: argparse.Namespace) -> None:
    """Every command's ``--output`` (a file) and ``--output-dir`` (a folder) can be written: found
    out before any work, not after hours of it (:class:`~anglekit.errors.OutputError`, exit 2)."""

    for attribute, folder in (("output", False), ("output_dir", True)):
        value = getattr(args, attribute, None)
        if value:
            check_writable(value, folder=folder)


def _save_traceback(command: str, debug: bool) -> str:
    """Write the current exception's traceback to a file (printing it too with ``--debug``); the
    note that names the file, for the one-line message."""
    import tempfile
    import time
    import traceback
    from pathlib import Path

    from anglekit.model.offline import cache_dir

    text = traceback.format_exc()
    if debug:
        print(text, file=sys.stderr, end="")
    folder = cache_dir() / "logs"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        folder = Path(tempfile.gettempdir())
    try:
        with tempfile.NamedTemporaryFile(
            "w", prefix=f"anglekit-{command}-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".txt", dir=folder, delete=False
        ) as handle:
            handle.write(text)
    except OSError:
        return "" if debug else " (run with --debug for the traceback)"
    return f" (traceback: {handle.name}; --debug prints it)"


__all__ = ["COMMANDS", "build_parser", "main", "plugins_epilog"]
