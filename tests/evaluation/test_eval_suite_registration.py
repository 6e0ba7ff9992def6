"""A new evaluation suite is one module and one call: a tiny suite registered from this file alone
runs through ``anglekit eval --suite`` (its options through ``--option``) and through the Python API."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError, DuplicateNameError
from anglekit.evaluation import suites

import helpers

NAME = "probe-similarity"


def evaluate_probe(encode: Callable[..., np.ndarray], data_root: str, *, sentence: str = "a man is playing a guitar .") -> dict[str, Any]:
    """The cosine of a sentence and its upper-cased copy, and the norm of the first vector."""
    vectors = np.asarray(encode([sentence, sentence.upper()]), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    cosine = float(vectors[0] @ vectors[1] / (norms[0] * norms[1]))
    return {
        "suite": NAME,
        "columns": ["cosine", "norm"],
        "scores": {"cosine": round(cosine, 6), "norm": round(float(norms[0]), 6)},
        "details": {"sentence": sentence},
    }


def probe_markdown(result: dict[str, Any], *, title: str = "model") -> str:
    scores = result["scores"]
    return f"## Probe similarity\n\n| model | cosine | norm |\n|---|---|---|\n| {title} | {scores['cosine']:.6f} | {scores['norm']:.6f} |\n"


@pytest.fixture
def registered() -> Iterator[None]:
    """The suite registered with one call; the registry as it was after the test."""
    suites.register_suite(NAME, evaluate_probe, probe_markdown)
    yield
    suites.unregister_suite(NAME)


def _expected(tiny_bert_dir: Path, sentence: str) -> dict[str, float]:
    from anglekit.model.embedder import Embedder

    vectors = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode([sentence, sentence.upper()]).astype(np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    return {"cosine": float(vectors[0] @ vectors[1] / (norms[0] * norms[1])), "norm": float(norms[0])}


def test_one_call_registers_a_suite_that_anglekit_eval_runs(registered: None, tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert suites.SUITES[-1] == NAME and suites.suite_options(NAME) == {"sentence": "a man is playing a guitar ."}
    sentence = "two dogs run in the park ."
    out = tmp_path / "eval"
    argv = ["eval", str(tiny_bert_dir), "--suite", NAME, "--option", f"{NAME}.sentence={sentence}", "--data-root", str(tmp_path),
            "--output-dir", str(out), "--no-cache", "--device", "cpu", "--quiet"]  # fmt: skip
    code, stdout, err = helpers.run_cli(argv, capsys)
    assert code == 0, err
    result = json.loads((out / f"{NAME}.json").read_text(encoding="utf-8"))
    expected = _expected(tiny_bert_dir, sentence)
    assert result["scores"] == pytest.approx(expected, abs=1e-5)
    assert result["options"] == {"sentence": sentence} and result["details"] == {"sentence": sentence}
    assert "## Probe similarity" in stdout and f"{result['scores']['cosine']:.6f}" in stdout  # the scores are reported
    assert (out / f"{NAME}.md").read_text(encoding="utf-8").startswith("## Probe similarity")


def test_the_python_api_runs_a_registered_suite(registered: None, tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.model.embedder import Embedder

    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    result = suites.run_suite(NAME, model, data_root=tmp_path, progress=False)
    assert result["scores"] == pytest.approx(_expected(tiny_bert_dir, "a man is playing a guitar ."), abs=1e-5)
    several = suites.run_suites([NAME], model, data_root=tmp_path, out_dir=tmp_path / "out", progress=False, options={NAME: {"sentence": "a cat"}})
    assert several[NAME]["scores"] == pytest.approx(_expected(tiny_bert_dir, "a cat"), abs=1e-5)
    assert (tmp_path / "out" / f"{NAME}.json").is_file() and (tmp_path / "out" / f"{NAME}.md").is_file()
    with pytest.raises(ConfigError, match="option probe-similarity.sentence: expected a string"):
        suites.run_suite(NAME, model, data_root=tmp_path, sentence=3)


def test_registration_is_checked(registered: None) -> None:
    with pytest.raises(DuplicateNameError, match="evaluation suite 'probe-similarity' is registered already"):
        suites.register_suite(NAME, evaluate_probe, probe_markdown)
    for bad in ("", "all", "a.b"):
        with pytest.raises(ConfigError, match="suite name"):
            suites.register_suite(bad, evaluate_probe, probe_markdown)


def test_the_registry_is_restored_after_a_test() -> None:
    assert NAME not in suites.SUITES and suites.SUITES == ("sts", "non-transfer", "transfer", "retrieval", "geometry")
