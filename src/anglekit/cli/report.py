"""``anglekit report RUN_DIR...``: a side-by-side markdown table of ``anglekit eval --suite`` runs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from anglekit.cli.common import add_output, add_quiet
from anglekit.io.atomic import atomic_write_text

NAME = "report"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="side-by-side markdown table of evaluation runs",
        description="Compare the suite results of several `anglekit eval --suite` output folders, "
        "with the papers' published numbers as reference rows. The table goes to stdout.",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="folders written by anglekit eval --output-dir")
    parser.add_argument("--suite", action="append", default=None, metavar="NAME", help="only these suites (repeatable)")
    parser.add_argument("--no-published", action="store_true", help="leave out the published reference rows")
    add_output(parser, metavar="FILE.md", help="also write the markdown to this file")
    add_quiet(parser, help="no 'wrote FILE' line on stderr")
    return parser


def run(args: argparse.Namespace) -> int:
    from anglekit.evaluation.report import report

    text = report(args.run_dirs, suites=args.suite, include_published=not args.no_published)
    print(text)
    if args.output:
        atomic_write_text(args.output, text)
        if not args.quiet:
            print(f"wrote {args.output}", file=sys.stderr)
    return 0
