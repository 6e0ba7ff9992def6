"""A teacher's scores in mining: sentence-transformers' CrossEncoder.predict and brute-force cosines
as references, the guard against a hand computation and a brute-force filter, the rescore round
trip, and bad input on the command line."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError, DataError
from anglekit.mining import MineSettings, TeacherSettings, check_teacher, load_teacher, mine_hard_negatives, rescore_mined
from anglekit.mining.guard import guard_masks

from helpers import build_tiny_bert, random_sentence, words

NAN_WORD = "7"
"""A token of the tiny vocabulary that random sentences never hold: the NaN teacher's poisoned word."""


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _pairs(n: int, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    texts = list(dict.fromkeys(random_sentence(rng, 3, 10) for _ in range(6 * n)))
    return [{"anchor": a, "positive": p} for a, p in zip(texts[:n], texts[n : 2 * n], strict=True)]


def _cross_encoder(folder: Path, *, labels: int = 1, seed: int = 0, nan_word: str | None = None) -> Path:
    """A tiny random BERT cross-encoder saved by sentence-transformers' CrossEncoder (its own files)."""
    import torch
    from sentence_transformers import CrossEncoder

    bert = build_tiny_bert(folder.parent / f"{folder.name}-bert", seed=seed)
    torch.manual_seed(seed)
    model = CrossEncoder(str(bert), num_labels=labels, device="cpu")
    with torch.no_grad():  # a random head scores every pair alike: widen it so that scores differ (by about 1)
        for module in (model.model.bert.pooler.dense, model.model.classifier):
            torch.nn.init.normal_(module.weight, std=1.0)
        for layer in model.model.bert.encoder.layer:
            torch.nn.init.normal_(layer.attention.self.query.weight, std=0.5)
            torch.nn.init.normal_(layer.attention.self.key.weight, std=0.5)
    if nan_word is not None:
        token = model.tokenizer.convert_tokens_to_ids(nan_word)
        with torch.no_grad():
            model.model.bert.embeddings.word_embeddings.weight[token] = float("nan")
    model.save(str(folder))
    return folder


@pytest.fixture(scope="module")
def cross_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _cross_encoder(tmp_path_factory.mktemp("teacher") / "cross")


@pytest.fixture(scope="module")
def minilm() -> str:
    from anglekit.model.offline import minilm_dir

    return str(minilm_dir())


def _pair_list(n: int = 24) -> tuple[list[str], list[str]]:
    rng = random.Random(3)
    anchors = [random_sentence(rng, 2, 12) for _ in range(n)]
    texts = [random_sentence(rng, 2, 12) for _ in range(n)]
    texts[0] = words(200)  # longer than the max length: truncated as CrossEncoder truncates
    anchors[1] = words(150, offset=7)
    texts[2] = anchors[2]
    return anchors, texts


def test_cross_encoder_scores_are_crossencoder_predict_logits(cross_dir: Path) -> None:
    import torch
    from sentence_transformers import CrossEncoder

    anchors, texts = _pair_list()
    spec = check_teacher(str(cross_dir), TeacherSettings())
    assert spec.kind == "cross" and "CrossEncoder" in spec.why
    teacher = load_teacher(spec, TeacherSettings(teacher_batch_size=5), device="cpu")
    got = teacher.score(anchors, texts)
    reference = CrossEncoder(str(cross_dir), device="cpu")
    pairs = list(zip(anchors, texts, strict=True))
    logits = reference.predict(pairs, activation_fn=torch.nn.Identity(), batch_size=7)
    np.testing.assert_allclose(got, logits, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(1 / (1 + np.exp(-got.astype(np.float64))), reference.predict(pairs), atol=1e-5)  # predict's default: sigmoid
    assert teacher.max_length == reference.max_seq_length == 128
    described = teacher.describe()
    assert described["score"] == "logit" and described["predict_activation"].endswith("Sigmoid") and described["pairs_scored"] == len(pairs)


def test_a_plain_sequence_classification_folder_is_a_cross_encoder(tmp_path: Path) -> None:
    import torch
    from sentence_transformers import CrossEncoder
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    bert = build_tiny_bert(tmp_path / "bert", seed=4)
    torch.manual_seed(4)
    model = AutoModelForSequenceClassification.from_pretrained(str(bert), num_labels=1)
    model.save_pretrained(tmp_path / "hf")
    AutoTokenizer.from_pretrained(str(bert)).save_pretrained(tmp_path / "hf")
    spec = check_teacher(str(tmp_path / "hf"), TeacherSettings())
    assert spec.kind == "cross" and "BertForSequenceClassification" in spec.why
    anchors, texts = _pair_list(10)
    got = load_teacher(spec, TeacherSettings(), device="cpu").score(anchors, texts)
    expected = CrossEncoder(str(tmp_path / "hf"), device="cpu").predict(list(zip(anchors, texts, strict=True)), activation_fn=torch.nn.Identity())
    np.testing.assert_allclose(got, expected, atol=2e-5, rtol=1e-5)
    with pytest.raises(ConfigError, match="--teacher-kind cross.*|sequence-classification"):
        check_teacher(str(bert), TeacherSettings(teacher_kind="cross"))  # a bare BertModel: its head would be random
    assert check_teacher(str(bert), TeacherSettings()).kind == "bi"


def test_bi_encoder_scores_are_brute_force_cosines(minilm: str) -> None:
    from anglekit.model.embedder import Embedder

    anchors, texts = _pair_list(16)
    spec = check_teacher(minilm, TeacherSettings())
    assert spec.kind == "bi"
    teacher = load_teacher(spec, TeacherSettings(teacher_batch_size=3), device="cpu")
    got = teacher.score(anchors, texts)
    model = Embedder.from_pretrained(minilm, device="cpu")
    expected = [float(model.encode_query(a, normalize=True) @ model.encode_document(t, normalize=True)) for a, t in zip(anchors, texts, strict=True)]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert teacher.max_length == model.config.max_length == 256 and teacher.describe()["score"] == "cosine"


def test_the_guard_against_a_hand_computation() -> None:
    positive = np.array([0.8, -0.2, 0.0, 2.0])
    negative = np.array([[0.77, 0.74, 0.9], [-0.19, -0.21, -0.5], [0.01, -0.01, 0.0], [1.0, 1.96, np.nan]])
    ratio = guard_masks(positive, negative, "bi", TeacherSettings(teacher_max_ratio=0.95))["teacher_max_ratio"]
    # 0.95 x 0.8 = 0.76: 0.77 and 0.9 dropped; p <= 0: dropped above p itself; 0.95 x 2 = 1.9; nan never dropped
    assert ratio.tolist() == [[True, False, True], [True, False, False], [True, False, False], [False, True, False]]
    margin = guard_masks(positive, negative, "bi", TeacherSettings(teacher_margin=0.05))["teacher_margin"]
    assert margin.tolist() == [[True, False, True], [True, True, False], [True, True, True], [False, True, False]]
    logits = np.array([[1.0, 2.0, -3.0], [-1.0, -1.2, 5.0], [0.0, -0.1, -0.3], [1.9, 0.0, -9.0]])
    cross = guard_masks(positive, logits, "cross", TeacherSettings(teacher_max_ratio=0.9))["teacher_max_ratio"]
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    limits = 0.9 * sig(positive)  # sigmoid(0.8)=0.690 -> 0.621, sigmoid(-0.2)=0.450 -> 0.405, 0.5 -> 0.45, sigmoid(2)=0.881 -> 0.793
    assert cross.tolist() == (sig(logits) > limits[:, None]).tolist()
    assert cross.tolist() == [[True, True, False], [False, False, True], [True, True, False], [True, False, False]]


def _guarded_brute_force(model: Any, teacher: Any, rows: list[dict[str, str]], corpus: list[str], s: MineSettings,
                         t: TeacherSettings) -> dict[tuple[str, str], list[str]]:  # fmt: skip
    """sentence-transformers' selection rules with the teacher guard as one more filter, over every candidate."""
    anchors = list(dict.fromkeys(r["anchor"] for r in rows))
    positives = {a: [r["positive"] for r in rows if r["anchor"] == a] for a in anchors}
    unique = list(dict.fromkeys(corpus + [r["positive"] for r in rows]))
    q = model.encode_query(anchors, 16, normalize=True).astype(np.float64)
    c = model.encode_document(unique, 16, normalize=True).astype(np.float64)
    max_pos = max(len(p) for p in positives.values())
    window = s.window(max_pos, guarded=True)
    width = min(len(unique), window + max_pos + 1)
    span = min(width, window) - s.range_min
    keys = np.random.default_rng(s.seed).random((len(anchors), span))  # --sampling random: the keys select_negatives draws
    out = {}
    for qi, anchor in enumerate(anchors):
        ranked = sorted(range(len(unique)), key=lambda j: (-(c[j] @ q[qi]), j))[:width]
        low = min(teacher.score([anchor] * len(positives[anchor]), positives[anchor]))
        candidates = [unique[j] for j in ranked if unique[j] not in positives[anchor] and unique[j] != anchor]
        scores = teacher.score([anchor] * len(candidates), candidates)
        drop = np.zeros(len(candidates), bool)
        for mask in guard_masks(np.array([low]), scores[None, :], teacher.spec.kind, t).values():
            drop |= mask[0]
        kept = [text for text, d in zip(candidates, drop, strict=True) if not d]
        chosen = kept[:window][s.range_min :][: s.num_negatives]
        if s.sampling == "random":
            available = min(len(kept), window) - s.range_min
            order = np.argsort(np.where(np.arange(span) < available, keys[qi], np.inf), kind="stable")[: s.num_negatives]
            chosen = [kept[s.range_min + int(p)] for p in sorted(order) if p < available]
        if len(chosen) == s.num_negatives:
            out.update({(anchor, p): chosen for p in positives[anchor]})
    return out


@pytest.mark.parametrize(
    ("guard", "sampling"),
    [
        (TeacherSettings(teacher_max_ratio=0.9), "top"),
        (TeacherSettings(teacher_margin=0.1, teacher_max_ratio=0.99), "top"),
        (TeacherSettings(teacher_margin=0.05), "random"),
    ],
    ids=["ratio", "both", "random"],
)
def test_the_guard_in_a_mine_is_a_filter_over_every_candidate(tmp_path: Path, load_bert: Any, cross_dir: Path, guard: TeacherSettings, sampling: str) -> None:
    model = load_bert(pooling="last_avg")
    rows = _pairs(30)
    rng = random.Random(5)
    corpus = [random_sentence(rng, 3, 10) for _ in range(80)]
    settings = MineSettings(num_negatives=3, range_min=1, sampling=sampling, seed=11)
    teacher = load_teacher(check_teacher(str(cross_dir), guard), guard, device="cpu")
    report = mine_hard_negatives(model, _write_jsonl(tmp_path / "pairs.jsonl", rows), tmp_path / "out.jsonl",
                                 corpus=_write_jsonl(tmp_path / "corpus.jsonl", [{"text": t} for t in corpus]), settings=settings,
                                 teacher=teacher, teacher_settings=guard)  # fmt: skip
    expected = _guarded_brute_force(model, teacher, rows, corpus, settings, guard)
    written = _read(report.output)
    assert {(r["anchor"], r["positive"]): [r[f"negative_{j}"] for j in (1, 2, 3)] for r in written} == expected
    dropped = report.summary["teacher"]["guard_dropped"]
    assert dropped["total"] > 0 and report.summary["skipped"]["teacher_guard"] == dropped["total"]
    for r in written:  # the scores written are the teacher's, and pass the guard
        scores = teacher.score([r["anchor"]] * 4, [r["positive"]] + [r[f"negative_{j}"] for j in (1, 2, 3)])
        np.testing.assert_allclose([r["positive_score"]] + [r[f"negative_{j}_score"] for j in (1, 2, 3)], scores, atol=2e-5)
        assert not any(m.any() for m in guard_masks(np.array([scores[0]]), scores[None, 1:], "cross", guard).values())
    assert "guard" in report.text() and "cross-encoder, raw logits" in report.text()


def test_mine_with_a_teacher_equals_mine_then_rescore(tmp_path: Path, load_bert: Any, minilm: str) -> None:
    from anglekit.model.embedder import Embedder

    model = load_bert(pooling="last_avg")
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", _pairs(25))
    settings = MineSettings(num_negatives=2)
    plain = mine_hard_negatives(model, pairs, tmp_path / "plain.jsonl", settings=settings)
    taught = mine_hard_negatives(model, pairs, tmp_path / "taught.jsonl", settings=settings, teacher=minilm)
    rows = _read(plain.output)
    for i, row in enumerate(rows):
        row["doc_id"] = f"d{i}"  # a column of the user's: kept
    _write_jsonl(tmp_path / "plain.jsonl", rows)
    rescored = rescore_mined(tmp_path / "plain.jsonl", tmp_path / "rescored.parquet", minilm)
    import pyarrow.parquet as pq

    again = pq.read_table(rescored.output).to_pylist()
    by_pair = {(r["anchor"], r["positive"]): r for r in _read(taught.output)}
    assert len(again) == len(by_pair) == len(rows) > 0
    names = ["positive_score", "negative_1_score", "negative_2_score"]
    for r in again:
        t = by_pair[(r["anchor"], r["positive"])]
        assert [r["negative_1"], r["negative_2"]] == [t["negative_1"], t["negative_2"]] and r["doc_id"].startswith("d")
        np.testing.assert_allclose([r[n] for n in names], [t[n] for n in names], atol=1e-5)
    teacher = Embedder.from_pretrained(minilm, device="cpu")  # and both are the cosines of the teacher's own vectors
    first = again[0]
    q = teacher.encode_query(first["anchor"], normalize=True)
    assert abs(float(q @ teacher.encode_document(first["negative_2"], normalize=True)) - first["negative_2_score"]) < 1e-5
    s = taught.summary["teacher"]
    assert s["kind"] == "bi" and s["max_length"] == 256 and s["pairs_scored"] > 0 and s["scores"]["positive"]["count"] == len(rows)
    assert taught.summary["score_columns"] == "the teacher's cosines" and "max length 256, the mining model's 128" in taught.text()
    assert rescored.summary["teacher"]["guard_dropped"] == {} and rescored.summary["rows_shortened"] == 0


def test_rescore_guard_moves_negatives_up_and_leaves_out_empty_rows(tmp_path: Path, cross_dir: Path) -> None:
    rng = random.Random(8)
    rows = [{"anchor": random_sentence(rng, 3, 9), "positive": random_sentence(rng, 3, 9), **{f"negative_{j}": random_sentence(rng, 3, 9) for j in (1, 2, 3)}}
            for _ in range(40)]  # fmt: skip
    rows[5]["negative_3"] = None  # a padded row
    mined = _write_jsonl(tmp_path / "mined.jsonl", rows)
    teacher = load_teacher(check_teacher(str(cross_dir), TeacherSettings()), TeacherSettings(), device="cpu")
    guard = TeacherSettings(teacher_margin=0.02)
    report = rescore_mined(mined, tmp_path / "out.jsonl", teacher, settings=guard)
    expected = []
    for r in rows:
        negatives = [r[f"negative_{j}"] for j in (1, 2, 3) if r[f"negative_{j}"]]
        scores = teacher.score([r["anchor"]] * (1 + len(negatives)), [r["positive"], *negatives])
        kept = [(text, float(s)) for text, s in zip(negatives, scores[1:], strict=True) if not s > scores[0] - 0.02]  # one anchor, one positive
        if kept:
            expected.append((r["anchor"], [k[0] for k in kept] + [None] * (3 - len(kept))))
    got = _read(report.output)
    assert [(r["anchor"], [r[f"negative_{j}"] for j in (1, 2, 3)]) for r in got] == expected
    assert report.summary["rows_left_out"] == len(rows) - len(expected)
    assert report.summary["teacher"]["guard_dropped"]["teacher_margin"] > 0 and report.summary["rows_shortened"] > 0
    assert all((r["negative_3"] is None) == (r["negative_3_score"] is None) for r in got)
    again = rescore_mined(report.output, tmp_path / "again.jsonl", teacher)  # its own output reads back (padded rows included)
    assert again.rows == len(got)


def test_bad_teachers_and_files_are_one_line_errors_that_write_nothing(tmp_path: Path, tiny_bert_dir: Path, cross_dir: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from anglekit.cli import main

    rows = _pairs(12)
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", rows)
    mined = _write_jsonl(tmp_path / "mined.jsonl", [{**r, "negative_1": "a dog runs", "negative_2": "the cat"} for r in rows])
    two_labels = _cross_encoder(tmp_path / "two", labels=2)
    empty = tmp_path / "empty"
    empty.mkdir()
    nan_teacher = _cross_encoder(tmp_path / "nan", nan_word=NAN_WORD)
    no_columns = _write_jsonl(tmp_path / "nocols.jsonl", [{"anchor": r["anchor"], "text": r["positive"]} for r in rows])
    no_negatives = _write_jsonl(tmp_path / "noneg.jsonl", rows)
    poisoned = _read(mined)
    poisoned[6]["negative_2"] = f"the {NAN_WORD} dogs"
    poisoned = _write_jsonl(tmp_path / "poisoned.jsonl", poisoned)
    bad_cell = _read(mined)
    bad_cell[3]["negative_1"] = 5
    bad_cell = _write_jsonl(tmp_path / "badcell.jsonl", bad_cell)
    out = tmp_path / "out" / "o.jsonl"
    out.parent.mkdir()
    mine = ["mine", str(tiny_bert_dir), "--input", str(pairs), "--output", str(out), "--num-negatives", "2", "--quiet"]
    cases = [
        (mine + ["--teacher", str(tmp_path / "nope")], ["--teacher", "nope", "not a model directory"]),
        (mine + ["--teacher", str(two_labels)], ["--teacher", "2 output labels", "one label"]),
        (mine + ["--teacher", str(empty)], ["--teacher", "empty"]),
        (mine + ["--teacher", str(tiny_bert_dir), "--teacher-kind", "cross"], ["sequence-classification", "--teacher-kind bi"]),
        (mine + ["--teacher-max-ratio", "0.9"], ["--teacher-max-ratio", "give --teacher"]),
        (["mine", "--rescore", str(poisoned), "--teacher", str(nan_teacher), "--output", str(out)], ["poisoned.jsonl, row 7, field 'negative_2'", "nan"]),
        (["mine", "--rescore", str(no_columns), "--teacher", str(cross_dir), "--output", str(out)], ["nocols.jsonl", "no positive column 'positive'"]),
        (["mine", "--rescore", str(no_negatives), "--teacher", str(cross_dir), "--output", str(out)], ["noneg.jsonl", "no negative column"]),
        (["mine", "--rescore", str(bad_cell), "--teacher", str(cross_dir), "--output", str(out)], ["badcell.jsonl, row 4, field 'negative_1'"]),
        (["mine", "--rescore", str(mined), "--teacher", str(cross_dir), "--output", str(mined)], ["is the --rescore file"]),
        (["mine", str(tiny_bert_dir), "--rescore", str(mined), "--teacher", str(cross_dir), "--output", str(out)], ["MODEL would be ignored"]),
        (["mine", "--rescore", str(mined), "--input", str(pairs), "--range-min", "2", "--teacher", str(cross_dir), "--output", str(out)],
         ["--input, --range-min would be ignored"]),
        (["mine", "--rescore", str(mined), "--output", str(out)], ["--rescore needs --teacher"]),
        (["mine", "--input", str(pairs), "--output", str(out)], ["MODEL required"]),
        (mine + ["--teacher", str(nan_teacher), "--num-negatives", "11", "--corpus", str(_write_jsonl(tmp_path / "c.jsonl", [{"text": f"a {NAN_WORD} b"}]))],
         ["pairs.jsonl, row", "nan"]),
    ]  # fmt: skip
    for argv, needles in cases:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        for needle in needles:
            assert needle in err, (needle, err)
        left = [p.name for p in out.parent.iterdir() if not p.name.endswith(".mine")]
        assert left == [], (argv, left)
    with pytest.raises(DataError, match="row 7"):
        rescore_mined(poisoned, out, str(nan_teacher), device="cpu")


def test_cli_mines_with_a_teacher_and_rescores(tmp_path: Path, tiny_bert_dir: Path, cross_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import main

    pairs = _write_jsonl(tmp_path / "pairs.jsonl", _pairs(20))
    out = tmp_path / "out.jsonl"
    code = main(["mine", str(tiny_bert_dir), "--input", str(pairs), "--output", str(out), "--num-negatives", "2", "--quiet", "--device", "cpu",
                 "--teacher", str(cross_dir), "--teacher-max-ratio", "0.95", "--teacher-batch-size", "4"])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0 and "teacher" in text and "pairs/s" in text and "max length 128" in text
    summary = json.loads((tmp_path / "out.summary.json").read_text())
    assert summary["teacher"]["guard"] == {"teacher_max_ratio": 0.95} and summary["teacher"]["kind"] == "cross"
    assert set(summary["teacher"]["scores"]) == {"positive", "negative", "difference"}
    code = main(["mine", "--rescore", str(out), "--teacher", str(cross_dir), "--output", str(tmp_path / "again.jsonl"), "--device", "cpu"])
    assert code == 0 and "rescored" in capsys.readouterr().out
    first, second = _read(out), _read(tmp_path / "again.jsonl")
    np.testing.assert_allclose([r["negative_1_score"] for r in first], [r["negative_1_score"] for r in second], atol=2e-5)


def test_the_mining_model_as_its_own_teacher_writes_its_own_cosines(tmp_path: Path, load_bert: Any, tiny_bert_dir: Path) -> None:
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", _pairs(20))
    settings = MineSettings(num_negatives=3)
    plain = mine_hard_negatives(load_bert(), pairs, tmp_path / "plain.jsonl", settings=settings)
    taught = mine_hard_negatives(load_bert(), pairs, tmp_path / "taught.jsonl", settings=settings, teacher=str(tiny_bert_dir))
    names = ["positive_score", *[f"negative_{j}_score" for j in (1, 2, 3)]]
    first, second = _read(plain.output), _read(taught.output)
    assert [[r[f"negative_{j}"] for j in (1, 2, 3)] for r in first] == [[r[f"negative_{j}"] for j in (1, 2, 3)] for r in second]
    np.testing.assert_allclose([[r[n] for n in names] for r in second], [[r[n] for n in names] for r in first], atol=1e-5)
    assert taught.summary["teacher"]["dtype"] == "float32" and taught.summary["teacher"]["detected_from"].startswith("no cross-encoder marker")
