"""Duplicate signals: state_reason, label, timeline events, comments (cross-repository too)."""

from __future__ import annotations

import pytest

from anglekit.github_issues.duplicates import (
    IssueRef,
    find_duplicate_pairs,
    find_references,
    is_candidate,
    parse_duplicate_comment,
)

R = "org/proj"


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
    pairs = find_duplicate_pairs(issue, [{"body": "Duplicate of #3"}], [], repo=R)
    assert [(p.duplicate, p.original, p.signals) for p in pairs] == [
        (IssueRef(R, 10), IssueRef(R, 3), ["state_reason", "label", "comment"])
    ]


def test_timeline_event_with_canonical_target() -> None:
    event = {"event": "marked_as_duplicate", "canonical": {"number": 2, "repository_url": "https://api.github.com/repos/up/stream"}}
    pairs = find_duplicate_pairs({"number": 11}, [], [event], repo=R)
    assert [(p.original, p.signals) for p in pairs] == [(IssueRef("up/stream", 2), ["timeline"])]


def test_flagged_issue_with_a_single_reference_uses_it() -> None:
    pairs = find_duplicate_pairs({"number": 12, "state_reason": "duplicate"}, [{"body": "Please follow #40 instead"}], [], repo=R)
    assert [(p.original, p.signals) for p in pairs] == [(IssueRef(R, 40), ["state_reason", "reference"])]
    # two candidate references: ambiguous, no pair; no flag at all: plain references mean nothing
    assert find_duplicate_pairs({"number": 12, "state_reason": "duplicate"}, [{"body": "#40 or #41"}], [], repo=R) == []
    assert find_duplicate_pairs({"number": 12}, [{"body": "Please follow #40 instead"}], [], repo=R) == []


def test_self_reference_and_marked_without_target() -> None:
    assert find_duplicate_pairs({"number": 5}, [{"body": "Duplicate of #5"}], [], repo=R) == []
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
