"""Readers, records and the dataset catalogue: formats, validation, lenient mode, real shared files.

Everything is offline: files are written by the tests into tmp_path, or read from ../shared/data.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import csv  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from anglekit.data import (  # noqa: E402
    PairDataset,
    PairRecord,
    detect_dataset,
    infer_format,
    load_dataset_by_name,
    load_mrpc,
    load_sick,
    load_stsb,
    parse_label,
    read_delimited,
    read_pairs,
    read_texts,
    resolve_dataset,
)
from anglekit.errors import ConfigError, DataError  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_shared = pytest.mark.skipif(not (SHARED / "stsb").is_dir(), reason="../shared/data not available")

ROWS = [("A man plays a guitar.", "Someone plays music.", 4.2), ("A cat sleeps.", "The stock market fell.", 0.0), ("Kids run.", "Children are running.", 2.4)]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("ANGLEKIT_DATA", raising=False)
    import sys

    if "datasets" in sys.modules:  # the flags are read at import time
        import datasets
        import huggingface_hub.constants

        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def write_csv(path: Path, header: list[str], rows: list, delimiter: str = ",") -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, objects: list) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    return path


def assert_where(exc: pytest.ExceptionInfo, source: object, row: int | None, field: str | None) -> None:
    message = str(exc.value)
    assert str(source) in message
    if row is not None:
        assert f"row {row}" in message, message
        assert exc.value.row == row
    if field is not None:
        assert f"field {field!r}" in message, message
        assert exc.value.field == field


def check_rows(ds: PairDataset, rows=ROWS) -> None:
    assert len(ds) == len(rows)
    assert ds.text1 == [r[0] for r in rows]
    assert ds.text2 == [r[1] for r in rows]
    assert ds.labels.dtype == np.float64
    assert ds.labels.tolist() == [r[2] for r in rows]
    assert ds.skipped == {}


# ------------------------------------------------------------------------------------------
# Formats
# ------------------------------------------------------------------------------------------


def test_csv_round_trip_with_quoting(tmp_path: Path) -> None:
    rows = [*ROWS, ('He said "hi", then left,\nquickly.', "NA", 1.0)]
    path = write_csv(tmp_path / "p.csv", ["text1", "text2", "label"], rows)
    ds = read_pairs(path)
    check_rows(ds, rows)  # "NA" stays a text, the quoted comma/newline survive
    assert ds.name == "p" and ds.source == str(path)
    assert ds[2] == PairRecord("Kids run.", "Children are running.", 2.4)


def test_tsv_round_trip_keeps_stray_quotes(tmp_path: Path) -> None:
    rows = [('He said " the witness " .', 'a "quote', 1.0), *ROWS]
    path = tmp_path / "p.tsv"
    path.write_text("text1\ttext2\tlabel\n" + "".join(f"{a}\t{b}\t{c}\n" for a, b, c in rows), encoding="utf-8")
    check_rows(read_pairs(path), rows)


def test_crlf_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "p.tsv"
    path.write_bytes(b"text1\ttext2\tlabel\r\n" + b"".join(f"{a}\t{b}\t{c}\r\n".encode() for a, b, c in ROWS))
    check_rows(read_pairs(path))


def test_jsonl_round_trip_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    lines = [json.dumps({"text1": a, "text2": b, "label": c, "extra": [1]}) for a, b, c in ROWS]
    path.write_text(lines[0] + "\n\n" + "\n".join(lines[1:]) + "\n", encoding="utf-8")
    check_rows(read_pairs(path))


def test_json_array_and_json_lines(tmp_path: Path) -> None:
    objects = [{"text1": a, "text2": b, "label": c} for a, b, c in ROWS]
    array = tmp_path / "a.json"
    array.write_text(json.dumps(objects, indent=1), encoding="utf-8")
    check_rows(read_pairs(array))
    check_rows(read_pairs(write_jsonl(tmp_path / "l.json", objects)))


def test_parquet_round_trip(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"text1": [r[0] for r in ROWS], "text2": [r[1] for r in ROWS], "label": [r[2] for r in ROWS]})
    pq.write_table(table, tmp_path / "p.parquet")
    check_rows(read_pairs(tmp_path / "p.parquet"))


def test_parquet_integer_labels_and_null_text(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"text1": ["a", None], "text2": ["b", "c"], "label": [1, 0]}), tmp_path / "p.parquet")
    with pytest.raises(DataError) as exc:
        read_pairs(tmp_path / "p.parquet")
    assert_where(exc, tmp_path / "p.parquet", 2, "text1")
    assert "missing" in str(exc.value)


def test_saved_hf_dataset_dir(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    columns = {"sentence1": [r[0] for r in ROWS], "sentence2": [r[1] for r in ROWS], "score": [r[2] for r in ROWS]}
    datasets.Dataset.from_dict(columns).save_to_disk(str(tmp_path / "single"))
    check_rows(read_pairs(tmp_path / "single"))  # aliases sentence1/sentence2/score
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(columns), "test": datasets.Dataset.from_dict(columns).select([0])}).save_to_disk(
        str(tmp_path / "dict")
    )
    assert len(read_pairs(tmp_path / "dict", split="test")) == 1
    check_rows(read_pairs(tmp_path / "dict", split="train"))
    with pytest.raises(ConfigError, match="split"):
        read_pairs(tmp_path / "dict")
    with pytest.raises(ConfigError, match="available splits"):
        read_pairs(tmp_path / "dict", split="dev")
    # the in-memory objects work as well
    check_rows(read_pairs(datasets.Dataset.from_dict(columns)))


def test_directory_that_is_not_a_dataset(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("hi\n")
    with pytest.raises(DataError, match="saved Hugging Face dataset"):
        read_pairs(tmp_path)


def test_python_data() -> None:
    check_rows(read_pairs([{"text1": a, "text2": b, "label": c} for a, b, c in ROWS]))
    check_rows(read_pairs(list(ROWS)))
    check_rows(read_pairs([list(r) for r in ROWS]))
    check_rows(read_pairs({"text1": [r[0] for r in ROWS], "text2": [r[1] for r in ROWS], "label": np.array([r[2] for r in ROWS])}))


def test_python_data_errors() -> None:
    with pytest.raises(DataError) as exc:
        read_pairs([("a", "b", 1.0), ("a", "b")])
    assert_where(exc, "<list of tuples>", 2, None)
    assert "wrong number of fields" in str(exc.value)
    with pytest.raises(DataError, match="differ in length"):
        read_pairs({"text1": ["a", "b"], "text2": ["c"], "label": [1, 2]})
    with pytest.raises(DataError, match="no rows"):
        read_pairs([])
    with pytest.raises(ConfigError):
        read_pairs(list(ROWS), columns={"text1": "x"})
    with pytest.raises(ConfigError):
        read_pairs(42)
    with pytest.raises(DataError) as exc:
        read_pairs([{"text1": "a", "text2": "b", "label": 1}, {"text1": "a", "label": 1}])
    assert_where(exc, "<list of dicts>", 2, "text2")


def test_dataframe() -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"q": [r[0] for r in ROWS], "d": [r[1] for r in ROWS], "y": [r[2] for r in ROWS]})
    check_rows(read_pairs(df, columns={"text1": "q", "text2": "d", "label": "y"}))
    df.loc[1, "d"] = float("nan")
    with pytest.raises(DataError) as exc:
        read_pairs(df, columns={"text1": "q", "text2": "d", "label": "y"})
    assert_where(exc, "<DataFrame>", 2, "d")


# ------------------------------------------------------------------------------------------
# Columns and formats
# ------------------------------------------------------------------------------------------


def test_column_mapping(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "p.csv", ["id", "query", "doc", "gold"], [(i, *r) for i, r in enumerate(ROWS)])
    check_rows(read_pairs(path, columns={"text1": "query", "text2": "doc", "label": "gold"}))
    with pytest.raises(ConfigError, match="unknown key"):
        read_pairs(path, columns={"text1": "query", "sentence2": "doc"})
    with pytest.raises(DataError) as exc:
        read_pairs(path, columns={"text1": "query", "text2": "doc", "label": "score"})
    assert_where(exc, path, None, "score")
    assert "'query'" in str(exc.value) and "available columns" in str(exc.value)


def test_aliases_only_when_canonical_absent(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "p.csv", ["sentence1", "sentence2", "score"], ROWS)
    check_rows(read_pairs(path))
    both = write_csv(tmp_path / "b.csv", ["text1", "sentence1", "text2", "label", "score"], [(r[0], "x", r[1], r[2], 9) for r in ROWS])
    check_rows(read_pairs(both))
    partial = write_csv(tmp_path / "m.csv", ["a", "sentence2", "label"], [(r[0], r[1], r[2]) for r in ROWS])
    check_rows(read_pairs(partial, columns={"text1": "a"}))


def test_missing_column_names_available(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "p.csv", ["text1", "text2", "gold"], ROWS)
    with pytest.raises(DataError) as exc:
        read_pairs(path)
    assert_where(exc, path, None, "label")
    assert "'gold'" in str(exc.value) and "'score'" in str(exc.value)


def test_duplicate_header_column(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "p.csv", ["text1", "text1", "text2", "label"], [("a", "b", "c", 1)])
    with pytest.raises(DataError, match="appears 2 times"):
        read_pairs(path)


def test_format_inference_and_errors(tmp_path: Path) -> None:
    assert infer_format("a.CSV") == "csv" and infer_format("x.tsv") == "tsv" and infer_format("d.parquet") == "parquet"
    assert infer_format("x.jsonl") == "jsonl"
    path = tmp_path / "p.dat"
    path.write_text("text1\ttext2\tlabel\na\tb\t1\n")
    with pytest.raises(ConfigError, match="format"):
        read_pairs(path)
    assert len(read_pairs(path, format="tsv")) == 1
    with pytest.raises(ConfigError, match="unknown format"):
        read_pairs(path, format="xlsx")
    with pytest.raises(ConfigError, match="split"):
        read_pairs(path, format="tsv", split="test")
    with pytest.raises(DataError, match="no such file"):
        read_pairs(tmp_path / "missing.csv")


def test_configuration_errors_come_before_io(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key"):
        read_pairs(tmp_path / "missing.csv", columns={"txt1": "a"})
    with pytest.raises(ConfigError, match="label_range"):
        read_pairs(tmp_path / "missing.csv", label_range=(0, float("nan")))


def test_read_delimited_headerless(tmp_path: Path) -> None:
    path = tmp_path / "raw.txt"
    path.write_text("".join(f"{c};{a};{b};extra\n" for a, b, c in ROWS))
    ds = read_delimited(
        path,
        delimiter=";",
        has_header=False,
        fieldnames=["y", "a", "b"],
        allow_extra_fields=True,
        columns={"text1": "a", "text2": "b", "label": "y"},
        name="raw",
    )
    check_rows(ds)
    with pytest.raises(DataError, match="got 4, expected 3") as exc:
        read_delimited(path, delimiter=";", has_header=False, fieldnames=["label", "text1", "text2"])
    assert_where(exc, path, 1, None)


def test_hub_name_offline_gives_clear_error() -> None:
    pytest.importorskip("datasets")
    t0 = time.perf_counter()
    with pytest.raises(DataError) as exc:
        read_pairs("anglekit-test-org/no-such-dataset", split="test")
    assert "hf:anglekit-test-org/no-such-dataset" in str(exc.value)
    assert "Hugging Face hub" in str(exc.value)
    assert time.perf_counter() - t0 < 10
    with pytest.raises(DataError, match="split="):
        read_pairs("anglekit-test-org/no-such-dataset")


# ------------------------------------------------------------------------------------------
# Bad input, strict mode: file, row and field are named
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "row", "field", "text"),
    [
        ([("a", "b", 1), ("", "d", 2)], 2, "text1", "empty"),
        ([("a", "b", 1), ("c", "d", 2), ("e", "   ", 3)], 3, "text2", "blank"),
        ([("a", "b", "abc")], 1, "label", "not a number"),
        ([("a", "b", 1), ("a", "b", "nan")], 2, "label", "not finite"),
        ([("a", "b", "inf")], 1, "label", "not finite"),
        ([("a", "b", "")], 1, "label", "empty"),
        ([("a", "b", "1,5")], 1, "label", "not a number"),
    ],
)
def test_bad_csv_rows(tmp_path: Path, rows, row, field, text) -> None:
    path = write_csv(tmp_path / "bad.csv", ["text1", "text2", "label"], rows)
    with pytest.raises(DataError, match=text) as exc:
        read_pairs(path)
    assert_where(exc, path, row, field)


@pytest.mark.parametrize(
    ("obj", "field", "text"),
    [
        ({"text1": 123, "text2": "b", "label": 1}, "text1", "got int"),
        ({"text1": "a", "text2": ["x", "y"], "label": 1}, "text2", "got list"),
        ({"text1": None, "text2": "b", "label": 1}, "text1", "missing"),
        ({"text1": "a", "text2": "b", "label": "abc"}, "label", "not a number"),
        ({"text1": "a", "text2": "b", "label": None}, "label", "missing"),
        ({"text1": "a", "text2": "b", "label": True}, "label", "bool"),
        ({"text1": "a", "text2": "b", "label": [1]}, "label", "got list"),
        ({"text1": "a", "text2": "b"}, "label", "missing"),
    ],
)
def test_bad_jsonl_rows(tmp_path: Path, obj, field, text) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [{"text1": "x", "text2": "y", "label": 0}, obj])
    with pytest.raises(DataError, match=text) as exc:
        read_pairs(path)
    assert_where(exc, path, 2, field)


INVISIBLE_ONLY = ["\u200b", "\ufeff", "\u3164", "\u115f", "\u2060", "\u200b \u200d\u2060", "\u00a0\u3000\t", "\u3164\ufe0f", "\u200e\u200f\x07"]
"""Texts that show nothing: zero-width space, BOM, Hangul fillers, word joiner, mixes with whitespace."""


def test_is_blank_against_the_characters_one_by_one() -> None:
    from anglekit.io.text import is_blank

    for text in INVISIBLE_ONLY + ["", "   "]:
        assert is_blank(text), repr(text)
    for text in ["a", "\u200ba", "\u3164\u3131", "é", "中", "\U0001f600", "0", "\u00ad-"]:
        assert not is_blank(text), repr(text)


@pytest.mark.parametrize("text", INVISIBLE_ONLY)
def test_invisible_only_text_is_blank_in_every_reader(tmp_path: Path, text: str) -> None:
    from anglekit.data import read_sentences, read_triplets

    path = write_jsonl(tmp_path / "p.jsonl", [{"text1": "x", "text2": "y", "label": 0}, {"text1": "a", "text2": text, "label": 1}])
    with pytest.raises(DataError, match="text is blank") as exc:
        read_pairs(path)
    assert_where(exc, path, 2, "text2")
    path = write_csv(tmp_path / "p.csv", ["text1", "text2", "label"], [("a", "b", 1), (text, "d", 2)])
    with pytest.raises(DataError, match="blank") as exc:
        read_pairs(path)
    assert_where(exc, path, 2, "text1")
    with pytest.raises(DataError, match="empty") as exc:
        PairDataset(["a", "b"], ["c", text], [0.0, 1.0], source="mem")
    assert_where(exc, "mem", 2, "text2")
    path = write_jsonl(tmp_path / "s.jsonl", [{"text": "fine"}, {"text": text}])
    with pytest.raises(DataError, match="blank") as exc:
        read_sentences(path)
    assert_where(exc, path, 2, "text")
    path = write_jsonl(tmp_path / "t.jsonl", [{"anchor": "a", "positive": "b", "negative": text}])
    with pytest.raises(DataError, match="blank") as exc:
        read_triplets(path)
    assert_where(exc, path, 1, "negative")


@pytest.mark.parametrize(
    ("header", "missing", "typo"),
    [("text1,text2,lable", "label", "lable"), ("text1,txet2,label", "text2", "txet2"), ("sentence1,sentnce2,score", "text2", "sentnce2")],
)
def test_a_misspelt_pair_column_is_named(tmp_path: Path, header: str, missing: str, typo: str) -> None:
    path = tmp_path / "p.csv"
    path.write_text(header + "\na,b,1\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"missing column '{missing}'.*; '{typo}' looks like a misspelling of '\w+'; available columns") as exc:
        read_pairs(path)
    assert_where(exc, path, None, missing)


def test_jsonl_row_is_the_line_number(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"text1": "a", "text2": "b", "label": 1}\n\n\n{"text1": "a", "text2": 5, "label": 1}\n')
    with pytest.raises(DataError) as exc:
        read_pairs(path)
    assert_where(exc, path, 4, "text2")


def test_malformed_json_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"text1": "a", "text2": "b", "label": 1}\n{"text1": "a", "text2": \n[1, 2]\n')
    with pytest.raises(DataError, match="malformed JSON") as exc:
        read_pairs(path)
    assert_where(exc, path, 2, None)
    path.write_text('{"text1": "a", "text2": "b", "label": 1}\n[1, 2]\n')
    with pytest.raises(DataError, match="expected a JSON object") as exc:
        read_pairs(path)
    assert_where(exc, path, 2, None)


def test_label_out_of_declared_range(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "p.csv", ["text1", "text2", "label"], [("a", "b", 5), ("a", "b", 5.5)])
    assert len(read_pairs(path)) == 2  # no range declared: any finite label
    with pytest.raises(DataError, match=r"outside the declared range \[0, 5\]") as exc:
        read_pairs(path, label_range=(0, 5))
    assert_where(exc, path, 2, "label")
    with pytest.raises(ConfigError):
        read_pairs(path, label_range=(5, 0))


def test_undecodable_bytes_name_the_row(tmp_path: Path) -> None:
    path = tmp_path / "p.tsv"
    path.write_bytes(b"text1\ttext2\tlabel\na\tb\t1\nc\td\t2\ne\tcaf\xe9 latin-1\t3\n")
    with pytest.raises(DataError, match="not valid UTF-8") as exc:
        read_pairs(path)
    assert_where(exc, path, 3, "text2")
    jpath = tmp_path / "p.jsonl"
    jpath.write_bytes(b'{"text1": "a", "text2": "b", "label": 1}\n{"text1": "\xff", "text2": "b", "label": 1}\n')
    with pytest.raises(DataError, match="not valid UTF-8") as exc:
        read_pairs(jpath)
    assert_where(exc, jpath, 2, None)


def test_wrong_number_of_fields(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("text1,text2,label\na,b,1\nc,d,2,extra\n")
    with pytest.raises(DataError, match="wrong number of fields: got 4") as exc:
        read_pairs(path)
    assert_where(exc, path, 2, None)
    tsv = tmp_path / "p.tsv"
    tsv.write_text("text1\ttext2\tlabel\na\tb\t1\nc\td\n")
    with pytest.raises(DataError, match="got 2") as exc:
        read_pairs(tsv)
    assert_where(exc, tsv, 2, None)


def test_malformed_csv_quoting(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text('text1,text2,label\na,b,1\n"c"x,d,2\n')
    with pytest.raises(DataError, match="malformed CSV") as exc:
        read_pairs(path)
    assert_where(exc, path, 2, None)


@pytest.mark.parametrize("content", [b"", b"   \n\n", b"\xef\xbb\xbf"])
@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_empty_file(tmp_path: Path, content: bytes, suffix: str) -> None:
    path = tmp_path / f"empty{suffix}"
    path.write_bytes(content)
    with pytest.raises(DataError, match="empty|no data rows") as exc:
        read_pairs(path, lenient=True)
    assert str(path) in str(exc.value)


@pytest.mark.parametrize(("suffix", "sep"), [(".csv", ","), (".tsv", "\t")])
def test_header_only_file(tmp_path: Path, suffix: str, sep: str) -> None:
    path = tmp_path / f"h{suffix}"
    path.write_text(sep.join(["text1", "text2", "label"]) + "\n")
    with pytest.raises(DataError, match=r"header only") as exc:
        read_pairs(path)
    assert str(path) in str(exc.value)


def test_bom_at_file_start(tmp_path: Path) -> None:
    body = "text1,text2,label\n" + "".join(f"{a},{b},{c}\n" for a, b, c in ROWS)
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    check_rows(read_pairs(path))
    jpath = tmp_path / "bom.jsonl"
    jpath.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps({"text1": a, "text2": b, "label": c}) + "\n" for a, b, c in ROWS).encode())
    check_rows(read_pairs(jpath))
    u16 = tmp_path / "u16.csv"
    u16.write_bytes(body.encode("utf-16"))  # with its BOM
    check_rows(read_pairs(u16))


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_bytes(b"text1,text2,label\n\x00\x01\x02")
    with pytest.raises(DataError, match="binary"):
        read_pairs(path)


# ------------------------------------------------------------------------------------------
# Lenient mode
# ------------------------------------------------------------------------------------------


def test_lenient_counts_and_reports(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "p.tsv"
    path.write_bytes(b"text1\ttext2\tlabel\ngood one\tfine\t1.5\n\tempty\t2\nx\ty\tabc\nx\ty\t9\nx\ty\ncaf\xe9\ty\t1\nx\t \t1\ngood two\tfine\t2.4\n")
    with caplog.at_level(logging.WARNING, logger="anglekit.data"):
        ds = read_pairs(path, lenient=True, label_range=(0, 5))
    assert ds.text1 == ["good one", "good two"] and ds.labels.tolist() == [1.5, 2.4]
    assert ds.skipped == {
        "empty text": 2,
        "invalid label": 1,
        "label out of range": 1,
        "wrong number of fields": 1,
        "undecodable bytes": 1,
    }
    summary = ds.summary()
    assert "SKIPPED 6 rows" in summary and "label out of range: 1" in summary and "empty text: 2" in summary
    assert "skipped 6 of 8 rows" in caplog.text and "row 2" in caplog.text


def test_lenient_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"text1": "a", "text2": "b", "label": 1}\n{oops\n{"text1": 7, "text2": "b", "label": 1}\n{"text1": "c", "text2": "d", "label": 0}\n')
    ds = read_pairs(path, lenient=True)
    assert len(ds) == 2 and ds.skipped == {"malformed JSON": 1, "non-string text": 1}


def test_lenient_still_raises_for_whole_source_problems(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "p.csv", ["a", "b", "c"], [("x", "y", 1)])
    with pytest.raises(DataError, match="missing column"):
        read_pairs(path, lenient=True)
    latin = tmp_path / "latin.tsv"
    latin.write_bytes("text1\ttext2\tlabel\ncafé\tthé\t1\nnaïve\tcrème\t2\n".encode("latin-1"))
    with pytest.raises(DataError, match="another encoding"):
        read_pairs(latin, lenient=True)
    all_bad = write_csv(tmp_path / "bad.csv", ["text1", "text2", "label"], [("a", "b", "x"), ("", "b", 1)])
    with pytest.raises(DataError, match="all 2 rows were skipped"):
        read_pairs(all_bad, lenient=True)
    header_bad = tmp_path / "hb.csv"
    header_bad.write_bytes(b"text1,te\xffxt2,label\na,b,1\n")
    with pytest.raises(DataError, match="header"):
        read_pairs(header_bad, lenient=True)


# ------------------------------------------------------------------------------------------
# Size and labels
# ------------------------------------------------------------------------------------------


def test_200k_rows_read_fast(tmp_path: Path) -> None:
    n = 200_000
    path = tmp_path / "big.tsv"
    with path.open("w", encoding="utf-8") as f:
        f.write("text1\ttext2\tlabel\n")
        f.writelines(f"sentence number {i}\tanother sentence {i}\t{i % 6 / 1.25}\n" for i in range(n))
    t0 = time.perf_counter()
    ds = read_pairs(path, label_range=(0, 5))
    elapsed = time.perf_counter() - t0
    assert len(ds) == n and ds.text2[-1] == f"another sentence {n - 1}"
    assert ds.labels[7] == 1 / 1.25
    assert elapsed < 8, elapsed


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_one_megabyte_field_kept_intact(tmp_path: Path, suffix: str) -> None:
    big = ("lorem ipsum dolor sit amet " * 40_000)[:1_000_000] + "END"
    rows = [("short", big, 1.0), ("a", "b", 0.0)]
    path = tmp_path / f"big{suffix}"
    if suffix == ".jsonl":
        write_jsonl(path, [{"text1": a, "text2": b, "label": c} for a, b, c in rows])
    else:
        write_csv(path, ["text1", "text2", "label"], rows, delimiter="," if suffix == ".csv" else "\t")
    ds = read_pairs(path)
    assert ds.text2[0] == big and len(ds.text2[0]) == 1_000_003
    assert csv.field_size_limit() == 131072  # the global limit is restored


def test_label_parsing() -> None:
    assert parse_label("2.4") == 2.4
    assert parse_label(" 3 ") == 3.0
    assert parse_label("1e-1") == 0.1
    assert parse_label(np.int64(2)) == 2.0
    assert parse_label(-0.5) == -0.5
    for bad in ("abc", "", "nan", "-inf", "1_000", "0x10", True, None, [1], float("nan")):
        with pytest.raises(ValueError):
            parse_label(bad)


def test_float_labels_kept(tmp_path: Path) -> None:
    path = tmp_path / "p.tsv"
    path.write_text("text1\ttext2\tlabel\na\tb\t2.4\nc\td\t3.800\ne\tf\t4\n")
    assert read_pairs(path).labels.tolist() == [2.4, 3.8, 4.0]


# ------------------------------------------------------------------------------------------
# Records
# ------------------------------------------------------------------------------------------


def test_pair_dataset_api() -> None:
    ds = PairDataset.from_records([PairRecord(*ROWS[0]), ROWS[1], list(ROWS[2])], name="demo", label_range=(0, 5))
    check_rows(ds)
    assert ds[-1] == PairRecord(*ROWS[2])
    assert [r.label for r in ds] == [4.2, 0.0, 2.4]
    sub = ds.select([2, 0])
    assert sub.text1 == [ROWS[2][0], ROWS[0][0]] and sub.name == "demo" and sub.label_range == (0.0, 5.0)
    assert len(ds.select(np.array([True, False, True]))) == 2
    assert len(ds.select([])) == 0
    assert ds[1:] == ds.select([1, 2])
    with pytest.raises(IndexError):
        ds[3]
    with pytest.raises(IndexError):
        ds.select([5])
    assert "demo: 3 pairs" in ds.summary() and "declared range [0, 5]" in ds.summary()
    assert ds == PairDataset.from_records(ROWS, name="demo", label_range=(0, 5))


def test_pair_dataset_validation() -> None:
    with pytest.raises(DataError, match="differ in length"):
        PairDataset(["a"], ["b", "c"], np.array([1.0]))
    with pytest.raises(DataError) as exc:
        PairDataset(["a", "b"], ["c", ""], np.array([1.0, 2.0]), name="x")
    assert_where(exc, "x", 2, "text2")
    with pytest.raises(DataError, match="not finite"):
        PairDataset(["a"], ["b"], np.array([np.nan]))
    with pytest.raises(DataError, match="outside"):
        PairDataset(["a"], ["b"], np.array([7.0]), label_range=(0, 5))
    with pytest.raises(DataError) as exc:
        PairDataset.from_records([("a", "b", 1), ("a", 3, 1)])
    assert_where(exc, "", 2, "text2")
    with pytest.raises(DataError):
        PairRecord("a", "b", "1")  # type: ignore[arg-type]
    assert PairRecord("a", "b", 1).label == 1.0 and isinstance(PairRecord("a", "b", 1).label, float)


# ------------------------------------------------------------------------------------------
# Plain texts
# ------------------------------------------------------------------------------------------


def test_read_texts(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.txt"
    path.write_bytes(b"first sentence\r\n  second, with spaces  \nthird")
    assert read_texts(path) == ["first sentence", "  second, with spaces  ", "third"]
    path.write_text("one\n\nthree\n")
    with pytest.raises(DataError, match="empty") as exc:
        read_texts(path)
    assert_where(exc, path, 2, "text")
    with caplog.at_level(logging.WARNING, logger="anglekit.data"):
        assert read_texts(path, lenient=True) == ["one", "three"]
    assert "skipped 1" in caplog.text
    csv_path = write_csv(tmp_path / "s.csv", ["id", "sentence"], [(1, "a"), (2, "b")])
    assert read_texts(csv_path) == ["a", "b"]
    assert read_texts(csv_path, column="id") == ["1", "2"]
    with pytest.raises(DataError, match="missing column"):
        read_texts(csv_path, column="body")
    assert read_texts(["x", "y"]) == ["x", "y"]
    with pytest.raises(DataError) as exc:
        read_texts(["x", 3])
    assert_where(exc, "<list of texts>", 2, "text")
    empty = tmp_path / "e.txt"
    empty.write_text("")
    with pytest.raises(DataError, match="empty"):
        read_texts(empty)


# ------------------------------------------------------------------------------------------
# Catalogue on the real shared files
# ------------------------------------------------------------------------------------------

CATALOGUE = [
    (load_stsb, "stsb", {"train": 5749, "dev": 1500, "test": 1379}, (0.0, 5.0)),
    (load_stsb, "senteval/STS/STSBenchmark", {"train": 5749, "dev": 1500, "test": 1379}, (0.0, 5.0)),
    (load_sick, "senteval/SICK", {"train": 4500, "dev": 500, "test": 4927}, (1.0, 5.0)),
    (load_mrpc, "mrpc", {"train": 3576, "dev": 500, "test": 1725}, (0.0, 1.0)),
    (load_mrpc, "senteval/MRPC", {"train": 4076, "test": 1725}, (0.0, 1.0)),
]


@needs_shared
@pytest.mark.parametrize(("loader", "folder", "counts", "label_range"), CATALOGUE, ids=[c[1] for c in CATALOGUE])
def test_catalogue_row_counts(loader, folder, counts, label_range) -> None:
    for split, n in counts.items():
        ds = loader(SHARED / folder, split)
        assert len(ds) == n, (folder, split)
        assert ds.label_range == label_range and ds.skipped == {}
        assert label_range[0] <= ds.labels.min() and ds.labels.max() <= label_range[1]
        assert ds.name.endswith(f":{split}")
        assert detect_dataset(SHARED / folder) == ds.name.split(":")[0]


@needs_shared
def test_catalogue_content() -> None:
    test = load_stsb(SHARED / "stsb", "validation")
    assert test[0] == PairRecord("A man with a hard hat is dancing.", "A man wearing a hard hat is dancing.", 5.0)
    # a row with 9 fields: the trailing source columns are ignored
    stsb_test = load_stsb(SHARED / "stsb", "test")
    i = stsb_test.text1.index("There's also what the string is made of.")
    assert stsb_test.text2[i] == "There is also a Youtube-Version of the film." and stsb_test.labels[i] == 0.0
    sick = load_sick(SHARED / "senteval/SICK", "train")
    assert sick.labels[1] == 3.2 and sick.text1[0].startswith("A group of kids is playing in a yard")
    mrpc = load_mrpc(SHARED / "senteval/MRPC", "train")
    assert mrpc[0].text1.startswith('Amrozi accused his brother , whom he called " the witness "') and mrpc[0].label == 1.0
    with pytest.raises(ConfigError, match="no dev split"):
        load_mrpc(SHARED / "senteval/MRPC", "dev")
    with pytest.raises(ConfigError, match="unknown split"):
        load_stsb(SHARED / "stsb", "holdout")


def test_stsb_short_row_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "sts-test.csv").write_text(
        "main\tMSRvid\t2012\t0001\t5.000\tA plane.\tAn air plane.\tsrc1\tsrc2\nmain\tMSRvid\t2012\t0002\t3.0\tonly one sentence\n"
    )
    with pytest.raises(DataError, match="got 6, expected at least 7") as exc:
        load_stsb(tmp_path, "test")
    assert_where(exc, tmp_path / "sts-test.csv", 2, None)
    ds = load_stsb(tmp_path, "test", lenient=True)
    assert ds.text2 == ["An air plane."] and ds.skipped == {"wrong number of fields": 1}


@needs_shared
def test_load_dataset_by_name_and_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(load_dataset_by_name("stsb", "test", data_root=SHARED)) == 1379
    assert len(load_dataset_by_name("SICK-R", "dev", data_root=SHARED)) == 500
    assert len(load_dataset_by_name(SHARED / "senteval/MRPC", "train")) == 4076
    sick_columns = {"text1": "sentence_A", "text2": "sentence_B", "label": "relatedness_score"}
    assert len(load_dataset_by_name(SHARED / "senteval/SICK/SICK_trial.txt", None, format="tsv", columns=sick_columns)) == 500
    monkeypatch.setenv("ANGLEKIT_DATA", str(SHARED))
    assert resolve_dataset("stsb:test").name == "stsb:test"
    assert len(resolve_dataset("stsb")) == 1379  # default split
    assert len(resolve_dataset("sick", default_split="train")) == 4500
    assert len(resolve_dataset(f"{SHARED / 'mrpc'}:dev")) == 500
    assert len(resolve_dataset("senteval/SICK:validation")) == 500  # relative to the data root
    assert len(resolve_dataset("mrpc:train")) == 3576
    with pytest.raises(ConfigError, match="unknown split"):
        resolve_dataset("stsb:holdout")
    monkeypatch.setenv("ANGLEKIT_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="ANGLEKIT_DATA"):
        resolve_dataset("stsb:test")


def test_resolve_dataset_files_and_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_csv(tmp_path / "pairs.csv", ["text1", "text2", "label"], ROWS)
    check_rows(resolve_dataset(str(path)))
    with pytest.raises(ConfigError, match="no splits"):
        resolve_dataset(f"{path}:test")
    check_rows(load_dataset_by_name(path, None))
    (tmp_path / "stsb").mkdir()
    (tmp_path / "stsb" / "sts-dev.csv").write_text("g\tf\t2012\t1\t2.4\tA b.\tC d.\n")
    monkeypatch.chdir(tmp_path)
    ds = resolve_dataset("stsb:dev")  # an existing relative directory wins
    assert ds.labels.tolist() == [2.4] and ds.name == "stsb:dev"
    with pytest.raises(DataError, match="'sts-train.csv' for the 'train' split is missing"):
        resolve_dataset("stsb:train")
    with pytest.raises(ConfigError):
        resolve_dataset("")


def test_known_name_without_local_copy_falls_back_to_hub(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    with pytest.raises(DataError, match="hf:sentence-transformers/stsb"):
        load_dataset_by_name("stsb", "test", data_root=tmp_path)
    with pytest.raises(ConfigError, match="no usable 'dev' split"):
        load_dataset_by_name("sick", "dev", data_root=tmp_path)
    with pytest.raises(ConfigError, match="no usable 'test' split"):
        load_dataset_by_name("mrpc", "test", data_root=tmp_path)
    with pytest.raises(DataError, match="hf:nyu-mll/glue/mrpc"):
        resolve_dataset("hf:nyu-mll/glue/mrpc:validation")
