"""``anglekit encode MODEL --input TEXTS --output VECTORS.npy``: embed a text file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from anglekit.cli.common import add_model_options, add_output, model_kwargs
from anglekit.errors import AnglekitError

NAME = "encode"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(NAME, allow_abbrev=False, help="embed a text file into a .npy matrix", description="Embed texts.")
    add_model_options(parser)
    parser.add_argument("--input", required=True, help="texts: .txt (one per line) or a csv/tsv/jsonl/parquet column")
    parser.add_argument("--column", default=None, help="column holding the texts in a tabular input")
    add_output(parser, required=True, metavar="FILE.npy", help="file to write the vectors to (.npy)")
    parser.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None, help="L2-normalise (default: the model's setting)")
    return parser


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from anglekit.data.readers import read_texts
    from anglekit.io.atomic import atomic_path
    from anglekit.model.embedder import Embedder

    output = Path(args.output)
    if output.suffix != ".npy":
        raise AnglekitError(f"--output must end in .npy, got {output}")
    if output.resolve() == Path(args.input).resolve():
        raise AnglekitError("--output would overwrite --input")
    texts = read_texts(args.input, column=args.column)
    model = Embedder.from_pretrained(args.model, **model_kwargs(args))
    vectors = model.encode(texts, batch_size=args.batch_size, normalize=args.normalize, show_progress=not args.quiet)
    with atomic_path(output) as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, vectors)
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} vectors to {output}")
    return 0
