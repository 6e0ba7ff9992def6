"""Fields of other tools' JSON files that anglekit reads are type-checked (issue 40): a
sentence-transformers folder's module list, Pooling config, sentence_bert_config.json and
config_sentence_transformers.json, PEFT's adapter_config.json and transformers' weight index. A
wrongly typed field is a ConfigError naming the file, the field and the value (never a TypeError,
never ignored). ``truncate_dim`` in config_sentence_transformers.json applies as
sentence-transformers applies it (checked against its own output)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError
from anglekit.model.checks import check_local_weights
from anglekit.model.embedder import Embedder
from anglekit.model.sentence_transformers import read_sentence_transformers_settings

import helpers

TEXTS = ["a man is playing the guitar .", "dog", " ".join(["the old woman walks her small white dog in the park"] * 6)]


def _st_folder(folder: Path, *, normalize: bool = False) -> Path:
    """The sentence-transformers 2.x layout over a copied model folder (mean pooling, max length 16)."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        (folder / "2_Normalize").mkdir()
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16, "do_lower_case": False}))
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {}, "default_prompt_name": None}))
    return folder


def _edit(path: Path, **changes: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


@pytest.fixture
def st_folder(tiny_bert_dir: Path, copy_model: Any) -> Path:
    return _st_folder(copy_model(tiny_bert_dir))


READERS = [pytest.param(True, id="through-st"), pytest.param(False, id="hand")]


def _read(folder: Path, through_st: bool) -> dict[str, Any]:
    if through_st:
        pytest.importorskip("sentence_transformers")
    return read_sentence_transformers_settings(str(folder), through_st=through_st)


@pytest.mark.parametrize("through_st", READERS)
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"pooling_mode": 5}, "pooling_mode must be a mode name or a list of mode names, got int 5"),
        ({"pooling_mode": ["mean", 2]}, 'pooling_mode must be a mode name or a list of mode names, got list ["mean", 2]'),
        ({"pooling_mode": {"mean": True}}, "pooling_mode must be a mode name or a list of mode names, got dict"),
        ({"include_prompt": "false"}, 'include_prompt must be true or false, got str "false"'),
        ({"pooling_mode_mean_tokens": "yes"}, 'pooling_mode_mean_tokens must be true or false, got str "yes"'),
        ({"pooling_mode_cls_token": 1}, "pooling_mode_cls_token must be true or false, got int 1"),
        ({"word_embedding_dimension": "32"}, 'word_embedding_dimension must be a positive integer, got str "32"'),
    ],
)
def test_a_wrongly_typed_pooling_field_is_named(st_folder: Path, through_st: bool, changes: dict[str, Any], message: str) -> None:
    config = st_folder / "1_Pooling" / "config.json"
    _edit(config, **changes)
    with pytest.raises(ConfigError) as info:
        _read(st_folder, through_st)
    assert str(info.value).startswith(f"{config}: {message}"), str(info.value)


@pytest.mark.parametrize("through_st", READERS)
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_seq_length": "abc"}, 'max_seq_length must be a positive integer or null, got str "abc"'),
        ({"max_seq_length": 0}, "max_seq_length must be a positive integer or null, got int 0"),
        ({"max_seq_length": -3}, "max_seq_length must be a positive integer or null, got int -3"),
        ({"max_seq_length": 12.5}, "max_seq_length must be a positive integer or null, got float 12.5"),
        ({"max_seq_length": True}, "max_seq_length must be a positive integer or null, got bool true"),
        ({"do_lower_case": "no"}, 'do_lower_case must be true or false, got str "no"'),
        ({"tokenizer_args": ["x"]}, 'tokenizer_args must be an object, got list ["x"]'),
        ({"tokenizer_args": {"model_max_length": "512"}}, 'tokenizer_args.model_max_length must be a positive integer, got str "512"'),
        ({"transformer_task": 3}, "transformer_task must be a string, got int 3"),
    ],
)
def test_a_wrongly_typed_transformer_field_is_named(st_folder: Path, through_st: bool, changes: dict[str, Any], message: str) -> None:
    config = st_folder / "sentence_bert_config.json"
    _edit(config, **changes)
    with pytest.raises(ConfigError) as info:
        _read(st_folder, through_st)
    assert str(info.value).startswith(f"{config}: {message}"), str(info.value)


@pytest.mark.parametrize("through_st", READERS)
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"default_prompt_name": ["query"], "prompts": {"query": "q: "}}, 'default_prompt_name must be a prompt name (a string) or null, got list ["query"]'),
        ({"truncate_dim": "8"}, 'truncate_dim must be a positive integer or null, got str "8"'),
        ({"truncate_dim": 0}, "truncate_dim must be a positive integer or null, got int 0"),
        ({"truncate_dim": True}, "truncate_dim must be a positive integer or null, got bool true"),
        ({"model_type": 5}, "model_type must be a string, got int 5"),
    ],
)
def test_a_wrongly_typed_st_config_field_is_named(st_folder: Path, through_st: bool, changes: dict[str, Any], message: str) -> None:
    config = st_folder / "config_sentence_transformers.json"
    _edit(config, **changes)
    with pytest.raises(ConfigError) as info:
        _read(st_folder, through_st)
    assert str(info.value).startswith(f"{config}: {message}"), str(info.value)


def test_the_issue_s_folders_fail_in_one_line_from_the_cli(st_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = tmp_path / "t.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    pooling = st_folder / "1_Pooling" / "config.json"
    _edit(pooling, pooling_mode=5)
    with pytest.raises(ConfigError, match="pooling_mode must be"):
        Embedder.from_pretrained(st_folder, device="cpu")
    code, _, err = helpers.run_cli(["encode", str(st_folder), "--input", str(texts), "--output", str(tmp_path / "v.npy")], capsys)
    assert code == 2 and f"{pooling}: pooling_mode must be a mode name or a list of mode names, got int 5" in err, err
    assert "unexpected error" not in err and err.count("\n") == 1 and not (tmp_path / "v.npy").exists()
    _edit(pooling, pooling_mode="mean")
    _edit(st_folder / "sentence_bert_config.json", max_seq_length="abc")
    code, _, err = helpers.run_cli(["encode", str(st_folder), "--input", str(texts), "--output", str(tmp_path / "v.npy")], capsys)
    assert code == 2 and 'sentence_bert_config.json: max_seq_length must be a positive integer or null, got str "abc"' in err, err


# ------------------------------------------------------------------ truncate_dim, against sentence-transformers


@pytest.mark.parametrize("normalize", [False, True])
def test_truncate_dim_applies_as_sentence_transformers_applies_it(tiny_bert_dir: Path, tmp_path: Path, normalize: bool) -> None:
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    modules = [Transformer(str(tiny_bert_dir), max_seq_length=16), Pooling(32, pooling_mode="mean")]
    if normalize:
        modules.append(Normalize())
    folder = tmp_path / "st"
    st.SentenceTransformer(modules=modules, device="cpu", truncate_dim=12).save(str(folder))
    assert json.loads((folder / "config_sentence_transformers.json").read_text())["truncate_dim"] == 12
    expected = st.SentenceTransformer(str(folder), device="cpu").encode(TEXTS, convert_to_numpy=True)
    assert expected.shape == (3, 12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = Embedder.from_pretrained(folder, device="cpu")
    truncation_warnings = [str(w.message) for w in caught if "truncate_dim 12" in str(w.message)]
    assert model.config.truncate_dim == 12 and model.output_dim == 12 and model.config.normalize is normalize
    ours = model.encode(TEXTS)
    assert ours.shape == (3, 12)
    if normalize:  # sentence-transformers cuts unit vectors; anglekit normalises after the cut: same directions
        assert len(truncation_warnings) == 1 and "config_sentence_transformers.json" in truncation_warnings[0]
        np.testing.assert_allclose(ours, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-5, rtol=0)
        np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    else:
        assert truncation_warnings == []
        np.testing.assert_allclose(ours, expected, atol=1e-5, rtol=0)
    assert model.encode(TEXTS, truncate_dim=32).shape == (3, 32)  # the caller's choice still wins


def test_truncate_dim_beyond_the_model_is_refused(st_folder: Path) -> None:
    _edit(st_folder / "config_sentence_transformers.json", truncate_dim=64)
    with pytest.raises(ConfigError, match="truncate_dim 64 is larger than the model's dimension 32"):
        Embedder.from_pretrained(st_folder, device="cpu")


# ------------------------------------------------------------------ PEFT's adapter config, transformers' weight index


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"base_model_name_or_path": 5, "peft_type": "LORA"}, "base_model_name_or_path must be a model name or path (a string) or null, got int 5"),
        ({"base_model_name_or_path": ["a"], "peft_type": "LORA"}, 'got list ["a"]'),
    ],
)
def test_a_wrongly_typed_adapter_base_is_named(tmp_path: Path, content: dict[str, Any], message: str) -> None:
    adapters = tmp_path / "adapters"
    adapters.mkdir()
    (adapters / "adapter_config.json").write_text(json.dumps(content))
    with pytest.raises(ConfigError) as info:
        Embedder.from_pretrained(adapters, device="cpu")
    assert str(info.value).startswith(f"{adapters / 'adapter_config.json'}: ") and message in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ([1, 2], "a weight index must be a JSON object, got a list"),
        ({"weight_map": ["model-00001.safetensors"]}, "field 'weight_map': expected an object (tensor name -> shard file), got a list"),
        ({"metadata": {}}, "field 'weight_map': expected an object (tensor name -> shard file), got null"),
        ({"weight_map": {"embeddings.weight": 3}}, "field 'weight_map.embeddings.weight': expected a shard file name, got a number 3"),
        ({"weight_map": {"embeddings.weight": ""}}, "field 'weight_map.embeddings.weight': expected a shard file name, got a string"),
    ],
)
def test_a_wrongly_typed_weight_index_is_named(tiny_bert_dir: Path, copy_model: Any, index: Any, message: str) -> None:
    folder = copy_model(tiny_bert_dir)
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ConfigError) as info:
        check_local_weights(folder)
    assert str(info.value).startswith(str(folder / "model.safetensors.index.json")) and message in str(info.value), str(info.value)
    with pytest.raises(ConfigError, match="weight_map|weight index"):
        Embedder.from_pretrained(folder, device="cpu")


def test_a_well_typed_weight_index_still_names_missing_shards(tiny_bert_dir: Path, copy_model: Any) -> None:
    folder = copy_model(tiny_bert_dir)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model.safetensors", "b": "model-2.safetensors"}}))
    with pytest.raises(ConfigError, match=r"weight shard\(s\) \['model-2.safetensors'\]"):
        check_local_weights(folder)
