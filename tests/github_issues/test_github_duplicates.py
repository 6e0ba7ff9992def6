"""Duplicate signals: state_reason, label, timeline events, comments (cross-repository too); only the
project's comments count, never a negated or speculative one; rejections are counted by reason."""

from __future__ import annotations

from collections import Counter

import pytest

from anglekit.errors import ConfigError
from anglekit.github_issues.duplicates import (
    ASSOCIATIONS,
    PROJECT_ASSOCIATIONS,
    IssueRef,
    find_duplicate_pairs,
    find_references,
    is_candidate,
    parse_authors,
    parse_duplicate_comment,
)

R = "org/proj"


def member(body: str, association: str = "MEMBER") -> dict[str, str]:
    return {"body": body, "author_association": association}


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        ("Duplicate of #123", [IssueRef(R, 123)]),
        ("Thanks! Closing as a duplicate of #45.", [IssueRef(R, 45)]),
        ("closing this as dupe of #7", [IssueRef(R, 7)]),
        ("Closed as duplicate of other/repo#9", [IssueRef("other/repo", 9)]),
        ("This duplicates https://github.com/a-b/c.d/issues/77", [IssueRef("a-b/c.d", 77)]),
        ("duplicate: #5 and see also #6", [IssueRef(R, 5)]),
        ("Marked as duplicate of #8", [IssueRef(R, 8)]),
        ("> Duplicate of #1\nI disagree", []),
        ("```\nDuplicate of #2\n```", []),
        ("Related to #3 but not a dup", []),
    ],
)
def test_comment_phrases(comment: str, expected: list[IssueRef]) -> None:
    assert parse_duplicate_comment(comment, R) == expected


def test_find_references_outside_quotes() -> None:
    text = "see #4 and owner/x#5\n> ignore #6\nhttps://github.com/o/p/pull/7"
    assert find_references(text, R) == [IssueRef(R, 4), IssueRef("owner/x", 5), IssueRef("o/p", 7)]


def test_each_pair_records_its_signals() -> None:
    issue = {"number": 10, "state_reason": "duplicate", "labels": [{"name": "Resolution: Duplicate"}]}
    pairs = find_duplicate_pairs(issue, [member("Duplicate of #3")], [], repo=R)
    assert [(p.duplicate, p.original, p.signals) for p in pairs] == [(IssueRef(R, 10), IssueRef(R, 3), ["state_reason", "label", "comment"])]


def test_timeline_event_with_canonical_target() -> None:
    event = {"event": "marked_as_duplicate", "canonical": {"number": 2, "repository_url": "https://api.github.com/repos/up/stream"}}
    pairs = find_duplicate_pairs({"number": 11}, [], [event], repo=R)
    assert [(p.original, p.signals) for p in pairs] == [(IssueRef("up/stream", 2), ["timeline"])]


def test_flagged_issue_with_a_single_reference_uses_it() -> None:
    pairs = find_duplicate_pairs({"number": 12, "state_reason": "duplicate"}, [member("Please follow #40 instead")], [], repo=R)
    assert [(p.original, p.signals) for p in pairs] == [(IssueRef(R, 40), ["state_reason", "reference"])]
    # two candidate references: ambiguous, no pair; no flag at all: plain references mean nothing
    assert find_duplicate_pairs({"number": 12, "state_reason": "duplicate"}, [member("#40 or #41")], [], repo=R) == []
    assert find_duplicate_pairs({"number": 12}, [member("Please follow #40 instead")], [], repo=R) == []


def test_self_reference_and_marked_without_target() -> None:
    assert find_duplicate_pairs({"number": 5}, [member("Duplicate of #5")], [], repo=R) == []
    assert find_duplicate_pairs({"number": 5}, [], [{"event": "marked_as_duplicate"}], repo=R) == []


def test_candidates() -> None:
    assert is_candidate({"state_reason": "duplicate"})
    assert is_candidate({"state_reason": "not_planned"})
    assert is_candidate({"labels": [{"name": "duplicate"}]})
    assert is_candidate({"title": "Possible duplicate: crash"})
    assert not is_candidate({"state_reason": "completed", "comments": 3})
    assert is_candidate({"state_reason": "completed", "comments": 3}, "commented")
    with pytest.raises(ValueError):
        is_candidate({}, "bogus")


@pytest.mark.parametrize(
    "comment",
    [
        "This is not a duplicate of #123",
        "It isn't a duplicate of #123.",
        "I don't think this is a dup of #123",
        "Not closing as a duplicate of #123",
        "Possibly duplicate of #77?",
        "Possible duplicate of #77",
        "maybe a dup of #77",
        "This might be a duplicate of #77",
        "Is this a duplicate of #77?",
        "Duplicate of #77?",
        "If this is a duplicate of #77, please close it",
    ],
)
def test_negated_and_speculative_comments_give_no_pair(comment: str) -> None:
    assert parse_duplicate_comment(comment, R) == []
    rejected: Counter[str] = Counter()
    assert find_duplicate_pairs({"number": 1}, [member(comment, "OWNER")], [], repo=R, rejected=rejected) == []
    assert sum(rejected[k] for k in ("negated comment", "speculative comment")) == 1


def test_negation_and_question_rejections_are_told_apart() -> None:
    rejected: Counter[str] = Counter()
    comments = [member("This is not a duplicate of #123"), member("Possibly duplicate of #77?"), member("maybe a dup of #9")]
    assert find_duplicate_pairs({"number": 1}, comments, [], repo=R, rejected=rejected) == []
    assert rejected == {"negated comment": 1, "speculative comment": 2}


def test_assertions_in_context_still_count() -> None:
    assert parse_duplicate_comment("Duplicate of #5. Is it fixed in 2.0?", R) == [IssueRef(R, 5)]
    assert parse_duplicate_comment("Sure, duplicate of #7", R) == [IssueRef(R, 7)]
    assert parse_duplicate_comment("Possibly related. Closing as duplicate of #8.", R) == [IssueRef(R, 8)]


@pytest.mark.parametrize("association", ["OWNER", "MEMBER", "COLLABORATOR"])
def test_project_comment_gives_a_pair(association: str) -> None:
    pairs = find_duplicate_pairs({"number": 2}, [member("Duplicate of #1", association)], [], repo=R)
    assert [(p.original, p.signals) for p in pairs] == [(IssueRef(R, 1), ["comment"])]


@pytest.mark.parametrize("association", ["NONE", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", None])
def test_non_project_comment_gives_none(association: str | None) -> None:
    comment = {"body": "Duplicate of #1"} if association is None else member("Duplicate of #1", association)
    rejected: Counter[str] = Counter()
    assert find_duplicate_pairs({"number": 2}, [comment], [], repo=R, rejected=rejected) == []
    reason = "comment author unknown" if association is None else "comment by non-project author"
    assert rejected == {reason: 1}
    # a flagged issue does not take its target from an outsider's comment either
    flagged = {"number": 2, "state_reason": "duplicate"}
    rejected.clear()
    assert find_duplicate_pairs(flagged, [comment], [], repo=R, rejected=rejected) == []
    assert rejected == {reason: 1, "flagged without target": 1}
    # unless asked to (a comment without author_association never counts: collected before it was kept)
    assert len(find_duplicate_pairs({"number": 2}, [comment], [], repo=R, authors=ASSOCIATIONS)) == (association is not None)


def test_flag_signals_are_counted_and_ambiguity_rejected() -> None:
    rejected: Counter[str] = Counter()
    issue = {"number": 12, "labels": [{"name": "duplicate"}]}
    assert find_duplicate_pairs(issue, [member("#40 or #41")], [], repo=R, rejected=rejected) == []
    assert find_duplicate_pairs({"number": 13, "state_reason": "duplicate"}, [], [], repo=R, rejected=rejected) == []
    assert find_duplicate_pairs({"number": 5}, [member("Duplicate of #5")], [], repo=R, rejected=rejected) == []
    assert rejected == {"ambiguous reference": 1, "flagged without target": 1, "self reference": 1}


def test_parse_authors() -> None:
    assert parse_authors(None) == PROJECT_ASSOCIATIONS == ("OWNER", "MEMBER", "COLLABORATOR")
    assert parse_authors("owner, member") == ("OWNER", "MEMBER")
    assert parse_authors("any") == ASSOCIATIONS
    for bad in ("maintainer", "", "OWNER,admins"):
        with pytest.raises(ConfigError):
            parse_authors(bad)
