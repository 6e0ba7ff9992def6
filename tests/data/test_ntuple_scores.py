"""Teacher scores of n-tuples (``positive_score``, ``negative_k_score``): read on request, in every
format, with the row and column of a missing or non-finite score named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anglekit.data.triplets import read_triplets, score_columns
from anglekit.errors import DataError

ROWS = [
    {
        "anchor": "q one",
        "positive": "p one",
        "negative_1": "n one",
        "negative_2": "n two",
        "positive_score": 0.9,
        "negative_1_score": 0.5,
        "negative_2_score": 0.25,
    },
    {
        "anchor": "q two",
        "positive": "p two",
        "negative_1": "n three",
        "negative_2": "n one",
        "positive_score": 0.75,
        "negative_1_score": 0.125,
        "negative_2_score": -0.5,
    },
]
EXPECTED = [(0.9, 0.5, 0.25), (0.75, 0.125, -0.5)]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet", "dict", "datasets"])
def test_scores_are_read_in_every_format(tmp_path: Path, fmt: str) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(ROWS)
    source: object
    if fmt == "jsonl":
        source = _jsonl(tmp_path / "m.jsonl", ROWS)
    elif fmt == "csv":
        source = tmp_path / "m.csv"
        frame.to_csv(source, index=False)
    elif fmt == "parquet":
        pytest.importorskip("pyarrow")
        source = tmp_path / "m.parquet"
        frame.to_parquet(source)
    elif fmt == "datasets":
        datasets = pytest.importorskip("datasets")
        source = datasets.Dataset.from_list(ROWS)
    else:
        source = {key: [row[key] for row in ROWS] for key in ROWS[0]}
    data = read_triplets(source, scores=True)
    assert data.scores == EXPECTED and data.negatives == [("n one", "n two"), ("n three", "n one")]
    assert read_triplets(source).scores is None  # not asked: not read
    assert data.select([1]).scores == EXPECTED[1:]
    assert data.summary().endswith("(anchor, positive, 2 hard negatives, teacher scores)")


def test_without_score_columns_scores_is_none(tmp_path: Path) -> None:
    rows = [{k: v for k, v in row.items() if k != "negative_2_score"} for row in ROWS]
    assert read_triplets(_jsonl(tmp_path / "m.jsonl", rows), scores=True).scores is None
    assert score_columns(2) == ["positive_score", "negative_1_score", "negative_2_score"]


@pytest.mark.parametrize(
    ("value", "message"),
    [(float("nan"), "teacher score is nan: not a finite number"), (None, "teacher score is missing"), ("high", "teacher score 'high' is not a number"),
     (True, "teacher score True is not a number"), (float("inf"), "is inf")],
)  # fmt: skip
def test_a_bad_score_names_row_and_column(tmp_path: Path, value: object, message: str) -> None:
    rows = [dict(ROWS[0]), {**ROWS[1], "negative_2_score": value}]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))  # json writes NaN / Infinity
    with pytest.raises(DataError) as error:
        read_triplets(path, scores=True)
    text = str(error.value)
    assert f"{path}, row 2, field 'negative_2_score'" in text and message in text and "\n" not in text
    assert read_triplets(path).negatives is not None  # the pair objectives do not read scores
    lenient = read_triplets(path, scores=True, lenient=True)
    assert lenient.scores == EXPECTED[:1] and lenient.skipped == {"bad teacher score": 1}


def test_padded_rows_read_the_scores_of_their_real_negatives(tmp_path: Path) -> None:
    short = {
        "anchor": "q three",
        "positive": "p three",
        "negative_1": "n four",
        "negative_2": None,
        "positive_score": 0.5,
        "negative_1_score": 0.25,
        "negative_2_score": None,
    }
    path = _jsonl(tmp_path / "m.jsonl", [*ROWS, short])
    data = read_triplets(path, scores=True, pad_negatives=True)
    assert data.scores == [*EXPECTED, (0.5, 0.25)] and data.negatives[2] == ("n four",)
    with pytest.raises(DataError, match="row 3, field .scores.: 3 scores for a positive and 1 negatives"):
        type(data)(data.anchor, data.positive, negatives=data.negatives, scores=[*EXPECTED, (0.5, 0.25, 0.1)])
