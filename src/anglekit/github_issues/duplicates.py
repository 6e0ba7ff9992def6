"""Duplicate detection from every signal GitHub gives; each pair records the signals that found it.

Signals (names as stored in a pair's ``signals`` list):

* ``state_reason`` -- the issue was closed with ``state_reason: "duplicate"``;
* ``label`` -- it carries a label whose name contains "duplicate" (``duplicate``, ``Resolution: Duplicate``...);
* ``timeline`` -- its timeline has a ``marked_as_duplicate`` event (the target is read from the
  event's ``canonical``/``subject`` issue when the API gives one);
* ``comment`` -- a comment **by the project** says so: "Duplicate of #123", "closing as a
  duplicate of #123", "dupe of owner/repo#123", "duplicates https://github.com/owner/repo/issues/123"...
  (quoted lines starting with ``>`` and code blocks are ignored; cross-repository references are kept);
* ``reference`` -- the issue is a duplicate by one of the first three signals, no target was
  found that way, and the project's comments reference exactly one other issue: that one is taken.

The paper's positives are duplicates marked as such by the project, so a comment counts only when
its ``author_association`` is in ``authors`` (default :data:`PROJECT_ASSOCIATIONS`: ``OWNER``,
``MEMBER``, ``COLLABORATOR``) and the phrase is neither negated ("not a duplicate of #1", "isn't a
dup of #1") nor speculative (a hedge such as "possibly", "maybe", "might", "I think", "if" shortly
before it, or its sentence ends with "?"). Links turned down are counted by reason in the
``rejected`` counter given to :func:`find_duplicate_pairs` (keys: :data:`REJECT_REASONS`).

A pair is ``(duplicate, original)``: the issue closed as a duplicate and the issue it points to.
The first three signals say *that* an issue is a duplicate, only ``timeline`` (with a target),
``comment`` and ``reference`` say *of what*; an issue with no target yields no pair.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anglekit.errors import ConfigError

__all__ = [
    "ASSOCIATIONS",
    "PROJECT_ASSOCIATIONS",
    "REJECT_REASONS",
    "SIGNALS",
    "DuplicatePair",
    "IssueRef",
    "classify_phrase",
    "duplicate_flags",
    "find_duplicate_pairs",
    "find_references",
    "is_candidate",
    "parse_authors",
    "parse_duplicate_comment",
]

SIGNALS = ("state_reason", "label", "timeline", "comment", "reference")
ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "MANNEQUIN", "NONE")
"""GitHub's ``author_association`` values."""
PROJECT_ASSOCIATIONS: tuple[str, ...] = ("OWNER", "MEMBER", "COLLABORATOR")
"""Whose comments count by default: the project's owners, members and collaborators."""
REJECT_REASONS = (
    "comment by non-project author",
    "comment author unknown",
    "negated comment",
    "speculative comment",
    "self reference",
    "flagged without target",
    "ambiguous reference",
)
"""Why a duplicate link was turned down (keys of the ``rejected`` counter)."""


def parse_authors(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """``author_association`` values whose comments count: comma-separated text or names, ``any``
    for all of them, None for :data:`PROJECT_ASSOCIATIONS`. Unknown names raise :class:`ConfigError`."""
    if value is None:
        return PROJECT_ASSOCIATIONS
    items = [v.strip().upper() for v in (value.split(",") if isinstance(value, str) else value) if str(v).strip()]
    if items == ["ANY"]:
        return ASSOCIATIONS
    unknown = [v for v in items if v not in ASSOCIATIONS]
    if unknown or not items:
        raise ConfigError(f"duplicate authors must be 'any' or GitHub author associations ({', '.join(ASSOCIATIONS)}), got {value!r}")
    return tuple(dict.fromkeys(items))


@dataclass(frozen=True, order=True)
class IssueRef:
    """An issue by repository and number."""

    repo: str
    number: int

    def key(self) -> str:
        return f"{self.repo}#{self.number}"

    @classmethod
    def parse(cls, key: str) -> IssueRef:
        repo, _, number = key.rpartition("#")
        return cls(repo, int(number))


@dataclass
class DuplicatePair:
    duplicate: IssueRef
    original: IssueRef
    signals: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"duplicate": self.duplicate.key(), "original": self.original.key(), "signals": list(self.signals)}


_OWNER_NAME = r"(?P<owner>[A-Za-z0-9][A-Za-z0-9-]*)/(?P<name>[A-Za-z0-9._-]+)"
_REF = (
    r"(?:https?://github\.com/(?P<uowner>[A-Za-z0-9][A-Za-z0-9-]*)/(?P<uname>[A-Za-z0-9._-]+)/(?:issues|pull)/(?P<unum>\d+)"
    rf"|(?:{_OWNER_NAME})?#(?P<num>\d+))"
)
_DUP_PHRASES = (
    rf"\bdup(?:licate|e)?s?\s+(?:of|to)\s*:?\s*{_REF}",
    rf"\b(?:clos(?:e|ed|ing)|mark(?:ed|ing)?)\s+(?:this\s+)?(?:issue\s+|one\s+)?(?:as\s+)?(?:an?\s+)?dup(?:licate|e)?\s*(?:of|to)?\s*:?\s*{_REF}",
    rf"\bduplicates\s+{_REF}",
    rf"\bdup(?:licate|e)\s*:\s*{_REF}",
    rf"\bdup(?:licate|e)\s+{_REF}",
)
_DUP_RES = [re.compile(p, re.IGNORECASE) for p in _DUP_PHRASES]
_ANY_REF = re.compile(_REF)


def _ref_from_match(match: re.Match[str], repo: str) -> IssueRef:
    if match.group("unum"):
        return IssueRef(f"{match.group('uowner')}/{match.group('uname')}", int(match.group("unum")))
    if match.group("owner"):
        return IssueRef(f"{match.group('owner')}/{match.group('name')}", int(match.group("num")))
    return IssueRef(repo, int(match.group("num")))


def _unquoted(text: str) -> str:
    """Drop quoted lines (``> ...``) and fenced code blocks: references there are someone else's words or code."""
    out, fenced = [], False
    for line in (text or "").splitlines():
        stripped = line.lstrip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fenced = not fenced
            continue
        if fenced or stripped.startswith(">"):
            continue
        out.append(line)
    return "\n".join(out)


_NEGATION = re.compile(r"\b(?:not|no|never|nor|neither|without)\b|n['’]t\b", re.IGNORECASE)
_HEDGE = re.compile(
    r"\b(?:possibl[ey]|maybe|perhaps|probably|might|could|may|likely|potential(?:ly)?|think|guess|suspect|"
    r"wonder(?:ing)?|unsure|if|whether|unless)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)|\n")
_CLAUSE_END = re.compile(r"[.!?;,:()](?=\s|$)|\n")
_NEGATION_WORDS = 6
_HEDGE_WORDS = 8


def _words_before(text: str, start: int, boundary: re.Pattern[str], words: int) -> str:
    before = text[:start]
    cut = max((m.end() for m in boundary.finditer(before)), default=0)
    return " ".join(before[cut:].split()[-words:])


def classify_phrase(text: str, start: int, end: int) -> str | None:
    """``"negated"``, ``"speculative"`` or None (an assertion) for a duplicate phrase at ``text[start:end]``.

    Negated: a negation (not, no, never, n't, ...) among the 6 words before it in its clause.
    Speculative: a hedge (possibly, maybe, might, could, may, probably, likely, I think/guess,
    if, whether, ...) among the 8 words before it in its sentence, or its sentence ends with "?".
    """
    if _NEGATION.search(_words_before(text, start, _CLAUSE_END, _NEGATION_WORDS)):
        return "negated"
    after = _SENTENCE_END.search(text, end)
    if (after is not None and after.group(0) == "?") or _HEDGE.search(_words_before(text, start, _SENTENCE_END, _HEDGE_WORDS)):
        return "speculative"
    return None


def _comment_links(text: str, repo: str) -> list[tuple[IssueRef, str | None]]:
    """``(target, None | "negated" | "speculative")`` of each duplicate phrase, in order, first per target."""
    clean = _unquoted(text)
    found: list[tuple[int, IssueRef, str | None]] = []
    for pattern in _DUP_RES:
        for match in pattern.finditer(clean):
            found.append((match.start(), _ref_from_match(match, repo), classify_phrase(clean, match.start(), match.end())))
    seen: dict[IssueRef, str | None] = {}
    for _, ref, verdict in sorted(found, key=lambda item: item[0]):
        if ref not in seen or (seen[ref] is not None and verdict is None):
            seen[ref] = verdict
    return list(seen.items())


def parse_duplicate_comment(text: str, repo: str) -> list[IssueRef]:
    """Issues a comment declares this one a duplicate of (in order of appearance, no repeats);
    negated and speculative phrases ("not a duplicate of #1", "possibly a dup of #2?") are left out."""
    return [ref for ref, verdict in _comment_links(text, repo) if verdict is None]


def find_references(text: str, repo: str) -> list[IssueRef]:
    """Every issue reference (``#12``, ``owner/repo#12``, an issues/pull URL) outside quotes and code."""
    seen: dict[IssueRef, None] = {}
    for match in _ANY_REF.finditer(_unquoted(text)):
        seen.setdefault(_ref_from_match(match, repo), None)
    return list(seen)


def _label_names(issue: Mapping[str, Any]) -> list[str]:
    names = []
    for label in issue.get("labels") or ():
        name = label.get("name") if isinstance(label, Mapping) else label
        if isinstance(name, str):
            names.append(name)
    return names


def duplicate_flags(issue: Mapping[str, Any]) -> list[str]:
    """The issue-level signals (``state_reason``, ``label``) an issue carries."""
    flags = []
    if issue.get("state_reason") == "duplicate":
        flags.append("state_reason")
    if any("duplicate" in name.lower() for name in _label_names(issue)):
        flags.append("label")
    return flags


def is_candidate(issue: Mapping[str, Any], mode: str = "signals") -> bool:
    """Whether the collector fetches this issue's comments and timeline.

    ``signals`` (default): closed as duplicate or not planned (GitHub's UI closes duplicates as
    "not planned" when no target is picked, and older duplicates carry only a label or a
    comment), a duplicate label, or "duplicate" in the title. ``commented``: any issue with
    comments (finds duplicates announced only in a comment, at many more requests). ``all``: every issue.
    """
    if mode == "all":
        return True
    if mode == "commented":
        return bool(issue.get("comments")) or bool(duplicate_flags(issue))
    if mode != "signals":
        raise ValueError(f"unknown candidate mode {mode!r} (signals, commented, all)")
    if duplicate_flags(issue) or issue.get("state_reason") == "not_planned":
        return True
    return "duplicate" in str(issue.get("title") or "").lower()


def _timeline_targets(events: Iterable[Mapping[str, Any]], repo: str, number: int) -> tuple[bool, list[IssueRef]]:
    marked, targets = False, []
    for event in events or ():
        if not isinstance(event, Mapping) or event.get("event") != "marked_as_duplicate":
            continue
        marked = True
        for key in ("canonical", "subject", "duplicate_of", "issue"):
            target = event.get(key)
            if isinstance(target, Mapping) and isinstance(target.get("number"), int):
                target_repo = repo
                url = target.get("repository_url") or target.get("html_url") or ""
                match = re.search(r"(?:repos/|github\.com/)([^/]+/[^/]+?)(?:/issues/.*|/pull/.*)?$", str(url))
                if match:
                    target_repo = match.group(1)
                ref = IssueRef(target_repo, int(target["number"]))
                if ref != IssueRef(repo, number) and ref not in targets:
                    targets.append(ref)
                break
    return marked, targets


def _comment_targets(comments: Iterable[Mapping[str, Any]], me: IssueRef, allowed: Collection[str], targets: dict[IssueRef, list[str]],
                     rejects: Counter[str]) -> list[Mapping[str, Any]]:  # fmt: skip
    """The originals that the comments of ``allowed`` authors name (added to ``targets``, each link
    turned down counted in ``rejects``); returns those authors' comments."""
    project_comments: list[Mapping[str, Any]] = []
    for comment in comments or ():
        if not isinstance(comment, Mapping):
            continue
        links = _comment_links(str(comment.get("body") or ""), me.repo)
        association = comment.get("author_association")
        if not isinstance(association, str) or association.upper() not in allowed:
            if links:
                reason = "comment author unknown" if not isinstance(association, str) else "comment by non-project author"
                rejects[reason] += len(links)
            continue
        project_comments.append(comment)
        for ref, verdict in links:
            if verdict is not None:
                rejects[f"{verdict} comment"] += 1
            elif ref == me:
                rejects["self reference"] += 1
            elif "comment" not in targets.setdefault(ref, []):
                targets[ref].append("comment")
    return project_comments


def _reference_target(project_comments: Sequence[Mapping[str, Any]], me: IssueRef, targets: dict[IssueRef, list[str]], rejects: Counter[str]) -> None:
    """A flagged issue without a named original: the one other issue its project comments refer
    to becomes the target; none or several are counted in ``rejects``."""
    refs: dict[IssueRef, None] = {}
    for comment in project_comments:
        for ref in find_references(str(comment.get("body") or ""), me.repo):
            if ref != me:
                refs.setdefault(ref, None)
    if len(refs) == 1:
        targets[next(iter(refs))] = ["reference"]
    else:
        rejects["ambiguous reference" if refs else "flagged without target"] += 1


def find_duplicate_pairs(
    issue: Mapping[str, Any],
    comments: Iterable[Mapping[str, Any]] = (),
    timeline: Iterable[Mapping[str, Any]] = (),
    *,
    repo: str,
    authors: Collection[str] = PROJECT_ASSOCIATIONS,
    rejected: Counter[str] | None = None,
) -> list[DuplicatePair]:
    """Pairs ``(this issue, original)`` found for one issue, each with the signals behind it.

    Only comments whose ``author_association`` is in ``authors`` are read; every link turned down
    is counted in ``rejected`` (when given) under one of :data:`REJECT_REASONS`.
    """
    rejects: Counter[str] = rejected if rejected is not None else Counter()
    number = int(issue["number"])
    me = IssueRef(repo, number)
    flags = duplicate_flags(issue)
    marked, timeline_targets = _timeline_targets(timeline, repo, number)
    if marked:
        flags.append("timeline")
    targets: dict[IssueRef, list[str]] = {}
    for ref in timeline_targets:
        targets.setdefault(ref, []).append("timeline")
    project_comments = _comment_targets(comments, me, {a.upper() for a in authors}, targets, rejects)
    if not targets and flags:
        _reference_target(project_comments, me, targets, rejects)
    pairs = []
    for ref, how in targets.items():
        signals = [s for s in SIGNALS if s in flags or s in how]
        pairs.append(DuplicatePair(me, ref, signals))
    return pairs
