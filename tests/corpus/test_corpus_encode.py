"""Sharded encoding: shards equal Embedder.encode, a rerun reuses finished shards, damage is found,
splits and workers cover the corpus exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.corpus import EncodeRequest, encode_corpus, open_shards
from anglekit.errors import ConfigError, DataError, OutputError

import helpers


def _corpus(path: Path, n: int) -> list[str]:
    import random

    rng = random.Random(3)
    texts = [helpers.random_sentence(rng) for _ in range(n)]
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return texts


@pytest.fixture
def model(load_bert: Any) -> Any:
    return load_bert()


def test_shards_hold_the_vectors_of_embedder_encode(tmp_path: Path, model: Any) -> None:
    texts = _corpus(tmp_path / "c.txt", 23)
    report = encode_corpus(model, EncodeRequest(tmp_path / "c.txt", tmp_path / "out", shard_size=5, batch_size=4))
    assert (report.rows, report.shards, report.encoded, report.reused, report.dim) == (23, 5, 5, 0, 32)
    ids, vectors = open_shards(tmp_path / "out").load()
    assert ids == [str(i) for i in range(1, 24)]
    np.testing.assert_allclose(vectors, model.encode(texts), atol=1e-5, rtol=0)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["rows"] == 23 and manifest["shards"] == 5 and manifest["model_fingerprint"] == model.fingerprint()


def test_a_rerun_keeps_finished_shards_and_redoes_damaged_ones(tmp_path: Path, model: Any) -> None:
    _corpus(tmp_path / "c.txt", 20)
    out = tmp_path / "out"
    encode_corpus(model, EncodeRequest(tmp_path / "c.txt", out, shard_size=5))
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    report = encode_corpus(model, EncodeRequest(tmp_path / "c.txt", out, shard_size=5))
    assert (report.encoded, report.reused) == (0, 4)
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()} == before

    # Damage: a flipped byte (same size), a truncated file, a deleted one.
    npy = out / "shard-000001.npy"
    data = bytearray(npy.read_bytes())
    data[-1] ^= 0xFF
    npy.write_bytes(bytes(data))
    (out / "shard-000002.ids.json").write_text("[]")
    (out / "shard-000003.npy").unlink()
    with pytest.raises(DataError) as info:
        open_shards(out)
    message = str(info.value)
    assert "3 shard(s) missing or corrupt" in message
    assert "shard 1: shard-000001.npy does not match the SHA-256" in message
    assert "shard 2: shard-000002.ids.json has 2 bytes" in message and "shard 3: shard-000003.npy is missing" in message
    with pytest.raises(DataError, match="shard 0: missing"):
        (out / "shard-000000.json").unlink()
        open_shards(out)
    report = encode_corpus(model, EncodeRequest(tmp_path / "c.txt", out, shard_size=5))
    assert (report.encoded, report.reused) == (4, 0)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {name: content for name, (content, _) in before.items()}


def test_a_folder_of_another_encode_is_refused(tmp_path: Path, model: Any, load_bert: Any) -> None:
    _corpus(tmp_path / "c.txt", 8)
    encode_corpus(model, EncodeRequest(tmp_path / "c.txt", tmp_path / "out", shard_size=4))
    with pytest.raises(ConfigError, match="differs in: shard_size"):
        encode_corpus(model, EncodeRequest(tmp_path / "c.txt", tmp_path / "out", shard_size=3))
    with pytest.raises(ConfigError, match="model_fingerprint"):
        encode_corpus(load_bert(pooling="last_avg"), EncodeRequest(tmp_path / "c.txt", tmp_path / "out", shard_size=4))
    _corpus(tmp_path / "c.txt", 9)
    with pytest.raises(ConfigError, match="input"):
        encode_corpus(model, EncodeRequest(tmp_path / "c.txt", tmp_path / "out", shard_size=4))
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="no manifest.json"):
        encode_corpus(model, EncodeRequest(tmp_path / "c.txt", other))
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_splits_cover_the_corpus_once(tmp_path: Path, model: Any) -> None:
    texts = _corpus(tmp_path / "c.txt", 17)
    out = tmp_path / "out"
    first = encode_corpus(model, EncodeRequest(tmp_path / "c.txt", out, shard_size=3, num_shards=2, shard_id=0))
    assert first.encoded == 3  # shards 0, 2, 4 of 6
    with pytest.raises(DataError, match="shard 1: missing"):
        open_shards(out)
    assert open_shards(out, allow_partial=True).rows == 9
    second = encode_corpus(model, EncodeRequest(tmp_path / "c.txt", out, shard_size=3, num_shards=2, shard_id=1))
    assert second.encoded == 3
    ids, vectors = open_shards(out).load()
    assert ids == [str(i) for i in range(1, 18)]
    np.testing.assert_allclose(vectors, model.encode(texts), atol=1e-5, rtol=0)


def test_parquet_shards_with_ids(tmp_path: Path, model: Any) -> None:
    import pyarrow.parquet as pq

    rows = [{"id": f"doc-{i}", "text": t} for i, t in enumerate(["dog", "a cat sits", "two kids", "rain today", "red car"])]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    encode_corpus(model, EncodeRequest(corpus, tmp_path / "out", shard_size=2, shard_format="parquet", normalize=True))
    table = pq.read_table(tmp_path / "out" / "shard-000000.parquet")
    assert table.column_names == ["id", "embedding"] and table.column("id").to_pylist() == ["doc-0", "doc-1"]
    ids, vectors = open_shards(tmp_path / "out").load()
    assert ids == [r["id"] for r in rows]
    np.testing.assert_allclose(vectors, model.encode([r["text"] for r in rows], normalize=True), atol=1e-5, rtol=0)


def test_workers_split_the_shards_between_processes(tmp_path: Path, tiny_bert_dir: Path, model: Any) -> None:
    texts = _corpus(tmp_path / "c.txt", 14)
    report = encode_corpus(str(tiny_bert_dir), EncodeRequest(tmp_path / "c.txt", tmp_path / "out", shard_size=3, workers=2, model_kwargs={"device": "cpu"}))
    assert (report.shards, report.encoded) == (5, 5)
    ids, vectors = open_shards(tmp_path / "out").load()
    assert ids == [str(i) for i in range(1, 15)]
    np.testing.assert_allclose(vectors, model.encode(texts), atol=1e-5, rtol=0)


def test_a_bad_record_fails_with_its_row_and_keeps_the_shards_before_it(tmp_path: Path, model: Any) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("dog\ncat\ncow\nhen\n\nfox\n")
    with pytest.raises(DataError, match="row 5"):
        encode_corpus(model, EncodeRequest(corpus, tmp_path / "out", shard_size=2))
    assert open_shards(tmp_path / "out", allow_partial=True).rows == 4
    with pytest.raises(DataError, match="not finished"):
        open_shards(tmp_path / "out")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"shard_size": 0}, "shard_size"), ({"shard_id": 2, "num_shards": 2}, "below num_shards"), ({"shard_format": "csv"}, "shard format"),
     ({"role": "passage"}, "role"), ({"workers": 2}, "model's name")],
)  # fmt: skip
def test_bad_arguments_are_refused_before_any_work(tmp_path: Path, model: Any, kwargs: dict[str, Any], match: str) -> None:
    _corpus(tmp_path / "c.txt", 3)
    with pytest.raises(ConfigError, match=match):
        encode_corpus(model, EncodeRequest(tmp_path / "c.txt", tmp_path / "out", **kwargs))
    assert not (tmp_path / "out").exists()


def test_a_request_of_another_type_is_refused(tmp_path: Path, model: Any) -> None:
    """The parameters come in one EncodeRequest; loose arguments are refused before any work."""
    _corpus(tmp_path / "c.txt", 3)
    with pytest.raises(ConfigError, match="encode_corpus takes an EncodeRequest, got PosixPath"):
        encode_corpus(model, tmp_path / "c.txt")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_corpus(model, tmp_path / "c.txt", tmp_path / "out", shard_size=3)  # type: ignore[call-arg]
    assert not (tmp_path / "out").exists()
