"""same_file: one file through another spelling, a symbolic link or a hard link; different files differ."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from anglekit.io import same_file


def test_same_file_sees_through_spellings_and_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = tmp_path / "a.txt"
    a.write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.txt").symlink_to(a)
    os.link(a, tmp_path / "hard.txt")
    (tmp_path / "b.txt").write_text("x")
    monkeypatch.chdir(tmp_path / "sub")
    for other in (a, "../a.txt", tmp_path / "sub" / ".." / "a.txt", tmp_path / "link.txt", tmp_path / "hard.txt"):
        assert same_file(a, other) and same_file(other, a)
    assert not same_file(a, tmp_path / "b.txt")  # equal content, another file
    assert same_file(tmp_path / "new.txt", "../new.txt")  # neither exists: compared resolved
    assert not same_file(tmp_path / "new.txt", a)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert same_file("~/a.txt", a)
