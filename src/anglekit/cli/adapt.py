"""``anglekit adapt MODEL --corpus FILE --llm SPEC --teacher MODEL --output-dir DIR``: documents in,
retriever out, in one resumable command (docs/retrieval.md, "From documents only"). Every flag is
generated from :class:`~anglekit.adapt.AdaptConfig`; the stages run in :mod:`anglekit.adapt`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from anglekit.cli.fields import add_setting, overrides_with_model
from anglekit.errors import ConfigError

NAME = "adapt"

DESCRIPTION = """Adapt MODEL (the student) to a collection of documents without labelled pairs, running the steps
of docs/retrieval.md's "From documents only" in order, as their commands would:

  queries   anglekit generate --kind queries --llm SPEC --filter-model TEACHER   -> DIR/queries.jsonl
  split     the queries of a share of the documents held out as a retrieval set  -> DIR/pairs.jsonl, DIR/dev/
  mine      anglekit mine MODEL --teacher TEACHER --teacher-max-ratio R          -> DIR/mined.jsonl
  eval      anglekit eval MODEL --suite retrieval --data DIR/dev                 -> DIR/eval/start/
  train     anglekit train MODEL --train-data DIR/mined.jsonl --objective ...    -> DIR/train/model
  eval      the trained model on the same set                                     -> DIR/eval/trained/
  merge     anglekit merge MODEL DIR/train/model --weight W (with --merge-weight) -> DIR/merged-wW, DIR/eval/merged-wW/

then writes DIR/report.json and DIR/report.md (queries kept per filter, negatives per row, the teacher's
scores, the scores before and after). DIR/stages.json records each stage's status, command, inputs'
fingerprints and time. Rerun the same command to resume: a finished stage is reused, an interrupted one
runs again (generate from its cache, train from its last checkpoint). A stage's output may be replaced by
a file of your own: the later stages then run again. DIR must be new or empty, or hold a run of the same
settings (else an error names what differs)."""

REQUIRED = ("corpus", "llm", "teacher", "output_dir")


def add_parser(commands: Any) -> argparse.ArgumentParser:
    from anglekit.adapt.config import AdaptConfig
    from anglekit.config import settings_of

    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        argument_default=argparse.SUPPRESS,
        help="documents in, retriever out: generate queries, mine with a teacher, train, score, merge (resumable)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model_argument", nargs="?", default=None, metavar="MODEL", help="the student: hub name, local folder or pypi:NAME (or --model)")
    parser.add_argument("--config", metavar="YAML", help="YAML file of these settings (keys as the flags, with _ or -); flags win")
    settings = settings_of(AdaptConfig)
    for s in settings:
        add_setting(parser, s)
    parser.set_defaults(_settings=settings)
    return parser


def config_from_args(args: argparse.Namespace) -> Any:
    """The AdaptConfig of the parsed flags (and ``--config``)."""
    from anglekit.adapt.config import AdaptConfig

    values = overrides_with_model(args)
    if getattr(args, "config", None):
        return AdaptConfig.from_yaml(args.config, values)
    missing = [flag for flag, key in (("MODEL", "model"), *((f"--{k.replace('_', '-')}", k) for k in REQUIRED)) if key not in values]
    if missing:
        raise ConfigError(f"{', '.join(missing)} required: anglekit adapt MODEL --corpus FILE --llm SPEC --teacher MODEL --output-dir DIR")
    return AdaptConfig(**values)


def run(args: argparse.Namespace) -> int:
    from anglekit.adapt.runner import run_adapt
    from anglekit.cli.generate import _restore_sigint

    _restore_sigint()  # a Ctrl-C (or kill -INT to a background run) stops it whatever the shell chose
    config = config_from_args(args)
    try:
        result = run_adapt(config, say=lambda line: print(f"adapt: {line}", file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        print(
            f"anglekit adapt: interrupted; the finished stages are kept in {config.output_dir} (stages.json): rerun the same command to resume", file=sys.stderr
        )
        return 130
    print(result.text())
    return 0


__all__ = ["add_parser", "config_from_args", "run"]
