"""Every folder anglekit writes gets the mode ``mkdir`` gives under the umask, files the mode
``open()`` gives: nothing stays at ``mkdtemp``'s 0700 or ``mkstemp``'s 0600 (umask 022 and 077)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from anglekit.io.atomic import atomic_write_text, file_mode, folder_mode, staging_dir

from helpers import run_cli


@pytest.fixture(params=[0o022, 0o077], ids=["umask022", "umask077"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _reference_modes(tmp: Path) -> tuple[int, int]:
    """What plain mkdir and open() give under the current umask (the independent reference)."""
    folder, file = tmp / "ref-dir", tmp / "ref-file"
    folder.mkdir()
    file.write_text("x")
    modes = stat.S_IMODE(folder.stat().st_mode), stat.S_IMODE(file.stat().st_mode)
    folder.rmdir()
    file.unlink()
    return modes


def assert_modes(root: Path, tmp: Path) -> int:
    """Every folder under (and including) ``root`` has mkdir's mode, every file open()'s; returns the count."""
    want_dir, want_file = _reference_modes(tmp)
    bad = []
    paths = [root, *root.rglob("*")]
    for path in paths:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_symlink():
            continue
        want = want_dir if path.is_dir() else want_file
        if mode != want:
            bad.append(f"{path.relative_to(root.parent)}: {oct(mode)} (want {oct(want)})")
    assert not bad, bad
    return len(paths)


def test_helpers_match_mkdir_and_open(umask: int, tmp_path: Path) -> None:
    want_dir, want_file = _reference_modes(tmp_path)
    assert (folder_mode(), file_mode()) == (want_dir, want_file) == (0o777 & ~umask, 0o666 & ~umask)
    folder = staging_dir(tmp_path / "out")
    assert folder.parent == tmp_path and folder.name.startswith(".out.") and not any(folder.iterdir())
    assert stat.S_IMODE(folder.stat().st_mode) == want_dir
    atomic_write_text(folder / "a.txt", "a")
    assert stat.S_IMODE((folder / "a.txt").stat().st_mode) == want_file
    with pytest.raises(FileNotFoundError):
        staging_dir(tmp_path / "no-parent" / "out")


def test_saved_model_folder(umask: int, tmp_path: Path, load_bert) -> None:  # type: ignore[no-untyped-def]
    out = load_bert().save_pretrained(tmp_path / "saved")
    assert assert_modes(out, tmp_path) > 3


@pytest.mark.parametrize("fmt", ["sentence-transformers", "onnx"])
def test_export_folders(fmt: str, umask: int, tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
    out = tmp_path / "exported"
    code, _, err = run_cli(["export", str(tiny_bert_dir), "--format", fmt, "--output-dir", str(out), "--device", "cpu", "--quiet"], capsys)
    assert code == 0, err
    assert assert_modes(out, tmp_path) > 3
    code, _, err = run_cli(["export", str(tiny_bert_dir), "--format", fmt, "--output-dir", str(out), "--device", "cpu", "--quiet", "--overwrite"], capsys)
    assert code == 0, err
    assert_modes(out, tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".exported.")]  # no staging left behind


def test_shards_index_and_training_output(umask: int, tmp_path: Path, tiny_bert_dir: Path, pair_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"text number {i}\n" for i in range(10)))
    shards = tmp_path / "shards"
    code, _, err = run_cli(
        ["encode", str(tiny_bert_dir), "--input", str(texts), "--output-dir", str(shards), "--shard-size", "4", "--device", "cpu", "--quiet"], capsys
    )
    assert code == 0, err
    assert_modes(shards, tmp_path)
    index = tmp_path / "index"
    code, _, err = run_cli(["index", "build", str(tiny_bert_dir), "--input", str(texts), "--output-dir", str(index), "--device", "cpu", "--quiet"], capsys)
    assert code == 0, err
    assert_modes(index, tmp_path)
    run = tmp_path / "run"
    code, _, err = run_cli(
        [
            "train",
            str(tiny_bert_dir),
            "--train-data",
            str(pair_file),
            "--output-dir",
            str(run),
            "--max-steps",
            "2",
            "--batch-size",
            "4",
            "--save-steps",
            "1",
            "--positive-threshold",
            "2.5",
            "--device",
            "cpu",
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    assert assert_modes(run, tmp_path) > 5
