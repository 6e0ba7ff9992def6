"""run_suite dispatcher, encoder adapters, the non-transfer suite, and the markdown report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from anglekit.errors import ConfigError, DataError
from anglekit.evaluation.baselines import HashingEncoder
from anglekit.evaluation.encoders import fingerprint_directory, prepare_encoder
from anglekit.evaluation.nontransfer import evaluate_nontransfer, load_qnli
from anglekit.evaluation.report import load_run, published_rows, report
from anglekit.evaluation.suites import SUITES, run_suite, run_suites, suite_options


def write_nontransfer_root(root: Path, n: int = 24) -> Path:
    rng = np.random.default_rng(0)
    words = ["a", "man", "woman", "dog", "plays", "guitar", "runs", "in", "the", "park", "red", "car", "what", "where", "is"]

    def s() -> str:
        return " ".join(rng.choice(words, size=5))

    (root / "mrpc").mkdir(parents=True)
    lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    lines += [f"{i % 2}\t{i}\t{i + 100}\t{s()}\t{s()}" for i in range(n)]
    (root / "mrpc" / "msr-para-test.tsv").write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    (root / "stsb").mkdir()
    rows = [f"g\tf\ty\t{i}\t{rng.uniform(0, 5):.2f}\t{s()}\t{s()}" for i in range(n)]
    (root / "stsb" / "sts-test.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / "qnli").mkdir()
    lines = ["index\tquestion\tsentence\tlabel"]
    lines += [f"{i}\t{s()}?\t{s()}.\t{'entailment' if i % 3 else 'not_entailment'}" for i in range(n)]
    (root / "qnli" / "dev.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


# ------------------------------------------------------------------ dispatcher


def test_suites_and_options_are_listed() -> None:
    assert SUITES == ("sts", "non-transfer", "transfer", "retrieval", "geometry")
    assert "variant" in suite_options("sts")
    assert {"n_folds", "seed", "c_grid"} <= set(suite_options("transfer"))


def test_unknown_suite_and_option(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown suite 'stsx'"):
        run_suite("stsx", HashingEncoder(4), data_root=tmp_path)
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['folds'\] for suite 'transfer'"):
        run_suite("transfer", HashingEncoder(4), data_root=tmp_path, folds=3)
    with pytest.raises(ConfigError, match="data_root"):
        run_suite("sts", HashingEncoder(4), data_root=tmp_path / "nowhere")


def test_max_length_is_never_ignored(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="takes no max_length keyword"):
        prepare_encoder(HashingEncoder(4), max_length=64)
    seen = {}

    def encode(texts: list[str], *, max_length: int) -> np.ndarray:
        seen["max_length"] = max_length
        return np.ones((len(texts), 3))

    enc = prepare_encoder(encode, max_length=64, progress=False)
    assert enc(["a", "b"]).shape == (2, 3) and seen == {"max_length": 64}
    assert enc.info()["max_length"] == 64


def test_prepared_encoder_batches_and_restores_order() -> None:
    calls = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return np.array([[len(t), i] for i, t in enumerate(texts)], dtype=np.float32)

    texts = ["aaaa", "b", "cc", "ddddddd", "eee"]
    out = prepare_encoder(encode, batch_size=2, progress=False)(texts)
    assert calls == [2, 2, 1]
    assert out[:, 0].tolist() == [len(t) for t in texts]


def test_run_suite_writes_json_and_markdown(tmp_path: Path) -> None:
    root = write_nontransfer_root(tmp_path / "data")
    out = tmp_path / "run"
    result = run_suite("non-transfer", HashingEncoder(32), data_root=root, out_dir=out, model_name="hashing-32", progress=False)
    saved = json.loads((out / "non-transfer.json").read_text())
    assert saved["scores"] == pytest.approx(result["scores"])
    assert saved["columns"] == ["MRPC", "STS-B", "QNLI", "Avg"]
    assert saved["model"]["name"] == "hashing-32"
    assert saved["seconds"] >= 0 and "created" in saved
    md = (out / "non-transfer.md").read_text()
    assert "| hashing-32" in md and "QNLI" in md


def test_embedder_through_run_suite(tmp_path: Path, load_bert) -> None:  # noqa: ANN001
    root = write_nontransfer_root(tmp_path / "data", n=8)
    model = load_bert(pooling="last_avg", max_length=32)
    with pytest.raises(ConfigError, match="loaded with max_length=32"):
        run_suite("non-transfer", model, data_root=root, max_length=64)
    result = run_suite("non-transfer", model, data_root=root, max_length=32, batch_size=4, progress=False, cache=tmp_path / "cache")
    assert result["model"]["fingerprint"] == model.fingerprint()
    assert result["model"]["pooling"] == "last_avg"
    assert result["model"]["cache"]["misses"] > 0


def test_run_suites_shares_one_encoder(tmp_path: Path) -> None:
    root = write_nontransfer_root(tmp_path / "data")
    inner = HashingEncoder(16)
    results = run_suites(["non-transfer"], inner, data_root=root, out_dir=tmp_path / "r", progress=False, options={"non-transfer": {"datasets": ["QNLI"]}})
    assert results["non-transfer"]["columns"] == ["QNLI", "Avg"]
    with pytest.raises(ConfigError, match="not run"):
        run_suites(["non-transfer"], inner, data_root=root, options={"sts": {}})


# ------------------------------------------------------------------ non-transfer


def test_nontransfer_spearman_against_binary_labels(tmp_path: Path) -> None:
    from scipy import stats

    from anglekit.metrics.similarity import paired_cosine

    root = write_nontransfer_root(tmp_path)
    enc = HashingEncoder(32)
    result = evaluate_nontransfer(enc, root, extra=[str(root / "stsb")])
    q = load_qnli(root / "qnli" / "dev.tsv")
    assert set(q.labels.tolist()) == {0.0, 1.0}
    want = stats.spearmanr(paired_cosine(enc(q.text1), enc(q.text2)), q.labels).statistic * 100
    assert result["scores"]["QNLI"] == pytest.approx(want)
    assert result["scores"][str(root / "stsb")] == pytest.approx(result["scores"]["STS-B"])


def test_qnli_errors(tmp_path: Path) -> None:
    path = tmp_path / "dev.tsv"
    path.write_text("index\tquestion\tsentence\tlabel\n0\tq?\ts.\tmaybe\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dev\.tsv, row 1, field 'label': expected a label in"):
        load_qnli(path)
    path.write_text("index\tquestion\tsentence\tlabel\n0\tq?\ts.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"row 1: expected 4 tab-separated columns"):
        load_qnli(path)
    with pytest.raises(DataError, match="file not found"):
        load_qnli(tmp_path / "missing.tsv")


# ------------------------------------------------------------------ report


def test_report_side_by_side(tmp_path: Path) -> None:
    root = write_nontransfer_root(tmp_path / "data")
    for name, dim in (("a", 16), ("b", 64)):
        run_suite("non-transfer", HashingEncoder(dim), data_root=root, out_dir=tmp_path / name, model_name=f"hash-{dim}", progress=False)
    sts = tmp_path / "a" / "sts.json"
    sts.write_text(json.dumps({"columns": ["STS12", "Avg"], "scores": {"STS12": 50.0, "Avg": 50.0}, "variant": "senteval", "model": {"name": "hash-16"}}))
    md = report([tmp_path / "a", tmp_path / "b"])
    assert "| hash-16" in md and "| hash-64" in md
    assert "SimCSE-BERT-base (unsup.)" in md and "68.40" in md  # published row on the STS table
    assert "Non-transfer" in md
    bare = report([tmp_path / "b"], include_published=False)
    assert "SimCSE" not in bare


def test_report_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="run folder not found"):
        load_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no suite results here"):
        load_run(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "sts.json").write_text("{not json")
    with pytest.raises(DataError, match=r"sts\.json: not valid JSON"):
        load_run(tmp_path / "bad")


def test_published_rows_are_consistent() -> None:
    rows = published_rows("sts")
    assert rows
    for row in rows:
        scores = row["scores"]
        assert row["kind"] in ("paper", "reference") and row["source"]
        if "Avg" in scores:
            cols = [c for c in scores if c != "Avg"]
            assert np.mean([scores[c] for c in cols]) == pytest.approx(scores["Avg"], abs=0.006), row["name"]


def test_fingerprint_directory_changes_with_content(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_bytes(b"abc")
    first = fingerprint_directory(tmp_path)
    (tmp_path / "w.bin").write_bytes(b"abd")
    assert fingerprint_directory(tmp_path) != first
