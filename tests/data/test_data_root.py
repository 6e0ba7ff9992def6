"""The default data root ($ANGLEKIT_DATA, else the per-user folder) and the missing-dataset errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anglekit.data import (
    DATA_ENV_VAR,
    default_data_root,
    load_dataset_by_name,
    resolve_dataset,
    resolve_sentences,
    resolve_triplets,
    user_data_dir,
)
from anglekit.errors import ConfigError, DataError


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No $ANGLEKIT_DATA; XDG_DATA_HOME is a fresh folder of this test. Returns XDG_DATA_HOME."""
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    monkeypatch.setenv("XDG_DATA_HOME", str(xdg))
    if "datasets" in sys.modules:  # the offline flags are read at import time
        import datasets
        import huggingface_hub.constants

        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return xdg


def assert_names_both_places(message: str) -> None:
    assert f"${DATA_ENV_VAR}" in message
    assert str(user_data_dir()) in message


def test_env_var_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "anglekit" / "data").mkdir(parents=True)
    assert default_data_root() == tmp_path
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=DATA_ENV_VAR):
        default_data_root()


def test_per_user_folder_when_the_env_var_is_unset(no_env: Path) -> None:
    folder = no_env / "anglekit" / "data"
    assert user_data_dir() == folder
    assert default_data_root() is None  # the folder does not exist yet
    folder.mkdir(parents=True)
    assert default_data_root() == folder


def test_xdg_default_and_relative_values(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert user_data_dir() == tmp_path / ".local" / "share" / "anglekit" / "data"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")  # the XDG spec: ignored when not absolute
    assert user_data_dir() == tmp_path / ".local" / "share" / "anglekit" / "data"


def test_never_relative_to_the_current_directory(no_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shared" / "data" / "stsb").mkdir(parents=True)
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")  # ../shared/data exists from here
    assert default_data_root() is None


def test_missing_named_pair_dataset_names_both_places(no_env: Path) -> None:
    with pytest.raises(ConfigError, match="no usable 'dev' split") as exc:
        load_dataset_by_name("sick", "dev")
    assert_names_both_places(str(exc.value))


def test_missing_pair_dataset_with_failing_hub_names_both_places(no_env: Path) -> None:
    pytest.importorskip("datasets")
    with pytest.raises(DataError, match="hf:sentence-transformers/stsb") as exc:
        resolve_dataset("stsb:test")
    assert_names_both_places(str(exc.value))
    assert "stsb/" in str(exc.value)


def test_missing_sentence_corpora_name_both_places(no_env: Path) -> None:
    with pytest.raises(ConfigError) as exc:  # no data root at all
        resolve_sentences("mr")
    assert_names_both_places(str(exc.value))
    (no_env / "anglekit" / "data").mkdir(parents=True)  # a data root without the corpora
    for spec in ("mr", "flickr30k:test", "snli:dev"):
        with pytest.raises(DataError) as exc:
            resolve_sentences(spec)
        assert_names_both_places(str(exc.value))


def test_missing_snli_with_failing_hub_names_both_places(no_env: Path) -> None:
    pytest.importorskip("datasets")
    with pytest.raises(DataError, match="stanfordnlp/snli") as exc:
        resolve_triplets("snli:train")
    assert_names_both_places(str(exc.value))
