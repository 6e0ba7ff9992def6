"""One catalogue for pairs, sentences and triplets; the data layer's import rules."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from anglekit.data import catalog
from anglekit.data.catalog import (
    is_known_nli_name,
    is_known_sentence_name,
    known_pair_dataset,
    load_sentences_by_name,
    load_triplets_by_name,
)

SRC = Path(catalog.__file__).resolve().parents[1]  # src/anglekit


def test_one_catalogue_for_every_kind() -> None:
    assert known_pair_dataset("STS-B").name == "stsb" and known_pair_dataset("gis").name == "github-issues"
    assert known_pair_dataset("mr") is None
    for name in ("mr", "cr", "subj", "mpqa", "flickr30k", "snli", "stsb", "sick-r", "github-issues"):
        assert is_known_sentence_name(name), name
    for name in ("snli", "mnli", "multinli", "all-nli"):
        assert is_known_nli_name(name), name
    assert not is_known_nli_name("stsb")
    assert load_sentences_by_name("no-such-corpus", "train") is None
    assert load_triplets_by_name("no-such-set", "train") is None


def test_github_issues_is_known_without_import_side_effects() -> None:
    code = (
        "import sys, anglekit.data.catalog as c\n"
        "assert 'github-issues' in c.KNOWN_DATASETS and c.known_pair_dataset('gis') is not None\n"
        "assert not [m for m in sys.modules if m.startswith('anglekit.github_issues')], 'the builder was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_github_issues_entry_matches_its_module() -> None:
    from anglekit.data import github_issues as dataset
    from anglekit.github_issues.build import MANIFEST

    entry = catalog.KNOWN_DATASETS["github-issues"]
    assert entry.hub_id == dataset.HUB_ID and entry.marker_files == (MANIFEST,)
    assert all(known_pair_dataset(name) is entry for name in dataset.NAMES)
    assert entry.hub_splits == dataset.FILE_SPLITS


def test_github_issues_valid_and_dev_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "github-issues"
    folder.mkdir()
    (folder / "github_issues.json").write_text("{}", encoding="utf-8")
    rows = [{"text1": "a bug", "text2": "the same bug", "label": 1}, {"text1": "x", "text2": "y", "label": 0}]
    (folder / "valid.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.setenv(catalog.DATA_ENV_VAR, str(tmp_path))
    valid = catalog.resolve_dataset("github-issues:valid")
    assert valid == catalog.resolve_dataset("github-issues:dev") and len(valid) == 2
    assert len(load_sentences_by_name("gis", "dev")) == 4  # both sides' distinct texts


def _imports(path: Path) -> list[ast.ImportFrom]:
    return [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.ImportFrom)]


def test_no_private_names_cross_modules() -> None:
    files = sorted((SRC / "data").glob("*.py")) + sorted((SRC / "github_issues").glob("*.py"))
    private = [
        f"{path.name}: from {node.module} import {alias.name}"
        for path in files
        for node in _imports(path)
        for alias in node.names
        if alias.name.startswith("_") and (node.module or "").startswith("anglekit")
    ]
    assert private == []


def test_records_know_no_reader() -> None:
    modules = {node.module for node in _imports(SRC / "data" / "records.py")}
    assert not any((m or "").startswith("anglekit.data") for m in modules), modules
