"""``anglekit search INDEX_DIR "query" [-k 10] [--json]``: the nearest documents of an index."""

from __future__ import annotations

import argparse
import json
from typing import Any

from anglekit.cli.common import add_loading_options, add_quiet, load_settings, positive_int
from anglekit.errors import ConfigError

NAME = "search"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="search an index built by 'anglekit index build'",
        description="Embed each query with the index's own model (its query prompt) and print the k nearest documents by cosine. Another model is refused.",
    )
    parser.add_argument("index", metavar="INDEX_DIR", help="folder written by 'anglekit index build'")
    parser.add_argument("queries", metavar="QUERY", nargs="+", help="one or more queries")
    parser.add_argument("-k", "--top-k", dest="k", type=positive_int, default=10, metavar="K", help="results per query (default: 10)")
    parser.add_argument("--json", action="store_true", help="print JSON: a list with one object per query (query, results: rank, id, score, text)")
    parser.add_argument("--model", default=None, help="load the index's model from here (e.g. after moving its folder); its fingerprint must match")
    parser.add_argument(
        "--rescore-multiplier", type=positive_int, default=None, metavar="N", help="int8/binary: candidates rescored per result (default: the index's)"
    )
    parser.add_argument("--expansion-search", type=positive_int, default=None, metavar="N", help="HNSW efSearch (default: the index's)")
    add_loading_options(parser, gguf=False)
    add_quiet(parser, help="print results only")
    return parser


def run(args: argparse.Namespace) -> int:
    from anglekit.index.store import VectorIndex
    from anglekit.io.text import is_blank

    blank = next((number for number, query in enumerate(args.queries, start=1) if is_blank(query)), None)
    if blank is not None:  # an argument, not a file's row: a usage error (exit 2), found before the index loads
        raise ConfigError(f"query {blank} is blank (only whitespace or invisible characters): {args.queries[blank - 1]!r}")
    index = VectorIndex.load(args.index)
    load = load_settings(args).given()  # over the settings the index recorded
    if args.model is not None or load:
        index.load_model(args.model, **load)
    results = index.search(list(args.queries), k=args.k, rescore_multiplier=args.rescore_multiplier, expansion_search=args.expansion_search)
    if args.json:
        payload = [{"query": q, "results": [{"rank": r + 1, "id": h.id, "score": h.score, "text": h.text} for r, h in enumerate(hits)]}
                   for q, hits in zip(args.queries, results, strict=True)]  # fmt: skip
        print(json.dumps(payload, ensure_ascii=False, indent=2))
        return 0
    for q, hits in zip(args.queries, results, strict=True):
        if len(args.queries) > 1 or not args.quiet:
            print(f"query: {q}")
        for rank, hit in enumerate(hits, start=1):
            text = f"  {hit.text}" if hit.text is not None else ""
            print(f"{rank:>3}  {hit.score:.4f}  {hit.id}{text}")
    return 0
