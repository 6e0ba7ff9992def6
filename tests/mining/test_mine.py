"""Hard-negative mining: brute force, sentence-transformers' miner, resume, bad input, the CLI."""

from __future__ import annotations

import json
import random
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
    """sentence-transformers' rules written out with explicit loops over the full score matrix."""
    anchors = list(dict.fromkeys(r["anchor"] for r in rows))
    positives: dict[str, list[str]] = {a: [] for a in anchors}
    for r in rows:
        if r["positive"] not in positives[r["anchor"]]:
            positives[r["anchor"]].append(r["positive"])
    unique = list(dict.fromkeys(corpus))
    q = model.encode_query(anchors, 16, normalize=True).astype(np.float64)
    c = model.encode_document(unique, 16, normalize=True).astype(np.float64)
    vec = {t: c[i] for i, t in enumerate(unique)}
    max_pos = max(len(p) for p in positives.values())
    window = s.window(max_pos)
    width = min(len(unique), window + max_pos)
    out: dict[tuple[str, str], list[str]] = {}
    for qi, anchor in enumerate(anchors):
        scores = c @ q[qi]
        ranked = sorted(range(len(unique)), key=lambda j: (-scores[j], j))[:width]
        low = min(float(q[qi] @ vec[p]) for p in positives[anchor])
        kept = []
        for j in ranked:
            score = scores[j]
            if unique[j] in positives[anchor]:
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
    corpus = [r["positive"] for r in rows] + extra
    corpus_file = _write_jsonl(tmp_path / "corpus.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(corpus)])
    pairs = _write_jsonl(tmp_path / "pairs.jsonl", rows)
    report = mine_hard_negatives(model, pairs, tmp_path / "out.jsonl", corpus=corpus_file, settings=settings, shard_size=32)
    expected = brute_force(model, rows, corpus, settings)
    got = {(r["anchor"], r["positive"]): [r[f"negative_{j + 1}"] for j in range(settings.num_negatives)] for r in _read(report.output)}
    assert got == expected
    assert report.rows == len(expected) > 0
    for r in _read(report.output):
        scores = [r[f"negative_{j + 1}_score"] for j in range(settings.num_negatives)]
        assert scores == sorted(scores, reverse=True)
        assert r["positive"] not in [r[f"negative_{j + 1}"] for j in range(settings.num_negatives)]


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
    partial = _write_jsonl(tmp_path / "partial.jsonl", [{"id": str(i), "text": r["positive"]} for i, r in enumerate(rows[:-1])])
    with pytest.raises(DataError, match=r"pairs.jsonl, row 10, field 'positive': positive .* is not in the corpus"):
        mine_hard_negatives(model, pairs, tmp_path / "out.jsonl", corpus=partial)
    duplicated = _write_jsonl(tmp_path / "dup.jsonl", [{"id": "x" if i in (2, 5) else str(i), "text": r["positive"]} for i, r in enumerate(rows)])
    with pytest.raises(DataError, match=r"duplicate id 'x' \(records 3 and 6\)"):
        mine_hard_negatives(model, pairs, tmp_path / "out.jsonl", corpus=duplicated)
    with pytest.raises(DataError, match="no .anchor, positive. pair got 2 negatives"):
        mine_hard_negatives(model, pairs, tmp_path / "out.jsonl", settings=MineSettings(num_negatives=2, max_score=-1.0))
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
