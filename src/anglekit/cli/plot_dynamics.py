"""``anglekit plot-dynamics RUN_DIR... --output FIGURE.png``: loss components and probes of training runs."""

from __future__ import annotations

import argparse
from typing import Any

from anglekit.cli.common import add_output, add_quiet

NAME = "plot-dynamics"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="plot a run's loss components and training-dynamics probes (PNG)",
        description="Plot loss components, mean angles to positives and negatives, alignment and uniformity "
        "from the metrics.jsonl of one or more training runs. Series without a finite value, values outside a "
        "probe's range and zeros on a log axis are left out with a warning; nothing drawable is an error and "
        "writes no figure.",
    )
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="training output_dir(s) holding metrics.jsonl")
    add_output(parser, required=True, metavar="FILE.png", help="file to write the figure to (.png)")
    parser.add_argument("--label", action="append", help="legend name of each run, in order (repeatable; default: folder names)")
    parser.add_argument("--title", default=None, help="figure title")
    add_quiet(parser, help="no 'wrote FILE' line")
    return parser


def run(args: argparse.Namespace) -> int:
    from anglekit.training.dynamics import plot_dynamics

    labels = args.label or None
    path = plot_dynamics(args.run_dirs, args.output, labels=labels, title=args.title)
    if not args.quiet:
        print(f"wrote {path}")
    return 0
