"""The typed settings of ``anglekit github-issues collect|build`` (their flags come from them)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from anglekit.config import check_fields, setting
from anglekit.config.fields import positive_int
from anglekit.errors import ConfigError
from anglekit.github_issues.build import DEFAULT_MAX_CHARS, PAPER_NEGATIVE_RATIO, PAPER_SPLIT_SHARES
from anglekit.github_issues.client import DEFAULT_BASE_URL, DEFAULT_TOKEN_ENV
from anglekit.github_issues.duplicates import PROJECT_ASSOCIATIONS, parse_authors
from anglekit.github_issues.repos import PAPER_REPOSITORY_COUNT

__all__ = ["CANDIDATES", "BuildSettings", "CollectSettings", "parse_shares"]

CANDIDATES = ("signals", "commented", "all")


def parse_shares(text: str) -> tuple[float, ...]:
    """``--split-shares`` (argparse type): three comma-separated numbers, train,valid,test."""
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three numbers like 0.857,0.071,0.072, got {text!r}") from None
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"expected three numbers (train,valid,test), got {text!r}")
    return values


def _authors(text: str) -> tuple[str, ...]:
    """``--duplicate-authors`` (argparse type): :func:`parse_authors`, its error as the flag's."""
    try:
        return parse_authors(text)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


_AUTHORS = f"author associations whose duplicate comments count, comma-separated, or 'any' (default: {','.join(PROJECT_ASSOCIATIONS)})"


@dataclass(frozen=True)
class CollectSettings:
    """What ``github-issues collect`` fetches and how it talks to the API."""

    repos: str | None = setting(None, help=f"comma-separated owner/name items, or 'paper' for the paper's {PAPER_REPOSITORY_COUNT} repositories (the default)")
    repos_file: str | None = setting(None, metavar="FILE", help="a file with one owner/name a line (# comments allowed)")
    base_url: str = setting(DEFAULT_BASE_URL, metavar="URL", help="API root")
    token_env: str = setting(DEFAULT_TOKEN_ENV, metavar="NAME", help="environment variable holding the token; never pass a token itself")
    max_issues: int | None = setting(None, minimum=1, parse=positive_int, metavar="N", help="at most this many closed issues per repository")
    per_page: int = setting(100, minimum=1, maximum=100, metavar="N", help="items per page, 1-100")
    candidates: str = setting("signals", choices=CANDIDATES, help="which issues get their comments and timeline fetched")
    originals: bool = setting(True, help="fetch the originals outside the collected issues (--no-originals: do not)")
    duplicate_authors: tuple[str, ...] | None = setting(None, parse=_authors, metavar="NAMES", help=_AUTHORS)
    rate_limit: bool = setting(True, help="wait pre-emptively when X-RateLimit-Remaining reaches 0 (--no-rate-limit: do not; 403/429 are still honoured)")
    max_retries: int = setting(5, minimum=0, metavar="N", help="retries of a failing request")
    max_rate_limit_waits: int = setting(10, minimum=0, metavar="N", help="waits a rate-limited request may make (Retry-After, reset) before it fails")

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class BuildSettings:
    """How ``github-issues build`` makes pairs, splits and statistics from a collection."""

    seed: int = setting(42, minimum=0, help="seed of splits and negative sampling")
    negative_ratio: float = setting(
        PAPER_NEGATIVE_RATIO, minimum=0, metavar="R", help=f"negatives per positive (default {PAPER_NEGATIVE_RATIO:.4f}: the published dataset's 10622/11038)"
    )
    split_shares: tuple[float, ...] = setting(
        PAPER_SPLIT_SHARES,
        parse=parse_shares,
        metavar="TRAIN,VALID,TEST",
        help="train,valid,test shares of positive pairs (default: the published 18565/1547/1548)",
    )
    max_chars: int = setting(DEFAULT_MAX_CHARS, minimum=1, metavar="N", help="cap of a text in characters")
    tokenizer: str | None = setting(None, metavar="NAME", help="tokenizer (path or cached name) for the token statistics (default: an approximate count)")
    long_threshold: int = setting(512, minimum=1, metavar="N", help="token count of a 'long' text")
    duplicate_authors: tuple[str, ...] | None = setting(
        None, parse=_authors, metavar="NAMES", help=_AUTHORS.replace("(default: ", "(default: the collection's, else ")
    )
    plot: bool = setting(True, help="write the length-distribution PNG (--no-plot: skip it)")

    def __post_init__(self) -> None:
        check_fields(self)
        if len(self.split_shares) != 3:
            raise ConfigError(f"split_shares: expected three numbers (train,valid,test), got {list(self.split_shares)}")
