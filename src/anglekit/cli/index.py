"""``anglekit index build MODEL --input CORPUS --output-dir INDEX_DIR``: build a search index."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from anglekit.cli.argtypes import ranged
from anglekit.cli.common import add_model_options, add_output_dir, load_settings, positive_int
from anglekit.config.fields import Bounds
from anglekit.errors import ConfigError

NAME = "index"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="build a search index of a corpus (exact or HNSW, float, int8 or binary)",
        description="Search indexes of one model's document vectors; 'anglekit search' queries them.",
    )
    sub = parser.add_subparsers(dest="index_command", metavar="{build}", required=True)
    build = sub.add_parser(
        "build",
        allow_abbrev=False,
        help="embed a corpus (or read encode's shards) into an index folder",
        description="Embed the documents of a corpus with the model's document prompt (in chunks, so any size "
        "fits) and write an index that records the model, its settings and its fingerprint.",
    )
    add_model_options(build)
    build.add_argument(
        "--input",
        required=True,
        help="corpus: .txt (one text a line, ids = line numbers), .jsonl/.csv/.tsv/.parquet with id and text "
        "columns, or a folder written by 'anglekit encode --output-dir' with --role document",
    )
    build.add_argument("--column", default=None, help="column holding the texts (default: text, sentence or the only other column)")
    build.add_argument("--id-column", default=None, help="column holding the ids (default: id if present, else the row number)")
    add_output_dir(build, required=True, help="index folder (index.json and its data files)")
    build.add_argument("--kind", choices=("exact", "hnsw"), default="exact", help="exact scan, or an HNSW graph (usearch or faiss-cpu) (default: exact)")
    build.add_argument(
        "--quantize",
        choices=("none", "int8", "binary"),
        default="none",
        help="search int8 or binary codes, rescoring the best k x multiplier with the float vectors (default: none)",
    )
    build.add_argument("--backend", choices=("auto", "usearch", "faiss"), default=None, help="HNSW library (default: usearch if installed, else faiss)")
    build.add_argument("--rescore-multiplier", type=positive_int, default=4, metavar="N", help="candidates per result rescored (default: 4)")
    build.add_argument("--connectivity", type=positive_int, default=16, metavar="M", help="HNSW edges per node (default: 16)")
    build.add_argument("--expansion-add", type=positive_int, default=128, metavar="N", help="HNSW efConstruction (default: 128)")
    build.add_argument("--expansion-search", type=positive_int, default=128, metavar="N", help="HNSW efSearch, the default of searches (default: 128)")
    build.add_argument(
        "--build-threads",
        type=ranged(int, Bounds(minimum=0)),
        default=0,
        metavar="N",
        help="HNSW: threads inserting documents (default: 0, every core; 1 builds the same graph every time, slower, with a little more recall)",
    )
    build.add_argument("--no-texts", action="store_true", help="do not store the texts (search then shows ids only)")
    build.add_argument("--overwrite", action="store_true", help="replace an index already in --output-dir")
    return parser


def run(args: argparse.Namespace) -> int:
    from anglekit.index.build import build_index
    from anglekit.index.store import INDEX_FILE
    from anglekit.model.embedder import Embedder

    out = Path(args.output_dir)
    if (out / INDEX_FILE).exists() and not args.overwrite:
        raise ConfigError(f"{out} already holds an index; pass --overwrite to replace it")
    if (out / INDEX_FILE).exists():  # --overwrite removes the folder: never with the input or the model in it
        for what, path in (("--input", args.input), ("the model", args.model)):
            if os.path.exists(path) and Path(os.path.realpath(path)).is_relative_to(os.path.realpath(out)):
                raise ConfigError(f"{out}: --overwrite would delete {what} {path}, which is inside it; give another --output-dir")
    if out.is_dir() and not (out / INDEX_FILE).exists() and any(out.iterdir()):
        raise ConfigError(f"{out}: holds files but no {INDEX_FILE}; give a new or empty folder for the index")
    if args.backend is not None and args.kind != "hnsw":
        raise ConfigError("--backend applies to --kind hnsw")
    if args.kind != "hnsw":
        graph_flags = [
            f for f, v, d in (("--connectivity", args.connectivity, 16), ("--expansion-add", args.expansion_add, 128), ("--build-threads", args.build_threads, 0))
            if v != d
        ]  # fmt: skip
        if graph_flags:
            raise ConfigError(f"{', '.join(graph_flags)} apply to --kind hnsw")
    settings = load_settings(args)
    model = Embedder.from_pretrained(args.model, settings=settings)
    bar = None
    if not args.quiet:
        from tqdm.auto import tqdm

        bar = tqdm(desc="index", unit="doc")
    try:
        index = build_index(
            model, args.input, name=args.model, load=settings.given(), text_column=args.column, id_column=args.id_column,
            batch_size=args.batch_size, progress=bar.update if bar is not None else None, kind=args.kind, quantize=args.quantize,
            backend=args.backend if args.kind == "hnsw" else None, rescore_multiplier=args.rescore_multiplier,
            connectivity=args.connectivity, expansion_add=args.expansion_add, expansion_search=args.expansion_search,
            build_threads=args.build_threads, store_texts=not args.no_texts,
        )  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    if (out / INDEX_FILE).exists():
        import shutil

        shutil.rmtree(out)  # --overwrite: the new index replaces the old one only once it is built
    index.save(out)
    kind = args.kind + (f" ({index.settings.backend})" if args.kind == "hnsw" else "")
    print(f"indexed {len(index)} documents ({index.dim}-d, {kind}, quantize {args.quantize}) in {out}")
    return 0
