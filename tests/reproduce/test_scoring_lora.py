"""A LoRA model is scored with its adapters merged into its weights: the same vectors (to float
rounding) and scores as the unmerged adapters, faster on a CPU; the cell's record says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from anglekit.model.embedder import Embedder
from anglekit.reproduce import make_protocol, scoring
from anglekit.reproduce.cells import make_cell, run_cell
from anglekit.reproduce.tables import build_tables

import helpers

EVALUATION = {"pooling": "last_token", "max_length": 32, "device": "cpu", "prompt": None, "batch_size": 4}
TEXTS = ["a man is playing a guitar", "a woman slices an onion", "the cat sleeps", "two dogs run on the beach in the sun", "hello"]


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory, tiny_llama_dir) -> Path:
    """Adapters with random (non-zero) B matrices on every linear layer of the tiny Llama: merging
    them changes the weights, so a scoring that left them out would embed differently."""
    return helpers.save_random_adapters(tiny_llama_dir, tmp_path_factory.mktemp("adapters") / "model")


def test_a_lora_model_is_scored_merged_with_the_unmerged_vectors(adapter_dir: Path) -> None:
    unmerged = Embedder.from_pretrained(str(adapter_dir), pooling="last_token", max_length=32, device="cpu")
    base = Embedder.from_pretrained(str(unmerged.config.base_model), pooling="last_token", max_length=32, device="cpu")
    assert unmerged.has_lora
    scored = scoring.load_embedder(str(adapter_dir), EVALUATION)
    assert not scored.has_lora
    reference, vectors = unmerged.encode(TEXTS, 4), scored.encode(TEXTS, 4)
    np.testing.assert_allclose(vectors, reference, rtol=1e-5, atol=1e-5)
    assert np.abs(base.encode(TEXTS, 4) - reference).max() > 1e-2  # the adapters matter: merging them in is what matched
    middle_unmerged = Embedder.from_pretrained(str(adapter_dir), pooling="last_token", max_length=32, device="cpu", layer=1)
    np.testing.assert_allclose(
        scoring.load_embedder(str(adapter_dir), EVALUATION, layer=1).encode(TEXTS, 4), middle_unmerged.encode(TEXTS, 4), rtol=1e-5, atol=1e-5
    )


def test_the_scores_of_a_merged_scoring_equal_the_unmerged_ones(adapter_dir: Path, tmp_path: Path) -> None:
    root = helpers.write_stsb_root(tmp_path / "data", seed=3, train=8)
    unmerged = Embedder.from_pretrained(str(adapter_dir), pooling="last_token", max_length=32, device="cpu")
    test = f"{root / 'stsb'}:test"
    merged = scoring.score_pairs(scoring.TextMemo(scoring.load_embedder(str(adapter_dir), EVALUATION), 4), test, None)
    assert merged == pytest.approx(scoring.score_pairs(lambda t: unmerged.encode(t, 4), test, None), abs=1e-6)


def test_a_lora_cell_records_its_merged_scoring_and_a_full_model_cell_does_not(tmp_path: Path, tiny_llama_dir: Path, tiny_bert_dir: Path) -> None:
    root = helpers.write_stsb_root(tmp_path / "data", seed=2, train=16)
    data = {"stsb": str(root / "stsb"), "mrpc": "", "nli": "", "nli-pairs": "", "github": None, "unsup": "", "qnli-train": "", "qnli-test": ""}
    table = build_tables(data, {})["objectives"]
    row = next(r for r in table.rows if r.name == "only cosine")
    lora = make_cell(row, table.tasks[0], 0, make_protocol("cpu", start="smollm2", model=str(tiny_llama_dir), max_steps=1, device="cpu"), str(tiny_llama_dir))
    record = run_cell(lora, tmp_path / "lora", metric=table.metrics[0], data_root=str(root), keep_model=True)
    assert record["status"] == "done" and record["scoring"] == {"lora": "merged"}
    kept = Embedder.from_pretrained(
        record["model_dir"], pooling="last_token", max_length=lora.evaluation["max_length"], device="cpu", prompt=lora.evaluation["prompt"]
    )
    # the record names the model as stored (adapters unmerged: what 'anglekit fingerprint' gives), not the merged floats
    assert kept.has_lora and record["model_fingerprint"] == kept.fingerprint() != kept.merge_lora().fingerprint()
    full = make_cell(row, table.tasks[0], 0, make_protocol("cpu", model=str(tiny_bert_dir), max_steps=1, batch_size=8, device="cpu"), str(tiny_bert_dir))
    assert "scoring" not in run_cell(full, tmp_path / "full", metric=table.metrics[0], data_root=str(root))
