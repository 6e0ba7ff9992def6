"""Hard-negative mining: brute force, sentence-transformers' miner, resume, bad input, the CLI."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError, DataError
from anglekit.mining import MineSettings, mine_hard_negatives

from helpers import random_sentence

FLICKR = Path(__file__).resolve().parents[3] / "shared" / "data" / "flickr30k" / "Test"


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _pairs(n: int, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    anchors = list(dict.fromkeys(random_sentence(rng, 3, 10) for _ in range(3 * n)))[:n]
    positives = list(dict.fromkeys(random_sentence(rng, 3, 10) for _ in range(3 * n)))
    positives = [p for p in positives if p not in anchors][:n]
    return [{"anchor": a, "positive": p} for a, p in zip(anchors, positives, strict=False)]


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def brute_force(model: Any, rows: list[dict[str, str]], corpus: list[str], s: MineSettings) -> dict[tuple[str, str], list[str]]:
    """sentence-transformers' rules written out with explicit loops over the full score matrix: the
    pool is the corpus then the positives it lacks; neither the anchor nor its positives are negatives."""
    anchors = list(dict.fromkeys(r["anchor"] for r in rows))
    positives: dict[str, list[str]] = {a: [] for a in anchors}
    for r in rows:
        if r["positive"] not in positives[r["anchor"]]:
            positives[r["anchor"]].append(r["positive"])
    unique = list(dict.fromkeys(corpus + [r["positive"] for r in rows]))
    q = model.encode_query(anchors, 16, normalize=True).astype(np.float64)
    c = model.encode_document(unique, 16, normalize=True).astype(np.float64)
    vec = {t: c[i] for i, t in enumerate(unique)}
    max_pos = max(len(p) for p in positives.values())
    window = s.window(max_pos)
    width = min(len(unique), window + max_pos + 1)
    out: dict[tuple[str, str], list[str]] = {}
    for qi, anchor in enumerate(anchors):
        scores = c @ q[qi]
        ranked = sorted(range(len(unique)), key=lambda j: (-scores[j], j))[:width]
        low = min(float(q[qi] @ vec[p]) for p in positives[anchor])
        kept = []
        for j in ranked:
            score = scores[j]
            if unique[j] in positives[anchor] or unique[j] == anchor:
                continue
            if s.absolute_margin is not None and score + s.absolute_margin > low:
                continue
            if s.relative_margin is not None and score > low - abs(low) * s.relative_margin:
                continue
            if s.max_score is not None and score > s.max_score:
                continue
            if s.min_score is not None and score < s.min_score:
                continue
            kept.append(unique[j])
        chosen = kept[:window][s.range_min :][: s.num_negatives]
        if len(chosen) == s.num_negatives:
            for p in positives[anchor]:
                out[(anchor, p)] = chosen
    return out


@pytest.mark.parametrize(
    "settings",
    [
        MineSettings(num_negatives=3),
        MineSettings(num_negatives=2, range_min=2, relative_margin=0.05),
        MineSettings(num_negatives=4, absolute_margin=0.0, max_score=0.99, range_max=12),
    ],
    ids=["plain", "range-relative", "absolute-max"],
)
def test_exact_mining_equals_brute_force(tmp_path: Path, load_bert: Any, settings: MineSettings) -> None:
    model = load_bert(pooling="last_avg")
    rows = _pairs(40)
    rows += [{"anchor": rows[0]["anchor"], "positive": rows[5]["positive"]}]  # a second positive for one anchor
    rng = random.Random(9)
    extra = [random_sentence(rng, 3, 10) for _ in range(60)] + [rows[3]["positive"], rows[7]["anchor"]] * 2  # repeats, as in real corpora
    corpus = [r["positive"] for r in rows[:25]] + extra + [r["anchor"] for r in rows[10:20]]  # without 15 positives, with 11 anchors
    corpus_file = _write_jsonl(tmp_path / "corpus.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(corpus)])
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", rows)
    report = mine_hard_negatives(model, pairs, tmp_path / "out.jsonl", corpus=corpus_file, settings=settings, shard_size=32)
    expected = brute_force(model, rows, corpus, settings)
    got = {(r["anchor"], r["positive"]): [r[f"negative_{j + 1}"] for j in range(settings.num_negatives)] for r in _read(report.output)}
    assert got == expected
    assert report.rows == len(expected) > 0
    added = {r["positive"] for r in rows} - set(corpus)
    assert len(added) == 15 and report.summary["positives_added_to_pool"] == 15 and report.summary["corpus_rows"] == len(corpus)
    assert report.summary["pool_rows"] == len(corpus) + 15 and "15 positives not in the corpus" in report.text()
    assert any(r["positive"] in added for r in _read(report.output))  # pairs whose positive the corpus lacks are mined too
    for r in _read(report.output):
        scores = [r[f"negative_{j + 1}_score"] for j in range(settings.num_negatives)]
        assert scores == sorted(scores, reverse=True)
        assert r["positive"] not in [r[f"negative_{j + 1}"] for j in range(settings.num_negatives)]
        assert r["anchor"] not in [r[f"negative_{j + 1}"] for j in range(settings.num_negatives)]
    assert report.summary["skipped"].get("anchor", 0) > 0  # the anchors in the corpus were candidates of their own, and left out


@pytest.mark.slow
def test_same_negatives_as_sentence_transformers(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives as st_mine

    from anglekit.model.embedder import Embedder
    from anglekit.model.offline import minilm_dir

    first = (FLICKR / "test.1").read_text(encoding="utf-8").splitlines()[:120]
    second = (FLICKR / "test.2").read_text(encoding="utf-8").splitlines()[:120]
    rows = [{"anchor": a, "positive": p} for a, p in zip(first, second, strict=False)]
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", rows)
    model = Embedder.from_pretrained(minilm_dir(), device="cpu")
    st_model = SentenceTransformer(str(minilm_dir()), device="cpu")
    for settings, options in (
        (MineSettings(num_negatives=3), {}),
        (MineSettings(num_negatives=2, relative_margin=0.05, range_min=1), {"relative_margin": 0.05, "range_min": 1}),
    ):
        out = tmp_path / f"out-{settings.range_min}.jsonl"
        mine_hard_negatives(model, pairs, out, settings=settings, work_dir=tmp_path / "work")
        theirs = st_mine(datasets.Dataset.from_list(rows), st_model, num_negatives=settings.num_negatives, output_format="n-tuple",
                         output_scores=True, verbose=False, **options)  # fmt: skip
        expected = {(r["anchor"], r["positive"]): [r[f"negative_{j + 1}"] for j in range(settings.num_negatives)] for r in theirs}
        mined = _read(out)
        got = {(r["anchor"], r["positive"]): [r[f"negative_{j + 1}"] for j in range(settings.num_negatives)] for r in mined}
        assert got == expected
        their_scores = {(r["anchor"], r["positive"]): r["scores"] for r in theirs}
        for r in mined:
            ours = [r["positive_score"], *(r[f"negative_{j + 1}_score"] for j in range(settings.num_negatives))]
            assert ours == pytest.approx(their_scores[(r["anchor"], r["positive"])], abs=2e-4)


@pytest.mark.slow
def test_same_negatives_as_sentence_transformers_with_a_corpus(tmp_path: Path) -> None:
    """``--corpus`` as sentence-transformers' ``corpus=``: the positives it lacks join the pool, and
    neither an anchor in it nor a positive is a negative. Exact search on both sides (no faiss),
    ``sampling_strategy="top"`` (random sampling draws from other generators), each range, margin,
    score bound and count the same, given explicitly or left to both defaults."""
    datasets = pytest.importorskip("datasets")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives as st_mine

    from anglekit.model.embedder import Embedder
    from anglekit.model.offline import minilm_dir

    captions = [(FLICKR / f"test.{k}").read_text(encoding="utf-8").splitlines() for k in range(1, 5)]
    rows = [{"anchor": a, "positive": p} for a, p in zip(captions[0][:200], captions[1][:200], strict=True)]
    # other captions of the same images, the last 50 positives, 30 anchors and 5 repeated texts: 385 records
    corpus = captions[2][:200] + captions[3][:100] + captions[1][150:200] + captions[0][:30] + captions[2][:5]
    corpus_file = _write_jsonl(tmp_path / "corpus.jsonl", [{"id": f"doc-{i}", "text": t} for i, t in enumerate(corpus)])
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", rows)
    model = Embedder.from_pretrained(minilm_dir(), device="cpu")
    st_model = SentenceTransformer(str(minilm_dir()), device="cpu")
    added = len(dict.fromkeys(r["positive"] for r in rows if r["positive"] not in set(corpus)))
    cases = (
        {"num_negatives": 3},
        {"num_negatives": 2, "relative_margin": 0.05, "range_min": 1},
        {"num_negatives": 4, "absolute_margin": 0.0, "max_score": 0.9, "min_score": 0.1, "range_max": 30},
    )
    for number, options in enumerate(cases):
        out = tmp_path / f"out-{number}.jsonl"
        report = mine_hard_negatives(model, pairs, out, corpus=corpus_file, settings=MineSettings(**options), work_dir=tmp_path / "work")
        theirs = st_mine(datasets.Dataset.from_list(rows), st_model, corpus=corpus, sampling_strategy="top", output_format="n-tuple", output_scores=True,
                         verbose=False, **options)  # fmt: skip
        count = options["num_negatives"]
        expected = {(r["anchor"], r["positive"]): [r[f"negative_{j + 1}"] for j in range(count)] for r in theirs}
        mined = _read(out)
        got = {(r["anchor"], r["positive"]): [r[f"negative_{j + 1}"] for j in range(count)] for r in mined}
        assert got == expected and len(got) > 100
        assert report.summary["positives_added_to_pool"] == added >= 140 and report.summary["skipped"].get("anchor", 0) > 0
        their_scores = {(r["anchor"], r["positive"]): r["scores"] for r in theirs}
        for r in mined:
            ours = [r["positive_score"], *(r[f"negative_{j + 1}_score"] for j in range(count))]
            assert ours == pytest.approx(their_scores[(r["anchor"], r["positive"])], abs=2e-4)


def test_rerun_resumes_and_gives_the_same_output(tmp_path: Path, load_bert: Any) -> None:
    model = load_bert(pooling="last_avg")
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", _pairs(50))
    out = tmp_path / "out.parquet"
    said: list[str] = []
    first = mine_hard_negatives(model, pairs, out, settings=MineSettings(num_negatives=2), shard_size=16, say=said.append)
    content = out.read_bytes()
    work = out.with_name(out.name + ".mine")
    # an interrupted mine: the candidates of one query shard and the outputs are gone
    (work / "candidates" / "cand-000001.npz").unlink()
    for path in (out, first.summary_path, first.histogram_path):
        path.unlink()
    said.clear()
    second = mine_hard_negatives(model, pairs, out, settings=MineSettings(num_negatives=2), shard_size=16, say=said.append)
    assert any("already encoded; reused" in line for line in said)
    assert any("candidates of 3 query shard(s) were already found" in line for line in said)
    assert out.read_bytes() == content and second.rows == first.rows
    import pyarrow.parquet as pq

    table = pq.read_table(out)
    assert table.column_names == ["anchor", "positive", "negative_1", "negative_2", "positive_score", "negative_1_score", "negative_2_score"]
    summary = json.loads(second.summary_path.read_text())
    assert summary["negatives_per_row"]["2"] == second.rows == table.num_rows
    assert second.histogram_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # other pairs in the same work folder: its shards are of other texts, so they are encoded again
    other = _write_jsonl(tmp_path / "other.jsonl", _pairs(30, seed=5))
    said.clear()
    third = mine_hard_negatives(model, other, out, settings=MineSettings(num_negatives=2), shard_size=16, say=said.append)
    assert any("encoding again" in line for line in said) and third.summary["pairs"] == 30


def test_output_is_read_by_the_triplet_reader(tmp_path: Path, load_bert: Any) -> None:
    from anglekit.data.triplets import read_triplets

    pairs = _write_jsonl(tmp_path / "pairs.jsonl", _pairs(30))
    report = mine_hard_negatives(load_bert(), pairs, tmp_path / "out.jsonl", settings=MineSettings(num_negatives=1))
    data = read_triplets(report.output)
    assert data.anchor == [r["anchor"] for r in _read(report.output)]
    assert len(data.anchor) == report.rows


def test_random_sampling_is_seeded_and_inside_the_window(tmp_path: Path, load_bert: Any) -> None:
    model = load_bert(pooling="last_avg")
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", _pairs(40))
    top = MineSettings(num_negatives=8, range_max=8)
    window = {
        (r["anchor"], r["positive"]): {r[f"negative_{j + 1}"] for j in range(8)}
        for r in _read(mine_hard_negatives(model, pairs, tmp_path / "top.jsonl", settings=top).output)
    }
    runs = []
    for name in ("a", "b"):
        s = MineSettings(num_negatives=3, range_max=8, sampling="random", seed=7)
        runs.append(_read(mine_hard_negatives(model, pairs, tmp_path / f"{name}.jsonl", settings=s, work_dir=tmp_path / "w").output))
    assert runs[0] == runs[1]
    picked = [tuple(r[f"negative_{j + 1}"] for j in range(3)) for r in runs[0]]
    assert len(set(picked)) > 1
    for r in runs[0]:
        assert {r[f"negative_{j + 1}"] for j in range(3)} <= window[(r["anchor"], r["positive"])]


def test_a_copy_of_the_positive_is_never_its_negative(tmp_path: Path, load_bert: Any) -> None:
    rows = _pairs(20)
    corpus = [r["positive"] for r in rows] * 2 + [r["anchor"] for r in rows]  # every positive twice, under two ids
    corpus_file = _write_jsonl(tmp_path / "corpus.jsonl", [{"id": str(i), "text": t} for i, t in enumerate(corpus)])
    report = mine_hard_negatives(load_bert(), _write_jsonl(tmp_path / "p.jsonl", rows), tmp_path / "o.jsonl", corpus=corpus_file,
                                 settings=MineSettings(num_negatives=5))  # fmt: skip
    for r in _read(report.output):
        negatives = [r[f"negative_{j + 1}"] for j in range(5)]
        assert r["positive"] not in negatives and len(set(negatives)) == 5
    assert report.summary["corpus_repeated_texts"] == 20 and report.summary["skipped"]["positive"] > 0


@pytest.mark.parametrize("kind", ["hnsw", "int8"])
def test_approximate_indexes_find_nearly_the_exact_negatives(tmp_path: Path, load_bert: Any, kind: str) -> None:
    model = load_bert(pooling="last_avg")
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", _pairs(60))
    exact = _read(mine_hard_negatives(model, pairs, tmp_path / "e.jsonl", settings=MineSettings(num_negatives=3)).output)
    approx = _read(mine_hard_negatives(model, pairs, tmp_path / "a.jsonl", settings=MineSettings(num_negatives=3, index=kind)).output)
    texts = [[r[f"negative_{j + 1}"] for j in range(3)] for r in exact]
    same = sum(t == [r[f"negative_{j + 1}"] for j in range(3)] for t, r in zip(texts, approx, strict=False))
    assert len(approx) == len(exact) and same >= 0.8 * len(exact)


def _no_outputs(folder: Path) -> bool:
    return not any(p.name.startswith("out") and p.is_file() for p in folder.iterdir())


def test_bad_input_is_one_clear_error_and_writes_nothing(tmp_path: Path, load_bert: Any) -> None:
    model = load_bert()
    rows = _pairs(10)
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", rows)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(DataError, match="empty"):
        mine_hard_negatives(model, pairs, tmp_path / "out.jsonl", corpus=empty)
    duplicated = _write_jsonl(tmp_path / "dup.jsonl", [{"id": "x" if i in (2, 5) else str(i), "text": r["positive"]} for i, r in enumerate(rows)])
    with pytest.raises(DataError, match=r"duplicate id 'x' \(records 3 and 6\)"):
        mine_hard_negatives(model, pairs, tmp_path / "out.jsonl", corpus=duplicated)
    with pytest.raises(DataError, match=r"no .anchor, positive. pair got 2 negatives \(negatives found per pair: min 0, median 0, max 0; ") as caught:
        mine_hard_negatives(model, pairs, tmp_path / "out.jsonl", settings=MineSettings(num_negatives=2, max_score=-1.0))
    # The message is one short line besides the file's path (the temporary folder's length varies).
    assert len(str(caught.value).replace(str(pairs), "")) < 400 and "\n" not in str(caught.value)
    (tmp_path / "no-pairs.jsonl").write_text("")
    with pytest.raises(DataError, match="no-pairs.jsonl"):
        mine_hard_negatives(model, tmp_path / "no-pairs.jsonl", tmp_path / "out.jsonl")
    typed = _write_jsonl(tmp_path / "typed.jsonl", [{"anchor": "a b", "positive": 5}])
    with pytest.raises(DataError, match=r"typed.jsonl, row 1, field 'positive'"):
        mine_hard_negatives(model, typed, tmp_path / "out.jsonl")
    with pytest.raises(ConfigError, match=r"must end in \.jsonl or \.parquet"):
        mine_hard_negatives(model, pairs, tmp_path / "out.csv")
    assert _no_outputs(tmp_path)
    with pytest.raises(ConfigError, match="range_min .5. must be below range_max .5."):
        MineSettings(range_min=5, range_max=5)
    with pytest.raises(ConfigError, match="cannot take 4 negatives from ranks 2..5"):
        MineSettings(num_negatives=4, range_min=2, range_max=5)
    with pytest.raises(ConfigError, match="num_negatives"):
        MineSettings(num_negatives=0)
    with pytest.raises(ConfigError, match="sampling"):
        MineSettings(sampling="best")
    with pytest.raises(ConfigError, match="relative_margin"):
        MineSettings(relative_margin="0.1")  # type: ignore[arg-type]


def test_cli_mines_and_fails_in_one_line(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import main

    pairs = _write_jsonl(tmp_path / "pairs.jsonl", _pairs(20))
    out = tmp_path / "out.jsonl"
    code = main(["mine", str(tiny_bert_dir), "--input", str(pairs), "--output", str(out), "--num-negatives", "2", "--range-min", "1",
                 "--device", "cpu", "--quiet"])  # fmt: skip
    assert code == 0
    assert "pairs got 2 negatives" in capsys.readouterr().out
    assert set(_read(out)[0]) == {"anchor", "positive", "negative_1", "negative_2", "positive_score", "negative_1_score", "negative_2_score"}
    code = main(["mine", str(tiny_bert_dir), "--input", str(pairs), "--output", str(tmp_path / "out2.jsonl"), "--corpus", str(tmp_path / "nope.jsonl"),
                 "--device", "cpu", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "nope.jsonl" in err
    for flags in (["--num-negatives", "0"], ["--relative-margin", "abc"], ["--sampling", "best"], ["--index", "ivf"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["mine", str(tiny_bert_dir), "--input", str(pairs), "--output", str(out), *flags])
        assert exit_info.value.code == 2
    assert not (tmp_path / "out2.jsonl").exists()


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from anglekit.cli import main

    code = main(["mine", *args, "--device", "cpu", "--quiet"])
    return code, capsys.readouterr().err.strip()


def test_a_corpus_without_some_positives_mines_them_too(tmp_path: Path, load_bert: Any) -> None:
    rows = _pairs(30)
    rng = random.Random(4)
    corpus = [random_sentence(rng, 3, 10) for _ in range(40)] + [r["positive"] for r in rows[:10]]  # 20 positives missing
    corpus_file = _write_jsonl(tmp_path / "corpus.jsonl", [{"id": f"c{i}", "text": t} for i, t in enumerate(corpus)])
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", rows)
    report = mine_hard_negatives(load_bert(), pairs, tmp_path / "out.jsonl", corpus=corpus_file, settings=MineSettings(num_negatives=4))
    assert report.rows == 30 and report.summary["positives_added_to_pool"] == 20 and report.summary["pool_rows"] == 70
    mined = _read(report.output)
    pool = set(corpus) | {r["positive"] for r in rows}
    negatives = {r[f"negative_{j + 1}"] for r in mined for j in range(4)}
    assert negatives <= pool and negatives & {r["positive"] for r in rows[10:]}  # an added positive is another anchor's negative
    for r in mined:
        assert r["positive"] not in [r[f"negative_{j + 1}"] for j in range(4)]


def test_an_output_that_is_an_input_is_refused_before_anything(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _pairs(12)
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", [dict(r, note="kept") for r in rows])
    corpus = _write_jsonl(tmp_path / "corpus.jsonl", [{"id": str(i), "text": r["positive"]} for i, r in enumerate(rows)])
    before = {p.name: p.read_bytes() for p in (pairs, corpus)}
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.jsonl").symlink_to(pairs)
    os.link(corpus, tmp_path / "hard.jsonl")
    cases = [
        (["--input", str(pairs), "--output", str(pairs)], "--output .*pairs.jsonl is the --input file"),
        (["--input", str(pairs), "--output", str(tmp_path / "sub" / ".." / "pairs.jsonl")], "is the --input file"),
        (["--input", str(pairs), "--output", str(tmp_path / "link.jsonl")], r"link.jsonl is the --input file .*pairs.jsonl"),
        (["--input", str(tmp_path / "link.jsonl"), "--output", str(pairs)], "is the --input file"),
        (["--input", str(pairs), "--corpus", str(corpus), "--output", str(corpus)], "is the --corpus file"),
        (["--input", str(pairs), "--corpus", str(corpus), "--output", str(tmp_path / "hard.jsonl")], "is the --corpus file"),
        (["--input", str(pairs), "--corpus", str(corpus), "--output", str(tmp_path / "corpus.parquet")], None),  # another file: runs
        (["--input", str(tmp_path / "m.summary.json"), "--output", str(tmp_path / "m.jsonl")], "the summary beside --output.* is the --input file"),
        (["--input", str(tmp_path / "queries.jsonl"), "--output", str(tmp_path / "q.jsonl"), "--work-dir", str(tmp_path)], "writes queries.jsonl there"),
        (
            [
                "--input",
                str(pairs),
                "--corpus",
                str(tmp_path / "corpus" / "c.jsonl"),
                "--output",
                str(tmp_path / "q.jsonl"),
                "--work-dir",
                str(tmp_path / "sub" / ".."),
            ],
            r"may replace its folder corpus/, which holds the --corpus file",
        ),
        (["--input", str(pairs), "--output", str(tmp_path / "q.jsonl"), "--corpus-column", "text"], "give --corpus or leave them out"),
    ]
    (tmp_path / "corpus").mkdir()
    shutil.copy(corpus, tmp_path / "corpus" / "c.jsonl")
    (tmp_path / "m.summary.json").write_text(pairs.read_text())
    (tmp_path / "queries.jsonl").write_text(pairs.read_text())
    for args, message in cases:
        listing = sorted(p.name for p in tmp_path.iterdir())
        code, err = _cli([str(tiny_bert_dir), *args, "--num-negatives", "2"], capsys)
        if message is None:
            assert code == 0, err
            continue
        assert code == 2 and err.count("\n") == 0 and re.search(message, err), (args, err)
        assert err.startswith("anglekit mine: error: ") and "Traceback" not in err
        assert sorted(p.name for p in tmp_path.iterdir()) == listing  # nothing created: no work folder, no output
    assert {p.name: p.read_bytes() for p in (pairs, corpus)} == before
    assert _read(tmp_path / "queries.jsonl")[0]["note"] == "kept"
    with pytest.raises(ConfigError, match="is the --input file"):
        mine_hard_negatives(str(tiny_bert_dir), pairs, pairs)


def test_a_missing_or_unreadable_corpus_creates_nothing(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", _pairs(10))
    (tmp_path / "folder").mkdir()
    (tmp_path / "corpus.json").write_text("[]")
    for corpus, message in (("nope.jsonl", r"nope.jsonl: --corpus: no such file"), ("folder", "--corpus is a folder"), ("corpus.json", "JSON Lines")):
        listing = sorted(p.name for p in tmp_path.iterdir())
        code, err = _cli([str(tiny_bert_dir), "--input", str(pairs), "--output", str(tmp_path / "out.jsonl"), "--corpus", str(tmp_path / corpus)], capsys)
        assert code == 2 and err.count("\n") == 0 and re.search(message, err), err
        assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no out.jsonl.mine work folder
    with pytest.raises(DataError, match="no such file"):
        mine_hard_negatives(str(tiny_bert_dir), pairs, tmp_path / "out.jsonl", corpus=tmp_path / "nope.jsonl", work_dir=tmp_path / "w")
    assert not (tmp_path / "w").exists()


def test_more_negatives_than_the_pool_is_one_short_line(tmp_path: Path, tiny_bert_dir: Path, load_bert: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _pairs(20)
    rows.append({"anchor": rows[0]["anchor"], "positive": rows[1]["positive"]})  # anchor 0: two positives, so one candidate fewer
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", rows)
    code, err = _cli([str(tiny_bert_dir), "--input", str(pairs), "--output", str(tmp_path / "out.jsonl"), "--num-negatives", "100000"], capsys)
    assert code == 2 and err.count("\n") == 0 and len(err) < 400, err
    assert "--num-negatives 100000: no anchor has that many candidates; the pool holds 20 distinct texts" in err
    assert "number min 18, median 19, max 19; ask at most 19" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.jsonl"]
    # 19: every anchor but the one with two positives can get them; that one's pairs are left out, and said so
    said: list[str] = []
    report = mine_hard_negatives(load_bert(), pairs, tmp_path / "out.jsonl", settings=MineSettings(num_negatives=19), say=said.append)
    assert "1 of 20 anchors have fewer than 19 candidates (min 18, median 18, max 18); their pairs are left out" in said
    assert report.rows == 19 and report.summary["negatives_per_row"] == {"18": 2, "19": 19}
    assert rows[0]["anchor"] not in {r["anchor"] for r in _read(report.output)}
