"""``anglekit github-issues collect|build``: the GitHub Issues Similarity dataset builder on the command line.
The flags come from the typed settings of :mod:`anglekit.github_issues.settings`.

``add_parser(commands)`` adds the ``github-issues`` command to an argparse subparsers object;
``run(args)`` runs it (exit status).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from anglekit.cli.common import add_output_dir, add_quiet
from anglekit.cli.fields import add_setting
from anglekit.config import settings_of
from anglekit.errors import EXIT_PARTIAL, ConfigError, DataError, InputPathError
from anglekit.github_issues.settings import BuildSettings, CollectSettings
from anglekit.io.read import read_user_text

__all__ = ["add_parser", "run"]

NAME = "github-issues"


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


def _add_settings(parser: Any, settings_class: type) -> None:
    """A flag for each setting of ``settings_class`` (:func:`anglekit.cli.fields.add_setting`)."""
    for s in settings_of(settings_class):
        add_setting(parser, s)


def _settings(args: argparse.Namespace, settings_class: type) -> Any:
    """The typed settings of the flags given (the others keep their defaults)."""
    return settings_class(**{s.key: getattr(args, s.key) for s in settings_of(settings_class) if getattr(args, s.key, None) is not None})


def _add_collect(sub: Any) -> None:
    collect = sub.add_parser(
        "collect",
        allow_abbrev=False,
        help="collect closed issues, comments and timelines (resumable)",
        description="Collect closed issues (pull requests excluded) of each repository, the comments and timeline "
        "of each duplicate candidate, and the originals they point to. Rerun the same command to resume.",
    )
    add_output_dir(collect, required=True, old="--out", type=Path, help="collection folder (created; resumed when it exists)")
    _add_settings(collect, CollectSettings)
    add_quiet(collect, help="no progress lines")


def _add_build(sub: Any) -> None:
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
    _add_settings(build, BuildSettings)
    add_quiet(build, help="print only the dataset folder, not the statistics (they are in github_issues.json)")


def _read_repos(settings: CollectSettings) -> list[str]:
    from anglekit.github_issues.repos import DEFAULT_REPOSITORIES, parse_repos

    names: list[str] = []
    if settings.repos:
        names += parse_repos(settings.repos)
    if settings.repos_file is not None:
        names += _read_repos_file(Path(settings.repos_file))
    return parse_repos(names) if names else list(DEFAULT_REPOSITORIES)


def _read_repos_file(path: Path) -> list[str]:
    """The ``owner/name`` items of a ``--repos-file`` (one a line, ``#`` comments); a bad line is a
    DataError naming the file and the line."""
    from anglekit.github_issues.repos import parse_repos

    expected = "one owner/name a line (# comments allowed)"
    if not path.is_file():  # the flag names no file: usage (exit 2), not the data (exit 1)
        raise InputPathError(f"{'is a folder' if path.is_dir() else 'no such file'}; expected a file holding {expected}", source=str(path))
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

    settings = _settings(args, CollectSettings)
    repos = _read_repos(settings)
    client = GitHubClient(
        settings.base_url,
        token_env=settings.token_env,
        per_page=settings.per_page,
        rate_limit=settings.rate_limit,
        max_retries=settings.max_retries,
        max_rate_limit_waits=settings.max_rate_limit_waits,
    )
    say = (lambda message: None) if args.quiet else (lambda message: print(message, file=sys.stderr, flush=True))
    if not client.authenticated:
        say(f"note: ${settings.token_env} is not set; anonymous requests are limited to 60 an hour on github.com")
    summary = collect(
        repos,
        args.output_dir,
        client=client,
        max_issues=settings.max_issues,
        candidates=settings.candidates,
        fetch_originals=settings.originals,
        duplicate_authors=settings.duplicate_authors,
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
            f"anglekit github-issues collect: {failure.repo} failed in phase {failure.phase} against {settings.base_url}: {failure.error} (rerun to resume)",
            file=sys.stderr,
        )
    return EXIT_PARTIAL if summary.failed else 0


def _build(args: argparse.Namespace) -> int:
    from anglekit.github_issues.build import build_dataset

    settings = _settings(args, BuildSettings)
    result = build_dataset(
        args.collection,
        args.output_dir,
        seed=settings.seed,
        negative_ratio=settings.negative_ratio,
        split_shares=settings.split_shares,
        max_chars=settings.max_chars,
        tokenizer=settings.tokenizer,
        long_threshold=settings.long_threshold,
        plot=settings.plot,
        duplicate_authors=settings.duplicate_authors,
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
