"""A full disk: every write names the file, the bytes and ENOSPC, and says which finished parts are
intact (issue 26 c). The disk is a fake with a byte budget, put in place of ``open`` in the writing
modules, so the tests do not depend on this machine's disk; it fails the way a real one does:
``OSError(ENOSPC)`` from ``write``, or numpy's short write ("N requested and M written")."""

from __future__ import annotations

import builtins
import errno
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anglekit.io.atomic as atomic
from anglekit.errors import DiskFullError, OutputError

import helpers


class FakeDisk:
    """``open`` with a budget of bytes across every file opened for writing; the write that goes
    past it writes what fits, then fails with ENOSPC (or, ``short=True``, numpy's short write)."""

    def __init__(self, budget: int, *, short: bool = False) -> None:
        self.left = budget
        self.short = short
        self.failed = 0

    def open(self, file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = builtins.open(file, mode, *args, **kwargs)  # noqa: SIM115 - returned to the caller, who closes it
        return handle if not any(c in mode for c in "wa+") else _Limited(handle, self)


class _Limited:
    def __init__(self, handle: Any, disk: FakeDisk) -> None:
        self._handle = handle
        self._disk = disk

    def write(self, data: Any) -> int:
        size = len(data.encode("utf-8")) if isinstance(data, str) else memoryview(data).nbytes
        if size <= self._disk.left:
            self._disk.left -= size
            return self._handle.write(data)
        fit = self._disk.left
        self._disk.left = 0
        self._disk.failed += 1
        self._handle.write(data[:fit] if isinstance(data, str) else bytes(memoryview(data).cast("B")[:fit]))
        self._handle.flush()
        if self._disk.short:
            raise OSError(f"{size} requested and {fit} written")
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self) -> _Limited:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._handle.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


def _fill(monkeypatch: pytest.MonkeyPatch, budget: int, *, short: bool = False, modules: tuple[Any, ...] = (atomic,)) -> FakeDisk:
    disk = FakeDisk(budget, short=short)
    for module in modules:
        monkeypatch.setattr(module, "open", disk.open, raising=False)
    return disk


# ------------------------------------------------------------------ one file


def test_a_full_disk_names_the_file_the_bytes_and_enospc_and_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "results.json"
    target.write_text("old")
    _fill(monkeypatch, 10)
    with pytest.raises(DiskFullError) as info:
        atomic.atomic_write_text(target, "x" * 100)
    message = str(info.value)
    assert str(target) in message and "ENOSPC" in message and "10 bytes written" in message
    assert "previous version is intact" in message
    assert isinstance(info.value, OutputError) and info.value.written == 10 and info.value.path == str(target)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left


def test_numpys_short_write_is_named_as_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case: np.save on a full disk says only '64000 requested and 52192 written'."""
    target = tmp_path / "vectors.npy"
    _fill(monkeypatch, 52192 + 128, short=True)  # the header (128 bytes) fits, then 52192 of the data
    with pytest.raises(DiskFullError) as info:
        atomic.atomic_write(target, lambda handle: np.save(handle, np.zeros((125, 128), dtype=np.float32)), binary=True)
    message = str(info.value)
    assert "64000 bytes requested and 52192 written" in message, message
    assert str(target) in message and "ENOSPC" in message and "it was not created" in message
    assert info.value.requested == 64000 and info.value.written == 52192 + 128
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_other_write_errors_pass_through_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(handle: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with pytest.raises(OSError) as info:
        atomic.atomic_write(tmp_path / "f", broken)
    assert not isinstance(info.value, DiskFullError) and info.value.errno == errno.EIO


# ------------------------------------------------------------------ several parts


def test_a_corpus_encode_says_which_shards_are_intact_and_a_rerun_resumes(tmp_path: Path, load_bert: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from anglekit.corpus import EncodeRequest, encode_corpus, open_shards

    model = load_bert()
    import random

    rng = random.Random(5)
    texts = [helpers.random_sentence(rng) for _ in range(20)]
    (tmp_path / "c.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    reference = tmp_path / "reference"
    encode_corpus(model, EncodeRequest(tmp_path / "c.txt", reference, shard_size=5))
    per_shard = sum(p.stat().st_size for p in reference.glob("shard-000000*"))
    manifest = (reference / "manifest.json").stat().st_size

    out = tmp_path / "out"
    disk = _fill(monkeypatch, manifest + 2 * per_shard + 40)  # the manifest and two shards fit, the third does not
    with pytest.raises(DiskFullError) as info:
        encode_corpus(model, EncodeRequest(tmp_path / "c.txt", out, shard_size=5))
    message = str(info.value)
    assert disk.failed == 1 and "ENOSPC" in message
    assert "Shard 2 (rows 10-14) is not finished" in message and "the 2 finished shards (0-1) are intact" in message, message
    assert str(out) in message and "shard-000002" in info.value.path
    monkeypatch.undo()
    report = encode_corpus(model, EncodeRequest(tmp_path / "c.txt", out, shard_size=5))
    assert (report.reused, report.encoded) == (2, 2)
    ids, vectors = open_shards(out).load()
    np.testing.assert_array_equal(vectors, open_shards(reference).load()[1])
    assert ids == [str(i) for i in range(1, 21)]


def test_an_index_save_on_a_full_disk_keeps_the_saved_index(tmp_path: Path, load_bert: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from anglekit.index.store import VectorIndex

    model = load_bert()
    vectors = np.random.default_rng(0).standard_normal((40, 32)).astype(np.float32)
    index = VectorIndex.create(model)
    index.add_vectors([str(i) for i in range(40)], vectors)
    index.save(tmp_path / "ix")
    index.delete([str(i) for i in range(10)])
    _fill(monkeypatch, 1000)
    with pytest.raises(DiskFullError) as info:
        index.save(tmp_path / "ix")
    assert "index saved before is intact" in str(info.value) and "ENOSPC" in str(info.value)
    monkeypatch.undo()
    assert len(VectorIndex.load(tmp_path / "ix", verify=True)) == 40
    with pytest.raises(DiskFullError) as info:
        _fill(monkeypatch, 1000)
        index.save(tmp_path / "new")
    assert "holds no usable index" in str(info.value)


def test_a_github_collection_append_on_a_full_disk_keeps_the_committed_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import anglekit.github_issues.collect as collect

    path = tmp_path / "issues.jsonl"
    committed = collect._append(path, [{"number": 1}], 0)
    _fill(monkeypatch, 5, modules=(collect,))
    with pytest.raises(DiskFullError) as info:
        collect._append(path, [{"number": n, "title": "t" * 50} for n in range(2, 5)], committed)
    message = str(info.value)
    assert str(path) in message and "ENOSPC" in message and f"The {committed} bytes committed before" in message
    monkeypatch.undo()
    assert collect._read_jsonl(path, committed) == [{"number": 1}]


def test_the_command_line_prints_one_line_and_exits_2(
    tmp_path: Path, tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "t.txt").write_text("a b c\nd e f\n", encoding="utf-8")
    out = tmp_path / "out.npy"
    import anglekit.cli.encode as encode_cli

    _fill(monkeypatch, 64, short=True, modules=(encode_cli,))
    code, stdout, stderr = helpers.run_cli(
        ["encode", str(tiny_bert_dir), "--input", str(tmp_path / "t.txt"), "--output", str(out), "--quiet", "--device", "cpu"], capsys
    )
    assert code == 2, stderr
    line = stderr.strip()
    assert line.startswith("anglekit encode: error: ") and "\n" not in line and "Traceback" not in line
    assert str(out) in line and "ENOSPC" in line and re.search(r"\d+ bytes requested and \d+ written", line), line
    assert not out.exists() and stdout == ""


def test_a_full_disk_outside_the_atomic_helpers_is_named_at_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A write the helpers do not wrap (a library's own save) still says ENOSPC and the file, in one line."""
    import anglekit.cli.report as report_cli

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out.md"))

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "sts.json").write_text('{"columns": ["STS12"], "scores": {"STS12": 70.0}}')
    monkeypatch.setattr(report_cli, "run", lambda args: full())  # main() reads each command's run when it parses
    code, _, err = helpers.run_cli(["report", str(tmp_path / "run"), "--output", str(tmp_path / "out.md")], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"{tmp_path / 'out.md'}: out of disk space (ENOSPC: No space left on device)" in err, err
