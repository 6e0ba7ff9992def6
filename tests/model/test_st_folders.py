"""Folders in the sentence-transformers format load with their own pooling, normalisation, max
length and prompts, and embed like sentence-transformers itself (the installed version) does:
folders hand-written in the old (2.x) layout and folders saved by the installed
sentence-transformers (5.4+ layout: ``pooling_mode``, the max length in tokenizer_config.json).
Every check runs twice: read through sentence-transformers, and by the hand reader with
sentence-transformers' import blocked. What anglekit cannot honour is refused by name."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError, UnsupportedModelError
from anglekit.model.embedder import Embedder
from anglekit.model.sentence_transformers import read_sentence_transformers_settings, sentence_transformers_available

st = pytest.importorskip("sentence_transformers")

TEXTS = [
    "a man is playing the guitar .",
    "dog",
    'he said "no" ?',
    " ".join(["the old woman walks her small white dog in the park"] * 12),  # longer than any max length here
]
POOLING_MODES = {"cls": "cls", "mean": "last_avg", "max": "last_max", "lasttoken": "last_token"}


class Reader:
    """Which reader anglekit uses inside ``with reader.active():``: through sentence-transformers,
    or by hand with sentence-transformers' import blocked (outside, sentence-transformers computes
    the reference vectors)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @contextmanager
    def active(self) -> Iterator[None]:
        with pytest.MonkeyPatch.context() as patch:
            if self.name == "hand":
                for module in [n for n in sys.modules if n == "sentence_transformers" or n.startswith("sentence_transformers.")]:
                    patch.setitem(sys.modules, module, None)
            assert sentence_transformers_available() is (self.name != "hand")
            yield


@pytest.fixture(params=["sentence-transformers", "hand"])
def reader(request: pytest.FixtureRequest) -> Reader:
    return Reader(request.param)


def _st_modules() -> tuple[Any, Any, Any]:
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    return Transformer, Pooling, Normalize


def _st_vectors(folder: Path, method: str = "encode", texts: list[str] = TEXTS) -> np.ndarray:
    model = st.SentenceTransformer(str(folder), device="cpu")
    vectors = getattr(model, method)(texts, batch_size=3, convert_to_numpy=True)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _ours(folder: Path, method: str = "encode", **kwargs: Any) -> np.ndarray:
    model = Embedder.from_pretrained(folder, device="cpu", **kwargs)
    return getattr(model, method)(TEXTS, batch_size=3, normalize=True)


def _save_with_st(folder: Path, base: Path, mode: str, *, normalize: bool, max_length: int | None = 16, **kwargs: Any) -> Path:
    """A folder written by the installed sentence-transformers' own ``save``."""
    transformer_cls, pooling_cls, normalize_cls = _st_modules()
    transformer = transformer_cls(str(base), max_seq_length=max_length) if max_length else transformer_cls(str(base))
    modules = [transformer, pooling_cls(32, pooling_mode=mode)]
    if normalize:
        modules.append(normalize_cls())
    st.SentenceTransformer(modules=modules, device="cpu", **kwargs).save(str(folder))
    return folder


def _write_old_layout(folder: Path, mode_key: str, *, normalize: bool, max_seq_length: int) -> None:
    """The layout sentence-transformers 2.x wrote: models.* types, every old pooling key."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        (folder / "2_Normalize").mkdir()
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    keys = ["pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
            "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"]  # fmt: skip
    pooling = {"word_embedding_dimension": 32, **{key: key == mode_key for key in keys}}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}))
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"__version__": {"sentence_transformers": "2.2.2", "transformers": "4.30.0", "pytorch": "2.0.0"}})
    )


# ------------------------------------------------------------------ old layout (2.x)


@pytest.mark.parametrize(
    ("mode_key", "pooling"),
    [
        ("pooling_mode_cls_token", "cls"),
        ("pooling_mode_mean_tokens", "last_avg"),
        ("pooling_mode_max_tokens", "last_max"),
        ("pooling_mode_lasttoken", "last_token"),
    ],
)
def test_old_layout_embeds_like_sentence_transformers(tiny_bert_dir: Path, copy_model: Any, mode_key: str, pooling: str, reader: Reader) -> None:
    folder = copy_model(tiny_bert_dir)
    _write_old_layout(folder, mode_key, normalize=True, max_seq_length=12)
    expected = _st_vectors(folder)
    with reader.active():
        embedder = Embedder.from_pretrained(folder, device="cpu")
    assert (embedder.config.pooling, embedder.config.normalize, embedder.config.max_length) == (pooling, True, 12)
    np.testing.assert_allclose(embedder.encode(TEXTS, batch_size=3), expected, atol=1e-5, rtol=0)


def test_both_readers_agree_on_an_old_layout(tiny_bert_dir: Path, copy_model: Any) -> None:
    folder = copy_model(tiny_bert_dir)
    _write_old_layout(folder, "pooling_mode_max_tokens", normalize=False, max_seq_length=20)
    through = read_sentence_transformers_settings(str(folder), through_st=True)
    by_hand = read_sentence_transformers_settings(str(folder), through_st=False)
    assert through == by_hand == {"pooling": "last_max", "normalize": False, "max_length": 20}


# ------------------------------------------------------------------ saved by the installed sentence-transformers


@pytest.mark.parametrize("mode", sorted(POOLING_MODES))
def test_folder_saved_by_sentence_transformers_embeds_like_it(tiny_bert_dir: Path, tmp_path: Path, mode: str, reader: Reader) -> None:
    folder = _save_with_st(tmp_path / f"st-{mode}", tiny_bert_dir, mode, normalize=mode != "max")
    expected = _st_vectors(folder)
    with reader.active():
        settings = read_sentence_transformers_settings(str(folder))
        ours = _ours(folder)
    assert settings["pooling"] == POOLING_MODES[mode] and settings["max_length"] == 16
    assert settings["normalize"] is (mode != "max")
    np.testing.assert_allclose(ours, expected, atol=1e-5, rtol=0)


def test_max_length_kept_only_in_the_tokenizer_config(tiny_bert_dir: Path, tmp_path: Path, reader: Reader) -> None:
    """sentence-transformers >= 5.4 writes no max_seq_length; the tokenizer's model_max_length holds it."""
    folder = _save_with_st(tmp_path / "st", tiny_bert_dir, "mean", normalize=True, max_length=10)
    assert "max_seq_length" not in json.loads((folder / "sentence_bert_config.json").read_text())
    assert json.loads((folder / "tokenizer_config.json").read_text())["model_max_length"] == 10
    expected = _st_vectors(folder)
    with reader.active():
        assert Embedder.from_pretrained(folder, device="cpu").config.max_length == 10
        ours = _ours(folder)
    np.testing.assert_allclose(ours, expected, atol=1e-5, rtol=0)
    # Without any: the model's positions cap the tokenizer's "no limit", as in sentence-transformers.
    _edit_json(folder / "tokenizer_config.json", model_max_length=None)
    expected = _st_vectors(folder)
    with reader.active():
        assert Embedder.from_pretrained(folder, device="cpu").config.max_length == 128
        ours = _ours(folder)
    np.testing.assert_allclose(ours, expected, atol=1e-5, rtol=0)


def test_prompts_apply_as_sentence_transformers_applies_them(tiny_bert_dir: Path, tmp_path: Path, reader: Reader) -> None:
    prompts = {"query": "query: ", "document": "passage: ", "classification": "classify this: "}
    folder = _save_with_st(tmp_path / "st", tiny_bert_dir, "mean", normalize=True, prompts=prompts, default_prompt_name="classification")
    expected = {m: _st_vectors(folder, m) for m in ("encode", "encode_query", "encode_document")}
    with reader.active():
        embedder = Embedder.from_pretrained(folder, device="cpu")
    assert embedder.config.prompt == "classify this: {text}"
    assert embedder.config.query_prompt == "query: {text}" and embedder.config.document_prompt == "passage: {text}"
    assert embedder.config.prompt_preprocess is False
    for method, vectors in expected.items():
        np.testing.assert_allclose(getattr(embedder, method)(TEXTS, batch_size=3, normalize=True), vectors, atol=1e-5, rtol=0, err_msg=method)


def test_an_empty_role_prompt_does_not_fall_back_to_the_default(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """sentence-transformers' encode_query uses the "query" prompt, "" included, never the default."""
    folder = _save_with_st(tmp_path / "st", tiny_bert_dir, "mean", normalize=True, prompts={"sts": "sts: "}, default_prompt_name="sts")
    embedder = Embedder.from_pretrained(folder, device="cpu")
    assert embedder.config.prompt == "sts: {text}" and embedder.config.query_prompt == "{text}"
    np.testing.assert_allclose(embedder.encode_query(TEXTS, normalize=True), _st_vectors(folder, "encode_query"), atol=1e-5, rtol=0)
    np.testing.assert_allclose(embedder.encode(TEXTS, normalize=True), _st_vectors(folder), atol=1e-5, rtol=0)


def test_real_minilm_resaved_by_sentence_transformers(tmp_path: Path, reader: Reader) -> None:
    """all-MiniLM-L6-v2 in the layout the installed sentence-transformers writes: mean pooling,
    normalised, max length 256 (the issue's 73.50-instead-of-82.03 case)."""
    from anglekit.model.offline import minilm_dir

    try:
        source = minilm_dir()
    except ConfigError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 package not installed: {exc}")
    folder = tmp_path / "minilm-resaved"
    texts = [*TEXTS, " ".join(["A very long sentence that keeps going"] * 60)]
    model = st.SentenceTransformer(str(source), device="cpu")
    model.save(str(folder))
    expected = model.encode(texts, batch_size=4, convert_to_numpy=True)
    with reader.active():
        # sentence-transformers gives every model empty query and document prompts: roles without a prefix
        assert read_sentence_transformers_settings(str(folder)) == {
            "pooling": "last_avg", "normalize": True, "max_length": 256, "query_prompt": "{text}", "document_prompt": "{text}", "prompt_preprocess": False,
        }  # fmt: skip
        embedder = Embedder.from_pretrained(folder, device="cpu")
    np.testing.assert_allclose(embedder.encode(texts, batch_size=4), expected, atol=1e-5, rtol=0)


# ------------------------------------------------------------------ refusals


def _edit_json(path: Path, **changes: Any) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


@pytest.fixture
def old_layout(tiny_bert_dir: Path, copy_model: Any) -> Path:
    folder = copy_model(tiny_bert_dir)
    _write_old_layout(folder, "pooling_mode_mean_tokens", normalize=True, max_seq_length=16)
    return folder


@pytest.mark.parametrize(
    ("module_type", "named"),
    [
        ("sentence_transformers.models.Dense", "Dense"),
        ("sentence_transformers.models.WeightedLayerPooling", "WeightedLayerPooling"),
        ("sentence_transformers.models.Router", "Router"),
        ("my_package.MyTransformer", "my_package.MyTransformer"),
    ],
)
def test_modules_anglekit_cannot_apply_are_refused_by_name(old_layout: Path, module_type: str, named: str, reader: Reader) -> None:
    modules = json.loads((old_layout / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "extra", "path": "2_Extra", "type": module_type})
    (old_layout / "modules.json").write_text(json.dumps(modules))
    with reader.active(), pytest.raises(UnsupportedModelError, match=named):
        Embedder.from_pretrained(old_layout, device="cpu")


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"pooling_mode_magic_tokens": True}, "pooling_mode_magic_tokens"),
        ({"include_prompt": False}, "include_prompt"),
        ({"pooling_mode_mean_tokens": False, "pooling_mode_weightedmean_tokens": True}, "weightedmean"),
        ({"pooling_mode_mean_tokens": False, "pooling_mode_mean_sqrt_len_tokens": True}, "mean_sqrt_len_tokens"),
        ({"pooling_mode_cls_token": True}, "several pooling modes"),
    ],
)
def test_pooling_settings_anglekit_cannot_honour_are_refused_by_name(old_layout: Path, changes: dict[str, Any], named: str, reader: Reader) -> None:
    _edit_json(old_layout / "1_Pooling" / "config.json", **changes)
    with reader.active(), pytest.raises(UnsupportedModelError, match=named):
        Embedder.from_pretrained(old_layout, device="cpu")


def test_new_pooling_keys_are_read_and_checked(old_layout: Path, reader: Reader) -> None:
    pooling = {"embedding_dimension": 32, "pooling_mode": "lasttoken", "include_prompt": True}
    (old_layout / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    with reader.active():
        assert read_sentence_transformers_settings(str(old_layout))["pooling"] == "last_token"
    (old_layout / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "pooling_mode": ["cls", "mean"]}))
    with reader.active(), pytest.raises(UnsupportedModelError, match="several pooling modes"):
        read_sentence_transformers_settings(str(old_layout))


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"do_lower_case": True}, "do_lower_case"),
        ({"transformer_task": "text-generation"}, "transformer_task"),
        ({"modality_config": {"message": {"method": "forward", "method_output_name": "last_hidden_state"}}}, "modality_config"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_transformer_settings_anglekit_cannot_honour_are_refused(old_layout: Path, changes: dict[str, Any], named: str, reader: Reader) -> None:
    _edit_json(old_layout / "sentence_bert_config.json", **changes)
    with reader.active(), pytest.raises(UnsupportedModelError, match=named):
        Embedder.from_pretrained(old_layout, device="cpu")


def test_layouts_that_are_not_transformer_pooling_normalize_are_refused(old_layout: Path, reader: Reader) -> None:
    modules = json.loads((old_layout / "modules.json").read_text())
    for layout, match in (
        ([modules[0], modules[2], modules[1]], "in that order"),
        ([modules[0]], "in that order"),
        ([], "in that order"),
        ([{**modules[0], "path": "0_Transformer"}, modules[1]], "0_Transformer"),
    ):
        (old_layout / "modules.json").write_text(json.dumps(layout))
        with reader.active(), pytest.raises(UnsupportedModelError, match=match):
            read_sentence_transformers_settings(str(old_layout))


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "cannot read"),
        ('{"idx": 0}', "list of modules"),
        ('[{"idx": 0, "path": ""}]', "'type' and 'path' must be strings"),
        ('["sentence_transformers.models.Transformer"]', "list of modules"),
    ],
)
def test_malformed_module_lists_are_config_errors(old_layout: Path, content: str, match: str, reader: Reader) -> None:
    (old_layout / "modules.json").write_text(content)
    with reader.active(), pytest.raises(ConfigError, match=match):
        Embedder.from_pretrained(old_layout, device="cpu")


def test_missing_or_malformed_pooling_config_is_refused(old_layout: Path, reader: Reader) -> None:
    (old_layout / "1_Pooling" / "config.json").write_text("[1, 2]")
    with reader.active(), pytest.raises(ConfigError, match="JSON object"):
        read_sentence_transformers_settings(str(old_layout))
    (old_layout / "1_Pooling" / "config.json").unlink()
    with reader.active(), pytest.raises(UnsupportedModelError, match="no 1_Pooling/config.json"):
        read_sentence_transformers_settings(str(old_layout))


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        ({"prompts": {"query": "ask {text} now"}, "default_prompt_name": None}, UnsupportedModelError, "contains"),
        ({"prompts": {"query": "q: "}, "default_prompt_name": "missing"}, ConfigError, "default_prompt_name"),
        ({"prompts": ["q: "]}, ConfigError, "prompts must map"),
        ({"prompts": {"query": 3}}, ConfigError, "prompts must map"),
        ({"model_type": "SparseEncoder"}, UnsupportedModelError, "SparseEncoder"),
    ],
)
def test_bad_prompt_configs_are_refused(old_layout: Path, config: dict[str, Any], error: type[Exception], match: str, reader: Reader) -> None:
    (old_layout / "config_sentence_transformers.json").write_text(json.dumps(config))
    with reader.active(), pytest.raises(error, match=match):
        read_sentence_transformers_settings(str(old_layout))


def test_a_folder_without_modules_json_is_not_read(tiny_bert_dir: Path) -> None:
    assert read_sentence_transformers_settings(str(tiny_bert_dir)) == {}
