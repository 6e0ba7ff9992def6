"""Chunked corpus reading: the same texts and errors as the whole-file readers, ids, constant chunks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anglekit.corpus.reader import corpus_signature, iter_corpus
from anglekit.data.readers import read_texts
from anglekit.errors import ConfigError, DataError

TEXTS = ["a man is playing the guitar .", "dog", "two kids ride bikes", "caf\u00e9 au lait", "the old woman walks her dog ."]


def _all(path: Path, **kwargs: object) -> tuple[list[str], list[str], list[int]]:
    ids, texts, starts = [], [], []
    for chunk in iter_corpus(path, **kwargs):  # type: ignore[arg-type]
        starts.append(chunk.start)
        ids.extend(chunk.ids)
        texts.extend(chunk.texts)
    return ids, texts, starts


def _write(path: Path, fmt: str, rows: list[dict[str, object]]) -> Path:
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif fmt in ("csv", "tsv"):
        import csv

        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, delimiter="," if fmt == "csv" else "\t", quoting=csv.QUOTE_MINIMAL if fmt == "csv" else csv.QUOTE_NONE)
            writer.writerow(list(rows[0]))
            for r in rows:
                writer.writerow(list(r.values()))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=2)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv", "parquet"])
def test_tables_give_the_texts_of_read_texts_and_their_ids(tmp_path: Path, fmt: str) -> None:
    rows = [{"doc": f"d-{i}", "text": t} for i, t in enumerate(TEXTS)]
    path = _write(tmp_path / f"corpus.{fmt}", fmt, rows)
    ids, texts, starts = _all(path, id_column="doc", chunk_rows=2)
    assert texts == read_texts(path, column="text") == TEXTS
    assert ids == [f"d-{i}" for i in range(len(TEXTS))]
    assert starts == [0, 2, 4]


def test_txt_ids_are_line_numbers_and_texts_are_read_texts(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_bytes(("\ufeff" + "\r\n".join(TEXTS) + "\r\n").encode("utf-8"))  # BOM and CRLF
    ids, texts, _ = _all(path, chunk_rows=3)
    assert texts == read_texts(path) == TEXTS
    assert ids == ["1", "2", "3", "4", "5"]
    mac = tmp_path / "mac.txt"
    mac.write_bytes(b"first\rsecond\rthird\r")
    assert _all(mac)[1] == read_texts(mac) == ["first", "second", "third"]


def test_default_columns_and_integer_ids(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.jsonl", "jsonl", [{"id": 7, "sentence": "dog"}, {"id": 8, "sentence": "cat"}])
    assert _all(path)[:2] == (["7", "8"], ["dog", "cat"])
    only = _write(tmp_path / "only.csv", "csv", [{"body": "dog"}, {"body": "cat"}])
    assert _all(only)[:2] == (["1", "2"], ["dog", "cat"])  # no id column: the row number


@pytest.mark.parametrize(
    ("content", "suffix", "match"),
    [
        (b"", ".txt", "empty"),
        (b"\n\n", ".txt", "empty"),
        (b"dog\n\ncat\n", ".txt", "row 2"),
        (b"dog\ncat\n   \n", ".txt", "row 3"),
        ("dog\n\u200b\u3164\u2060\n".encode(), ".txt", "row 2, field 'text': text is blank"),
        (b'{"id": 1, "text": "a"}\n{"id": 2, "text": "\\ufeff\\u115f"}\n', ".jsonl", "row 2, field 'text': text is blank"),
        (b"\x00\x01\x02binary\x00stuff\xff", ".txt", "binary"),
        (b"dog\ncaf\xe9 au lait\n", ".txt", "row 2"),
        (b"id,other,more\n1,x,y\n", ".csv", "column"),
        (b'{"id": 1, "text": "a"}\n{not json\n', ".jsonl", "row 2"),
        (b'{"id": 1, "text": "a"}\n{"id": 2, "text": 5}\n', ".jsonl", "row 2"),
        (b'{"id": 1, "text": "a"}\n{"id": true, "text": "b"}\n', ".jsonl", "id must be a string or an integer"),
        (b'{"id": 1, "text": "a"}\n[1, 2]\n', ".jsonl", "expected a JSON object"),
        (b"id,text\n1,a\n2,b,c\n", ".csv", "wrong number of fields"),
        (b"not parquet at all", ".parquet", "not a readable Parquet file"),
    ],
)  # fmt: skip
def test_bad_input_is_a_data_error_naming_file_and_row(tmp_path: Path, content: bytes, suffix: str, match: str) -> None:
    path = tmp_path / f"input{suffix}"
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        _all(path)
    assert str(path) in str(info.value) and match in str(info.value), str(info.value)


def test_the_same_errors_as_read_texts_for_text_files(tmp_path: Path) -> None:
    for content in (b"dog\n\ncat\n", b"dog\ncaf\xe9 au lait\n", b"", b"\x00\x01binary"):
        path = tmp_path / "t.txt"
        path.write_bytes(content)
        with pytest.raises(DataError) as streamed:
            _all(path)
        with pytest.raises(DataError) as whole:
            read_texts(path)
        assert str(streamed.value) == str(whole.value)


def test_wrong_arguments(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("dog\n")
    with pytest.raises(ConfigError, match="chunk_rows"):
        list(iter_corpus(path, chunk_rows=0))
    with pytest.raises(ConfigError, match="apply to tables"):
        list(iter_corpus(path, text_column="text"))
    with pytest.raises(ConfigError, match="JSON Lines"):
        list(iter_corpus(tmp_path / "c.json"))
    with pytest.raises(DataError, match="no such file"):
        list(iter_corpus(tmp_path / "missing.txt"))
    with pytest.raises(DataError, match="is a folder"):
        list(iter_corpus(tmp_path))
    table = _write(tmp_path / "t.csv", "csv", [{"id": "1", "text": "a", "x": "b"}])
    with pytest.raises(DataError, match="missing column 'body'"):
        list(iter_corpus(table, text_column="body"))


def test_reading_holds_one_chunk_at_a_time(tmp_path: Path) -> None:
    """A consumer that keeps nothing sees every record, in chunks no larger than asked."""
    path = tmp_path / "big.txt"
    path.write_text("".join(f"sentence number {i}\n" for i in range(25_000)), encoding="utf-8")
    sizes, last = [], None
    for chunk in iter_corpus(path, chunk_rows=4096):
        sizes.append(len(chunk))
        last = chunk.texts[-1]
    assert max(sizes) == 4096 and sum(sizes) == 25_000 and last == "sentence number 24999"


def test_signature_is_that_of_the_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "c.txt").write_text("dog\ncat\n")
    (b / "c.txt").write_text("dog\ncat\n")
    assert corpus_signature(a / "c.txt") == corpus_signature(b / "c.txt")
    (b / "c.txt").write_text("dog\ncow\n")
    assert corpus_signature(a / "c.txt") != corpus_signature(b / "c.txt")


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv", "parquet"])
def test_a_title_column_goes_before_the_text_as_beir_builds_documents(tmp_path: Path, fmt: str) -> None:
    from anglekit.corpus.reader import corpus_columns

    rows: list[dict[str, object]] = [{"id": "a", "title": "Guitars", "text": "a man plays ."}, {"id": "b", "title": "", "text": "dog"}]
    path = _write(tmp_path / f"c.{fmt}", fmt, rows)
    assert corpus_columns(path) == ["id", "title", "text"]
    assert _all(path, title_column="title")[:2] == (["a", "b"], ["Guitars a man plays .", "dog"])
    assert _all(path)[:2] == (["a", "b"], ["a man plays .", "dog"])  # opt-in: without it the title is not read
    with pytest.raises(DataError, match="heading"):
        _all(path, title_column="heading")
    with pytest.raises(ConfigError, match="the text column and the title column are both 'text'"):
        _all(path, title_column="text")


def test_a_title_that_is_not_a_string_and_a_txt_corpus_with_a_title_are_refused(tmp_path: Path) -> None:
    from anglekit.corpus.reader import corpus_columns

    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "a", "title": null, "text": "x"}\n{"_id": "b", "title": ["t"], "text": "y"}\n')
    with pytest.raises(DataError, match=r"c.jsonl, row 2, field 'title': title must be a string, got list"):
        _all(path, id_column="_id", title_column="title")
    txt = tmp_path / "c.txt"
    txt.write_text("one\ntwo\n")
    assert corpus_columns(txt) is None
    with pytest.raises(ConfigError, match="plain-text corpus"):
        _all(txt, title_column="title")
