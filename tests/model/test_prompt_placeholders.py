"""A prompt a person gives (``--prompt``, ``--prompts NAME=PROMPT``, the Python and YAML settings)
holds no placeholder but ``{text}`` (issue 60): ``query={txt}`` was taken as a literal prefix. What
a placeholder is follows ``str.format`` (its own parser is the reference), with ``{{``, ``}}``, a
lone brace and non-name braced text left as text; prefixes with such braces, and the braced
prompts of a sentence-transformers folder, still work as before."""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.errors import ConfigError
from anglekit.llm.prompts import placeholders, unknown_placeholder
from anglekit.model.embedder import Embedder
from anglekit.model.load_settings import LoadSettings
from anglekit.training.config import TrainConfig

import helpers

TEXTS = ["a man is playing a guitar", "the cat sleeps on the mat", "stocks fell sharply today"]

CASES = [
    ("query: ", [], None),
    ("query={txt}", ["{txt}"], "{txt}"),
    ("{}", ["{}"], "{}"),
    ("q {0}", ["{0}"], "{0}"),
    ("{text} and {text}", ["{text}", "{text}"], None),
    ("{{txt}} ", [], None),  # escaped: text, as written
    ("{{{txt}}}", ["{txt}"], "{txt}"),  # an escaped brace, then a field
    ("}} {{", [], None),
    ("{ text }", ["{ text }"], "{ text }"),
    ("{text!r}", ["{text!r}"], "{text!r}"),
    ("{text:>9}", ["{text:>9}"], "{text:>9}"),
    ("{Text}", ["{Text}"], "{Text}"),
    ("{item[0]} {a.b}", ["{item[0]}", "{a.b}"], "{item[0]}"),
    ('json {"a": 1} ', [], None),  # braced text that names nothing
    ("code {", [], None),  # a lone brace: str.format refuses it, a prefix may hold it
    ("{txt} then {", ["{txt}"], "{txt}"),
    ("}", [], None),
]


@pytest.mark.parametrize(("value", "found", "unknown"), CASES)
def test_placeholders_and_the_unknown_one(value: str, found: list[str], unknown: str | None) -> None:
    assert placeholders(value) == found
    assert unknown_placeholder(value) == unknown


def _parses(value: str) -> bool:
    try:
        list(string.Formatter().parse(value))
    except ValueError:  # a lone brace: the handwritten cases cover those
        return False
    return True


@pytest.mark.parametrize("value", [v for v, _, _ in CASES if _parses(v)])
def test_placeholders_are_the_named_fields_str_format_finds(value: str) -> None:
    """Where str.format can parse the value, the placeholders are its fields whose name (before
    '.', '[') is empty, a number or a word, in order."""
    parsed = list(string.Formatter().parse(value))
    names = [name for _, name, _, _ in parsed if name is not None]
    named = [name for name in names if _head(name) == "" or _head(name).isdigit() or _head(name).isidentifier()]
    assert [next(iter(string.Formatter().parse(p)))[1] for p in placeholders(value)] == named


def _head(name: str) -> str:
    return name.replace("[", ".").split(".")[0].strip()


@pytest.mark.parametrize(
    ("flag", "value", "shown", "placeholder"),
    [
        ("--prompts", "query={txt}", "'query={txt}'", "{txt}"),
        ("--prompts", "query=q: {}", "'query=q: {}'", "{}"),
        ("--prompts", "document={0} ", "'document={0} '", "{0}"),
        ("--prompts", "query=q: {text} {Text}", "'query=q: {text} {Text}'", "{Text}"),
        ("--prompt", "{text!r}", "'{text!r}'", "{text!r}"),
        ("--prompt", "say {txt}", "'say {txt}'", "{txt}"),
    ],
)
def test_encode_refuses_an_unknown_placeholder_naming_it(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, shown: str, placeholder: str
) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "vectors.npy"
    code, stdout, err = helpers.run_cli(["encode", str(tiny_bert_dir), "--input", str(texts), "--output", str(out), flag, value], capsys)
    assert code == 2 and "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"anglekit encode: error: argument {flag}: unknown placeholder {placeholder} in {shown}; use {{text}} for the text's place (a prefix has no placeholder)"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("prompt", "applied"),
    [
        ("{{txt}} ", lambda t: "{{txt}} " + t),
        ("code { ", lambda t: "code { " + t),
        ("{text} | {text}", lambda t: f"{t} | {t}"),
        ('json {"a": 1} ', lambda t: 'json {"a": 1} ' + t),
    ],
)
def test_prefixes_with_braces_and_text_twice_still_encode(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], prompt: str, applied: Callable[[str], str]
) -> None:
    """Not placeholders: applied as written, as if the words were typed in front of each text."""
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "vectors.npy"
    argv = [
        "encode",
        str(tiny_bert_dir),
        "--input",
        str(texts),
        "--output",
        str(out),
        "--prompts",
        f"query={prompt}",
        "--role",
        "query",
        "--pooling",
        "last_avg",
    ]
    code, _, err = helpers.run_cli(argv, capsys)
    assert code == 0, err
    plain = Embedder.from_pretrained(tiny_bert_dir, device="cpu", pooling="last_avg")
    expected = plain.encode([applied(t) for t in TEXTS])
    np.testing.assert_allclose(np.load(out), expected, atol=1e-5)
    assert not np.allclose(np.load(out), plain.encode(TEXTS), atol=1e-3)  # the prompt was applied


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"prompts": {"query": "{txt}"}}, "unknown placeholder {txt} in prompts.query '{txt}'"),
        ({"query_prompt": "q: {query} {text}"}, "unknown placeholder {query} in query_prompt 'q: {query} {text}'"),
        ({"document_prompt": "{}{text}"}, "unknown placeholder {} in document_prompt '{}{text}'"),
    ],
)
def test_the_python_settings_refuse_an_unknown_placeholder(tiny_bert_dir: Path, settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{_escape(message)}; use"):
        LoadSettings(**settings)
    with pytest.raises(ConfigError, match=_escape(message)):
        Embedder.from_pretrained(tiny_bert_dir, device="cpu", **settings)


def test_a_train_config_refuses_an_unknown_placeholder() -> None:
    with pytest.raises(ConfigError, match=r"unknown placeholder \{Text\} in prompts.document 'passage: \{Text\}'"):
        TrainConfig.from_dict({"model": "m", "train_data": "d.jsonl", "prompts": {"document": "passage: {Text}"}})
    with pytest.raises(ConfigError, match=r"unknown placeholder \{txt\} in prompt 'q \{txt\} \{text\}'"):
        TrainConfig.from_dict({"model": "m", "train_data": "d.jsonl", "prompt": "q {txt} {text}"})
    assert TrainConfig.from_dict({"model": "m", "train_data": "d.jsonl", "prompts": {"query": "{{q}} "}}).model.prompts == {"query": "{{q}} "}


def test_a_sentence_transformers_folder_with_braces_in_a_prompt_loads_as_before(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """A saved model's prompts are prefixes by sentence-transformers' rule, braces included: not
    checked as a person's typing is (they are applied as sentence-transformers applies them)."""
    st = pytest.importorskip("sentence_transformers")
    try:
        from sentence_transformers.base.modules import Transformer
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:  # sentence-transformers < 5.4
        from sentence_transformers.models import Pooling, Transformer
    prompts = {"query": "Represent the {domain} query: ", "document": "doc {}: "}
    theirs = st.SentenceTransformer(
        modules=[Transformer(str(tiny_bert_dir), max_seq_length=32), Pooling(32, pooling_mode="mean")], device="cpu", prompts=prompts
    )
    theirs.save(str(tmp_path / "st"))
    ours = Embedder.from_pretrained(tmp_path / "st", device="cpu")
    assert ours.config.template("query") == "Represent the {domain} query: {text}"
    for name in prompts:
        np.testing.assert_allclose(ours.encode(TEXTS, role=name), theirs.encode(TEXTS, prompt_name=name), atol=1e-5, err_msg=name)


def _escape(text: str) -> str:
    import re

    return re.escape(text)
