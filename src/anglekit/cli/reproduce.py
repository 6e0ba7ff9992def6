"""``anglekit reproduce TABLE [TABLE ...]``: reproduce the papers' tables at the machine's scale.
Flags are generated from :class:`~anglekit.reproduce.config.ReproduceConfig`."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from anglekit.cli.fields import add_settings, overrides

NAME = "reproduce"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    from anglekit.reproduce.config import TABLE_NAMES, ReproduceConfig

    parser = commands.add_parser(
        NAME,
        help="reproduce the papers' tables (ablations, transfer, non-transfer, ...) with seeds and a report",
        description="Train and score every cell (row x task x seed) of the named tables, resumably (finished "
        "cells are reused), and write <output-dir>/report.md: mean ± std per row, a paired comparison with the "
        "reference row, and the paper's figure beside each row; per table, <table>.json, <table>.md and a chart, "
        "<table>.png (with matplotlib, the eval extra). Tables: " + ", ".join(TABLE_NAMES) + ", all.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.add_argument("tables", nargs="+", metavar="TABLE", choices=[*TABLE_NAMES, "all"], help=f"one or more of {', '.join(TABLE_NAMES)}, or all")
    settings = add_settings(parser, ReproduceConfig)
    parser.set_defaults(_settings=settings)
    return parser


def run(args: argparse.Namespace) -> int:
    from anglekit.reproduce import ReproduceConfig, reproduce

    config = ReproduceConfig(**overrides(args, args._settings))
    command = "anglekit " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == [NAME] else None
    result = reproduce(args.tables, config, command=command)
    print(result.report.read_text(encoding="utf-8"))
    tail = f"cells: {result.ran} run, {result.reused} reused"
    if result.missing:
        tail += f", {result.missing} not run yet (--report-only)"
        trainings = sum(p.trains for p in result.pending)
        untrained = len(result.pending) - trainings
        parts = [_count(trainings, "training")] + ([_count(untrained, "cell that trains nothing", "cells that train nothing")] if untrained else [])
        print(f"not run yet: {_count(result.missing, 'cell')}: {', '.join(parts)}, in the order a run takes them:", file=sys.stderr)
        for item in result.pending:
            print(f"  {item.describe()}", file=sys.stderr)
    print(f"{tail}; report: {result.report}", file=sys.stderr)
    return 0


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"
