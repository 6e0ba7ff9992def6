"""VectorIndex: exact search equals brute force; HNSW, int8 and binary recall against exact is
bounded; add/delete by id; save/load round trips; damage and another model are refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError, DataError, ModelMismatchError
from anglekit.index import VectorIndex
from anglekit.index.graph import resolve_backend

DIM = 32
HNSW_BACKENDS = [b for b in ("usearch", "faiss") if __import__("importlib").util.find_spec(b) is not None]


@pytest.fixture(scope="module")
def model(tiny_bert_dir: Path) -> Any:
    from anglekit.model.embedder import Embedder

    return Embedder.from_pretrained(tiny_bert_dir, device="cpu")


def _clustered(n: int, n_queries: int, dim: int = DIM, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Vectors in 40 clusters (as embeddings of a corpus are), queries near them."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((40, dim))
    docs = centers[rng.integers(0, 40, n)] + 0.6 * rng.standard_normal((n, dim))
    queries = centers[rng.integers(0, 40, n_queries)] + 0.6 * rng.standard_normal((n_queries, dim))
    return docs.astype(np.float32), queries.astype(np.float32)


def _brute_force(docs: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    d = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    scores = q.astype(np.float64) @ d.T.astype(np.float64)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


def _recall(ids: list[list[str]], truth: np.ndarray) -> float:
    return float(np.mean([len({int(i) for i in got} & set(row.tolist())) / truth.shape[1] for got, row in zip(ids, truth, strict=False)]))


def _index(model: Any, docs: np.ndarray, **settings: Any) -> VectorIndex:
    index = VectorIndex.create(model, **settings)
    index.add_vectors([str(i) for i in range(len(docs))], docs)
    return index


@pytest.mark.parametrize("k", [1, 10, 57])
def test_exact_search_equals_brute_force(model: Any, k: int) -> None:
    docs, queries = _clustered(3000, 40)
    index = _index(model, docs)
    ids, scores = index.search_vectors(queries, k)
    truth, truth_scores = _brute_force(docs, queries, k)
    assert [[int(i) for i in row] for row in ids] == truth.tolist()
    np.testing.assert_allclose(scores, truth_scores, atol=1e-5)


def test_exact_search_over_blocks_and_query_batches(model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import anglekit.index.quantize as quantize

    monkeypatch.setattr(quantize, "_BLOCK_ROWS", 97)  # many blocks, a ragged last one
    monkeypatch.setattr(quantize, "_QUERY_BATCH", 7)
    docs, queries = _clustered(1000, 30, seed=1)
    ids, _ = _index(model, docs).search_vectors(queries, 10)
    assert [[int(i) for i in row] for row in ids] == _brute_force(docs, queries, 10)[0].tolist()


@pytest.mark.parametrize(
    ("kind", "quantize", "backend", "bound"),
    [("exact", "int8", None, 0.97), ("exact", "binary", None, 0.75)]
    + [("hnsw", q, b, bound) for b in HNSW_BACKENDS for q, bound in (("none", 0.95), ("int8", 0.95), ("binary", 0.7))],
)
def test_recall_at_10_against_exact_is_bounded(model: Any, kind: str, quantize: str, backend: str | None, bound: float) -> None:
    docs, queries = _clustered(4000, 100, dim=64, seed=2)
    truth, _ = _brute_force(docs, queries, 10)
    index = VectorIndex(_record(model, 64), _settings(kind=kind, quantize=quantize, backend=backend))
    index.add_vectors([str(i) for i in range(len(docs))], docs)
    ids, scores = index.search_vectors(queries, 10)
    recall = _recall(ids, truth)
    assert recall >= bound, recall
    # Returned scores are the exact cosines of the returned documents (rescored with float vectors).
    d = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    for row, (got, s) in enumerate(zip(ids, scores, strict=False)):
        np.testing.assert_allclose(s[: len(got)], d[[int(i) for i in got]] @ q[row], atol=1e-5)


def _record(model: Any, dim: int) -> dict[str, Any]:
    from anglekit.index.store import model_record

    return {**model_record(model), "dim": dim}


def _settings(**kwargs: Any) -> Any:
    from anglekit.index.store import IndexSettings

    return IndexSettings(**kwargs)


def test_texts_are_embedded_with_the_document_prompt_and_queries_with_the_query_prompt(load_bert: Any) -> None:
    model = load_bert(query_prompt="query: {text}", document_prompt="passage: {text}")
    texts = ["a man plays the guitar", "the dog runs in the park", "two kids ride bikes", "rain falls on the city"]
    index = VectorIndex.build(model, ["a", "b", "c", "d"], texts)
    expected = model.encode(texts, normalize=True, role="document")
    np.testing.assert_allclose(index.vectors, expected, atol=1e-6)
    hits = index.search("a dog in a park", k=4)
    query = model.encode(["a dog in a park"], normalize=True, role="query")[0]
    order = np.argsort(-(expected @ query), kind="stable")
    assert [h.id for h in hits] == [["a", "b", "c", "d"][i] for i in order]
    np.testing.assert_allclose([h.score for h in hits], (expected @ query)[order], atol=1e-5)
    assert hits[0].text == texts[order[0]]
    assert [len(r) for r in index.search(["dog", "kids"], k=2)] == [2, 2]


@pytest.mark.parametrize(("kind", "quantize"), [("exact", "none"), ("exact", "binary")] + [("hnsw", "int8")] * bool(HNSW_BACKENDS))
def test_delete_by_id_then_add_again(model: Any, kind: str, quantize: str) -> None:
    docs, queries = _clustered(600, 20, seed=3)
    index = _index(model, docs, kind=kind, quantize=quantize)
    index.search_vectors(queries, 10)  # codes and graph exist before the deletion
    gone = [str(i) for i in range(0, 600, 3)]
    assert index.delete(gone) == 200 and len(index) == 400 and "0" not in index and "1" in index
    keep = np.array([i for i in range(600) if i % 3])
    ids, _ = index.search_vectors(queries, 10)
    assert not set().union(*map(set, ids)) & set(gone)
    if kind == "exact" and quantize == "none":
        truth, _ = _brute_force(docs[keep], queries, 10)
        assert [[int(i) for i in row] for row in ids] == keep[truth].tolist()
    with pytest.raises(DataError, match="not in the index"):
        index.delete(["1", "0"])
    assert len(index) == 400 and "1" in index  # nothing removed
    index.add_vectors(["0"], docs[:1])
    assert index.search_vectors(docs[:1], 1)[0] == [["0"]]


def test_bad_input_is_refused_and_changes_nothing(model: Any) -> None:
    index = _index(model, _clustered(10, 1)[0])
    for ids, vectors, match in (
        (["0"], np.ones((1, DIM)), "already in the index"),
        (["x", "x"], np.ones((2, DIM)), "appears twice"),
        (["x"], np.ones((1, DIM + 1)), r"\[n, 32\] matrix"),
        (["x"], np.full((1, DIM), np.nan), "not finite"),
        (["x"], np.zeros((1, DIM)), "all zeros"),
        (["x", "y"], np.ones((1, DIM)), "2 ids for 1 documents"),
        ([None], np.ones((1, DIM)), "expected a string or an integer"),
        ("xy", np.ones((2, DIM)), "list of strings"),
    ):
        with pytest.raises(DataError, match=match):
            index.add_vectors(ids, vectors)
    with pytest.raises(DataError, match="item 2: text is empty"):
        index.add(["p", "q"], ["dog", ""])
    assert len(index) == 10
    for k in (0, -1, 2.5):
        with pytest.raises(ConfigError, match="k must be a positive integer"):
            index.search_vectors(np.ones((1, DIM)), k)  # type: ignore[arg-type]
    with pytest.raises(DataError, match="queries"):
        index.search([])
    for query in ("", "\u200b\u3164", "\ufeff \u2060"):
        with pytest.raises(DataError, match=r"query 2 is blank \(only whitespace or invisible characters\)"):
            index.search(["dog", query])
    with pytest.raises(DataError, match="item 2: text is blank"):
        index.add(["p", "q"], ["dog", "\u115f\u200b"])
    with pytest.raises(ConfigError, match="kind"):
        VectorIndex.create(model, kind="ivf")
    with pytest.raises(ConfigError, match="quantize"):
        VectorIndex.create(model, quantize="int4")
    empty = VectorIndex.create(model)
    assert empty.search_vectors(np.ones((2, DIM)), 5)[0] == [[], []]


@pytest.mark.parametrize(("kind", "quantize"), [("exact", "none"), ("exact", "int8")] + [("hnsw", q) for q in ("none", "binary")] * bool(HNSW_BACKENDS))
def test_save_and_load_round_trip(tmp_path: Path, model: Any, kind: str, quantize: str) -> None:
    docs, queries = _clustered(500, 15, seed=4)
    index = _index(model, docs, kind=kind, quantize=quantize)
    index.delete(["7"])
    before = index.search_vectors(queries, 10)
    index.save(tmp_path / "ix")
    loaded = VectorIndex.load(tmp_path / "ix", verify=True)
    after = loaded.search_vectors(queries, 10)
    assert after[0] == before[0]
    np.testing.assert_allclose(after[1], before[1], atol=1e-6)
    loaded.add_vectors(["new"], docs[7:8])  # a loaded (memory-mapped) index grows and saves again
    (tmp_path / "ix" / ".vectors-000001.npy.x1y2.tmp").write_bytes(b"left by a killed save")
    loaded.save(tmp_path / "ix")
    again = VectorIndex.load(tmp_path / "ix")
    assert len(again) == 500 and again.search_vectors(docs[7:8], 1)[0] == [["new"]]
    files = sorted(p.name for p in (tmp_path / "ix").iterdir())
    assert all("000002" in name for name in files if name != "index.json"), files  # the old generation is gone


def test_damaged_or_incomplete_index_is_refused(tmp_path: Path, model: Any) -> None:
    index = _index(model, _clustered(50, 1)[0], quantize="int8")
    index.save(tmp_path / "ix")
    manifest = json.loads((tmp_path / "ix" / "index.json").read_text())
    vectors = tmp_path / "ix" / manifest["files"]["vectors"]
    data = bytearray(vectors.read_bytes())
    data[-3] ^= 0x55
    vectors.write_bytes(bytes(data))
    with pytest.raises(DataError, match=rf"{manifest['files']['vectors']} does not match the SHA-256"):
        VectorIndex.load(tmp_path / "ix")  # sizes match: only the checksum tells
    assert len(VectorIndex.load(tmp_path / "ix", verify=False)) == 50  # sizes only, when asked
    vectors.write_bytes(bytes(data[:-8]))
    with pytest.raises(DataError, match="truncated or rewritten"):
        VectorIndex.load(tmp_path / "ix")
    (tmp_path / "ix" / manifest["files"]["codes"]).unlink()
    with pytest.raises(DataError, match="is missing"):
        VectorIndex.load(tmp_path / "ix")
    with pytest.raises(DataError, match="not an index folder"):
        VectorIndex.load(tmp_path)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "mine.txt").write_text("x")
    with pytest.raises(ConfigError, match="no index.json"):
        index.save(tmp_path / "other")


def test_another_model_is_refused(tmp_path: Path, model: Any, load_bert: Any, copy_model: Any, tiny_bert_dir: Path) -> None:
    from anglekit.model.embedder import Embedder

    import helpers

    index = VectorIndex.build(model, ["a", "b"], ["a dog", "a cat"])
    index.save(tmp_path / "ix")
    other_weights = Embedder.from_pretrained(helpers.build_tiny_bert(tmp_path / "other", seed=1), device="cpu")
    for other in (other_weights, load_bert(pooling="last_avg"), load_bert(query_prompt="query: {text}")):
        with pytest.raises(ModelMismatchError, match="built with"):
            VectorIndex.load(tmp_path / "ix", model=other)
    assert VectorIndex.load(tmp_path / "ix", model=load_bert()).search("a dog", k=1)[0].id == "a"
    # The recorded folder changed since the build: found when the model is loaded for a query.
    moved = copy_model(tiny_bert_dir, "model-moved")
    manifest = json.loads((tmp_path / "ix" / "index.json").read_text())
    manifest["model"]["path"] = str(moved)
    (tmp_path / "ix" / "index.json").write_text(json.dumps(manifest))
    assert VectorIndex.load(tmp_path / "ix").search("a cat", k=1)[0].id == "b"
    helpers.build_tiny_bert(moved, seed=2)
    with pytest.raises(ModelMismatchError):
        VectorIndex.load(tmp_path / "ix").search("a cat", k=1)


def test_backend_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    import anglekit.index.graph as graph

    monkeypatch.setattr(graph, "_have", lambda name: False)
    with pytest.raises(ConfigError, match="pip install 'anglekit\\[index\\]'"):
        resolve_backend("auto")
    with pytest.raises(ConfigError, match="backend must be one of"):
        resolve_backend("annoy")


def test_a_save_that_dies_before_index_json_leaves_the_old_index(tmp_path: Path, model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import anglekit.index.store as store

    docs, queries = _clustered(300, 5, seed=6)
    index = _index(model, docs, quantize="int8")
    index.save(tmp_path / "ix")
    before = VectorIndex.load(tmp_path / "ix").search_vectors(queries, 5)
    index.delete([str(i) for i in range(100)])

    def die(*args: Any, **kwargs: Any) -> None:
        raise OSError("killed")

    monkeypatch.setattr(store, "atomic_write_json", die)  # every data file of generation 2 is written, index.json is not
    with pytest.raises(OSError, match="killed"):
        index.save(tmp_path / "ix")
    old = VectorIndex.load(tmp_path / "ix", verify=True)
    assert len(old) == 300 and old.search_vectors(queries, 5)[0] == before[0]
    monkeypatch.undo()
    index.save(tmp_path / "ix")
    assert len(VectorIndex.load(tmp_path / "ix", verify=True)) == 200


@pytest.mark.parametrize("part", ["vectors", "labels", "ids", "texts", "codes"])
def test_a_file_corrupted_at_the_same_size_is_named_on_load(tmp_path: Path, model: Any, part: str) -> None:
    """Every data file's SHA-256 is recorded at save and checked at load: one flipped byte, size unchanged."""
    index = _index(model, _clustered(40, 2)[0], quantize="int8")
    index.save(tmp_path / "ix")
    manifest = json.loads((tmp_path / "ix" / "index.json").read_text())
    name = manifest["files"][part]
    recorded = manifest["digests"][name]
    assert recorded["sha256"] == hashlib.sha256((tmp_path / "ix" / name).read_bytes()).hexdigest()  # an independent hash
    path = tmp_path / "ix" / name
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle] = (data[middle] + 1) % 256 if part not in ("ids", "texts") else ord("X" if data[middle] != ord("X") else "Y")
    path.write_bytes(bytes(data))
    assert path.stat().st_size == recorded["bytes"]
    with pytest.raises(DataError, match=rf"ix: {name} does not match the SHA-256 recorded in index.json") as caught:
        VectorIndex.load(tmp_path / "ix")
    assert "rebuild the index or restore this file" in str(caught.value)


def test_an_index_saved_without_checksums_loads_with_a_warning(tmp_path: Path, model: Any, caplog: pytest.LogCaptureFixture) -> None:
    vectors = _clustered(30, 3)[0]
    index = _index(model, vectors)
    index.save(tmp_path / "ix")
    expected = index.search_vectors(vectors[:3], 5)
    manifest_path = tmp_path / "ix" / "index.json"
    manifest = json.loads(manifest_path.read_text())
    for variant in ("no digests", "sizes only"):
        if variant == "no digests":
            old = {k: v for k, v in manifest.items() if k != "digests"}
        else:
            old = {**manifest, "digests": {n: {"bytes": d["bytes"]} for n, d in manifest["digests"].items()}}
        manifest_path.write_text(json.dumps(old))
        caplog.clear()
        with caplog.at_level("WARNING", logger="anglekit.index"):
            again = VectorIndex.load(tmp_path / "ix")
        assert "records no checksum" in caplog.text and manifest["files"]["vectors"] in caplog.text, variant
        got = again.search_vectors(vectors[:3], 5)
        assert got[0] == expected[0] and np.allclose(got[1], expected[1])
    # still: a missing file is an error, and saving again records the checksums (no warning then)
    again.save(tmp_path / "ix")
    caplog.clear()
    with caplog.at_level("WARNING", logger="anglekit.index"):
        VectorIndex.load(tmp_path / "ix")
    assert "records no checksum" not in caplog.text
    assert all("sha256" in d for d in json.loads(manifest_path.read_text())["digests"].values())
    bad = {**json.loads(manifest_path.read_text()), "digests": ["not", "an", "object"]}
    manifest_path.write_text(json.dumps(bad))
    with pytest.raises(DataError, match="digests"):
        VectorIndex.load(tmp_path / "ix")


@pytest.mark.parametrize("backend", HNSW_BACKENDS)
def test_one_build_thread_builds_the_same_graph_every_time(tmp_path: Path, model: Any, backend: str) -> None:
    """build_threads=1 inserts in order: two builds answer alike, and the setting is recorded and
    reloaded; the library's own thread count is left as it was."""
    docs, queries = _clustered(3000, 200, seed=5)
    threads = None
    if backend == "faiss":
        import faiss

        threads = faiss.omp_get_max_threads()
    first = _index(model, docs, kind="hnsw", backend=backend, build_threads=1, connectivity=4, expansion_add=8)
    second = _index(model, docs, kind="hnsw", backend=backend, build_threads=1, connectivity=4, expansion_add=8)
    assert first.search_vectors(queries, 10, expansion_search=10)[0] == second.search_vectors(queries, 10, expansion_search=10)[0]
    if threads is not None:
        assert faiss.omp_get_max_threads() == threads
    first.save(tmp_path / "ix")
    assert json.loads((tmp_path / "ix" / "index.json").read_text())["settings"]["build_threads"] == 1
    assert VectorIndex.load(tmp_path / "ix").settings.build_threads == 1
    # an index written before the setting existed loads with the default, and answers as it did
    manifest = json.loads((tmp_path / "ix" / "index.json").read_text())
    del manifest["settings"]["build_threads"]
    (tmp_path / "ix" / "index.json").write_text(json.dumps(manifest), encoding="utf-8")
    older = VectorIndex.load(tmp_path / "ix")
    assert older.settings.build_threads == 0
    assert older.search_vectors(queries, 10, expansion_search=10)[0] == first.search_vectors(queries, 10, expansion_search=10)[0]


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True, None])
def test_build_threads_must_be_a_count(model: Any, bad: Any) -> None:
    with pytest.raises(ConfigError, match="build_threads"):
        VectorIndex.create(model, kind="hnsw", build_threads=bad)


def test_build_threads_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import main

    with pytest.raises(SystemExit) as parsed:
        main(["index", "build", "m", "--input", "x.jsonl", "--output-dir", str(tmp_path / "a"), "--build-threads", "-1"])
    assert parsed.value.code == 2 and "argument --build-threads: must be >= 0, got -1" in capsys.readouterr().err
    assert main(["index", "build", "m", "--input", "x.jsonl", "--output-dir", str(tmp_path / "b"), "--build-threads", "2"]) == 2
    assert "--build-threads apply to --kind hnsw" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
