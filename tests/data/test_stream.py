"""Spooled reads (``anglekit.data.stream``): the same rows, checks, errors and skips as the
in-memory readers, kept in a memory-mapped Arrow file written a batch at a time."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import numpy as np
import pytest

from anglekit.data.readers import read_pairs
from anglekit.data.sentences import read_sentences
from anglekit.data.stream import ArrowRows, spooling
from anglekit.data.triplets import read_triplets
from anglekit.errors import ConfigError, DataError


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


PAIRS = [{"text1": f"first text {i}", "text2": f"second text {i % 4}", "label": float(i % 6)} for i in range(23)]


def test_spooled_pairs_equal_the_in_memory_read(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "pairs.jsonl", PAIRS)
    expected = read_pairs(path, label_range=(0, 5))
    with spooling(tmp_path / "spool", batch_rows=5) as spool:
        rows = read_pairs(path, label_range=(0, 5))
    assert isinstance(rows, ArrowRows) and len(rows) == 23 and rows.label_range == (0, 5)
    assert spool.columns["text1"].written == 23 and not spool.columns["text1"].buffer  # written in batches, nothing held
    assert rows.texts("text1") == expected.text1 and rows.texts("text2", 3, 9) == expected.text2[3:9]
    np.testing.assert_array_equal(rows.labels, expected.labels)
    assert rows.table.column("text1").num_chunks == 5  # 5 + 5 + 5 + 5 + 3
    assert "23 pairs" in rows.summary()


def test_errors_and_lenient_skips_are_those_of_the_in_memory_read(tmp_path: Path) -> None:
    bad = [dict(r) for r in PAIRS]
    bad[16]["text2"] = "   "
    path = _jsonl(tmp_path / "bad.jsonl", bad)
    with pytest.raises(DataError) as plain:
        read_pairs(path)
    with pytest.raises(DataError) as spooled, spooling(tmp_path / "s1", batch_rows=4):
        read_pairs(path)
    assert str(spooled.value) == str(plain.value) and "17" in str(spooled.value)  # the same row, counted across batches
    with spooling(tmp_path / "s2", batch_rows=4):
        lenient = read_pairs(path, lenient=True)
    assert len(lenient) == 22 and lenient.skipped == read_pairs(path, lenient=True).skipped
    with pytest.raises(DataError, match="empty"), spooling(tmp_path / "s3"):
        read_pairs(_jsonl(tmp_path / "empty.jsonl", []))


def test_sentences_and_triplets_spool_and_nli_rows_refuse(tmp_path: Path) -> None:
    text = tmp_path / "s.txt"
    text.write_text("\n".join(f"sentence number {i}" for i in range(11)) + "\n", encoding="utf-8")
    with spooling(batch_rows=3):
        sentences = read_sentences(text)
    assert isinstance(sentences, ArrowRows) and sentences.texts("text") == read_sentences(text).texts
    triplets = [{"anchor": f"a {i}", "positive": f"p {i}", "negative": f"n {i}"} for i in range(7)]
    for rows_in, negatives in ((triplets, True), ([{k: r[k] for k in ("anchor", "positive")} for r in triplets], False)):
        path = _jsonl(tmp_path / f"t{negatives}.jsonl", rows_in)
        with spooling(batch_rows=2):
            spooled = read_triplets(path)
        expected = read_triplets(path)
        assert spooled.has_negatives is negatives and spooled.texts("anchor") == expected.anchor
        if negatives:
            assert spooled.texts("negative") == expected.negative
    nli = _jsonl(tmp_path / "nli.jsonl", [{"premise": "a", "hypothesis": "b", "label": 0}, {"premise": "a", "hypothesis": "c", "label": 2}])
    with pytest.raises(ConfigError, match="cannot be streamed"), spooling():
        read_triplets(nli)


def test_datasets_objects_spool(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    data = {"q": [r["text1"] for r in PAIRS], "d": [r["text2"] for r in PAIRS], "y": [r["label"] for r in PAIRS]}
    ds = datasets.Dataset.from_dict(data)
    mapping = {"text1": "q", "text2": "d", "label": "y"}
    for source in (ds, ds.to_iterable_dataset()):
        with spooling(batch_rows=6):
            rows = read_pairs(source, columns=mapping)
        assert isinstance(rows, ArrowRows) and rows.texts("text1") == data["q"]
        np.testing.assert_array_equal(rows.labels, data["y"])


def test_a_temporary_spool_is_removed_with_its_rows(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "pairs.jsonl", PAIRS)
    with spooling():
        rows = read_pairs(path)
    folder = rows.path.parent
    assert folder.is_dir() and folder.name.startswith("anglekit-rows-")
    del rows
    gc.collect()
    assert not folder.exists()
    kept = tmp_path / "kept"
    with spooling(kept):
        rows = read_pairs(path)
    del rows
    gc.collect()
    assert (kept / "rows.arrow").is_file()  # a folder the caller chose stays


def test_a_temporary_spool_folder_is_removed_when_no_rows_come_out(tmp_path: Path) -> None:
    """A failed read (a bad row half-way, an empty file) leaves no temporary folder behind; rows
    that came out keep theirs until they are collected."""
    bad = [dict(r) for r in PAIRS]
    bad[16]["text2"] = "   "
    for rows, expected in ((bad, "row 17"), ([], "empty")):
        with pytest.raises(DataError, match=expected), spooling(batch_rows=4) as spool:
            read_pairs(_jsonl(tmp_path / "pairs.jsonl", rows))
        assert not spool.folder.exists()
    with spooling() as spool:
        pass
    assert not spool.folder.exists()
    with spooling(batch_rows=4) as spool:
        good = read_pairs(_jsonl(tmp_path / "pairs.jsonl", PAIRS))
    assert spool.folder.is_dir() and len(good) == 23
    del good
    gc.collect()
    assert not spool.folder.exists()
    with pytest.raises(DataError), spooling(tmp_path / "mine", batch_rows=4):  # the caller's folder is the caller's
        read_pairs(_jsonl(tmp_path / "pairs.jsonl", bad))
    assert (tmp_path / "mine").is_dir()
