"""The GPU path checked on the CPU: the attention setting (auto / named kernels, refused where they
cannot run), the unpadding guard, gradient checkpointing under LoRA (same gradients, activations
really recomputed) and that importing anglekit or ``anglekit --help`` loads no GPU-only package."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from anglekit.errors import ConfigError
from anglekit.llm import attention
from anglekit.llm.attention import apply_attention, check_unpadding, choose_attention
from anglekit.llm.lora import unwrap
from anglekit.model.embedder import Embedder
from anglekit.training.config import TrainConfig

TEXTS = ["a man is playing the guitar .", "dog", "the old woman walks her small white dog in the park .", "he said no ?"]


class _NoKernels(torch.nn.Module):
    """A model whose class declares neither SDPA nor FlashAttention-2."""

    _supports_sdpa = False
    _supports_flash_attn = False


@pytest.fixture
def llama(tiny_llama_dir: Path) -> Embedder:
    return Embedder.from_pretrained(tiny_llama_dir, device="cpu", dtype="fp32")


# ------------------------------------------------------------------ attention setting


def test_auto_picks_sdpa_on_cpu_and_flash_only_on_cuda_with_flash_attn(llama: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    base = unwrap(llama.backbone)
    monkeypatch.setattr(attention, "flash_attn_installed", lambda: True)
    assert choose_attention(base, "auto", "cpu") == "sdpa"
    assert choose_attention(base, None, "cpu") == "sdpa"
    assert choose_attention(base, "auto", "cuda") == "flash_attention_2"
    monkeypatch.setattr(attention, "flash_attn_installed", lambda: False)
    assert choose_attention(base, "auto", "cuda") == "sdpa"
    assert choose_attention(_NoKernels(), "auto", "cuda") == "eager"


def test_named_kernels_that_cannot_run_are_errors(llama: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    base = unwrap(llama.backbone)
    monkeypatch.setattr(attention, "flash_attn_installed", lambda: True)
    with pytest.raises(ConfigError, match="CUDA only.*cpu"):
        choose_attention(base, "flash_attention_2", "cpu")
    monkeypatch.setattr(attention, "flash_attn_installed", lambda: False)
    with pytest.raises(ConfigError, match="needs the 'flash_attn' package"):
        choose_attention(base, "flash_attention_2", "cuda")
    with pytest.raises(ConfigError, match="_NoKernels does not support it"):
        choose_attention(_NoKernels(), "sdpa", "cpu")
    with pytest.raises(ConfigError, match="choose one of auto, eager, sdpa, flash_attention_2"):
        choose_attention(base, "flash", "cpu")
    assert choose_attention(base, "eager", "cpu") == "eager"


def test_switching_the_kernel_is_real_and_keeps_the_embeddings(llama: Embedder) -> None:
    base = unwrap(llama.backbone)
    assert apply_attention(base, "auto", "cpu") == "sdpa"
    assert base.config._attn_implementation == "sdpa"
    sdpa = llama.encode(TEXTS)
    assert apply_attention(base, "eager", "cpu") == "eager"
    assert base.config._attn_implementation == "eager"
    eager = llama.encode(TEXTS)
    np.testing.assert_allclose(eager, sdpa, atol=1e-5)  # the two kernels compute the same attention


class _StuckModel(torch.nn.Module):
    """Like remote-code models: says it supports FlashAttention-2 but cannot switch (transformers only warns)."""

    _supports_sdpa = True
    _supports_flash_attn = True

    def __init__(self) -> None:
        super().__init__()
        self.config = type("Config", (), {"_attn_implementation": "eager", "model_type": "stuck"})()

    def set_attn_implementation(self, implementation: str) -> None:
        pass


def test_auto_keeps_a_kernel_it_cannot_switch_and_a_named_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attention, "flash_attn_installed", lambda: True)
    model = _StuckModel()
    assert apply_attention(model, "auto", "cuda") == "eager"  # flash refused by the model: keeps its own
    assert apply_attention(model, "auto", "cpu") == "eager"  # auto never switches away from the loaded kernel but to flash
    with pytest.raises(ConfigError, match=r"_StuckModel \(stuck\) cannot switch its attention"):
        apply_attention(model, "sdpa", "cpu")
    assert model.config._attn_implementation == "eager"


def test_attention_settings_are_typed_and_checked() -> None:
    config = TrainConfig.from_dict({"train_data": "x.jsonl", "attn_implementation": "eager", "unpad": True})
    assert config.model.attn_implementation == "eager" and config.model.unpad is True
    assert TrainConfig.from_dict({"train_data": "x.jsonl"}).model.attn_implementation == "auto"
    with pytest.raises(ConfigError, match="attn_implementation"):
        TrainConfig.from_dict({"train_data": "x.jsonl", "attn_implementation": "flash"})


# ------------------------------------------------------------------ unpadding guard


def test_unpadding_needs_a_variable_length_model_and_flash_attention(llama: Embedder) -> None:
    with pytest.raises(ConfigError, match="unpad: _NoKernels has no variable-length attention"):
        check_unpadding(_NoKernels(), "eager")
    base = unwrap(llama.backbone)
    with pytest.raises(ConfigError, match=r"unpad: needs attn_implementation flash_attention_2 .*runs sdpa"):
        apply_attention(base, "auto", "cpu", unpad=True)
    check_unpadding(base, "flash_attention_2")  # supported class + the varlen kernel: accepted


def test_train_with_unpad_on_the_cpu_fails_before_training(tiny_llama_dir: Path, tmp_path: Path) -> None:
    from anglekit.training.run import train

    import helpers

    data = helpers.write_pairs(tmp_path / "pairs.jsonl", 16)
    out = tmp_path / "run"
    config = TrainConfig.from_dict(
        {
            "model": str(tiny_llama_dir),
            "train_data": str(data),
            "output_dir": str(out),
            "max_steps": 1,
            "device": "cpu",
            "unpad": True,
            "quiet": True,
            "positive_threshold": 4.0,
        }
    )
    with pytest.raises(ConfigError, match="unpad: needs attn_implementation flash_attention_2"):
        train(config)
    assert not (out / "results.json").exists()


# ------------------------------------------------------------------ gradient checkpointing + LoRA


def _lora_gradients(tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch, *, checkpointing: bool) -> tuple[dict[str, torch.Tensor], int]:
    """LoRA gradients of a fixed loss on the tiny Llama, and how many times its MLP blocks ran."""
    from transformers.models.llama import modeling_llama

    from anglekit.training.checkpointing import enable_gradient_checkpointing

    embedder = Embedder.from_pretrained(tiny_llama_dir, device="cpu", dtype="fp32")
    base = unwrap(embedder.backbone)
    if checkpointing:
        enable_gradient_checkpointing(base)
    embedder.add_lora(rank=4, alpha=8, dropout=0.0)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in embedder.named_parameters():
            if "lora_" in name:  # the same adapters in both runs (A is random at creation, B zero)
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    calls = 0
    original = modeling_llama.LlamaMLP.forward

    def counted(self: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:  # module hooks do not run on recompute
        nonlocal calls
        calls += 1
        return original(self, x)

    monkeypatch.setattr(modeling_llama.LlamaMLP, "forward", counted)
    embedder.train()
    batch = embedder.tokenize(TEXTS)
    vectors = embedder(**batch)
    (vectors[0] @ vectors[1] - vectors[2].pow(2).sum() + vectors[3].sum()).backward()
    monkeypatch.setattr(modeling_llama.LlamaMLP, "forward", original)
    grads = {n: p.grad.detach().clone() for n, p in embedder.named_parameters() if p.requires_grad}
    return grads, calls


def test_gradient_checkpointing_gives_the_same_lora_gradients(tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain, plain_calls = _lora_gradients(tiny_llama_dir, monkeypatch, checkpointing=False)
    checkpointed, checkpointed_calls = _lora_gradients(tiny_llama_dir, monkeypatch, checkpointing=True)
    # 2 layers: each block runs once, and once more in the backward pass when checkpointed.
    assert (plain_calls, checkpointed_calls) == (2, 4)
    assert plain.keys() == checkpointed.keys() and plain
    assert all(float(g.abs().sum()) > 0 for g in plain.values())  # every adapter gets a gradient
    for name, grad in plain.items():
        torch.testing.assert_close(checkpointed[name], grad, rtol=1e-4, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")


# ------------------------------------------------------------------ no GPU-only import


def test_import_and_help_load_no_gpu_only_package(tmp_path: Path) -> None:
    """Fake flash_attn / bitsandbytes packages are importable; neither import nor --help may load them."""
    for name in ("flash_attn", "bitsandbytes"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise SystemExit('imported " + name + "')\n", encoding="utf-8")
    script = textwrap.dedent(
        """
        import contextlib, io, sys
        import anglekit
        from anglekit.cli import main
        with contextlib.redirect_stdout(io.StringIO()) as out:
            try:
                main(["--help"])
            except SystemExit as exc:
                assert exc.code == 0, exc.code
        assert "usage" in out.getvalue()
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("flash_attn", "bitsandbytes"))
        print("LOADED", loaded)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout
