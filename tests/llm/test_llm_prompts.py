"""Prompt presets, user templates, the paper's preprocessing, query / document prompts, and how
they are saved with the model (tiny BERT and tiny Llama from the session fixtures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.cli import main
from anglekit.errors import ConfigError
from anglekit.llm.prompts import PROMPT_PRESETS, apply_prompt, preprocess_sentence, quotes_text, resolve_prompt
from anglekit.model.config import CONFIG_NAME, EmbedderConfig
from anglekit.model.embedder import Embedder

PAPER = 'Summarize sentence "{text}" in one word:"'
TEXTS = ["a man is playing the guitar", "is the dog happy?", 'he said "no"', "two kids ride bikes ."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A man is playing a guitar", "A man is playing a guitar."),  # no final punctuation: full stop
        ("A man is playing a guitar.", "A man is playing a guitar."),
        ("Is it raining?", "Is it raining."),  # final ? becomes .
        ('He said "hi"', "He said 'hi'"),  # ends with a quote: no full stop; quotes become single
        ('What is "AI"?', "What is 'AI'."),
        ("it's 'fine'", "it's 'fine'"),
        ("wow!", "wow!."),  # the official rule only spares . ? " '
        ("", ""),
        ("a {brace}", "a {brace}."),
        ("ends with space ", "ends with space ."),
    ],
)
def test_preprocess_sentence_follows_the_official_evaluation(text: str, expected: str) -> None:
    assert preprocess_sentence(text) == expected


def test_apply_prompt() -> None:
    assert apply_prompt(PAPER, 'is "it" on?', preprocess=True) == 'Summarize sentence "is \'it\' on." in one word:"'
    assert apply_prompt(PAPER, "is it on?", preprocess=False) == 'Summarize sentence "is it on?" in one word:"'
    assert apply_prompt(None, "is it on?", preprocess=True) == "is it on?"  # no prompt: text untouched
    assert apply_prompt("q: {text} {text}", "{text}", preprocess=False) == "q: {text} {text}"


def test_presets_and_templates() -> None:
    assert PROMPT_PRESETS["paper"] == PAPER
    assert resolve_prompt("paper") == PAPER
    assert resolve_prompt("none") is None and resolve_prompt(None) is None
    assert resolve_prompt("query: {text}") == "query: {text}"
    with pytest.raises(ConfigError, match="paper"):
        resolve_prompt("summarize")
    with pytest.raises(ConfigError):
        resolve_prompt(3)  # type: ignore[arg-type]
    assert quotes_text(PAPER) and quotes_text(PROMPT_PRESETS["paper-b"])
    assert not quotes_text("query: {text}") and not quotes_text(None)


def test_config_resolves_presets_and_decides_preprocessing() -> None:
    config = EmbedderConfig(prompt="paper")
    assert config.prompt == PAPER and config.prompt_preprocess is True
    assert config.format("is it on?") == 'Summarize sentence "is it on." in one word:"'
    literal = EmbedderConfig(prompt="paper", prompt_preprocess=False)
    assert literal.format("is it on?") == 'Summarize sentence "is it on?" in one word:"'
    plain = EmbedderConfig(prompt="query: {text}")
    assert plain.prompt_preprocess is False and plain.format("x?") == "query: x?"
    assert EmbedderConfig(prompt="none").prompt is None
    with pytest.raises(ConfigError, match="prompt_preprocess"):
        EmbedderConfig(prompt_preprocess="yes")  # type: ignore[arg-type]


def test_a_role_is_a_named_prompt_and_a_missing_one_is_an_error() -> None:
    config = EmbedderConfig(prompt="text: {text}", query_prompt="retrieval-query")
    assert config.format("x", "query") == "Represent this sentence for searching relevant passages: x"
    assert config.format("x") == "text: x"
    # No document prompt: role "document" is an error naming the roles it has; callers that
    # pick a role for the user (index build, encode_document) fall back to the general prompt.
    with pytest.raises(ConfigError, match=r"role 'document'.*its prompts: query$"):
        config.format("x", "document")
    assert config.role_if_present("document") is None and config.role_if_present("query") == "query"
    with pytest.raises(ConfigError, match="its prompts: none"):
        EmbedderConfig(prompt="text: {text}").format("x", "query")
    with pytest.raises(ConfigError, match="role must be a prompt name"):
        config.format("x", 1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="document_prompt"):
        EmbedderConfig(document_prompt="doc:")


def test_config_file_round_trip_and_legacy_files(tmp_path: Path) -> None:
    config = EmbedderConfig(pooling="last_token", prompt="paper", query_prompt="q {text}", bidirectional=True)
    config.save(tmp_path)
    assert EmbedderConfig.load(tmp_path) == config
    # A file written before these keys existed applied its template literally: still does.
    (tmp_path / CONFIG_NAME).write_text(json.dumps({"pooling": "last_token", "prompt": PAPER, "format_version": 1}))
    legacy = EmbedderConfig.load(tmp_path)
    assert legacy.prompt_preprocess is False and legacy.bidirectional is False
    assert legacy.format("x?") == 'Summarize sentence "x?" in one word:"'
    (tmp_path / CONFIG_NAME).write_text(json.dumps({"pooling": "cls", "bidirektional": True}))
    with pytest.raises(ConfigError, match="bidirektional"):
        EmbedderConfig.load(tmp_path)


def test_embedder_applies_the_paper_prompt(tiny_llama_dir: Path) -> None:
    prompted = Embedder.from_pretrained(tiny_llama_dir, prompt="paper", device="cpu")
    plain = Embedder.from_pretrained(tiny_llama_dir, device="cpu")
    formatted = [PAPER.replace("{text}", preprocess_sentence(t)) for t in TEXTS]
    np.testing.assert_allclose(prompted.encode(TEXTS), plain.encode(formatted), atol=1e-6)


def test_encode_roles(tiny_llama_dir: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_llama_dir, query_prompt="retrieval-query", document_prompt="the text {text}", device="cpu")
    plain = Embedder.from_pretrained(tiny_llama_dir, device="cpu")
    query = [PROMPT_PRESETS["retrieval-query"].replace("{text}", t) for t in TEXTS]  # type: ignore[union-attr]
    np.testing.assert_allclose(embedder.encode_query(TEXTS), plain.encode(query), atol=1e-6)
    np.testing.assert_allclose(embedder.encode(TEXTS, role="document"), plain.encode([f"the text {t}" for t in TEXTS]), atol=1e-6)
    np.testing.assert_allclose(embedder.encode_document(TEXTS), embedder.encode(TEXTS, role="document"))
    np.testing.assert_allclose(embedder.encode(TEXTS), plain.encode(TEXTS), atol=1e-6)  # no general prompt


def test_prompt_settings_are_saved_and_a_new_prompt_decides_again(load_bert: Any, tmp_path: Path) -> None:
    embedder = load_bert(prompt="paper", document_prompt="doc {text}")
    saved = embedder.save_pretrained(tmp_path / "m")
    data = json.loads((saved / CONFIG_NAME).read_text())
    assert (data["prompt"], data["prompt_preprocess"], data["document_prompt"]) == (PAPER, True, "doc {text}")
    again = Embedder.from_pretrained(saved, device="cpu")
    assert again.config == embedder.config
    np.testing.assert_array_equal(again.encode(TEXTS), embedder.encode(TEXTS))
    assert Embedder.from_pretrained(saved, prompt="say {text}", device="cpu").config.prompt_preprocess is False
    off = Embedder.from_pretrained(saved, prompt_preprocess=False, device="cpu").config
    assert off.prompt == PAPER and off.prompt_preprocess is False


def test_cli_encode_with_a_prompt_preset(tiny_llama_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "v.npy"
    assert main(["encode", str(tiny_llama_dir), "--input", str(texts), "--output", str(out), "--prompt", "paper", "--quiet"]) == 0
    expected = Embedder.from_pretrained(tiny_llama_dir, prompt="paper", device="cpu").encode(TEXTS)
    np.testing.assert_allclose(np.load(out), expected, atol=1e-6)
    code = main(["encode", str(tiny_llama_dir), "--input", str(texts), "--output", str(out), "--prompt", "summarize", "--quiet"])
    assert code == 2 and "preset" in capsys.readouterr().err
