"""STS readers and the ``sts`` suite: SentEval's blank-line rule, the "all" aggregation, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from anglekit.data import senteval as se
from anglekit.errors import DataError
from anglekit.evaluation.baselines import HashingEncoder
from anglekit.evaluation.sts import evaluate_sts, load_sts_data, sts_markdown, year_scores
from anglekit.metrics.similarity import paired_cosine

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "senteval" / "STS").is_dir(), reason="../shared/data not present")

WORDS = [
    "a",
    "man",
    "woman",
    "dog",
    "cat",
    "plays",
    "guitar",
    "runs",
    "eats",
    "food",
    "in",
    "the",
    "park",
    "on",
    "street",
    "red",
    "blue",
    "car",
    "big",
    "small",
]


def _sentence(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, size=rng.integers(3, 8)))


def write_subset(directory: Path, name: str, n: int, *, seed: int, blank_every: int = 0, prefix: str = "STS") -> None:
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    inputs, golds = [], []
    for i in range(n):
        a = _sentence(rng)
        b = a if rng.random() < 0.3 else _sentence(rng)
        inputs.append(f"{a}\t{b}")
        golds.append("" if blank_every and i % blank_every == 0 else f"{rng.uniform(0, 5):.3f}")
    (directory / f"{prefix}.input.{name}.txt").write_text("\n".join(inputs) + "\n", encoding="utf-8")
    (directory / f"{prefix}.gs.{name}.txt").write_text("\n".join(golds) + "\n", encoding="utf-8")


def write_sts_root(root: Path, *, blank_every: int = 3) -> Path:
    """A data root with every year (tiny subsets, some blank gold lines), STS-B and SICK (SentEval layout)."""
    for y, (year, subsets) in enumerate(se.STS_YEARS.items()):
        for s, name in enumerate(subsets):
            write_subset(root / "senteval" / "STS" / f"{year}-en-test", name, 12 + s, seed=100 * y + s, blank_every=blank_every)
    rng = np.random.default_rng(7)
    stsb = root / "senteval" / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    rows = [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{rng.uniform(0, 5):.3f}\t{_sentence(rng)}\t{_sentence(rng)}" for i in range(20)]
    rows[3] += "\textra\tcolumns"  # extra trailing columns: the first 7 count
    (stsb / "sts-test.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    sick = root / "senteval" / "SICK"
    sick.mkdir(parents=True)
    lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    lines += [f"{i}\t{_sentence(rng)}\t{_sentence(rng)}\t{rng.uniform(1, 5):.1f}\tNEUTRAL" for i in range(20)]
    (sick / "SICK_test_annotated.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


# ------------------------------------------------------------------ real files


@needs_data
@pytest.mark.parametrize("variant", ["senteval", "original"])
def test_real_files_give_senteval_pair_counts(variant: str) -> None:
    for year, expected in se.STS_EXPECTED_PAIRS.items():
        loaded = se.load_sts_year(DATA, year, variant=variant, check_counts=False)
        assert loaded.n_pairs == expected, (variant, year)
        for sub in loaded.subsets:
            assert sub.encoding == "utf-8"
            assert sub.n_pairs + sub.n_skipped == sub.n_lines
            assert np.all((sub.gold >= 0) & (sub.gold <= 5))


@needs_data
def test_real_blank_gold_lines_are_skipped_exactly_like_senteval() -> None:
    """SentEval: keep the pairs whose gold line is not '' (after splitlines), in file order."""
    directory = DATA / "senteval" / "STS" / "STS16-en-test"
    for sub in se.load_sts_year(DATA, "STS16").subsets:
        raw_in = (directory / f"STS.input.{sub.name}.txt").read_text(encoding="utf-8").splitlines()
        raw_gs = np.array((directory / f"STS.gs.{sub.name}.txt").read_text(encoding="utf-8").splitlines())
        keep = raw_gs != ""
        expected_s1 = [" ".join(line.split("\t")[0].split()) for line, k in zip(raw_in, keep, strict=False) if k]
        assert sub.text1 == expected_s1
        np.testing.assert_array_equal(sub.gold, raw_gs[keep].astype(float))


@needs_data
def test_real_stsb_and_sick_sizes() -> None:
    assert len(se.load_stsbenchmark(DATA / "senteval" / "STS" / "STSBenchmark", "test")) == 1379
    assert len(se.load_stsbenchmark(DATA / "stsb", "train", normalize_whitespace=False)) == 5749
    assert len(se.load_sick_relatedness(DATA / "senteval" / "SICK", "test")) == 4927


# ------------------------------------------------------------------ aggregation


def test_all_mean_wmean_agree_with_scipy(tmp_path: Path) -> None:
    root = write_sts_root(tmp_path)
    encode = HashingEncoder(64)
    result = evaluate_sts(encode, root, tasks=["STS12", "STS-B", "SICK-R"], check_counts=False)
    year = se.load_sts_year(root, "STS12", check_counts=False)
    cosines, golds, per = [], [], []
    for sub in year.subsets:
        cos = paired_cosine(encode(sub.text1), encode(sub.text2))
        cosines.append(cos)
        golds.append(sub.gold)
        per.append(stats.spearmanr(cos, sub.gold).statistic * 100)
    expected_all = stats.spearmanr(np.concatenate(cosines), np.concatenate(golds)).statistic * 100
    det = result["details"]["STS12"]
    assert det["all"]["spearman"] == pytest.approx(expected_all, abs=1e-9)
    assert result["scores"]["STS12"] == pytest.approx(expected_all, abs=1e-9)
    assert det["mean"]["spearman"] == pytest.approx(np.mean(per), abs=1e-9)
    weights = [s.n_pairs for s in year.subsets]
    assert det["wmean"]["spearman"] == pytest.approx(np.average(per, weights=weights), abs=1e-9)
    assert det["n_pairs"] == sum(weights)
    # 'all' is not the mean of the subsets (in general)
    assert det["all"]["spearman"] != pytest.approx(det["mean"]["spearman"], abs=1e-6)
    assert result["scores"]["Avg"] == pytest.approx(np.mean([result["scores"][c] for c in ("STS12", "STS-B", "SICK-R")]))
    assert result["columns"] == ["STS12", "STS-B", "SICK-R", "Avg"]


def test_year_scores_with_direct_inputs() -> None:
    rng = np.random.default_rng(0)
    subsets = []
    cosines = []
    for k, n in enumerate((10, 25)):
        gold = rng.uniform(0, 5, n)
        subsets.append(se.StsSubset("X", f"s{k}", ["a"] * n, ["b"] * n, gold, n, 0, "in", "gs"))
        cosines.append(gold * 0.1 + rng.normal(0, 0.3, n))
    out = year_scores(se.StsYear("X", tuple(subsets), "dir"), cosines)
    assert out["all"]["spearman"] == pytest.approx(stats.spearmanr(np.concatenate(cosines), np.concatenate([s.gold for s in subsets])).statistic * 100)
    assert out["all"]["pearson"] == pytest.approx(stats.pearsonr(np.concatenate(cosines), np.concatenate([s.gold for s in subsets])).statistic * 100)


def test_blank_lines_skipped_and_counted(tmp_path: Path) -> None:
    write_subset(tmp_path, "x", 10, seed=0, blank_every=3)  # rows 1, 4, 7, 10 blank
    sub = se.load_sts_subset(tmp_path / "STS.input.x.txt", tmp_path / "STS.gs.x.txt")
    assert (sub.n_lines, sub.n_skipped, sub.n_pairs) == (10, 4, 6)
    lines = (tmp_path / "STS.input.x.txt").read_text().splitlines()
    kept = [lines[i].split("\t")[0] for i in range(10) if i % 3 != 0]
    assert sub.text1 == kept


def test_count_check_names_the_folder(tmp_path: Path) -> None:
    root = write_sts_root(tmp_path)
    with pytest.raises(DataError, match=r"STS13 has \d+ scored pairs; expected 1500"):
        se.load_sts_year(root, "STS13")


def test_original_layout_with_sts2016_names_and_source_columns(tmp_path: Path) -> None:
    d = tmp_path / "sts12-16-original" / "STS16"
    d.mkdir(parents=True)
    for name in se.STS_YEARS["STS16"]:
        (d / f"STS2016.input.{name}.txt").write_text("A b\tA  c\tsrc1\tsrc2\nx y\tz\tsrc\tsrc\n", encoding="utf-8")
        (d / f"STS2016.gs.{name}.txt").write_text("3\n\n", encoding="utf-8")
    year = se.load_sts_year(tmp_path, "STS16", variant="original", check_counts=False)
    assert year.n_pairs == 5
    assert year.subsets[0].text2 == ["A  c"]  # the original copy is not whitespace-normalised


def _write_irregular_stsb_and_sick(root: Path) -> list[str]:
    """STS-B and SICK test files (SentEval layout) whose sentences have runs of spaces and spaces at
    their edges; returns the raw sentences as written."""
    words = ["guitar", "dog", "car", "bread", "river", "ball"]
    raw: list[str] = []
    stsb_rows = []
    for i, w in enumerate(words):
        a, b = f" A  man   plays the {w} .", f"The  {w}   is  red "
        raw += [a, b]
        stsb_rows.append(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{i * 0.8:.1f}\t{a}\t{b}")
    stsb = root / "senteval" / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    (stsb / "sts-test.csv").write_text("\n".join(stsb_rows) + "\n", encoding="utf-8")
    sick_lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    for i, w in enumerate(words):
        a, b = f"  Two  kids   see a {w}", f"A {w}    is  seen  "
        raw += [a, b]
        sick_lines.append(f"{i}\t{a}\t{b}\t{1 + i * 0.7:.1f}\tNEUTRAL")
    sick = root / "senteval" / "SICK"
    sick.mkdir(parents=True)
    (sick / "SICK_test_annotated.txt").write_text("\n".join(sick_lines) + "\n", encoding="utf-8")
    return raw


def test_suite_normalises_the_whitespace_of_stsb_and_sick(tmp_path: Path) -> None:
    """The senteval copy: STS-B and SICK reach the encoder split-and-joined, as SentEval does."""
    raw = _write_irregular_stsb_and_sick(tmp_path)
    expected = {" ".join(text.split()) for text in raw}
    assert not expected & set(raw)  # every written sentence needs normalising
    seen: list[str] = []
    hashing = HashingEncoder(64)

    def encode(texts: list[str]) -> np.ndarray:
        seen.extend(texts)
        return hashing(texts)

    result = evaluate_sts(encode, tmp_path, tasks=["STS-B", "SICK-R"])
    assert set(seen) == expected
    assert set(result["scores"]) == {"STS-B", "SICK-R", "Avg"}
    data = load_sts_data(tmp_path, tasks=["STS-B", "SICK-R"])
    for task in ("STS-B", "SICK-R"):
        assert all(t == " ".join(t.split()) for t in [*data[task].text1, *data[task].text2]), task


def test_original_copy_keeps_the_whitespace_of_sick(tmp_path: Path) -> None:
    """The original (MTEB-style) copy is read untouched (SICK is the same file in both copies)."""
    raw = _write_irregular_stsb_and_sick(tmp_path)
    data = load_sts_data(tmp_path, variant="original", tasks=["SICK-R"])
    assert (data["SICK-R"].text1, data["SICK-R"].text2) == (raw[12::2], raw[13::2])


def test_markdown_year_table_puts_all_mean_and_wmean_in_their_columns() -> None:
    result = {
        "variant": "senteval",
        "columns": ["STS12", "Avg"],
        "scores": {"STS12": 11.11, "Avg": 11.11},
        "details": {
            "STS12": {
                "all": {"spearman": 11.11, "pearson": 12.0},
                "mean": {"spearman": 22.22, "pearson": 23.0},
                "wmean": {"spearman": 33.33, "pearson": 34.0},
                "n_pairs": 44,
                "subsets": {"MSRpar": {"spearman": 55.55, "pearson": 66.66, "n_pairs": 44, "n_skipped_blank_gold": 7}},
            }
        },
    }
    lines = sts_markdown(result).splitlines()

    def table(first_header: str) -> list[dict[str, str]]:
        start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} "))
        cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[start:]]
        rows = []
        for row in cells[2:]:
            if len(row) != len(cells[0]):
                break
            rows.append(dict(zip(cells[0], row, strict=False)))
        return rows

    assert table("year") == [{"year": "STS12", "all": "11.11", "mean": "22.22", "wmean": "33.33", "pairs": "44"}]
    assert table("model") == [{"model": "model", "STS12": "11.11", "Avg": "11.11"}]
    assert table("subset") == [{"subset": "STS12 MSRpar", "spearman": "55.55", "pearson": "66.66", "pairs": "44", "skipped (blank gold)": "7"}]


# ------------------------------------------------------------------ errors


def _pair(tmp_path: Path, inp: str, gs: str | None) -> tuple[Path, Path]:
    i, g = tmp_path / "STS.input.t.txt", tmp_path / "STS.gs.t.txt"
    i.write_text(inp, encoding="utf-8")
    if gs is not None:
        g.write_text(gs, encoding="utf-8")
    return i, g


def test_missing_gold_file_is_named(tmp_path: Path) -> None:
    i, g = _pair(tmp_path, "a\tb\n", None)
    with pytest.raises(DataError, match=r"STS\.gs\.t\.txt: file not found; expected STS gold scores"):
        se.load_sts_subset(i, g)


def test_missing_year_folder(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"STS12-en-test: folder not found; expected the senteval copy of STS12"):
        se.load_sts_year(tmp_path, "STS12")


def test_misaligned_line_counts(tmp_path: Path) -> None:
    i, g = _pair(tmp_path, "a\tb\nc\td\n", "1\n")
    with pytest.raises(DataError) as err:
        se.load_sts_subset(i, g)
    assert str(i) in str(err.value) and str(g) in str(err.value)
    assert "has 2 lines" in str(err.value) and "line-aligned" in str(err.value)


def test_non_numeric_gold(tmp_path: Path) -> None:
    i, g = _pair(tmp_path, "a\tb\nc\td\n", "1\nhigh\n")
    with pytest.raises(DataError, match=r"STS\.gs\.t\.txt, row 2, field 'score': expected a number, got 'high'"):
        se.load_sts_subset(i, g)


def test_gold_out_of_range(tmp_path: Path) -> None:
    i, g = _pair(tmp_path, "a\tb\n", "7.5\n")
    with pytest.raises(DataError, match=r"expected a score in \[0.0, 5.0\]"):
        se.load_sts_subset(i, g)


def test_wrong_column_count(tmp_path: Path) -> None:
    i, g = _pair(tmp_path, "a\tb\nonly one column\n", "1\n2\n")
    with pytest.raises(DataError, match=r"STS\.input\.t\.txt, row 2: expected 2 tab-separated columns"):
        se.load_sts_subset(i, g)


def test_invalid_utf8_is_an_error_naming_file_and_byte(tmp_path: Path) -> None:
    i = tmp_path / "STS.input.t.txt"
    i.write_bytes(b"caf\xe9\tb\n")
    (tmp_path / "STS.gs.t.txt").write_text("1\n")
    with pytest.raises(DataError, match=r"STS\.input\.t\.txt, row 1: not valid UTF-8: byte 0xe9"):
        se.load_sts_subset(i, tmp_path / "STS.gs.t.txt")


def test_known_latin1_file_is_decoded_deliberately(tmp_path: Path) -> None:
    path = tmp_path / "train_5500.label"
    path.write_bytes(b"LOC:city Which city has a sister\xf0city ?\n")
    tf = se.read_lines(path)
    assert tf.encoding == "latin-1"
    assert "0xf0" in (tf.note or "") and "line 1" in (tf.note or "")
    assert tf.lines == ["LOC:city Which city has a sister\u00f0city ?"]


def test_stsb_needs_seven_columns(tmp_path: Path) -> None:
    (tmp_path / "sts-test.csv").write_text("g\tf\t2012\t1\t3.0\tonly s1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"sts-test\.csv, row 1: expected at least 7 tab-separated columns"):
        se.load_stsbenchmark(tmp_path, "test")


def test_sick_header_is_checked(tmp_path: Path) -> None:
    (tmp_path / "SICK_test_annotated.txt").write_text("a\tb\tc\td\n1\tx\ty\t3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"SICK_test_annotated\.txt, row 0: expected the header pair_ID"):
        se.load_sick_relatedness(tmp_path, "test")


def test_suite_fails_before_encoding_when_a_file_is_missing(tmp_path: Path) -> None:
    root = write_sts_root(tmp_path)
    (root / "senteval" / "SICK" / "SICK_test_annotated.txt").unlink()
    encode = HashingEncoder(16)
    with pytest.raises(DataError, match="SICK_test_annotated.txt: file not found"):
        evaluate_sts(encode, root, tasks=["STS12", "SICK-R"], check_counts=False)
    assert encode.n_encoded == 0
