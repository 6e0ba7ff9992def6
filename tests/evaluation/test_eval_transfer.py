"""Transfer suite: seeded stratified folds, C selection, MRPC features, readers, a tiny end-to-end run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from anglekit.data import senteval as se
from anglekit.errors import ConfigError, DataError
from anglekit.evaluation.baselines import HashingEncoder
from anglekit.evaluation.transfer import (
    _Fitter,
    evaluate_transfer,
    kfold_accuracy,
    pair_features,
    stratified_folds,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "senteval").is_dir(), reason="../shared/data not present")


def _labels(n_pos: int = 130, n_neg: int = 370) -> np.ndarray:
    rng = np.random.default_rng(0)
    y = np.array([1] * n_pos + [0] * n_neg)
    rng.shuffle(y)
    return y


def test_folds_are_seeded() -> None:
    y = _labels()
    a = stratified_folds(y, 10, seed=1111)
    b = stratified_folds(y, 10, seed=1111)
    c = stratified_folds(y, 10, seed=7)
    for (tr1, te1), (tr2, te2) in zip(a, b, strict=False):
        np.testing.assert_array_equal(te1, te2)
        np.testing.assert_array_equal(tr1, tr2)
    assert any(not np.array_equal(t1, t2) for (_, t1), (_, t2) in zip(a, c, strict=False))


def test_folds_are_stratified_and_partition_the_data() -> None:
    y = _labels()
    folds = stratified_folds(y, 10, seed=1111)
    tests = np.concatenate([te for _, te in folds])
    assert sorted(tests.tolist()) == list(range(len(y)))
    overall = y.mean()
    for tr, te in folds:
        assert len(set(tr) & set(te)) == 0
        # each class's count in a fold differs from the exact share by less than one sample
        assert abs(y[te].sum() - overall * len(te)) < 1.0 + 1e-9
        assert abs(y[te].mean() - overall) < 0.02


def test_kfold_on_separable_data_is_perfect_and_records_choices() -> None:
    rng = np.random.default_rng(1)
    y = _labels(60, 60)
    x = rng.normal(size=(120, 5)) + y[:, None] * 6.0
    fitter = _Fitter(max_iter=200, seed=0)
    out = kfold_accuracy(x, y, fitter, n_folds=5, inner_folds=3, grid=[0.5, 2.0], seed=0)
    assert out["accuracy"] == 100.0
    assert len(out["fold_accuracy"]) == 5 and len(out["chosen_C"]) == 5
    assert set(out["chosen_C"]) == {0.5}  # ties go to the smaller C
    assert fitter.fits == 5 * (2 * 3 + 1)


def test_select_c_on_dev() -> None:
    rng = np.random.default_rng(2)
    y = np.array([0, 1] * 50)
    x = rng.normal(size=(100, 3)) + y[:, None] * 3.0
    c, scores = _Fitter(200, 0).select_c(x, y, [0.1, 1.0, 10.0], inner_folds=3, dev=(x[:20], y[:20]))
    assert c in (0.1, 1.0, 10.0)
    assert set(scores) == {"0.1", "1.0", "10.0"}


def test_pair_features_order() -> None:
    u = np.array([[1.0, 2.0]])
    v = np.array([[3.0, -1.0]])
    np.testing.assert_array_equal(pair_features(u, v, ["u", "v", "abs", "prod"]), [[1, 2, 3, -1, 2, 3, 3, -2]])
    np.testing.assert_array_equal(pair_features(u, v, ["abs", "prod"]), [[2, 3, 3, -2]])
    with pytest.raises(ConfigError):
        pair_features(u, v, ["diff"])


# ------------------------------------------------------------------ readers


def write_senteval_root(root: Path, n: int = 40) -> Path:
    rng = np.random.default_rng(3)
    pos_words, neg_words = ["good", "great", "fine", "lovely"], ["bad", "awful", "poor", "dull"]

    def sent(words: list[str]) -> str:
        return " ".join(rng.choice(words + ["the", "film", "is", "a"], size=5))

    s = root / "senteval"
    for folder, pos, neg in se.BINARY_TASK_FILES.values():
        (s / folder).mkdir(parents=True)
        (s / folder / pos).write_text("\n".join(sent(pos_words) for _ in range(n)) + "\n", encoding="utf-8")
        (s / folder / neg).write_text("\n".join(sent(neg_words) for _ in range(n + 7)) + "\n", encoding="utf-8")
    sst = s / "SST" / "binary"
    sst.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        lines = [f"{sent(pos_words)} \t1" if i % 2 else f"{sent(neg_words)} \t0" for i in range(n)]
        (sst / f"sentiment-{split}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (s / "TREC").mkdir()
    for name in se.TREC_FILES.values():
        lines = [f"{'NUM:count How many' if i % 2 else 'LOC:city Where is'} {sent(pos_words)} ?" for i in range(n)]
        (s / "TREC" / name).write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    (s / "MRPC").mkdir()
    for name in se.MRPC_FILES.values():
        lines = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(n):
            a = sent(pos_words)
            lines.append(f"{i % 2}\t{i}\t{i + 1000}\t{a}\t{a if i % 2 else sent(neg_words)}")
        (s / "MRPC" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_binary_task_keeps_empty_lines_and_counts_them(tmp_path: Path) -> None:
    (tmp_path / "CR").mkdir()
    (tmp_path / "CR" / "custrev.pos").write_text("good  one\n\nfine\n", encoding="utf-8")
    (tmp_path / "CR" / "custrev.neg").write_text("bad\n", encoding="utf-8")
    d = se.load_binary_task(tmp_path, "CR")
    assert d.texts == ["good one", "", "fine", "bad"]
    assert d.labels.tolist() == [1, 1, 1, 0]
    assert d.n_empty == 1


def test_trec_coarse_labels_and_errors(tmp_path: Path) -> None:
    (tmp_path / "TREC").mkdir()
    (tmp_path / "TREC" / "TREC_10.label").write_text("NUM:date When was it ?\nHUM:ind Who is he ?\n", encoding="utf-8")
    d = se.load_trec(tmp_path, "test")
    assert d.texts == ["When was it ?", "Who is he ?"]
    assert [d.classes[k] for k in d.labels] == ["NUM", "HUM"]
    (tmp_path / "TREC" / "TREC_10.label").write_text("FOO:bar What ?\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"TREC_10\.label, row 1, field 'label': expected a coarse class"):
        se.load_trec(tmp_path, "test")


@needs_data
def test_real_trec_train_is_latin1_on_purpose() -> None:
    d = se.load_trec(DATA / "senteval", "train")
    assert len(d) == 5452
    assert any("Latin-1" in n for n in d.notes)
    assert "sister\u00f0city" in d.texts[65]


def test_sst_label_error(tmp_path: Path) -> None:
    (tmp_path / "SST" / "binary").mkdir(parents=True)
    (tmp_path / "SST" / "binary" / "sentiment-dev").write_text("fine\t1\nmeh\t2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"sentiment-dev, row 2, field 'label': expected label 0 or 1"):
        se.load_sst_binary(tmp_path, "dev")


def test_mrpc_wrong_column_count(tmp_path: Path) -> None:
    (tmp_path / "MRPC").mkdir()
    (tmp_path / "MRPC" / "msr_paraphrase_test.txt").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t2\t3\tonly one\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"msr_paraphrase_test\.txt, row 1: expected 5 tab-separated columns"):
        se.load_mrpc_senteval(tmp_path, "test")


def test_missing_task_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"MR/rt-polarity\.pos: file not found; expected MR sentences"):
        se.load_binary_task(tmp_path, "MR")


# ------------------------------------------------------------------ end to end


def test_transfer_suite_end_to_end(tmp_path: Path) -> None:
    root = write_senteval_root(tmp_path)
    result = evaluate_transfer(HashingEncoder(32), root, n_folds=3, inner_folds=2, c_grid=[0.5, 4.0], max_iter=200)
    assert result["columns"] == ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "Avg"]
    for task in ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC"):
        assert result["scores"][task] > 90.0, task  # the word lists separate the classes
    assert 0.0 <= result["scores"]["MRPC"] <= 100.0
    assert "f1" in result["details"]["MRPC"]
    assert result["details"]["MRPC"]["features"] == ["u", "v", "|u-v|", "u*v"]
    assert result["details"]["SST2"]["selection"] == "dev"
    assert "encoding_notes" not in result["details"]["TREC"]  # these TREC files are valid UTF-8
    again = evaluate_transfer(HashingEncoder(32), root, n_folds=3, inner_folds=2, c_grid=[0.5, 4.0], max_iter=200)
    assert again["scores"] == result["scores"]  # seeded: identical


def test_transfer_rejects_unknown_task(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown transfer task"):
        evaluate_transfer(HashingEncoder(8), tmp_path, tasks=["SICK-E"])
