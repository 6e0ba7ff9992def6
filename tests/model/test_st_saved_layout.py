"""Every folder save_pretrained writes is a sentence-transformers folder (issue 28): it embeds in
sentence-transformers exactly like in anglekit, or sentence-transformers refuses it."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError
from anglekit.model.embedder import Embedder
from anglekit.model.st_layout import REFUSAL_README, ST_FILES

st = pytest.importorskip("sentence_transformers")

TEXTS = ["A man is playing a guitar.", "wow!", "the quick brown fox jumps over the lazy dog " * 6, "Two dogs run."]


def _st(folder: Path, method: str) -> np.ndarray:
    model = st.SentenceTransformer(str(folder), device="cpu")
    return np.asarray(getattr(model, method)(TEXTS, batch_size=3, convert_to_numpy=True), dtype=np.float64)


def _ours(model: Any, method: str) -> np.ndarray:
    return np.asarray(getattr(model, method)(TEXTS, batch_size=3), dtype=np.float64)


@pytest.mark.parametrize("pooling", ["cls", "last_avg", "last_max"])
@pytest.mark.parametrize("normalize", [False, True])
def test_saved_encoder_embeds_identically_in_sentence_transformers(tiny_bert_dir: Path, tmp_path: Path, pooling: str, normalize: bool) -> None:
    model = Embedder.from_pretrained(
        tiny_bert_dir, device="cpu", dtype="float32", pooling=pooling, normalize=normalize, max_length=12,
        prompt="any: {text}", query_prompt="query: {text}",
    )  # fmt: skip
    folder = model.save_pretrained(tmp_path / "saved")
    assert json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"] == 12
    for method in ("encode", "encode_query", "encode_document"):
        ours, theirs = _ours(model, method), _st(folder, method)
        assert theirs.shape == ours.shape
        np.testing.assert_allclose(theirs, ours, atol=1e-5, err_msg=method)
    # anglekit reads the folder back as the same model (both configs agree)
    again = Embedder.from_pretrained(folder, device="cpu", dtype="float32")
    np.testing.assert_allclose(_ours(again, "encode_query"), _ours(model, "encode_query"), atol=1e-6)


def test_prompts_are_exact_not_just_close(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """The prompt matters: without it sentence-transformers' vectors would differ (the test can fail)."""
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="float32", query_prompt="query: {text}")
    folder = model.save_pretrained(tmp_path / "saved")
    assert not np.allclose(_st(folder, "encode_query"), _st(folder, "encode"), atol=1e-3)
    np.testing.assert_allclose(_st(folder, "encode_query"), _ours(model, "encode_query"), atol=1e-5)


def test_left_padded_decoder_with_last_token_pooling(tiny_llama_dir: Path, tmp_path: Path) -> None:
    model = Embedder.from_pretrained(tiny_llama_dir, device="cpu", dtype="float32", padding_side="left", normalize=True, max_length=16)
    assert model.config.pooling == "last_token" and model.tokenizer.padding_side == "left"
    folder = model.save_pretrained(tmp_path / "saved")
    np.testing.assert_allclose(_st(folder, "encode"), _ours(model, "encode"), atol=1e-5)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"pooling": "cls_avg"}, "cls_avg"),
        ({"pooling": "first_last_avg"}, "first_last_avg"),
        ({"layer": 1}, "layer 1"),
        ({"long_text": "chunk-mean"}, "chunk-mean"),
        ({"prompt": 'Summarize "{text}" in one word:'}, "not a plain prefix"),
        ({"truncate_dim": 8, "normalize": True}, "truncate_dim 8"),
    ],
)
def test_settings_sentence_transformers_cannot_express_make_it_refuse(
    tiny_bert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, settings: dict[str, Any], named: str
) -> None:
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="float32", **settings)
    with caplog.at_level(logging.WARNING, logger="anglekit.model.embedder"):
        folder = model.save_pretrained(tmp_path / "saved")
    warnings = [r.getMessage() for r in caplog.records if "sentence-transformers will refuse" in r.getMessage()]
    assert len(warnings) == 1 and named in warnings[0]
    assert named in (folder / REFUSAL_README).read_text()
    assert named in (folder / "README.md").read_text()
    with pytest.raises(Exception) as raised:  # sentence-transformers 6.x cannot import the module
        st.SentenceTransformer(str(folder), device="cpu")
    assert "anglekit_only" in str(raised.value) or isinstance(raised.value, ImportError)
    again = Embedder.from_pretrained(folder, device="cpu", dtype="float32")  # anglekit still loads it exactly
    np.testing.assert_allclose(_ours(again, "encode"), _ours(model, "encode"), atol=1e-6)


def test_bidirectional_decoder_is_refused(tiny_llama_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = Embedder.from_pretrained(tiny_llama_dir, device="cpu", dtype="float32", bidirectional=True)
    with caplog.at_level(logging.WARNING, logger="anglekit.model.embedder"):
        folder = model.save_pretrained(tmp_path / "saved")
    assert any("bidirectional" in r.getMessage() for r in caplog.records)
    with pytest.raises(Exception, match="anglekit_only|NotExpressible|import"):
        st.SentenceTransformer(str(folder), device="cpu")


@pytest.mark.parametrize(
    ("path", "changes", "named"),
    [
        ("1_Pooling/config.json", {"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}, "'last_avg' in modules.json"),
        ("sentence_bert_config.json", {"max_seq_length": 7}, "max_length: 7"),
        ("config_sentence_transformers.json", {"prompts": {"query": "other: ", "document": ""}}, "'other: {text}'"),
    ],
)
def test_disagreeing_configs_are_refused_with_both_values(tiny_bert_dir: Path, tmp_path: Path, path: str, changes: dict[str, Any], named: str) -> None:
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu", pooling="cls", max_length=12, query_prompt="query: {text}")
    folder = model.save_pretrained(tmp_path / "saved")
    file = folder / path
    data = json.loads(file.read_text())
    data.update(changes)
    file.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="disagree") as raised:
        Embedder.from_pretrained(folder, device="cpu")
    message = str(raised.value)
    assert named in message and "anglekit_config.json" in message


def test_folder_of_the_old_layout_loads_exactly_as_before(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """Folders of earlier anglekit versions had only anglekit_config.json: built here by removing the
    sentence-transformers files (cls pooling, which sentence-transformers' mean fallback would miss)."""
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="float32", pooling="cls", prompt="any: {text}", max_length=10)
    folder = model.save_pretrained(tmp_path / "old")
    for name in ST_FILES:
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    assert not (folder / "modules.json").exists() and (folder / "anglekit_config.json").exists()
    again = Embedder.from_pretrained(folder, device="cpu", dtype="float32")
    assert again.config == model.config
    np.testing.assert_allclose(_ours(again, "encode"), _ours(model, "encode"), atol=1e-6)


def test_lora_adapter_folder_loads_in_sentence_transformers_and_peft(tiny_bert_dir: Path, tmp_path: Path) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModel

    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="float32", pooling="cls", normalize=True)
    base_vectors = _ours(model, "encode")
    model.add_lora(rank=4)
    with torch.no_grad():  # adapters that change the vectors, so that loading them is visible
        for name, parameter in model.backbone.named_parameters():
            if "lora_B" in name:
                parameter.normal_(generator=torch.Generator().manual_seed(0))
    ours = _ours(model, "encode")
    assert not np.allclose(ours, base_vectors, atol=1e-3)
    folder = model.save_pretrained(tmp_path / "adapters")
    assert (folder / "adapter_config.json").exists() and not (folder / "config.json").exists()
    np.testing.assert_allclose(_st(folder, "encode"), ours, atol=1e-5)
    np.testing.assert_allclose(_ours(Embedder.from_pretrained(folder, device="cpu", dtype="float32"), "encode"), ours, atol=1e-6)
    peft_model = PeftModel.from_pretrained(AutoModel.from_pretrained(tiny_bert_dir), str(folder)).eval()
    batch = model.tokenize(TEXTS)
    with torch.no_grad():
        cls = peft_model(**batch).last_hidden_state[:, 0]
    np.testing.assert_allclose(torch.nn.functional.normalize(cls, dim=-1).numpy(), ours, atol=1e-5)


def test_the_folder_train_writes_embeds_identically(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    config = TrainConfig.from_dict({
        "model": str(tiny_bert_dir), "train_data": str(pair_file), "output_dir": str(tmp_path / "run"), "max_steps": 2,
        "batch_size": 4, "device": "cpu", "quiet": True, "pooling": "cls", "max_length": 12, "objective": "cosine",
    })  # fmt: skip
    result = train(config)
    assert (Path(result.model_dir) / "modules.json").is_file()
    model = Embedder.from_pretrained(result.model_dir, device="cpu", dtype="float32")
    assert model.config.pooling == "cls"
    np.testing.assert_allclose(_st(Path(result.model_dir), "encode"), _ours(model, "encode"), atol=1e-5)


def test_truncate_dim_without_normalisation_is_honoured(tiny_bert_dir: Path, tmp_path: Path) -> None:
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="float32", truncate_dim=8)
    folder = model.save_pretrained(tmp_path / "saved")
    ours = _ours(model, "encode")
    assert ours.shape == (len(TEXTS), 8)
    np.testing.assert_allclose(_st(folder, "encode"), ours, atol=1e-5)
