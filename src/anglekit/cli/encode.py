"""``anglekit encode MODEL --input TEXTS --output VECTORS.npy | --output-dir SHARDS``: embed texts.

``--output`` writes one .npy matrix (the whole input in memory); ``--output-dir`` streams an input
of any size into numbered shards in constant memory, resumable after a kill (:mod:`anglekit.corpus`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from anglekit.cli.common import add_load_settings, add_model_options, load_settings, number, positive_int
from anglekit.errors import AnglekitError, ConfigError
from anglekit.io.atomic import atomic_path

NAME = "encode"

_SHARD_FLAGS = {"id_column": "--id-column", "shard_size": "--shard-size", "shard_format": "--shard-format", "shard_id": "--shard-id",
                "num_shards": "--num-shards", "workers": "--workers"}  # fmt: skip


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="embed a text file into a .npy matrix, or a corpus of any size into shards",
        description="Embed texts: into one .npy matrix (--output), or, in constant memory, into numbered shards "
        "that a rerun of the same command resumes (--output-dir).",
    )
    add_model_options(parser)
    add_load_settings(parser, ("backend",))
    parser.add_argument("--input", required=True, help="texts: .txt (one per line) or a csv/tsv/jsonl/parquet column (--output-dir: no .json)")
    parser.add_argument("--column", default=None, help="column holding the texts in a tabular input")
    outputs = parser.add_mutually_exclusive_group(required=True)
    outputs.add_argument("--output", metavar="FILE.npy", help="file to write the vectors to (.npy)")
    outputs.add_argument("--output-dir", metavar="DIR", help="folder of numbered shards (with ids) and manifest.json; rerun to resume")
    parser.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None, help="L2-normalise (default: the model's setting)")
    parser.add_argument(
        "--role",
        default=None,
        metavar="NAME",
        help="embed with the model's prompt of this name, e.g. query or document (a name it lacks is an error listing its prompts) (default: its general prompt)",
    )
    add_load_settings(parser, ("truncate_dim",))
    shards = parser.add_argument_group("shards (--output-dir)")
    shards.add_argument("--id-column", default=None, help="column holding the ids (default: 'id' if present, else the row number)")
    shards.add_argument("--shard-size", type=positive_int, default=None, metavar="N", help="texts per shard (default: 10000)")
    shards.add_argument(
        "--shard-format", choices=("npy", "parquet"), default=None, help="npy: SHARD.npy + SHARD.ids.json; parquet: columns id, embedding (default: npy)"
    )
    shards.add_argument("--shard-id", type=number(int, 0), default=None, metavar="I", help="encode only the shards k with k %% NUM_SHARDS == I (default: 0)")
    shards.add_argument("--num-shards", type=positive_int, default=None, metavar="N", help="split the corpus between N machines (default: 1)")
    shards.add_argument("--workers", type=positive_int, default=None, metavar="N", help="processes on this machine, each loading the model (default: 1)")
    return parser


def run(args: argparse.Namespace) -> int:
    if args.output_dir is not None:
        return _run_shards(args)
    given = [flag for key, flag in _SHARD_FLAGS.items() if getattr(args, key) is not None]
    if given:
        raise ConfigError(f"{', '.join(given)} apply to --output-dir (shards), not to --output")
    import numpy as np

    from anglekit.data.readers import read_texts
    from anglekit.model.embedder import Embedder
    from anglekit.model.encoding import zero_rows_message

    output = Path(args.output)
    if output.suffix != ".npy":
        raise AnglekitError(f"--output must end in .npy, got {output}")
    if output.resolve() == Path(args.input).resolve():
        raise AnglekitError("--output would overwrite --input")
    texts = read_texts(args.input, column=args.column)
    model = Embedder.from_pretrained(args.model, settings=load_settings(args))
    vectors = model.encode(texts, batch_size=args.batch_size, normalize=args.normalize, show_progress=not args.quiet, role=args.role)
    if (model.config.normalize if args.normalize is None else args.normalize) and (message := zero_rows_message(vectors, where=f"{args.input}: ")):
        print(f"anglekit encode: warning: {message}", file=sys.stderr)
    with atomic_path(output) as tmp, open(tmp, "wb") as handle:
        np.save(handle, vectors)
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} vectors to {output}")
    return 0


def _run_shards(args: argparse.Namespace) -> int:
    from anglekit.corpus.encode import EncodeRequest, encode_corpus

    shard_id = args.shard_id or 0
    num_shards = args.num_shards or 1
    if shard_id >= num_shards:
        raise ConfigError(f"--shard-id {shard_id} must be below --num-shards {num_shards}")
    request = EncodeRequest(
        args.input, args.output_dir, text_column=args.column, id_column=args.id_column,
        shard_size=args.shard_size or 10_000, shard_format=args.shard_format or "npy", batch_size=args.batch_size,
        normalize=args.normalize, role=args.role, shard_id=shard_id, num_shards=num_shards, workers=args.workers or 1,
        model_kwargs=load_settings(args).given(), show_progress=not args.quiet,
    )  # fmt: skip
    report = encode_corpus(args.model, request, say=lambda line: print(line, file=sys.stderr, flush=True))
    print(report.summary())
    if num_shards > 1:
        print(f"this run did the shards k with k % {num_shards} == {shard_id}; the folder is complete when every split has run")
    return 0
