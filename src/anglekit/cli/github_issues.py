"""``anglekit github-issues collect|build``: the GitHub Issues Similarity dataset builder on the command line.

``add_parser(commands)`` adds the ``github-issues`` command to an argparse subparsers object;
``run(args)`` runs it (exit status).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from anglekit.cli.common import add_output_dir, add_quiet, number, positive_int
from anglekit.errors import ConfigError, DataError
from anglekit.io.read import read_user_text

__all__ = ["add_parser", "run"]

NAME = "github-issues"


def _shares(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three numbers like 0.857,0.071,0.072, got {text!r}") from None
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"expected three numbers (train,valid,test), got {text!r}")
    return values


def _authors(text: str) -> tuple[str, ...]:
    from anglekit.github_issues.duplicates import parse_authors

    try:
        return parse_authors(text)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``github-issues`` with its ``collect`` and ``build`` subcommands to ``commands``."""
    parser = commands.add_parser(
        NAME,
        allow_abbrev=False,
        help="collect duplicate GitHub issues and build the long-text STS pair dataset",
        description="Build AnglE's GitHub Issues Similarity dataset: collect issues over the GitHub REST API, then build pairs.",
    )
    sub = parser.add_subparsers(dest="github_command", metavar="{collect,build}", required=True)
    _add_collect(sub)
    _add_build(sub)
    return parser


def _authors_help() -> str:
    from anglekit.github_issues.duplicates import PROJECT_ASSOCIATIONS

    return f"author associations whose duplicate comments count, comma-separated, or 'any' (default: {','.join(PROJECT_ASSOCIATIONS)})"


def _add_collect(sub: Any) -> None:
    from anglekit.github_issues.client import DEFAULT_BASE_URL, DEFAULT_TOKEN_ENV
    from anglekit.github_issues.repos import PAPER_REPOSITORY_COUNT

    collect = sub.add_parser(
        "collect",
        allow_abbrev=False,
        help="collect closed issues, comments and timelines (resumable)",
        description="Collect closed issues (pull requests excluded) of each repository, the comments and timeline "
        "of each duplicate candidate, and the originals they point to. Rerun the same command to resume.",
    )
    collect.add_argument(
        "--repos", default=None, help=f"comma-separated owner/name items, or 'paper' for the paper's {PAPER_REPOSITORY_COUNT} repositories (the default)"
    )
    collect.add_argument("--repos-file", type=Path, default=None, help="a file with one owner/name a line (# comments allowed)")
    add_output_dir(collect, required=True, old="--out", type=Path, help="collection folder (created; resumed when it exists)")
    collect.add_argument("--base-url", default=DEFAULT_BASE_URL, help="API root (default %(default)s)")
    collect.add_argument(
        "--token-env", default=DEFAULT_TOKEN_ENV, help="environment variable holding the token (default %(default)s); never pass a token itself"
    )
    collect.add_argument("--max-issues", type=positive_int, default=None, help="at most this many closed issues per repository")
    collect.add_argument("--per-page", type=number(int, 1, 100), default=100, help="items per page, 1-100 (default %(default)s)")
    collect.add_argument(
        "--candidates",
        choices=("signals", "commented", "all"),
        default="signals",
        help="which issues get their comments and timeline fetched (default %(default)s)",
    )
    collect.add_argument("--no-originals", action="store_true", help="do not fetch originals outside the collected issues")
    collect.add_argument("--duplicate-authors", type=_authors, default=None, help=_authors_help())
    collect.add_argument(
        "--no-rate-limit", action="store_true", help="do not wait pre-emptively when X-RateLimit-Remaining reaches 0 (403/429 are still honoured)"
    )
    collect.add_argument("--max-retries", type=number(int, 0), default=5, help="retries of a failing request (default %(default)s)")
    collect.add_argument(
        "--max-rate-limit-waits",
        type=number(int, 0),
        default=10,
        help="waits a rate-limited request may make (Retry-After, reset) before it fails (default %(default)s)",
    )
    add_quiet(collect, help="no progress lines")


def _add_build(sub: Any) -> None:
    from anglekit.github_issues.build import DEFAULT_MAX_CHARS, PAPER_NEGATIVE_RATIO, PAPER_SPLIT_SHARES

    build = sub.add_parser(
        "build",
        allow_abbrev=False,
        help="build pairs, splits, statistics and the length plot from a collection",
        description="Positive pairs (duplicate, original), negatives from the same repository, splits by duplicate "
        "components (no issue in two splits), statistics and the paper's Figure 3 length plot.",
    )
    build.add_argument(
        "collection", type=Path, help="a folder written by 'github-issues collect', finished (an unfinished one is refused with the command resuming it)"
    )
    add_output_dir(build, required=True, old="--out", type=Path, help="dataset folder (train/valid/test.jsonl, github_issues.json, PNG)")
    build.add_argument("--seed", type=number(int, 0), default=42, help="seed of splits and negative sampling (default %(default)s)")
    build.add_argument(
        "--negative-ratio",
        type=number(float, 0),
        default=PAPER_NEGATIVE_RATIO,
        help="negatives per positive (default %(default).4f: the published dataset's 10622/11038)",
    )
    build.add_argument(
        "--split-shares",
        type=_shares,
        default=list(PAPER_SPLIT_SHARES),
        help="train,valid,test shares of positive pairs (default: the published 18565/1547/1548)",
    )
    build.add_argument("--max-chars", type=positive_int, default=DEFAULT_MAX_CHARS, help="cap of a text in characters (default %(default)s)")
    build.add_argument("--tokenizer", default=None, help="tokenizer (path or cached name) for the token statistics (default: an approximate count)")
    build.add_argument("--long-threshold", type=positive_int, default=512, help="token count of a 'long' text (default %(default)s)")
    build.add_argument("--duplicate-authors", type=_authors, default=None, help=_authors_help().replace("(default: ", "(default: the collection's, else "))
    build.add_argument("--no-plot", action="store_true", help="skip the length-distribution PNG")
    add_quiet(build, help="print only the dataset folder, not the statistics (they are in github_issues.json)")


def _read_repos(args: argparse.Namespace) -> list[str]:
    from anglekit.github_issues.repos import DEFAULT_REPOSITORIES, parse_repos

    names: list[str] = []
    if args.repos:
        names += parse_repos(args.repos)
    if args.repos_file is not None:
        names += _read_repos_file(args.repos_file)
    return parse_repos(names) if names else list(DEFAULT_REPOSITORIES)


def _read_repos_file(path: Path) -> list[str]:
    """The ``owner/name`` items of a ``--repos-file`` (one a line, ``#`` comments); a bad line is a
    DataError naming the file and the line."""
    from anglekit.github_issues.repos import parse_repos

    expected = "one owner/name a line (# comments allowed)"
    names: list[str] = []
    for row, line in enumerate(read_user_text(path, expected=expected).splitlines(), start=1):
        item = line.split("#", 1)[0].strip()
        if item:
            try:
                names += parse_repos([item])
            except ConfigError as error:
                raise DataError(f"{error}; expected {expected}", source=str(path), row=row) from None
    if not names:
        raise DataError(f"no repositories in it (only comments or blank lines); expected {expected}", source=str(path))
    return names


def _collect(args: argparse.Namespace) -> int:
    from anglekit.github_issues.client import GitHubClient
    from anglekit.github_issues.collect import collect

    repos = _read_repos(args)
    client = GitHubClient(
        args.base_url,
        token_env=args.token_env,
        per_page=args.per_page,
        rate_limit=not args.no_rate_limit,
        max_retries=args.max_retries,
        max_rate_limit_waits=args.max_rate_limit_waits,
    )
    say = (lambda message: None) if args.quiet else (lambda message: print(message, file=sys.stderr, flush=True))
    if not client.authenticated:
        say(f"note: ${args.token_env} is not set; anonymous requests are limited to 60 an hour on github.com")
    summary = collect(
        repos,
        args.output_dir,
        client=client,
        max_issues=args.max_issues,
        candidates=args.candidates,
        fetch_originals=not args.no_originals,
        duplicate_authors=args.duplicate_authors,
        progress=say,
    )
    done = sum(1 for r in summary.repos if r.phase == "done")
    missing = sum(1 for r in summary.repos if r.phase == "missing")
    print(
        f"collected {done}/{len(summary.repos)} repositories ({missing} not found, {len(summary.failed)} failed) "
        f"in {summary.requests} requests, {summary.seconds:.1f} s -> {args.output_dir}"
    )
    for failure in summary.failed:  # always said, --quiet or not: which repository, which host, what error
        print(
            f"anglekit github-issues collect: {failure.repo} failed in phase {failure.phase} against {args.base_url}: {failure.error} (rerun to resume)",
            file=sys.stderr,
        )
    return 1 if summary.failed else 0


def _build(args: argparse.Namespace) -> int:
    from anglekit.github_issues.build import build_dataset

    result = build_dataset(
        args.collection,
        args.output_dir,
        seed=args.seed,
        negative_ratio=args.negative_ratio,
        split_shares=args.split_shares,
        max_chars=args.max_chars,
        tokenizer=args.tokenizer,
        long_threshold=args.long_threshold,
        plot=not args.no_plot,
        duplicate_authors=args.duplicate_authors,
    )
    stats = result.stats
    if args.quiet:
        print(result.out)
        return 0
    for split, counts in stats["pairs"].items():
        print(f"{split:5s}: {counts['total']} pairs ({counts['positive']} positive, {counts['negative']} negative)")
    over = stats["texts_over_threshold"]
    print(f"texts: {stats['texts']}, over {over['threshold']} tokens: {100 * over['share']:.1f}% ({over['counted_with']})")
    print(
        "over "
        + str(over["threshold"])
        + " tokens per split: "
        + ", ".join(f"{s} {100 * v['share']:.1f}% of {v['texts']}" for s, v in over["per_split"].items())
    )
    links = stats["links"]
    print(f"links found by signal: {links['found_by_signal']}; kept: {links['kept_by_signal']}")
    print(f"links rejected: {links['rejected'] or 'none'} (comments counted from {','.join(links['duplicate_authors'])})")
    print(
        f"skipped: {stats['skipped']}; issues sharing a text: {stats['shared_texts']['issues']} "
        f"({stats['shared_texts']['components_merged']} components merged so no text is in two splits)"
    )
    print(f"-> {result.out}" + (f" (plot {result.plot.name})" if result.plot else ""))
    return 0


def run(args: argparse.Namespace) -> int:
    """Run a parsed ``github-issues`` command; the exit status."""
    if args.github_command == "collect":
        return _collect(args)
    if args.github_command == "build":
        return _build(args)
    raise ConfigError(f"unknown github-issues command {args.github_command!r}")
