"""Named prompts (roles): sentence-transformers is the reference both ways (a folder anglekit saves
encodes the same there with ``prompt_name``, a folder it saves loads here with the same vectors),
the settings merge name by name, and every bad role or prompt is a one-line error."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.cli.fields import add_setting
from anglekit.config import settings_of
from anglekit.errors import ConfigError
from anglekit.model.config import EmbedderConfig
from anglekit.model.embedder import Embedder
from anglekit.model.load_settings import LoadSettings, named_prompt

import helpers

st = pytest.importorskip("sentence_transformers")

TEXTS = ["a man is playing a guitar", "the cat sleeps on the mat", "stocks fell sharply today"]
PROMPTS = {"query": "query: ", "document": "passage: ", "classification": "topic: "}
TOL = {"atol": 1e-5, "rtol": 0}


def _st_modules() -> tuple[Any, Any]:
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    return Transformer, Pooling


def test_anglekit_folder_encodes_the_same_in_sentence_transformers(tiny_bert_dir: Path, tmp_path: Path) -> None:
    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu", pooling="last_avg", prompt="any: {text}", prompts=PROMPTS)
    assert model.config.roles == ("query", "document", "classification")
    folder = model.save_pretrained(tmp_path / "saved")
    saved = json.loads((folder / "config_sentence_transformers.json").read_text())
    assert saved["prompts"] == {**PROMPTS, "default": "any: "} and saved["default_prompt_name"] == "default"
    theirs = st.SentenceTransformer(str(folder), device="cpu")
    for name in PROMPTS:
        np.testing.assert_allclose(theirs.encode(TEXTS, prompt_name=name), model.encode(TEXTS, role=name), **TOL, err_msg=name)
    np.testing.assert_allclose(theirs.encode(TEXTS), model.encode(TEXTS), **TOL)
    np.testing.assert_allclose(theirs.encode_query(TEXTS), model.encode_query(TEXTS), **TOL)
    # The prompts matter (the comparison can fail): each role embeds differently.
    assert not np.allclose(model.encode(TEXTS, role="query"), model.encode(TEXTS, role="document"), atol=1e-4)
    again = Embedder.from_pretrained(folder, device="cpu")
    assert again.config.named_prompts == model.config.named_prompts and again.config.prompt == "any: {text}"


def test_sentence_transformers_folder_loads_with_the_same_vectors(tiny_bert_dir: Path, tmp_path: Path) -> None:
    transformer, pooling = _st_modules()
    theirs = st.SentenceTransformer(
        modules=[transformer(str(tiny_bert_dir), max_seq_length=32), pooling(32, pooling_mode="mean")], device="cpu",
        prompts=PROMPTS, default_prompt_name="classification",
    )  # fmt: skip
    theirs.save(str(tmp_path / "st"))
    ours = Embedder.from_pretrained(tmp_path / "st", device="cpu")
    assert set(ours.config.roles) == set(PROMPTS)
    for name in PROMPTS:
        np.testing.assert_allclose(ours.encode(TEXTS, role=name), theirs.encode(TEXTS, prompt_name=name), **TOL, err_msg=name)
    np.testing.assert_allclose(ours.encode(TEXTS), theirs.encode(TEXTS), **TOL)  # the default prompt: classification
    np.testing.assert_allclose(ours.encode_document(TEXTS), theirs.encode_document(TEXTS), **TOL)


def test_prompts_merge_name_by_name_over_a_saved_model(tiny_bert_dir: Path, tmp_path: Path) -> None:
    folder = Embedder.from_pretrained(tiny_bert_dir, device="cpu", prompts=PROMPTS).save_pretrained(tmp_path / "m")
    model = Embedder.from_pretrained(folder, device="cpu", prompts={"query": "q2: ", "extra": "x {text} y"})
    assert model.config.named_prompts == {"query": "q2: {text}", "document": "passage: {text}", "classification": "topic: {text}", "extra": "x {text} y"}
    replaced = Embedder.from_pretrained(folder, device="cpu", query_prompt="q3: {text}")
    assert replaced.config.template("query") == "q3: {text}"


def test_a_model_without_named_prompts_saves_as_before() -> None:
    assert "prompts" not in EmbedderConfig().to_dict()  # files and fingerprints of older models are unchanged
    assert EmbedderConfig.from_dict(EmbedderConfig(prompts={"a": "b"}).to_dict()).prompts == {"a": "b{text}"}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"prompts": ["query: "]}, "prompts must map role names to prompts, got list"),
        ({"prompts": {"query": 3}}, r"prompts.query must be a string \(a prefix or a template with \{text\}\), got int 3"),
        ({"prompts": {"": "x"}}, "a role name must be a non-empty string"),
        ({"prompts": {" query": "x"}}, "without surrounding spaces"),
        ({"prompts": {"query": "q: "}, "query_prompt": "other {text}"}, "prompts.query 'q: {text}' disagrees with query_prompt 'other {text}'"),
    ],
)
def test_bad_prompts_are_one_line_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as raised:
        EmbedderConfig(**kwargs)
    assert "\n" not in str(raised.value)


def test_a_role_the_model_lacks_names_its_roles(load_bert: Any) -> None:
    plain = load_bert()
    for texts in (TEXTS, []):
        with pytest.raises(ConfigError, match=r"^role 'query': the model has no prompt of that name; its prompts: none$"):
            plain.encode(texts, role="query")
    np.testing.assert_allclose(plain.encode_query(TEXTS), plain.encode(TEXTS), **TOL)  # falls back to the general prompt
    roled = load_bert(prompts={"query": "q: "})
    with pytest.raises(ConfigError, match="its prompts: query$"):
        roled.encode(TEXTS, role="document")


def test_prompts_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert named_prompt("query=query: ") == ("query", "query: ") and named_prompt("document=") == ("document", "")
    for bad in ("query", "=x", " query=x"):
        with pytest.raises(argparse.ArgumentTypeError, match="NAME=PROMPT"):
            named_prompt(bad)
    parser = argparse.ArgumentParser(prog="t")
    add_setting(parser, next(s for s in settings_of(LoadSettings) if s.key == "prompts"))
    args = parser.parse_args(["--prompts", "query=query: ", "--prompts", "document=passage: {text}"])
    assert args.prompts == {"query": "query: ", "document": "passage: {text}"}
    with pytest.raises(SystemExit):
        parser.parse_args(["--prompts", "query=a", "--prompts", "query=b"])
    assert "'query' given twice" in capsys.readouterr().err


def test_encode_cli_role_and_prompts(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "texts.txt"
    corpus.write_text("".join(t + "\n" for t in TEXTS), encoding="utf-8")
    out = tmp_path / "q.npy"
    argv = ["encode", str(tiny_bert_dir), "--input", str(corpus), "--output", str(out), "--device", "cpu", "--quiet"]
    code, _, err = helpers.run_cli([*argv, "--role", "query", "--prompts", "query=query: "], capsys)
    assert code == 0, err
    expected = Embedder.from_pretrained(tiny_bert_dir, device="cpu", prompts={"query": "query: "}).encode(TEXTS, role="query")
    np.testing.assert_allclose(np.load(out), expected, **TOL)
    out.unlink()
    code, _, err = helpers.run_cli([*argv, "--role", "query"], capsys)
    assert code == 2 and "role 'query': the model has no prompt of that name; its prompts: none" in err
    assert not out.exists()
