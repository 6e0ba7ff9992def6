"""The bf16 loop's swaps (fp32 attention on CPUs, no LoRA input casts), fast dropout's one-byte
mask and unbiased bf16 scale, and checkpointing a share of the layers (checkpoint_fraction)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from anglekit.errors import ConfigError
from anglekit.model.embedder import Embedder
from anglekit.training.checkpointing import enable_gradient_checkpointing
from anglekit.training.config import TrainConfig
from anglekit.training.run import train
from anglekit.training.speed.autocast_swaps import FP32_SDPA, fp32_attention, uncast_lora_inputs
from anglekit.training.speed.fast_dropout import LEVELS, SEED_RANGE, FastDropout, cpu_keep_bits, device_keep_bits, keep_bits

# ====================================================================== fast dropout's saved mask


def test_fast_dropout_saves_one_byte_for_backward_and_its_gradient_is_the_mask() -> None:
    saved: list[torch.Tensor] = []
    x = torch.randn(64, 48, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        torch.manual_seed(3)
        out = FastDropout(0.25).train()(x)
    assert [t.dtype for t in saved] == [torch.uint8] and saved[0].shape == x.shape
    assert set(saved[0].unique().tolist()) == {0, 1}  # a 0/1 mask, about a quarter dropped
    assert 0.2 < 1 - saved[0].float().mean().item() < 0.3
    out.backward(torch.ones_like(out))
    scale = 1 / (1 - round(0.25 * LEVELS) / LEVELS)
    assert torch.equal(x.grad, saved[0].float() * scale)  # type: ignore[arg-type]
    assert torch.equal(out, torch.where(saved[0].bool(), x * scale, 0.0))  # fp32: exactly x * keep * scale


def test_device_keep_bits_is_a_uint8_view_of_the_comparison_of_16_bit_lanes() -> None:
    x = torch.empty(333, 17)
    torch.manual_seed(11)
    keep = device_keep_bits(x, round(0.1 * LEVELS))
    torch.manual_seed(11)
    words = torch.empty((x.numel() + 3) // 4, dtype=torch.int64).random_(-(1 << 63), (1 << 63) - 1)
    expected = words.view(torch.int16)[: x.numel()].view(x.shape).int() + LEVELS // 2 >= round(0.1 * LEVELS)
    assert keep.dtype == torch.uint8 and torch.equal(keep.bool(), expected)


def test_cpu_keep_bits_compares_pcg64_lanes_seeded_by_one_torch_draw() -> None:
    x = torch.empty(333, 17)  # 5661 elements: not a multiple of 4, the last word's lanes partly unused
    torch.manual_seed(11)
    keep = keep_bits(x, round(0.1 * LEVELS))
    torch.manual_seed(11)
    seed = int(torch.randint(SEED_RANGE, ()))
    words = np.random.PCG64(seed).random_raw((x.numel() + 3) // 4)
    lanes = [(int(word) >> (16 * i)) & 0xFFFF for word in words for i in range(4)][: x.numel()]  # little-endian lanes
    expected = torch.tensor([lane >= round(0.1 * LEVELS) for lane in lanes]).view(x.shape)
    assert keep.dtype == torch.uint8 and keep.shape == x.shape and torch.equal(keep.bool(), expected)


def test_cpu_masks_follow_torch_s_seed_and_saved_state() -> None:
    x = torch.empty(4096)
    torch.manual_seed(7)
    first, second = keep_bits(x, 6554), keep_bits(x, 6554)
    assert not torch.equal(first, second)  # each mask its own draw
    torch.manual_seed(7)
    assert torch.equal(keep_bits(x, 6554), first)
    state = torch.get_rng_state()
    again = keep_bits(x, 6554)
    torch.set_rng_state(state)
    assert torch.equal(keep_bits(x, 6554), again) and torch.equal(again, second)
    torch.manual_seed(8)
    assert not torch.equal(keep_bits(x, 6554), first)


@pytest.mark.parametrize("threshold", [1, 6554, 32768, 65535])
def test_cpu_keep_bits_keep_each_element_with_the_lane_probability(threshold: int) -> None:
    torch.manual_seed(0)
    keep = cpu_keep_bits(1 << 20, threshold)
    assert keep.dtype == torch.uint8 and keep.shape == (1 << 20,) and set(keep.unique().tolist()) <= {0, 1}
    expected = 1 - threshold / LEVELS
    for lane in keep.view(-1, 4).T.double():  # each of a word's four 16-bit lanes, the top one included
        assert abs(lane.mean().item() - expected) < 0.004
    assert cpu_keep_bits(0, threshold).shape == (0,)


def test_fast_dropout_scales_bf16_in_fp32_arithmetic() -> None:
    # A bf16 mask would hold 1/(1-0.1) as 1.109375 and shrink every kept element by 0.16%.
    torch.manual_seed(0)
    x = torch.rand(1 << 20, dtype=torch.bfloat16) + 0.5
    module = FastDropout(0.1).train()
    torch.manual_seed(5)
    out = module(x)
    torch.manual_seed(5)
    keep = keep_bits(x, module.threshold).bool()
    ratio = (out.double()[keep] / x.double()[keep]).mean().item()
    assert ratio == pytest.approx(module.scale, rel=2e-4)
    assert bool((out[~keep] == 0).all())


# ====================================================================== fp32 attention


def _llama(tiny_llama_dir: Path, dtype: str = "fp32") -> Any:
    embedder = Embedder.from_pretrained(tiny_llama_dir, device="cpu", dtype=dtype)
    embedder.backbone.set_attn_implementation("sdpa")
    return embedder, embedder.backbone


def _batch() -> dict[str, torch.Tensor]:
    ids = torch.randint(3, 40, (3, 9))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding: a bool mask reaches SDPA
    return {"input_ids": ids, "attention_mask": mask}


def test_fp32_attention_runs_sdpa_in_fp32_under_bf16_autocast_and_restores(tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, backbone = _llama(tiny_llama_dir, "bf16")  # bf16 weights: the query reaches attention in bf16 (the laptop recipe)
    _, full = _llama(tiny_llama_dir)
    seen: list[tuple[torch.dtype, bool]] = []
    real = F.scaled_dot_product_attention

    def spy(q: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        seen.append((q.dtype, torch.is_autocast_enabled("cpu")))  # autocast on would cast fp32 back to bf16
        return real(q, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    batch = _batch()
    with torch.no_grad():
        reference = full(**batch).last_hidden_state
        with torch.autocast("cpu", dtype=torch.bfloat16):
            plain = backbone(**batch).last_hidden_state
            with fp32_attention(backbone, enabled=True, device="cpu", autocast_dtype=torch.bfloat16) as switched:
                assert switched and backbone.config._attn_implementation == FP32_SDPA
                upcast = backbone(**batch).last_hidden_state
    assert backbone.config._attn_implementation == "sdpa"
    layers = backbone.config.num_hidden_layers
    assert seen == [(torch.float32, False)] * layers + [(torch.bfloat16, True)] * layers + [(torch.float32, False)] * layers
    assert upcast.dtype == plain.dtype
    # the same model: bf16 autocast either way, the attention alone in fp32 is no further from fp32
    real_rows = batch["attention_mask"].bool()
    error_upcast = (upcast.float() - reference)[real_rows].abs().max()
    error_plain = (plain.float() - reference)[real_rows].abs().max()
    assert error_upcast <= error_plain * 1.5 + 1e-3


def test_fp32_attention_stays_off_where_it_does_not_apply(tiny_llama_dir: Path) -> None:
    _, backbone = _llama(tiny_llama_dir)
    for kwargs in (
        {"enabled": False, "device": "cpu", "autocast_dtype": torch.bfloat16},
        {"enabled": True, "device": "cpu", "autocast_dtype": None},
        {"enabled": True, "device": "cuda", "autocast_dtype": torch.bfloat16},
        {"enabled": True, "device": "cpu", "autocast_dtype": torch.float16},
    ):
        with fp32_attention(backbone, **kwargs) as switched:
            assert not switched and backbone.config._attn_implementation == "sdpa"
    backbone.set_attn_implementation("eager")
    with fp32_attention(backbone, enabled=True, device="cpu", autocast_dtype=torch.bfloat16) as switched:
        assert not switched and backbone.config._attn_implementation == "eager"


def test_fp32_attention_is_restored_after_an_error(tiny_llama_dir: Path) -> None:
    _, backbone = _llama(tiny_llama_dir)
    with pytest.raises(RuntimeError, match="boom"), fp32_attention(backbone, enabled=True, device="cpu", autocast_dtype=torch.bfloat16):
        raise RuntimeError("boom")
    assert backbone.config._attn_implementation == "sdpa"


def test_fp32_attention_leaves_attention_dropout_to_sdpa(monkeypatch: pytest.MonkeyPatch) -> None:
    from anglekit.training.speed import autocast_swaps

    seen: list[torch.dtype] = []

    def fake_sdpa(module: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, **kwargs: Any) -> Any:
        seen.append(q.dtype)
        return q, None

    monkeypatch.setattr("transformers.integrations.sdpa_attention.sdpa_attention_forward", fake_sdpa)
    q = torch.randn(1, 2, 3, 4, dtype=torch.bfloat16)
    out, _ = autocast_swaps.sdpa_in_fp32(None, q, q, q, None, dropout=0.1)
    assert seen == [torch.bfloat16] and out is q
    out, _ = autocast_swaps.sdpa_in_fp32(None, q, q, q, torch.zeros(1, 1, 3, 3, dtype=torch.bfloat16), dropout=0.0)
    assert seen[-1] == torch.float32 and out.dtype == torch.bfloat16


# ====================================================================== LoRA input casts


def test_lora_inputs_keep_autocasts_dtype_in_the_context(tiny_llama_dir: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_llama_dir, device="cpu", dtype="bf16").add_lora(rank=4, alpha=8, dropout=0.1)
    embedder.train()
    seen: list[torch.dtype] = []
    hooks = [
        m.register_forward_pre_hook(lambda _m, args: seen.append(args[0].dtype)) for n, m in embedder.named_modules() if n.endswith("lora_dropout.default")
    ]
    assert hooks
    batch = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        embedder.backbone(**batch)
        assert set(seen) == {torch.float32}  # PEFT casts to the fp32 adapters' dtype
        seen.clear()
        with uncast_lora_inputs(embedder.backbone, autocast_dtype=torch.bfloat16):
            embedder.backbone(**batch)
        assert set(seen) == {torch.bfloat16}
        seen.clear()
        embedder.backbone(**batch)
        assert set(seen) == {torch.float32}  # restored
    with uncast_lora_inputs(embedder.backbone, autocast_dtype=None):  # fp32 runs: nothing to undo
        assert all(getattr(m, "cast_input_dtype_enabled", True) for m in embedder.modules())


def test_a_bf16_lora_run_uses_the_swaps_and_saves_the_original_attention(
    tiny_llama_dir: Path, pair_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="anglekit.training.speed.plan")
    settings = {
        "model": str(tiny_llama_dir), "train_data": str(pair_file), "output_dir": str(tmp_path / "run"), "prompt": "paper",
        "lora": True, "lora_rank": 4, "max_steps": 3, "batch_size": 4, "positive_threshold": 4.0, "device": "cpu",
        "precision": "bf16", "attn_implementation": "sdpa", "quiet": True, "gradient_checkpointing": True, "checkpoint_every": 2,
    }  # fmt: skip
    result = train(TrainConfig.from_dict(settings))
    assert result.steps == 3
    plans = [r.getMessage() for r in caplog.records if r.getMessage().startswith(("speed swaps for", "no speed swap"))]
    assert len(plans) == 1  # logged once per run
    lines = plans[0].splitlines()
    assert lines[0] == "speed swaps for llama on cpu (bfloat16 autocast): 6 applied"
    assert "  fused RMSNorm: 5 norm(s) keep their input and an fp32 rstd per row for backward (LlamaRMSNorm)" in lines  # 2 layers x 2 + the final norm
    assert "  fused MLP: 2 gated MLP(s) keep gate and up, not silu(gate), for backward (LlamaMLP)" in lines
    assert any(line.startswith("  fp32 attention: 1 backbone(s)") for line in lines)
    assert any(line.startswith("  no LoRA input casts:") for line in lines)
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text(encoding="utf-8"))
    assert saved["train"]["fp32_attention"] is True and saved["train"]["checkpoint_every"] == 2 and saved["train"]["fused_layers"] is True
    swaps = saved["speed_swaps"]
    assert swaps == result.speed_swaps == json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))["speed_swaps"]
    assert list(result.speed_swaps["applied"]) == ["fast_dropout", "fused_rms_norm", "fused_mlp", "fused_lora", "fp32_attention", "lora_input_casts"]
    assert swaps["applied"]["fused_lora"] == {"flag": "fused_layers", "modules": 14, "classes": ["Linear"]}  # 2 layers x 7 projections
    assert swaps["skipped"] == {
        "compact_embeddings": "the input embedding is frozen",
        "packed_tokens": "no module matches (the layers of BERT-style encoders (BERT, RoBERTa, XLM-R))",
    }
    assert (swaps["architecture"], swaps["device"]) == ("llama", "cpu") and saved["train"]["compact_embeddings"] is False  # asked, not applied
    reloaded = Embedder.from_pretrained(result.model_dir, device="cpu")
    assert reloaded.backbone.config._attn_implementation != FP32_SDPA
    assert not any("forward" in m.__dict__ for m in reloaded.modules())
    written = [p.read_text(encoding="utf-8") for p in Path(result.model_dir).rglob("*.json")]
    assert written and not any(FP32_SDPA in text for text in written)


# ====================================================================== checkpointing every n-th layer


def _layer_calls(model: nn.Module, loss_of: Any) -> list[int]:
    """How often each decoder layer's MLP ran in one forward and backward pass (2: recomputed)."""
    calls = [0] * len(model.layers)
    hooks = [layer.mlp.register_forward_pre_hook(lambda _m, _a, i=i: calls.__setitem__(i, calls[i] + 1)) for i, layer in enumerate(model.layers)]
    loss_of(model).backward()
    for hook in hooks:
        hook.remove()
    return calls


@pytest.mark.parametrize(("every", "expected"), [(1, [2, 2, 2, 2]), (2, [2, 1, 2, 1]), (3, [2, 1, 1, 2]), (8, [2, 1, 1, 1])])
def test_every_nth_layer_recomputes_and_the_gradients_are_unchanged(every: int, expected: list[int]) -> None:
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=2)
    model = LlamaModel(config).train()
    batch = _batch()
    loss_of = lambda m: m(**batch).last_hidden_state.pow(2).mean()  # noqa: E731
    assert _layer_calls(model, loss_of) == [1, 1, 1, 1]
    reference = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    enable_gradient_checkpointing(model, every)
    assert _layer_calls(model, loss_of) == expected
    for name, grad in reference.items():
        assert torch.allclose(dict(model.named_parameters())[name].grad, grad, atol=1e-6), name


def test_the_fallback_switches_layers_off_where_transformers_takes_no_every_n_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=2)
    model = LlamaModel(config).train()
    # an older transformers: checkpointing is all or nothing, and the layers carry the switch
    monkeypatch.setattr(
        model,
        "activation_checkpointing_enable",
        lambda activation_checkpointing_kwargs: model._activation_checkpointing_enable(activation_checkpointing_kwargs),
    )
    enable_gradient_checkpointing(model, 2)
    assert [layer.gradient_checkpointing for layer in model.layers] == [True, False, True, False]


def test_checkpoint_every_needs_per_layer_switches_and_a_positive_integer() -> None:
    class Old(nn.Module):  # a model that checkpoints all or nothing, without per-layer switches
        def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: Any = None) -> None:
            pass

    with pytest.raises(ConfigError, match="no per-layer checkpointing switch"):
        enable_gradient_checkpointing(Old(), 2)
    enable_gradient_checkpointing(Old(), 1)  # every layer: nothing to switch
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match="checkpoint_every"):
            enable_gradient_checkpointing(Old(), bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -2, 1.5, "two", None, True])
def test_checkpoint_every_refuses_values_out_of_range_or_type(value: Any) -> None:
    with pytest.raises(ConfigError, match="checkpoint_every"):
        TrainConfig.from_dict({"checkpoint_every": value})


def test_checkpoint_every_needs_checkpointing_and_no_kbit_loading() -> None:
    with pytest.raises(ConfigError, match="only applies with gradient_checkpointing"):
        TrainConfig.from_dict({"checkpoint_every": 2})
    with pytest.raises(ConfigError, match="does not combine with load_in_kbit"):
        TrainConfig.from_dict({"checkpoint_every": 2, "gradient_checkpointing": True, "load_in_kbit": 4, "lora": True})
    assert TrainConfig.from_dict({"checkpoint_every": 2, "gradient_checkpointing": True}).trainer.checkpoint_every == 2


@pytest.mark.parametrize("value", ["0", "1.5", "x", ""])
def test_the_checkpoint_every_flag_refuses_bad_values(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--checkpoint-every", value])
    assert exit_info.value.code == 2 and "checkpoint-every" in capsys.readouterr().err
