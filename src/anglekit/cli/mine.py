"""``anglekit mine MODEL --input PAIRS [--corpus FILE] --num-negatives N --output FILE``: hard negatives.

The selection flags are generated from :class:`anglekit.mining.MineSettings`; the work (shards,
candidates) stays in ``--work-dir`` (default ``OUTPUT.mine``) so that a rerun resumes.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from anglekit.cli.common import add_model_options, add_output, load_settings, positive_int
from anglekit.cli.fields import add_setting
from anglekit.config import settings_of
from anglekit.mining.settings import MineSettings

NAME = "mine"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="mine hard negatives for (anchor, positive) pairs from a corpus",
        description="Find hard negatives for (anchor, positive) pairs among a candidate pool (the --corpus texts and the "
        "positives, as sentence-transformers' mine_hard_negatives with corpus=; without --corpus, the positives) with any "
        "model and anglekit's index, following sentence-transformers' mine_hard_negatives rules (neither an anchor nor its "
        "positives are its negatives), and write n-tuples (anchor, positive, negative_1..N with their scores) that "
        "'anglekit train --train-data' reads, a summary (OUTPUT.summary.json) and a histogram of the scores "
        "(OUTPUT.scores.png). Inputs are checked before anything is created; an output that is an input (through any "
        "path or link) is refused. A rerun resumes an interrupted mine.",
    )
    add_model_options(parser)
    parser.add_argument(
        "--input", required=True, metavar="PAIRS", help="(anchor, positive) pairs: csv/tsv/jsonl/json/parquet, a saved dataset or hf:NAME:SPLIT"
    )
    parser.add_argument("--columns", metavar="anchor=COL,positive=COL", help="the pairs' column names (default: anchor/query, positive/pos)")
    parser.add_argument(
        "--corpus",
        metavar="FILE",
        help="candidate texts besides the positives: .txt/.jsonl/.csv/.tsv/.parquet, any size; the positives it lacks join the pool "
        "(default: the distinct positives alone)",
    )
    parser.add_argument("--corpus-column", metavar="COL", help="text column of a tabular corpus (default: text, sentence, or the only column)")
    parser.add_argument("--corpus-id-column", metavar="COL", help="id column of the corpus (default: id if present, else the row number)")
    add_output(
        parser, required=True, metavar="FILE.jsonl|FILE.parquet", help="the n-tuples (anchor, positive, negative_1..N, *_score); never --input or --corpus"
    )
    parser.add_argument("--work-dir", metavar="DIR", help="folder for the shards and candidates, kept for reruns (default: OUTPUT.mine)")
    parser.add_argument("--shard-size", type=positive_int, default=10_000, metavar="N", help="texts per encoded shard (default: 10000)")
    group = parser.add_argument_group("selection")
    for s in settings_of(MineSettings):
        add_setting(group, s)
    return parser


def run(args: argparse.Namespace) -> int:
    from anglekit.data.training_data import parse_columns
    from anglekit.mining.mine import mine_hard_negatives

    given = {s.key: getattr(args, s.key) for s in settings_of(MineSettings) if getattr(args, s.key, None) is not None}
    settings = MineSettings(**given)
    columns = parse_columns(args.columns)
    report = mine_hard_negatives(
        args.model, args.input, args.output, corpus=args.corpus, settings=settings, columns=columns,
        corpus_text_column=args.corpus_column, corpus_id_column=args.corpus_id_column, work_dir=args.work_dir,
        batch_size=args.batch_size, shard_size=args.shard_size, model_kwargs=load_settings(args).given(),
        show_progress=not args.quiet, say=lambda line: print(line, file=sys.stderr, flush=True),
    )  # fmt: skip
    print(report.text())
    return 0
