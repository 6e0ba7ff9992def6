"""Data for the contrastive objectives: sentences, triplets, NLI -> triplets, specs, collators.

Offline: files are written by the tests into tmp_path, or read from ../shared/data.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from anglekit.data import (
    SentenceDataset,
    TripletDataset,
    load_snli,
    nli_to_triplets,
    read_sentences,
    read_triplets,
    resolve_sentences,
    resolve_training_data,
    resolve_triplets,
    triplets_from_records,
)
from anglekit.data.nli import parse_nli_label
from anglekit.errors import ConfigError, DataError
from anglekit.training.tasks.contrastive import SentenceCollator, TokenizedSentences, TokenizedTriplets, TripletCollator

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_shared = pytest.mark.skipif(not (SHARED / "senteval" / "SNLI").is_dir(), reason="../shared/data not available")


def assert_where(exc: pytest.ExceptionInfo[DataError], source: Path | str, row: int | None, field: str | None) -> None:
    err = exc.value
    assert err.source == str(source), (err.source, source)
    assert err.row == row, (err.row, row)
    assert err.field == field, (err.field, field)


# ====================================================================== sentences


def test_txt_sentences_kept_exactly(tmp_path: Path) -> None:
    path = tmp_path / "s.txt"
    path.write_text("  a man plays .\r\nthe dog runs\nA man plays .\n", encoding="utf-8")
    ds = read_sentences(path)
    assert isinstance(ds, SentenceDataset)
    assert ds.texts == ["  a man plays .", "the dog runs", "A man plays ."]
    assert ds.name == "s" and ds.source == str(path) and len(ds) == 3 and ds[1] == "the dog runs"
    assert "3 sentences" in ds.summary()


def test_blank_line_is_an_error_naming_the_line_unless_lenient(tmp_path: Path) -> None:
    path = tmp_path / "s.txt"
    path.write_text("one\n\nthree\n   \n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        read_sentences(path)
    assert_where(exc, path, 2, "text")
    ds = read_sentences(path, lenient=True)
    assert ds.texts == ["one", "three"] and ds.skipped == {"empty text": 2}
    assert "SKIPPED 2" in ds.summary()


def test_sentences_from_a_column(tmp_path: Path) -> None:
    csv_path = tmp_path / "s.csv"
    csv_path.write_text('id,sentence,other\n1,"hello, world",x\n2,bye,y\n', encoding="utf-8")
    assert read_sentences(csv_path).texts == ["hello, world", "bye"]  # the 'sentence' alias
    assert read_sentences(csv_path, column="other").texts == ["x", "y"]
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(json.dumps({"body": "a"}) + "\n" + json.dumps({"body": ""}) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        read_sentences(jsonl, column="body")
    assert_where(exc, jsonl, 2, "body")
    with pytest.raises(DataError, match="missing column 'nope'"):
        read_sentences(csv_path, column="nope")
    with pytest.raises(DataError, match="cannot tell which column"):
        read_sentences(_two_columns(tmp_path))


def _two_columns(tmp_path: Path) -> Path:
    path = tmp_path / "two.tsv"
    path.write_text("a\tb\nx\ty\n", encoding="utf-8")
    return path


def test_sentences_from_parquet_saved_dataset_and_list(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"text": ["a", "b"]}), tmp_path / "s.parquet")
    assert read_sentences(tmp_path / "s.parquet").texts == ["a", "b"]
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"text": ["c", "d", "e"]}).save_to_disk(str(tmp_path / "saved"))
    assert read_sentences(tmp_path / "saved").texts == ["c", "d", "e"]
    assert read_sentences(["x", "y"]).texts == ["x", "y"]
    with pytest.raises(DataError):
        read_sentences(["x", ""])
    with pytest.raises(DataError, match="no such file"):
        read_sentences(tmp_path / "missing.txt")


def test_sentence_dataset_deduplicate_and_concatenate() -> None:
    a = SentenceDataset(["x", "y", "x"], name="a")
    b = SentenceDataset(["z", "y"], name="b", skipped={"empty text": 1})
    joined = SentenceDataset.concatenate([a, b])
    assert joined.texts == ["x", "y", "x", "z", "y"] and joined.name == "a+b" and joined.skipped == {"empty text": 1}
    distinct = joined.deduplicate()
    assert distinct.texts == ["x", "y", "z"] and distinct.skipped == {"empty text": 1, "duplicate": 2}
    with pytest.raises(DataError, match="row 2"):
        SentenceDataset(["ok", " "])


def test_resolve_sentences_files_and_splits(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("a\nb\n", encoding="utf-8")
    assert resolve_sentences(str(path)).texts == ["a", "b"]
    with pytest.raises(ConfigError, match="single file"):
        resolve_sentences(f"{path}:train")
    other = tmp_path / "more.txt"
    other.write_text("c\n", encoding="utf-8")
    assert resolve_sentences(f"{path}+{other}").texts == ["a", "b", "c"]
    other.write_text("c\na\n", encoding="utf-8")
    joined = resolve_sentences(f"{path}+{other}")
    assert joined.texts == ["a", "b", "c"] and joined.skipped == {"duplicate": 1}
    with pytest.raises(DataError, match="not a known corpus"):
        resolve_sentences("no-such-corpus", data_root=tmp_path)


@needs_shared
def test_known_sentence_corpora_from_the_shared_data() -> None:
    mr = resolve_sentences("mr", data_root=SHARED)
    assert 10_000 < len(mr) <= 10_662 and len(set(mr.texts)) == len(mr)  # distinct sentences
    flickr = resolve_sentences("flickr30k:test", data_root=SHARED)
    assert 4_900 < len(flickr) <= 5_000
    joined = resolve_sentences("mr+flickr30k:test", data_root=SHARED)
    assert len(joined) == len(set(mr.texts) | set(flickr.texts))  # a join keeps each sentence once
    stsb = resolve_sentences("stsb:dev", data_root=SHARED)  # both sides of a pair dataset
    assert len(stsb) == len(set(stsb.texts)) > 1500
    snli = resolve_sentences("snli:test", data_root=SHARED)
    assert len(snli) == len(set(snli.texts)) > 9_000


# ====================================================================== triplets


def test_triplets_from_jsonl_csv_tsv(tmp_path: Path) -> None:
    rows = [{"anchor": "a1", "positive": "p1", "negative": "n1"}, {"anchor": "a2", "positive": "p2", "negative": "n2"}]
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ds = read_triplets(jsonl)
    assert isinstance(ds, TripletDataset) and ds.has_negatives
    assert ds.anchor == ["a1", "a2"] and ds.positive == ["p1", "p2"] and ds.negative == ["n1", "n2"]
    assert tuple(ds[1]) == ("a2", "p2", "n2")
    csv_path = tmp_path / "nli_for_simcse.csv"  # SimCSE's column names
    csv_path.write_text('sent0,sent1,hard_neg\n"a, 1",p1,n1\n', encoding="utf-8")
    assert tuple(read_triplets(csv_path)[0]) == ("a, 1", "p1", "n1")
    tsv = tmp_path / "q.tsv"  # query / positive, no negatives
    tsv.write_text('query\tpositive\nwhat "is" x\tx is\n', encoding="utf-8")
    ds = read_triplets(tsv)
    assert not ds.has_negatives and ds.negative is None and tuple(ds[0]) == ('what "is" x', "x is", None)
    assert "anchor, positive)" in ds.summary()


def test_triplet_errors_name_file_row_and_field(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps({"anchor": "a", "positive": "p", "negative": "n"}) + "\n\n" + json.dumps({"anchor": "a", "positive": "", "negative": "n"}) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(DataError) as exc:
        read_triplets(path)
    assert_where(exc, path, 3, "positive")  # JSON Lines: the line number
    lenient = read_triplets(path, lenient=True)
    assert len(lenient) == 1 and lenient.skipped == {"empty text": 1}
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("anchor,negative\na,n\n", encoding="utf-8")
    with pytest.raises(DataError, match="missing column 'positive'") as exc:
        read_triplets(csv_path)
    assert exc.value.field == "positive"
    csv_path.write_text("anchor,positive,negative\na,p,\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        read_triplets(csv_path)
    assert_where(exc, csv_path, 1, "negative")
    with pytest.raises(ConfigError, match="unknown key"):
        read_triplets(csv_path, columns={"query": "anchor"})


@pytest.mark.parametrize("typo", ["negatve", "negativ", "Negative", "hard_negtive", "hardneg"])
def test_a_misspelt_negative_column_is_an_error_not_pairs(tmp_path: Path, typo: str) -> None:
    """It used to be ignored: the rows trained as (anchor, positive) pairs without a word."""
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"anchor": "a", "positive": "p", typo: "n"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"field '{typo}': column '{typo}' looks like a misspelling of '(negative|hard_negative|hard_neg)'") as exc:
        read_triplets(path)
    assert str(path) in str(exc.value) and exc.value.field == typo and "train as (anchor, positive) pairs" in str(exc.value)
    assert read_triplets(path, columns={"negative": typo}).negative == ["n"]  # mapped: read as the negatives


def test_columns_that_are_not_typos_still_make_pairs(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"anchor": "a", "positive": "p", "id": 3, "source": "x", "label": 1}) + "\n", encoding="utf-8")
    assert read_triplets(path).negative is None


@pytest.mark.parametrize(("header", "missing", "typo"), [("anchr,positive", "anchor", "anchr"), ("anchor,positve", "positive", "positve")])
def test_a_misspelt_required_column_is_named_in_the_missing_column_error(tmp_path: Path, header: str, missing: str, typo: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(header + "\na,b\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"missing column '{missing}'.*; '{typo}' looks like a misspelling of '{missing}'; available columns"):
        read_triplets(path)


def test_triplets_from_python_data_and_column_mapping(tmp_path: Path) -> None:
    ds = read_triplets([("a", "p", "n"), ("b", "q", "m")])
    assert ds.negative == ["n", "m"]
    assert read_triplets([("a", "p")]).negative is None
    with pytest.raises(DataError) as exc:
        read_triplets([("a", "p", "n"), ("b", "q")])
    assert exc.value.row == 2
    ds = read_triplets({"q": ["x"], "d": ["y"]}, columns={"anchor": "q", "positive": "d"})
    assert tuple(ds[0]) == ("x", "y", None)
    ds = triplets_from_records([("a", "p", "n")], name="mine", source="here")
    assert ds.name == "mine" and ds.source == "here"
    with pytest.raises(DataError, match="differ in length"):
        TripletDataset(["a"], ["p", "q"])


def test_triplets_from_parquet_and_saved_dataset(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"anchor": ["a", None], "positive": ["p", "q"]}), tmp_path / "t.parquet")
    with pytest.raises(DataError) as exc:
        read_triplets(tmp_path / "t.parquet")
    assert_where(exc, tmp_path / "t.parquet", 2, "anchor")
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"anchor": ["a"], "positive": ["p"], "negative": ["n"]}).save_to_disk(str(tmp_path / "saved"))
    assert tuple(read_triplets(tmp_path / "saved")[0]) == ("a", "p", "n")


# ====================================================================== NLI


NLI_ROWS = [  # premise, hypothesis, label
    ("P1", "p1 neutral", "neutral"),
    ("P1", "p1 entail A", "entailment"),
    ("P1", "p1 contra A", "contradiction"),
    ("P2", "p2 entail", "entailment"),  # no contradiction for P2
    ("P1", "p1 entail B", "entailment"),
    ("P1", "p1 contra B", "contradiction"),
    ("P3", "p3 contra", 2),  # integers as on the hub
    ("P3", "p3 entail", 0),
    ("P3", "p3 unlabelled", -1),
    ("P1", "p1 entail C", "Entailment"),
]


def _nli(pairing: str = "zip") -> TripletDataset:
    premises, hypotheses, labels = zip(*NLI_ROWS, strict=False)
    return nli_to_triplets(premises, hypotheses, labels, pairing=pairing)


def test_nli_zip_pairs_the_kth_entailment_with_the_kth_contradiction() -> None:
    ds = _nli("zip")
    assert list(map(tuple, ds)) == [
        ("P1", "p1 entail A", "p1 contra A"),
        ("P1", "p1 entail B", "p1 contra B"),
        ("P3", "p3 entail", "p3 contra"),
    ]
    assert ds.skipped == {
        "unused: neutral": 1,
        "unused: no gold label": 1,
        "unused: entailment without a contradiction": 2,  # P1's third entailment, P2's only one
    }


def test_nli_cycle_and_all_pairings() -> None:
    cycle = list(map(tuple, _nli("cycle")))
    assert ("P1", "p1 entail C", "p1 contra A") in cycle and len(cycle) == 4
    everything = list(map(tuple, _nli("all")))
    assert len(everything) == 3 * 2 + 1
    with pytest.raises(ConfigError, match="pairing"):
        _nli("random")


def test_nli_labels() -> None:
    assert parse_nli_label("entailment") == "entailment" and parse_nli_label(" CONTRADICTION ") == "contradiction"
    assert parse_nli_label(1) == "neutral" and parse_nli_label("2") == "contradiction"
    assert parse_nli_label(-1) is None and parse_nli_label("-") is None
    for bad in ("entailed", 3, True, 1.5):
        with pytest.raises(ValueError):
            parse_nli_label(bad)


def test_nli_file_is_converted_and_bad_labels_name_the_row(tmp_path: Path) -> None:
    path = tmp_path / "nli.jsonl"
    path.write_text("".join(json.dumps({"premise": p, "hypothesis": h, "label": lab}) + "\n" for p, h, lab in NLI_ROWS), encoding="utf-8")
    ds = read_triplets(path)
    assert len(ds) == 3 and ds.has_negatives and ds.source == str(path)
    assert len(read_triplets(path, nli_pairing="all")) == 7
    bad = tmp_path / "bad.tsv"
    bad.write_text("premise\thypothesis\tlabel\nP\tH\tentailment\nP\tH2\tmaybe\n", encoding="utf-8")
    with pytest.raises(DataError, match="maybe") as exc:
        read_triplets(bad)
    assert_where(exc, bad, 2, "label")
    only_neutral = tmp_path / "neutral.tsv"
    only_neutral.write_text("premise\thypothesis\tlabel\nP\tH\tneutral\n", encoding="utf-8")
    with pytest.raises(DataError, match="no triplets"):
        read_triplets(only_neutral)


def _write_snli(folder: Path, split: str, rows: list[tuple[str, str, str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, column in (("s1", 0), ("s2", 1), ("labels", 2)):
        (folder / f"{name}.{split}").write_text("".join(str(r[column]) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_snli_layout(tmp_path: Path) -> None:
    folder = _write_snli(tmp_path / "senteval" / "SNLI", "dev", [r for r in NLI_ROWS if isinstance(r[2], str)])
    ds = load_snli(folder, "dev")
    assert ds.name == "snli:dev" and len(ds) == 2
    assert resolve_triplets("snli:dev", data_root=tmp_path) == ds
    assert resolve_triplets(f"{folder}:validation") == ds
    with pytest.raises(DataError, match="no SNLI 'train' split.*hf:stanfordnlp/snli"):
        load_snli(folder, "train")
    (folder / "labels.dev").write_text("entailment\n", encoding="utf-8")
    with pytest.raises(DataError, match="not line-aligned"):
        load_snli(folder, "dev")
    (folder / "labels.dev").write_text("".join(r[2] + "\n" for r in NLI_ROWS if isinstance(r[2], str)), encoding="utf-8")
    (folder / "s2.dev").write_text("a\n\nb\nc\nd\ne\nf\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        load_snli(folder, "dev")
    assert_where(exc, folder / "s2.dev", 2, "text")


@needs_shared
def test_real_snli_dev_to_triplets() -> None:
    ds = resolve_triplets("snli:dev", data_root=SHARED)
    assert 2_500 < len(ds) < 3_329 and ds.has_negatives  # at most one per entailment
    # Every triplet: the hypothesis labelled entailment / contradiction for that very premise.
    s1 = (SHARED / "senteval/SNLI/s1.dev").read_text(encoding="utf-8").splitlines()
    s2 = (SHARED / "senteval/SNLI/s2.dev").read_text(encoding="utf-8").splitlines()
    labels = (SHARED / "senteval/SNLI/labels.dev").read_text(encoding="utf-8").splitlines()
    gold = {(p, h): lab for p, h, lab in zip(s1, s2, labels, strict=False)}
    for anchor, positive, negative in list(ds)[:200]:
        assert gold[(anchor, positive)] == "entailment" and gold[(anchor, negative)] == "contradiction"
    assert ds.skipped["unused: neutral"] == labels.count("neutral")


def test_hub_nli_names_offline_give_a_clear_error() -> None:
    with pytest.raises(DataError, match="sentence-transformers/all-nli"):
        resolve_triplets("all-nli:train")
    with pytest.raises(DataError, match="offline"):
        resolve_triplets("hf:stanfordnlp/snli:train")


def test_resolve_training_data_by_kind(tmp_path: Path) -> None:
    path = tmp_path / "s.txt"
    path.write_text("a\nb\n", encoding="utf-8")
    assert isinstance(resolve_training_data(str(path), "sentences"), SentenceDataset)
    with pytest.raises(ConfigError, match="batch kind"):
        resolve_training_data(str(path), "pairs")
    with pytest.raises(ConfigError, match="text_column"):
        resolve_training_data(str(path), "triplets", column="x")


# ====================================================================== collators


def _fake_tokenize(texts: list[str]) -> list[list[int]]:
    return [[len(t)] * (1 + len(t.split())) for t in texts]


def test_sentence_collator_and_text_ids() -> None:
    ds = TokenizedSentences.build(["a b", "c", "a b", "d e f"], _fake_tokenize)
    assert len(ds.token_ids) == 3  # each distinct text tokenized once
    assert ds.lengths() == [3, 2, 3, 4]
    batch = SentenceCollator(pad_id=0)([ds[0], ds[1], ds[2]])
    assert batch["input_ids"].shape == (3, 3) and batch["attention_mask"].sum().item() == 8
    assert batch["text_ids"].tolist() == [0, 1, 0]
    left = SentenceCollator(pad_id=0, left_padding=True)([ds[1], ds[3]])
    assert left["attention_mask"][0].tolist() == [0, 0, 1, 1]


def test_triplet_collator_stacks_anchor_positive_negative() -> None:
    ds = TokenizedTriplets.build(["a", "b"], ["p", "a"], ["n", "p"], _fake_tokenize)
    assert ds.parts == 3 and len(ds.token_ids) == 4
    batch = TripletCollator(pad_id=0)([ds[0], ds[1]])
    assert batch["input_ids"].shape == (6, 2) and int(batch["parts"]) == 3
    # ids in order of first appearance row by row (a=0, p=1, n=2, b=3); identical texts share ids:
    # anchors a, b | positives p, a | negatives n, p
    assert batch["text_ids"].tolist() == [0, 3, 1, 0, 2, 1]
    pairs = TokenizedTriplets.build(["a"], ["p"], None, _fake_tokenize)
    out = TripletCollator(pad_id=0)([pairs[0]])
    assert out["input_ids"].shape[0] == 2 and int(out["parts"]) == 2
    with pytest.raises(ValueError, match="mixes"):
        TripletCollator(pad_id=0)([ds[0], pairs[0]])
    assert torch.equal(out["attention_mask"], torch.ones(2, 2, dtype=out["attention_mask"].dtype))
