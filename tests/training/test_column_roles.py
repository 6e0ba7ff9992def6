"""Column roles in training: triplets' anchors take the model's query prompt and positives and
negatives its document prompt (when it has them), pairs none; ``column_roles`` overrides; the
tokenized rows equal what ``encode(role=...)`` tokenizes; bad settings are one-line errors."""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from anglekit.data.records import TripletDataset
from anglekit.errors import ConfigError
from anglekit.model.config import EmbedderConfig
from anglekit.training.config import TrainConfig
from anglekit.training.roles import apply_column_roles, column_role, column_roles
from anglekit.training.run import train
from anglekit.training.tasks.contrastive import TripletTask

import helpers

PROMPTS = {"query": "query: ", "document": "passage: "}
ROLED = EmbedderConfig(prompts={**PROMPTS, "clf": "topic: "})


def test_default_roles_follow_the_model_and_the_data_kind() -> None:
    assert column_roles("triplets", None, ROLED) == {"anchor": "query", "positive": "document", "negative": "document"}
    assert column_roles("triplets", None, EmbedderConfig()) == {"anchor": None, "positive": None, "negative": None}
    only_query = EmbedderConfig(query_prompt="q {text}")
    assert column_roles("triplets", None, only_query) == {"anchor": "query", "positive": None, "negative": None}
    assert column_roles("pairs", None, ROLED) == {"text1": None, "text2": None}  # STS pairs are symmetric
    assert column_roles("sentences", None, ROLED) == {"text": None}
    configured = {"text1": "query", "text2": "clf"}
    assert column_roles("pairs", configured, ROLED) == {"text1": "query", "text2": "clf"}
    assert column_roles("triplets", {"negative": "none"}, ROLED) == {"anchor": "query", "positive": "document", "negative": None}


@pytest.mark.parametrize(
    ("kind", "configured", "config", "match"),
    [
        ("triplets", {"anchor": "search"}, ROLED, r"role 'search': the model has no prompt of that name; its prompts: query, document, clf$"),
        ("triplets", {"anchor": "query"}, EmbedderConfig(), "its prompts: none$"),
        ("triplets", {"text1": "query"}, ROLED, "triplets data has no column 'text1'; its columns: anchor, positive, negative"),
        ("pairs", {"question": "query"}, ROLED, "unknown column 'question'"),
        ("pairs", {"text1": 3}, ROLED, "column_roles.text1 must be a role name"),
        ("pairs", ["text1"], ROLED, "must map columns to roles"),
    ],
)
def test_bad_column_roles_are_errors(kind: str, configured: Any, config: EmbedderConfig, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        column_roles(kind, configured, config)


def test_flag_parser() -> None:
    assert column_role("anchor=query") == ("anchor", "query")
    for bad in ("anchor", "=query", "anchor="):
        with pytest.raises(argparse.ArgumentTypeError, match="COLUMN=ROLE"):
            column_role(bad)


def test_tokenized_rows_equal_encode_with_the_role(load_bert: Any) -> None:
    embedder = load_bert(prompts=PROMPTS, prompt="any {text}")
    same = "a man plays a guitar"
    triplets = TripletDataset(anchor=[same, "b c d"], positive=[same, "e f"], negative=["g h", same])
    prompted, tokenizing, roles = apply_column_roles("triplets", None, triplets, embedder)
    assert roles == {"anchor": "query", "positive": "document", "negative": "document"}
    tokenized, _ = TripletTask().tokenize(prompted, tokenizing)
    for row in range(2):
        item = tokenized[row]
        assert item.anchor == embedder.tokenize_unpadded([triplets.anchor[row]], role="query")[0]
        assert item.positive == embedder.tokenize_unpadded([triplets.positive[row]], role="document")[0]
        assert item.negative == embedder.tokenize_unpadded([triplets.negative[row]], role="document")[0]
    # The same text as a query and as a document is two inputs (two text ids); as two documents one.
    first, second = tokenized[0], tokenized[1]
    assert first.text_ids[0] != first.text_ids[1] and first.text_ids[1] == second.text_ids[2]
    # Without roles the general prompt applies to every column, as before roles existed.
    unchanged, tokenizing, _ = apply_column_roles("triplets", {"anchor": "none", "positive": "none", "negative": "none"}, triplets, embedder)
    assert unchanged is triplets and tokenizing is embedder
    assert TripletTask().tokenize(unchanged, tokenizing)[0][0].anchor == embedder.tokenize_unpadded([same])[0]


def _settings(tiny_bert_dir: Path, tmp_path: Path) -> dict[str, Any]:
    rng = random.Random(5)
    data = tmp_path / "triplets.jsonl"
    rows = [{"anchor": helpers.random_sentence(rng), "positive": helpers.random_sentence(rng), "negative": helpers.random_sentence(rng)} for _ in range(8)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {
        "model": str(tiny_bert_dir), "train_data": str(data), "output_dir": str(tmp_path / "run"), "objective": "simcse-sup", "max_steps": 1,
        "batch_size": 4, "logging_steps": 1, "device": "cpu", "precision": "fp32", "quiet": True, "prompts": PROMPTS,
        "column_roles": {"negative": "none"},
    }  # fmt: skip


@pytest.mark.slow
def test_triplet_training_with_roles(tiny_bert_dir: Path, tmp_path: Path) -> None:
    result = train(TrainConfig.from_dict(_settings(tiny_bert_dir, tmp_path)))
    assert result.steps == 1
    records = helpers.read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert all(math.isfinite(r["loss_simcse"]) for r in records if "loss" in r)
    saved = json.loads((result.model_dir / "anglekit_config.json").read_text())
    assert (saved["query_prompt"], saved["document_prompt"]) == ("query: {text}", "passage: {text}")  # the model keeps its roles


def test_training_refuses_a_role_the_model_lacks(tiny_bert_dir: Path, tmp_path: Path) -> None:
    settings = _settings(tiny_bert_dir, tmp_path)
    with pytest.raises(ConfigError, match="role 'search'.*its prompts: query, document"):
        train(TrainConfig.from_dict({**settings, "column_roles": {"anchor": "search"}}))
    assert not (tmp_path / "run" / "metrics.jsonl").exists() and not (tmp_path / "run" / "train_config.json").exists()
    with pytest.raises(ConfigError, match="column_roles"):
        TrainConfig.from_dict({**settings, "column_roles": "anchor=query"})
    with pytest.raises(ConfigError, match="prompts"):
        TrainConfig.from_dict({**settings, "prompts": ["query: "]})


def test_yaml_and_flags(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = _settings(tiny_bert_dir, tmp_path)
    yaml_file = tmp_path / "train.yaml"
    yaml_file.write_text(
        f"model: {tiny_bert_dir}\ntrain_data: {settings['train_data']}\noutput_dir: {tmp_path / 'y'}\nobjective: simcse-sup\n"
        "prompts: {query: 'query: ', document: 'passage: '}\ncolumn_roles: {anchor: query, negative: none}\n",
        encoding="utf-8",
    )
    config = TrainConfig.from_yaml(yaml_file, {})
    assert config.data.column_roles == {"anchor": "query", "negative": "none"}
    assert config.model.load_kwargs()["prompts"] == PROMPTS
    # On the command line: repeatable flags; a role the model lacks exits 2 with one line, nothing trained.
    argv = ["train", str(tiny_bert_dir), "--train-data", settings["train_data"], "--output-dir", str(tmp_path / "cli"), "--objective", "simcse-sup",
            "--device", "cpu", "--prompts", "query=query: ", "--column-roles", "anchor=query", "--column-roles", "positive=document", "--quiet"]  # fmt: skip
    code, _, err = helpers.run_cli(argv, capsys)
    assert code == 2 and "role 'document': the model has no prompt of that name; its prompts: query" in err, err
    assert not (tmp_path / "cli" / "metrics.jsonl").exists()


def test_a_pair_objective_on_n_tuples_gives_their_columns_roles(load_bert: Any, tiny_bert_dir: Path, tmp_path: Path) -> None:
    """The AnglE (pair) objective trains n-tuples (issue 41's mined rows) with the same roles as a
    contrastive objective: anchor query, positive and negatives document; column_roles names them."""
    from anglekit.data.records import PairDataset
    from anglekit.training.tasks.pairs import PairTask

    embedder = load_bert(prompts=PROMPTS)
    rows = TripletDataset(anchor=["a b", "c d"], positive=["e f", "g h"], negatives=[("i j", "k l"), ("m n", "o p")])
    task = PairTask()
    assert task.columns_kind(rows) == "triplets" and task.columns_kind(PairDataset(["x"], ["y"], [1.0])) == "pairs"
    prompted, tokenizing, roles = apply_column_roles(task.columns_kind(rows), None, rows, embedder)
    assert roles == {"anchor": "query", "positive": "document", "negative": "document"}
    tokenized, _ = task.tokenize(prompted, tokenizing)
    item = tokenized[1]
    assert item.anchor == embedder.tokenize_unpadded(["c d"], role="query")[0]
    assert item.positive == embedder.tokenize_unpadded(["g h"], role="document")[0]
    assert list(item.negatives) == embedder.tokenize_unpadded(["m n", "o p"], role="document")
    settings = {**_settings(tiny_bert_dir, tmp_path), "objective": "paper", "column_roles": {"anchor": "query", "negative": "none"}}
    assert train(TrainConfig.from_dict(settings)).steps == 1  # was "pairs data has no column 'anchor'"
    with pytest.raises(ConfigError, match="triplets data has no column 'text1'"):
        train(TrainConfig.from_dict({**settings, "output_dir": str(tmp_path / "other"), "column_roles": {"text1": "query"}}))
