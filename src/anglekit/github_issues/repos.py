"""The repositories the AnglE paper built its GitHub Issues Similarity dataset from.

The paper (Li & Li, "AnglE-optimized Text Embeddings", arXiv:2309.12871, appendix) lists 55
popular repositories; the list ships with the package (``paper_repositories.txt``, one
``owner/name`` a line, in the appendix's order) and is the default of ``github-issues collect``.

Repository lists (:func:`parse_repos`) are comma-separated ``owner/name`` items (or an iterable of
them); an item may also be a keyword naming a shipped list: ``paper`` (the 55).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import resources

from anglekit.errors import ConfigError

__all__ = [
    "DEFAULT_REPOSITORIES",
    "PAPER_REPOSITORIES",
    "PAPER_REPOSITORY_COUNT",
    "REPO_KEYWORDS",
    "parse_repo",
    "parse_repos",
    "repo_dirname",
]

_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


def _shipped(name: str) -> tuple[str, ...]:
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return tuple(line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip())


PAPER_REPOSITORIES: tuple[str, ...] = _shipped("paper_repositories.txt")
"""The paper's appendix list (55 repositories, its order)."""

PAPER_REPOSITORY_COUNT = 55
"""How many repositories the paper's appendix lists."""

DEFAULT_REPOSITORIES: tuple[str, ...] = PAPER_REPOSITORIES
"""What ``collect`` uses when no repository is given: the paper's 55."""

REPO_KEYWORDS: dict[str, tuple[str, ...]] = {"paper": PAPER_REPOSITORIES}
"""Keywords accepted in a repository list, and the repositories each stands for."""


def parse_repo(text: str) -> str:
    """Validate one ``owner/name`` (surrounding blanks and a ``https://github.com/`` prefix dropped)."""
    value = str(text).strip()
    for prefix in ("https://github.com/", "http://github.com/", "github.com/"):
        if value.lower().startswith(prefix):
            value = value[len(prefix) :]
    value = value.rstrip("/")
    if value.endswith(".git"):
        value = value[:-4]
    if not _REPO.match(value) or value.split("/")[1] in (".", ".."):
        raise ConfigError(f"not a GitHub repository 'owner/name': {text!r}")
    return value


def parse_repos(items: str | Iterable[str]) -> list[str]:
    """Comma-separated text or an iterable of names and keywords -> validated, de-duplicated
    ``owner/name`` list (order kept). An item without ``/`` must be a keyword of :data:`REPO_KEYWORDS`."""
    parts = items.split(",") if isinstance(items, str) else list(items)
    seen: dict[str, None] = {}
    for part in parts:
        item = str(part).strip()
        if not item or item.startswith("#"):
            continue
        if "/" not in item:
            if item.lower() not in REPO_KEYWORDS:
                raise ConfigError(f"unknown repository list {item!r}: give owner/name items or one of {', '.join(REPO_KEYWORDS)}")
            for repo in REPO_KEYWORDS[item.lower()]:
                seen.setdefault(repo, None)
            continue
        seen.setdefault(parse_repo(item), None)
    if not seen:
        raise ConfigError("no repositories given")
    return list(seen)


def repo_dirname(repo: str) -> str:
    """Folder name of a repository inside a collection (``owner__name``)."""
    owner, name = parse_repo(repo).split("/")
    return f"{owner}__{name}"
