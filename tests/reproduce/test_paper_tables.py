"""The shipped paper tables (anglekit.evaluation.paper): equal to the project's transcription, parsed
to the figures printed in it, and malformed tables rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from anglekit.errors import ConfigError, DataError
from anglekit.evaluation.paper import paper_note, paper_table, paper_text, paper_value, parse_tables

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "paper" / "README.md"


@pytest.mark.skipif(not SHARED.is_file(), reason="../shared/paper/README.md is not beside the checkout")
def test_shipped_copy_equals_the_transcription():
    assert paper_text() == SHARED.read_text(encoding="utf-8")


def test_table_4_both_halves_and_the_ibn_note():
    assert paper_value(4, "all (cosine + ibn + angle)", "Spearman") == 86.26
    assert paper_value(4, "without ibn", "Spearman") == 86.00
    assert paper_value(4, "only ibn", "Spearman") == 72.48
    assert paper_value(4, "last-max", "Spearman (2)", key="pooling") == 79.76
    assert paper_value(4, "cls-last-avg", "Spearman (2)", key="pooling") == 85.81
    assert "0.18" in paper_note("identical-sentence detection")


def test_tables_2_3_5_rows_and_their_averages():
    angle = next(r for r in paper_table(2) if r["model"] == "**AnglE-BERT**".strip("*"))
    sts = [angle[c] for c in ("STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R")]
    assert abs(sum(sts) / 7 - angle["avg"]) < 0.01
    assert paper_value(3, "AnglE-BERT", "GitHub Issues test") == 70.55
    assert paper_value(5, "SimCSE-BERT (unsup.)", "Spearman") == 76.85
    assert paper_value(6, "GloVe (avg.)", "SST2") is None  # the illegible cell


def test_unknown_table_row_or_column_is_a_clear_error():
    with pytest.raises(ConfigError, match="Table 9"):
        paper_table(9)
    with pytest.raises(ConfigError, match="no row"):
        paper_value(4, "nothing", "Spearman")
    with pytest.raises(ConfigError, match="no column"):
        paper_value(4, "without ibn", "Pearson")


def test_malformed_and_empty_markdown():
    assert parse_tables("") == {}
    assert parse_tables("## Table 1: x\n\nno table here\n") == {"Table 1": []}
    with pytest.raises(DataError, match="cells"):
        parse_tables("## Table 7: bad\n\n| a | b |\n|---|---|\n| 1 | 2 | 3 |\n")
    parsed = parse_tables("## Table 8: ok\n\n| a | b |\n|---|---|\n| x | 1.5 |\n| y | – |\n\nprose\n\n| c |\n|---|\n| 9 |\n")
    assert parsed["Table 8"] == [{"a": "x", "b": 1.5}, {"a": "y", "b": None}]  # only the section's first table
