"""n-tuple rows (anchor, positive, negative_1..negative_n) read by the triplet reader: the columns
``anglekit mine`` writes (``*_score`` columns ignored), differing counts as errors naming the file,
row and field, or padded with ``pad_negatives``; gaps, type errors and extra negatives refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anglekit.data.records import NTupleRecord, TripletDataset
from anglekit.data.training_data import resolve_triplets
from anglekit.data.triplets import negative_columns, read_triplets
from anglekit.errors import DataError

MINED = [
    {"anchor": "q1", "positive": "p1", "positive_score": 0.9, "negative_1": "n11", "negative_1_score": 0.5, "negative_2": "n12", "negative_2_score": 0.4},
    {"anchor": "q2", "positive": "p2", "positive_score": 0.8, "negative_1": "n21", "negative_1_score": 0.3, "negative_2": "n22", "negative_2_score": 0.2},
]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_mined_jsonl_reads_as_n_tuples_ignoring_scores(tmp_path: Path) -> None:
    data = read_triplets(_jsonl(tmp_path / "mined.jsonl", MINED))
    assert data.negatives == [("n11", "n12"), ("n21", "n22")]
    assert data.negative is None and data.negatives_per_row == 2 and not data.padded
    assert data[1] == NTupleRecord("q2", "p2", ("n21", "n22"))
    assert "2 hard negatives" in data.summary()
    assert data.select([1]).negatives == [("n21", "n22")]


def test_csv_row_with_fewer_negatives_is_an_error_naming_file_row_and_field(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("anchor,positive,negative_1,negative_2,negative_3\nq,p,a,b,c\nr,s,d,e,\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"t\.csv, row 2, field 'negative_3': row has 2 negative\(s\) where the columns hold 3.*--pad-negatives"):
        read_triplets(path)
    padded = read_triplets(path, pad_negatives=True)
    assert padded.negatives == [("a", "b", "c"), ("d", "e")] and padded.padded and padded.negatives_per_row == 3
    assert "up to 3 hard negatives, padded" in padded.summary()
    lenient = read_triplets(path, lenient=True)
    assert lenient.negatives == [("a", "b", "c")] and lenient.skipped == {"differing number of negatives": 1}


def test_jsonl_missing_key_null_and_extra_negatives(tmp_path: Path) -> None:
    rows = [{"anchor": "q", "positive": "p", "negative_1": "a", "negative_2": "b"}, {"anchor": "r", "positive": "s", "negative_1": "c"}]
    with pytest.raises(DataError, match=r"row 2, field 'negative_2': row has 1 negative"):
        read_triplets(_jsonl(tmp_path / "a.jsonl", rows))
    assert read_triplets(_jsonl(tmp_path / "a.jsonl", rows), pad_negatives=True).negatives == [("a", "b"), ("c",)]
    rows[1]["negative_2"] = None
    assert read_triplets(_jsonl(tmp_path / "b.jsonl", rows), pad_negatives=True).negatives == [("a", "b"), ("c",)]
    # a later record with more negatives than the first: an error, or with padding the first is padded
    extra = [rows[0], {"anchor": "r", "positive": "s", "negative_1": "c", "negative_2": "d", "negative_3": "e"}]
    with pytest.raises(DataError, match=r"row 2, field 'negative_3': row has 3 negative columns where the first row has 2.*--pad-negatives"):
        read_triplets(_jsonl(tmp_path / "c.jsonl", extra))
    assert read_triplets(_jsonl(tmp_path / "c.jsonl", extra), pad_negatives=True).negatives == [("a", "b"), ("c", "d", "e")]


@pytest.mark.parametrize(
    "row,match",
    [
        ({"anchor": "q", "positive": "p", "negative_1": "", "negative_2": "b"}, r"field 'negative_1': negative_1 is empty but negative_2 is given"),
        ({"anchor": "q", "positive": "p", "negative_1": 3, "negative_2": "b"}, r"field 'negative_1': text must be a string, got int 3"),
        ({"anchor": "q", "positive": "", "negative_1": "a", "negative_2": "b"}, r"field 'positive': text is empty"),
    ],
)
def test_malformed_n_tuple_rows(tmp_path: Path, row: dict, match: str) -> None:
    good = {"anchor": "x", "positive": "y", "negative_1": "a", "negative_2": "b"}
    with pytest.raises(DataError, match=r"row 2, " + match):
        read_triplets(_jsonl(tmp_path / "m.jsonl", [good, row]), pad_negatives=True)


def test_column_layouts_refused(tmp_path: Path) -> None:
    gap = tmp_path / "gap.csv"
    gap.write_text("anchor,positive,negative_1,negative_3\nq,p,a,b\n", encoding="utf-8")
    with pytest.raises(DataError, match="negative_2 is missing"):
        read_triplets(gap)
    both = tmp_path / "both.csv"
    both.write_text("anchor,positive,negative,negative_1\nq,p,a,b\n", encoding="utf-8")
    with pytest.raises(DataError, match="both a 'negative' column and numbered negatives"):
        read_triplets(both)
    empty = tmp_path / "empty.csv"
    empty.write_text("anchor,positive,negative_1,negative_2\n", encoding="utf-8")
    with pytest.raises(DataError, match="no data rows"):
        read_triplets(empty)
    assert negative_columns(["negative_2", "negative_1", "negative_10x", "negative"], "s") == ["negative_1", "negative_2"]


def test_tuples_and_dataset_checks() -> None:
    assert read_triplets([("a", "b", "c", "d")]).negatives == [("c", "d")]
    with pytest.raises(DataError, match="row 2: wrong number of fields: expected 4 like the first row, got 3"):
        read_triplets([("a", "b", "c", "d"), ("e", "f", "g")])
    assert read_triplets([("a", "b", "c", "d"), ("e", "f")], pad_negatives=True).negatives == [("c", "d"), ()]
    with pytest.raises(DataError, match="not both"):
        TripletDataset(["a"], ["b"], ["c"], negatives=[("d",)])
    with pytest.raises(DataError, match=r"row 1, field 'negative_2': text must be a str"):
        TripletDataset(["a"], ["b"], negatives=[("d", 5)])  # type: ignore[list-item]


def test_resolve_triplets_passes_pad_negatives(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    path.write_text("query\tpositive\tnegative_1\tnegative_2\nq\tp\ta\t\n", encoding="utf-8")
    with pytest.raises(DataError, match="row has 1 negative"):
        resolve_triplets(str(path))
    assert resolve_triplets(str(path), pad_negatives=True).negatives == [("a",)]


def test_n_tuples_stream_as_the_in_memory_read_gives_them(tmp_path: Path) -> None:
    """Spooled (stream_data) n-tuples hold the rows the in-memory read holds, across record batches,
    padded rows included; a row with fewer negatives is the same error, naming file, row and field."""
    from anglekit.data.stream import ArrowRows, spooling

    rows = [{"anchor": f"q{i}", "positive": f"p{i}", **{f"negative_{k}": f"n{i}.{k}" for k in range(1, 4 if i % 3 else 2)}} for i in range(7)]
    path = _jsonl(tmp_path / "mined.jsonl", rows)
    memory = read_triplets(path, pad_negatives=True)
    with spooling(batch_rows=2):
        streamed = read_triplets(path, pad_negatives=True)
    assert isinstance(streamed, ArrowRows) and streamed.is_ntuples and len(streamed) == 7 and streamed.negatives_per_row == 3
    assert streamed.texts("anchor") == memory.anchor and streamed.texts("positive") == memory.positive
    assert [tuple(n) for n in streamed.texts("negatives")] == memory.negatives
    assert streamed.row(0) == {"anchor": "q0", "positive": "p0", "negatives": ["n0.1"]}
    assert "7 n-tuples (anchor, positive, 3 hard negatives)" in streamed.summary()
    with spooling(batch_rows=2), pytest.raises(DataError, match=r"mined\.jsonl, row 2, field 'negative_2': row has 3 negative column"):
        read_triplets(path)
    prompted = streamed.formatted({"negatives": "doc: {}".format})
    assert prompted.row(1)["negatives"] == ["doc: n1.1", "doc: n1.2", "doc: n1.3"] and streamed.row(1)["negatives"][0] == "n1.1"
    folder = streamed.path.parent
    del streamed, memory
    import gc

    gc.collect()
    assert folder.is_dir() and prompted.texts("anchor")[:2] == ["q0", "q1"]  # a view keeps the mapped file and its folder
    del prompted
    gc.collect()
    assert not folder.exists()  # the temporary folder goes with the last view


def test_many_negatives_per_row(tmp_path: Path) -> None:
    """60 numbered negatives (a wide miner output) read in column order, not text order."""
    row = {"anchor": "q", "positive": "p", **{f"negative_{k}": f"n{k}" for k in range(60, 0, -1)}}
    data = read_triplets(_jsonl(tmp_path / "wide.jsonl", [row, row]))
    assert data.negatives_per_row == 60 and data.negatives[0][:3] == ("n1", "n2", "n3") and data.negatives[0][-1] == "n60"
