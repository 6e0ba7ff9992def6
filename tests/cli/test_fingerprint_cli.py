"""``anglekit fingerprint MODEL [--update PATH]`` and fingerprints already on disk: a legacy one this
machine reproduces is accepted (and re-recorded), one from another machine is refused with the
command that re-records it, which rewrites that one field only (no vector recomputed) and never a
current fingerprint of another model; bad paths and metadata exit 2 and write nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from anglekit.errors import ModelMismatchError
from anglekit.model.embedder import Embedder

import helpers

DOCS = {"d1": "a man is playing the guitar .", "d2": "the dog runs in the park", "d3": "two kids ride bikes",
        "d4": "a woman is cooking food", "d5": "rain falls on the old city"}  # fmt: skip
OTHER_MACHINE = "0123456789abcdef"
"""A legacy fingerprint this machine does not reproduce (as one recorded elsewhere would be)."""


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return helpers.run_cli(argv, capsys)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in DOCS.items()), encoding="utf-8")
    return path


@pytest.fixture
def model(tiny_bert_dir: Path) -> Any:
    return Embedder.from_pretrained(tiny_bert_dir, device="cpu")


@pytest.fixture
def index_dir(tmp_path: Path, tiny_bert_dir: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    folder = tmp_path / "ix"
    code, _, err = _run(["index", "build", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(folder), "--device", "cpu", "--quiet"], capsys)
    assert code == 0, err
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _edit(path: Path, dotted: str, value: Any) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    parent = data
    *head, last = dotted.split(".")
    for key in head:
        parent = parent[key]
    parent[last] = value
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return data


def test_prints_the_model_s_fingerprint(tiny_bert_dir: Path, model: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["fingerprint", str(tiny_bert_dir)], capsys)
    assert code == 0 and out == model.fingerprint() + "\n", err
    code, out, _ = _run(["fingerprint", str(tiny_bert_dir), "--prompt", "query: {text}", "--precision", "bf16"], capsys)
    assert code == 0 and out.strip() == Embedder.from_pretrained(tiny_bert_dir, device="cpu", prompt="query: {text}").fingerprint() != model.fingerprint()


def test_a_legacy_fingerprint_this_machine_reproduces_is_accepted_and_re_recorded(index_dir: Path, model: Any) -> None:
    from anglekit.index.store import VectorIndex

    _edit(index_dir / "index.json", "model.fingerprint", model.legacy_fingerprint())
    index = VectorIndex.load(index_dir, model=model)
    assert index.search(["a dog"], k=1)[0][0].id == VectorIndex.build(model, list(DOCS), list(DOCS.values())).search(["a dog"], k=1)[0][0].id
    index.save(index_dir)
    assert json.loads((index_dir / "index.json").read_text())["model"]["fingerprint"] == model.fingerprint()


def test_another_machine_s_legacy_fingerprint_is_refused_then_updated_without_recomputing(
    index_dir: Path, tiny_bert_dir: Path, model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _, expected, _ = _run(["search", str(index_dir), "a dog", "kids", "--json"], capsys)
    old = _edit(index_dir / "index.json", "model.fingerprint", OTHER_MACHINE)
    before = _files(index_dir)
    code, out, err = _run(["search", str(index_dir), "a dog"], capsys)
    assert code == 2 and out == "" and f"anglekit fingerprint MODEL --update {index_dir}" in err and "older scheme" in err
    assert len(err.strip().splitlines()) == 1

    code, out, err = _run(["fingerprint", str(tiny_bert_dir), "--update", str(index_dir)], capsys)
    assert code == 0 and out == model.fingerprint() + "\n", err
    assert f"{OTHER_MACHINE} -> {model.fingerprint()} in index.json" in err and "no vector recomputed" in err
    after = _files(index_dir)
    assert {name for name in before if before[name] != after[name]} == {"index.json"} and set(after) == set(before)
    new = json.loads(after["index.json"])
    assert new["model"].pop("fingerprint") == model.fingerprint()
    old["model"].pop("fingerprint")
    assert new == old  # every other field as it was
    code, out, err = _run(["search", str(index_dir), "a dog", "kids", "--json"], capsys)
    assert code == 0 and out == expected, err
    code, out, err = _run(["fingerprint", str(tiny_bert_dir), "--update", str(index_dir)], capsys)
    assert code == 0 and "nothing to do" in err and _files(index_dir) == after


def test_a_current_fingerprint_of_another_model_is_never_overwritten(index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = helpers.build_tiny_bert(tmp_path / "other", seed=1)
    before = _files(index_dir)
    code, out, err = _run(["fingerprint", str(other), "--update", str(index_dir)], capsys)
    assert code == 2 and out == "" and "another model's; not overwritten" in err and _files(index_dir) == before


def test_update_checks_the_recorded_settings_and_dimension(index_dir: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit(index_dir / "index.json", "model.fingerprint", OTHER_MACHINE)
    before = _files(index_dir)
    code, _, err = _run(["fingerprint", str(tiny_bert_dir), "--update", str(index_dir), "--prompt", "query: {text}"], capsys)
    assert code == 2 and "other embedding settings" in err and "prompt (recorded None, the model's 'query: {text}')" in err
    assert _files(index_dir) == before
    _edit(index_dir / "index.json", "model.dim", 16)
    before = _files(index_dir)
    code, _, err = _run(["fingerprint", str(tiny_bert_dir), "--update", str(index_dir)], capsys)
    assert code == 2 and "records dimension 16, the model's is 32" in err and _files(index_dir) == before


def test_shards_legacy_fingerprints_resume_and_update(
    tmp_path: Path, tiny_bert_dir: Path, corpus: Path, model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = tmp_path / "shards"
    encode = ["encode", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(shards), "--shard-size", "2",
              "--device", "cpu", "--quiet"]  # fmt: skip
    assert _run(encode, capsys)[0] == 0
    manifest = shards / "manifest.json"
    vectors = (shards / "shard-000000.npy").read_bytes()
    # reproduced here: the resume goes on and records the current scheme
    _edit(manifest, "model_fingerprint", model.legacy_fingerprint())
    (shards / "shard-000002.json").unlink()  # one shard to redo: the model is loaded and checked
    code, _, err = _run(encode, capsys)
    assert code == 0 and json.loads(manifest.read_text())["model_fingerprint"] == model.fingerprint(), err
    # recorded elsewhere: refused with the command, which fixes it
    _edit(manifest, "model_fingerprint", OTHER_MACHINE)
    (shards / "shard-000002.json").unlink()
    code, _, err = _run(encode, capsys)
    assert code == 2 and "model_fingerprint" in err and f"anglekit fingerprint MODEL --update {shards}" in err
    old = json.loads(manifest.read_text())
    code, out, err = _run(["fingerprint", str(tiny_bert_dir), "--update", str(shards)], capsys)
    assert code == 0 and out.strip() == model.fingerprint(), err
    new = json.loads(manifest.read_text())
    assert new.pop("model_fingerprint") == model.fingerprint() and old.pop("model_fingerprint") == OTHER_MACHINE and new == old
    assert (shards / "shard-000000.npy").read_bytes() == vectors
    code, _, err = _run(encode, capsys)
    assert code == 0, err
    code, out, err = _run(["index", "build", str(tiny_bert_dir), "--input", str(shards), "--output-dir", str(tmp_path / "ix"), "--quiet"], capsys)
    assert code == 0 and "indexed 5 documents" in out, err


def _fake_export(folder: Path, model: Any, fingerprint: str, info_file: str = "onnx_config.json", model_file: str = "model.onnx") -> Path:
    folder.mkdir(parents=True)
    (folder / model_file).write_text("x")
    model.config.save(folder)
    (folder / info_file).write_text(
        json.dumps({"quantize": "int8", "hidden_size": model.dim, "source_fingerprint": fingerprint, "check": {"min_cosine": 0.99}}, indent=2, sort_keys=True)
        + "\n"
    )
    return folder


def test_export_folders_are_updated_and_then_picked(tmp_path: Path, tiny_bert_dir: Path, model: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.model.int8_exports import int8_exports

    root = tmp_path / "model"
    reproduced = _fake_export(root / "a-ov", model, model.legacy_fingerprint(), "openvino_config.json", "openvino_model.xml")
    elsewhere = _fake_export(root / "b-onnx", model, OTHER_MACHINE)
    assert [e.path for e in int8_exports(root, model)] == [reproduced]  # a legacy fingerprint reproduced here counts
    before = json.loads((elsewhere / "onnx_config.json").read_text())
    code, out, err = _run(["fingerprint", str(tiny_bert_dir), "--update", str(elsewhere)], capsys)
    assert code == 0 and "in onnx_config.json" in err, err
    after = json.loads((elsewhere / "onnx_config.json").read_text())
    assert after.pop("source_fingerprint") == model.fingerprint() and before.pop("source_fingerprint") == OTHER_MACHINE and after == before
    assert [e.path for e in int8_exports(root, model)] == [elsewhere, reproduced]
    with pytest.raises(ModelMismatchError):  # the library call refuses another model's current fingerprint too
        from anglekit.index.fingerprints import update_fingerprint

        update_fingerprint(Embedder.from_pretrained(helpers.build_tiny_bert(tmp_path / "other", seed=1), device="cpu"), elsewhere)


def _bad_index_json(folder: Path) -> str:
    folder.mkdir()
    (folder / "index.json").write_text('{"format": "anglekit-index", ')
    return "unreadable index.json"


def _bad_fingerprint_type(folder: Path) -> str:
    folder.mkdir()
    (folder / "onnx_config.json").write_text(json.dumps({"source_fingerprint": 42, "hidden_size": 32}))
    return "field 'source_fingerprint': expected str"


def _not_an_object(folder: Path) -> str:
    folder.mkdir()
    (folder / "openvino_config.json").write_text("[1, 2]")
    return "expected a JSON object"


def _no_settings(folder: Path) -> str:
    folder.mkdir()
    (folder / "onnx_config.json").write_text(json.dumps({"source_fingerprint": OTHER_MACHINE, "hidden_size": 32}))
    return "no anglekit_config.json"


def _shards_without_settings(folder: Path) -> str:
    folder.mkdir()
    (folder / "manifest.json").write_text(
        json.dumps({"format": "anglekit-shards", "version": 1, "shard_size": 2, "shard_format": "npy", "model_fingerprint": OTHER_MACHINE, "dim": 32})
    )
    return "field 'embedder_config': expected dict"


def _empty(folder: Path) -> str:
    folder.mkdir()
    return "none of an index folder"


def _a_file(folder: Path) -> str:
    folder.write_text("{}")
    return "a file; give the folder"


USAGE = {"_empty", "_a_file"}
"""No index, shards or export at the path: the command is wrong (exit 2); the others are one with
bad metadata: the data is wrong (exit 1)."""


@pytest.mark.parametrize("make", [_bad_index_json, _bad_fingerprint_type, _not_an_object, _no_settings, _shards_without_settings, _empty, _a_file])
def test_bad_update_paths_exit_1_or_2_and_write_nothing(make: Any, tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "target"
    expected = make(target)
    before = _files(target) if target.is_dir() else target.read_bytes()
    code, out, err = _run(["fingerprint", str(tiny_bert_dir), "--update", str(target)], capsys)
    assert code == (2 if make.__name__ in USAGE else 1), err
    assert out == "" and expected in err and str(target) in err and len(err.strip().splitlines()) == 1, err
    assert (_files(target) if target.is_dir() else target.read_bytes()) == before


def test_a_missing_update_path_exits_2(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["fingerprint", str(tiny_bert_dir), "--update", str(tmp_path / "nowhere")], capsys)
    assert code == 2 and out == "" and "nowhere: no such folder" in err and not (tmp_path / "nowhere").exists()
