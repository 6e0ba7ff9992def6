"""``anglekit fingerprint MODEL --update INDEX --verify-texts N``: an index built with LoRA adapters
takes the same adapters merged by ``anglekit merge-lora`` (another fingerprint, the same vectors)
once N of its stored texts re-embed to their stored vectors; another model is refused after the
same check; only index.json's model record changes, and bad input exits 2 with nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.cli.fingerprint import MIN_COSINE
from anglekit.errors import ConfigError, ModelMismatchError
from anglekit.index.fingerprints import DEFAULT_MIN_COSINE, adopt_model
from anglekit.index.store import VectorIndex
from anglekit.model.embedder import Embedder

import helpers

DOCS = {"d1": "a man is playing the guitar .", "d2": "the dog runs in the park", "d3": "two kids ride bikes",
        "d4": "a woman is cooking food", "d5": "rain falls on the old city", "d6": "hello"}  # fmt: skip
FP32 = ["--device", "cpu", "--precision", "fp32"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, tiny_llama_dir: Path) -> dict[str, Path]:
    """Adapters, the same adapters merged, and slightly other adapters (B 2% smaller) merged."""
    root = tmp_path_factory.mktemp("adopt")
    adapters = helpers.save_random_adapters(tiny_llama_dir, root / "adapters")
    other = helpers.save_random_adapters(tiny_llama_dir, root / "other-adapters", scale=0.49)
    merged = {}
    for name, folder in (("merged", adapters), ("other", other)):
        Embedder.from_pretrained(str(folder), device="cpu").merge_lora().save_pretrained(root / name)
        merged[name] = root / name
    return {"adapters": adapters, **merged}


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in DOCS.items()), encoding="utf-8")
    return path


@pytest.fixture
def index_dir(tmp_path: Path, models: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> Path:
    corpus = _corpus(tmp_path)
    folder = tmp_path / "ix"
    code, _, err = helpers.run_cli(["index", "build", str(models["adapters"]), "--input", str(corpus), "--output-dir", str(folder), *FP32, "--quiet"], capsys)
    assert code == 0, err
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _search(index_dir: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> Any:
    code, out, err = helpers.run_cli(["search", str(index_dir), "a dog in a park", "cooking", "-k", "3", "--json", *extra], capsys)
    assert code == 0, err
    return json.loads(out)


def test_the_merged_adapters_take_over_the_index_after_the_check(index_dir: Path, models: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    merged = Embedder.from_pretrained(str(models["merged"]), device="cpu", precision="fp32")
    adapters = Embedder.from_pretrained(str(models["adapters"]), device="cpu", precision="fp32")
    assert merged.fingerprint() != adapters.fingerprint()
    hits = _search(index_dir, capsys)
    before = _files(index_dir)
    # without the check: refused, with the way to go on
    code, out, err = helpers.run_cli(["fingerprint", str(models["merged"]), "--update", str(index_dir), *FP32], capsys)
    assert code == 2 and out == "" and "another model's; not overwritten" in err and "--verify-texts N" in err, err
    assert _files(index_dir) == before
    code, out, err = helpers.run_cli(["fingerprint", str(models["merged"]), "--update", str(index_dir), "--verify-texts", "4", *FP32], capsys)
    assert code == 0 and out == merged.fingerprint() + "\n", err
    assert "4 stored texts re-embedded" in err and f"the index now records the model {models['merged']}" in err
    assert float(err.split("lowest cosine ")[1].split(";")[0]) > 1 - 1e-6  # the same vectors, to float32 rounding
    after = _files(index_dir)
    assert {name: data for name, data in after.items() if name != "index.json"} == {name: data for name, data in before.items() if name != "index.json"}
    old, new = json.loads(before["index.json"]), json.loads(after["index.json"])
    assert new["model"]["fingerprint"] == merged.fingerprint() and new["model"]["name"] == str(models["merged"])
    assert new["model"]["path"] == str(models["merged"].resolve()) and new["model"]["dim"] == old["model"]["dim"]
    assert {k: v for k, v in new.items() if k != "model"} == {k: v for k, v in old.items() if k != "model"}
    # the index now loads its new model by itself and finds what it found before; the adapters are another model now
    again = _search(index_dir, capsys)
    assert [[h["id"] for h in q["results"]] for q in again] == [[h["id"] for h in q["results"]] for q in hits]
    scores = [h["score"] for q in again for h in q["results"]]
    assert scores == pytest.approx([h["score"] for q in hits for h in q["results"]], abs=1e-4)
    with pytest.raises(ModelMismatchError):
        VectorIndex.load(index_dir, model=adapters)
    code, _, err = helpers.run_cli(["fingerprint", str(models["merged"]), "--update", str(index_dir), "--verify-texts", "4", *FP32], capsys)
    assert code == 0 and "nothing to do" in err and _files(index_dir) == after


def test_another_model_is_refused_after_the_check_unless_the_threshold_allows_it(
    index_dir: Path, models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(index_dir)
    argv = ["fingerprint", str(models["other"]), "--update", str(index_dir), "--verify-texts", "100", *FP32]
    code, out, err = helpers.run_cli(argv, capsys)
    assert code == 2 and out == "" and "stored texts re-embed below cosine 0.9999" in err and "not overwritten" in err, err
    assert "of 6 stored texts" in err  # N beyond the index's size: every stored text
    assert _files(index_dir) == before
    lowest = float(err.split("(lowest ")[1].split(",")[0])
    assert 0 < lowest < DEFAULT_MIN_COSINE
    code, _, err = helpers.run_cli([*argv, "--min-cosine", f"{lowest - 1e-4:.6f}"], capsys)
    assert code == 0 and f"lowest cosine {lowest:.6f}" in err, err
    assert json.loads((index_dir / "index.json").read_text())["model"]["name"] == str(models["other"])


def test_the_cli_default_is_the_library_s() -> None:
    assert MIN_COSINE == DEFAULT_MIN_COSINE


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--verify-texts", "0"], "--verify-texts: must be"),
        (["--verify-texts", "-2"], "--verify-texts: must be"),
        (["--verify-texts", "2.5"], "expected an integer, got '2.5'"),
        (["--verify-texts", "all"], "expected an integer, got 'all'"),
        (["--verify-texts", "3", "--min-cosine", "0"], "--min-cosine: must be"),
        (["--verify-texts", "3", "--min-cosine", "1.5"], "--min-cosine: must be"),
        (["--verify-texts", "3", "--min-cosine", "nan"], "got nan"),
        (["--verify-texts", "3", "--min-cosine", "high"], "expected a number, got 'high'"),
        (["--min-cosine", "0.9"], "--min-cosine applies with --verify-texts"),
    ],
)
def test_bad_flags_exit_2_and_write_nothing(
    extra: list[str], expected: str, index_dir: Path, models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(index_dir)
    code, out, err = helpers.run_cli(["fingerprint", str(models["merged"]), "--update", str(index_dir), *extra, *FP32], capsys)
    assert code == 2 and out == "" and expected in err, err
    assert _files(index_dir) == before


def test_verify_texts_needs_an_index_that_stores_texts(tmp_path: Path, models: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    merged = str(models["merged"])
    code, out, err = helpers.run_cli(["fingerprint", merged, "--verify-texts", "3", *FP32], capsys)
    assert code == 2 and out == "" and "--verify-texts needs --update INDEX" in err, err
    corpus = _corpus(tmp_path)
    shards, bare = tmp_path / "shards", tmp_path / "bare"
    assert helpers.run_cli(["encode", str(models["adapters"]), "--input", str(corpus), "--output-dir", str(shards), *FP32, "--quiet"], capsys)[0] == 0
    build = ["index", "build", str(models["adapters"]), "--input", str(corpus), "--output-dir", str(bare), "--no-texts", *FP32, "--quiet"]
    assert helpers.run_cli(build, capsys)[0] == 0
    for folder, expected in ((shards, "encode shards store no texts to re-embed"), (bare, "the index stores no texts")):
        before = _files(folder)
        code, out, err = helpers.run_cli(["fingerprint", merged, "--update", str(folder), "--verify-texts", "3", *FP32], capsys)
        assert code == 2 and out == "" and expected in err, err
        assert _files(folder) == before
    with pytest.raises(ConfigError, match="encode shards store no texts"):
        adopt_model(Embedder.from_pretrained(merged, device="cpu"), shards, texts=3)


@pytest.mark.parametrize(("texts", "cosine"), [(0, 0.9), (True, 0.9), ("3", 0.9), (3, 0.0), (3, 1.01), (3, True)])
def test_adopt_model_checks_its_arguments(texts: Any, cosine: Any, index_dir: Path, models: dict[str, Path]) -> None:
    before = _files(index_dir)
    with pytest.raises(ConfigError):
        adopt_model(Embedder.from_pretrained(str(models["merged"]), device="cpu"), index_dir, texts=texts, min_cosine=cosine)
    assert _files(index_dir) == before


def test_a_model_that_embeds_nan_is_refused(index_dir: Path, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    merged = Embedder.from_pretrained(str(models["merged"]), device="cpu", precision="fp32")
    monkeypatch.setattr(merged, "encode", lambda texts, *args, **kwargs: np.full((len(texts), merged.dim), np.nan, np.float32))
    before = _files(index_dir)
    with pytest.raises(ModelMismatchError, match="6 of 6 stored texts re-embed below cosine"):
        adopt_model(merged, index_dir, texts=10)
    assert _files(index_dir) == before
