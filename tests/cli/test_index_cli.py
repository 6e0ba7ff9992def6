"""``anglekit index build`` and ``anglekit search``: results equal the Python API's brute force, the
index's own model embeds the queries, bad input exits 2 and leaves nothing behind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import helpers

DOCS = {"d1": "a man is playing the guitar .", "d2": "the dog runs in the park", "d3": "two kids ride bikes",
        "d4": "a woman is cooking food", "d5": "rain falls on the old city"}  # fmt: skip


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in DOCS.items()), encoding="utf-8")
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return helpers.run_cli(argv, capsys)


@pytest.mark.parametrize(("kind", "quantize"), [("exact", "none"), ("exact", "int8"), ("hnsw", "binary")])
def test_build_then_search_equals_brute_force(
    tmp_path: Path, tiny_bert_dir: Path, corpus: Path, kind: str, quantize: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from anglekit.model.embedder import Embedder

    index = tmp_path / "ix"
    code, out, err = _run(["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(index),
                           "--kind", kind, "--quantize", quantize, "--batch-size", "2", "--quiet"], capsys)  # fmt: skip
    assert code == 0, err
    assert f"indexed 5 documents (32-d, {kind}" in out
    manifest = json.loads((index / "index.json").read_text())
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    assert manifest["model"]["fingerprint"] == model.fingerprint() and manifest["model"]["path"] == str(tiny_bert_dir.resolve())
    assert manifest["settings"]["kind"] == kind and manifest["settings"]["quantize"] == quantize and manifest["count"] == 5

    code, out, err = _run(["search", str(index), "a dog in the park", "kids on bikes", "-k", "3", "--json"], capsys)
    assert code == 0, err
    results = json.loads(out)
    docs = model.encode_document(list(DOCS.values()), normalize=True)  # no document prompt: the general one
    for entry, query in zip(results, ["a dog in the park", "kids on bikes"], strict=False):
        scores = docs @ model.encode_query([query], normalize=True)[0]
        order = np.argsort(-scores, kind="stable")[:3]
        assert entry["query"] == query
        assert [r["id"] for r in entry["results"]] == [list(DOCS)[i] for i in order]
        np.testing.assert_allclose([r["score"] for r in entry["results"]], scores[order], atol=1e-5)
        assert [r["rank"] for r in entry["results"]] == [1, 2, 3] and entry["results"][0]["text"] == DOCS[entry["results"][0]["id"]]
    code, out, _ = _run(["search", str(index), "a dog", "-k", "2"], capsys)
    assert code == 0 and out.startswith("query: a dog\n") and len(out.strip().splitlines()) == 3


def test_index_from_encode_shards(tmp_path: Path, tiny_bert_dir: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shards, index = tmp_path / "shards", tmp_path / "ix"
    prompts = ["--prompts", "query=query: ", "--prompts", "document=passage: "]
    # Shards without the document prompt do not fit an index of a model that has one.
    assert _run(["encode", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(tmp_path / "plain"), "--quiet", *prompts], capsys)[0] == 0
    code, _, err = _run(["index", "build", str(tiny_bert_dir), "--input", str(tmp_path / "plain"), "--output-dir", str(index), "--quiet", *prompts], capsys)
    assert code == 2 and "encode with --role document" in err and not index.exists()
    assert _run(["encode", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(shards), "--shard-size", "2", "--role", "document",
                 "--quiet", *prompts], capsys)[0] == 0  # fmt: skip
    code, out, err = _run(["index", "build", str(tiny_bert_dir), "--input", str(shards), "--output-dir", str(index), "--quiet", *prompts], capsys)
    assert code == 0 and "indexed 5 documents" in out, err
    direct = tmp_path / "direct"
    assert _run(["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(direct), "--quiet", *prompts], capsys)[0] == 0
    _, from_shards, _ = _run(["search", str(index), "a dog", "--json"], capsys)
    _, from_corpus, _ = _run(["search", str(direct), "a dog", "--json"], capsys)
    strip = lambda payload: [[(r["id"], round(r["score"], 5)) for r in e["results"]] for e in json.loads(payload)]  # noqa: E731
    assert strip(from_shards) == strip(from_corpus)
    # Shards of another model are refused.
    other = helpers.build_tiny_bert(tmp_path / "other-model", seed=1)
    code, _, err = _run(["index", "build", str(other), "--input", str(shards), "--output-dir", str(tmp_path / "ix2"), "--quiet"], capsys)
    assert code == 2 and "encoded by" in err and "fingerprint" in err and not (tmp_path / "ix2").exists()


def test_search_with_another_model_exits_2(tmp_path: Path, tiny_bert_dir: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = tmp_path / "ix"
    assert _run(["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(index), "--quiet"], capsys)[0] == 0
    other = helpers.build_tiny_bert(tmp_path / "other-model", seed=1)
    code, out, err = _run(["search", str(index), "a dog", "--model", str(other)], capsys)
    assert code == 2 and out == "" and "this index was built with" in err and "fingerprint" in err
    code, _, err = _run(["search", str(index), "a dog", "--model", str(tiny_bert_dir), "--device", "cpu"], capsys)
    assert code == 0, err


@pytest.mark.parametrize(
    ("content", "match"),
    [(b'{"id": "a", "text": "dog"}\n{"id": "a", "text": "cat"}\n', "c.jsonl: duplicate id 'a' (record 2)"),
     (b'{"id": "a", "text": "dog"}\n{"id": "b", "text": "  "}\n', "row 2, field 'text': text is blank"),
     (b'{"id": "a", "text": "dog"}\n{"id": 2.5, "text": "cat"}\n', "row 2, field 'id': id must be a string or an integer"),
     (b"", "empty")],
)  # fmt: skip
def test_bad_corpus_exits_1_and_writes_no_index(tmp_path: Path, tiny_bert_dir: Path, content: bytes, match: str, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(content)
    code, out, err = _run(["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(tmp_path / "ix"), "--quiet"], capsys)
    assert code == 1 and match in err and "Traceback" not in err, err
    assert not (tmp_path / "ix").exists()


def test_existing_index_needs_overwrite_and_bad_flags(tmp_path: Path, tiny_bert_dir: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(tmp_path / "ix"), "--quiet"]
    assert _run(argv, capsys)[0] == 0
    code, _, err = _run(argv, capsys)
    assert code == 2 and "--overwrite" in err
    code, out, err = _run([*argv, "--overwrite", "--quantize", "int8"], capsys)
    assert code == 0 and "quantize int8" in out, err
    assert json.loads((tmp_path / "ix" / "index.json").read_text())["settings"]["quantize"] == "int8"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    code, out, err = _run([*argv[:-2], str(mine), "--quiet"], capsys)
    assert code == 2 and "holds files but no index.json" in err and out == ""
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    for extra, message in ((["--backend", "faiss"], "--backend applies to --kind hnsw"), (["--connectivity", "8"], "apply to --kind hnsw"),
                           (["--quantize", "int4"], "invalid choice"), (["--rescore-multiplier", "0"], "positive integer")):  # fmt: skip
        code, _, err = _run([*argv, "--overwrite", *extra], capsys)
        assert code == 2 and message in err, (extra, err)
    for argv2, message in ((["search", str(tmp_path / "nope"), "q"], "not an index folder"), (["search", str(tmp_path / "ix"), "q", "-k", "0"], "positive integer"),
                           (["search", str(tmp_path / "ix"), "   "], "query 1 is blank")):  # fmt: skip
        code, _, err = _run(argv2, capsys)
        assert code == 2 and message in err, (argv2, err)


def test_search_of_an_index_corrupted_at_the_same_size_exits_1_naming_the_file(
    tmp_path: Path, tiny_bert_dir: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "ix"
    code, _, err = _run(["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(index), "--quiet"], capsys)
    assert code == 0, err
    name = json.loads((index / "index.json").read_text())["files"]["vectors"]
    data = bytearray((index / name).read_bytes())
    data[-5] ^= 0x40  # a float of the last vector changes; the size does not
    (index / name).write_bytes(bytes(data))
    code, out, err = _run(["search", str(index), "a dog", "-k", "2"], capsys)
    assert code == 1 and out == "" and err.count("\n") == 1 and name in err and "SHA-256" in err, err


def test_overwrite_never_deletes_the_corpus_or_the_model_inside_the_index_folder(
    tmp_path: Path, tiny_bert_dir: Path, corpus: Path, capsys: pytest.CaptureFixture[str], copy_model: Any
) -> None:
    index = tmp_path / "ix"
    code, _, err = _run(["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(index), "--quiet"], capsys)
    assert code == 0, err
    inner = index / "corpus.jsonl"
    inner.write_bytes(corpus.read_bytes())
    code, _, err = _run(["index", "build", str(tiny_bert_dir), "--input", str(inner), "--output-dir", str(index), "--overwrite", "--quiet"], capsys)
    assert code == 2 and "would delete --input" in err and inner.is_file() and (index / "index.json").is_file(), err
    model = copy_model(tiny_bert_dir, "ix/model")
    link = tmp_path / "ix-link"
    link.symlink_to(index, target_is_directory=True)
    code, _, err = _run(["index", "build", str(model), "--input", str(corpus), "--output-dir", str(link), "--overwrite", "--quiet"], capsys)
    assert code == 2 and "would delete the model" in err and (model / "config.json").is_file(), err
    code, _, err = _run(["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(index), "--overwrite", "--quiet"], capsys)
    assert code == 0, err  # input and model outside it: replaced as before
