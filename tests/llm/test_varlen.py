"""torch_varlen: unpadded attention on torch's own variable-length FlashAttention op.

The op runs on CUDA only; here it is replaced by a reference (SDPA over each sequence on its own)
so that everything around it (dropping the padding, cumulative lengths, causality, grouped-query
heads, scattering back, transformers' registration) is checked against the padded SDPA model. The
op's schema and autograd kernel, private to torch, are pinned; its shapes are checked on the meta
device. benchmarks/gpu_check.sh runs the real kernel on a GPU (docs/gpu.md).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from anglekit.errors import ConfigError
from anglekit.llm import attention, varlen
from anglekit.llm.attention import apply_attention, check_unpadding, choose_attention


def reference_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor, max_q: int, max_k: int,
                     dropout_p: float, is_causal: bool, return_debug_mask: bool, *, scale: float | None = None) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """What the op computes (without dropout): attention within each sequence of the flat batch."""
    assert dropout_p == 0.0 and not return_debug_mask
    assert cu_q.dtype == torch.int32 and torch.equal(cu_q, cu_k) and max_q == max_k
    assert max_q == int((cu_q[1:] - cu_q[:-1]).max())
    assert q.shape == k.shape == v.shape and q.shape[0] == int(cu_q[-1])
    out = torch.empty_like(q)
    for start, end in zip(cu_q[:-1].tolist(), cu_q[1:].tolist(), strict=False):
        qi, ki, vi = (t[start:end].transpose(0, 1) for t in (q, k, v))  # (H, T, D)
        out[start:end] = F.scaled_dot_product_attention(qi, ki, vi, is_causal=is_causal, scale=scale).transpose(0, 1)
    return out, None, None, None, None


@pytest.fixture
def on_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(varlen, "_kernel", lambda: reference_kernel)
    assert varlen.register()


def _bert() -> Any:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
                        max_position_embeddings=32, attn_implementation="sdpa")  # fmt: skip
    return BertModel(config).eval()


def _llama() -> Any:
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=48, max_position_embeddings=32, attn_implementation="sdpa")  # fmt: skip
    return LlamaModel(config).eval()


def _batch(left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = [7, 3, 5, 1]
    ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        span = slice(max(lengths) - n, None) if left else slice(0, n)
        ids[row, span] = torch.randint(1, 64, (n,), generator=torch.Generator().manual_seed(row))
        mask[row, span] = 1
    return ids, mask


@pytest.mark.parametrize("build,left", [(_bert, False), (_llama, False), (_llama, True)], ids=["bert", "llama-gqa-right-padded", "llama-gqa-left-padded"])
def test_the_unpadded_model_gives_every_real_token_what_padded_sdpa_gives(on_reference: None, build: Any, left: bool) -> None:
    model = build()
    ids, mask = _batch(left)
    padded = model(input_ids=ids, attention_mask=mask).last_hidden_state
    model.set_attn_implementation(varlen.TORCH_VARLEN)
    assert model.config._attn_implementation == varlen.TORCH_VARLEN
    unpadded = model(input_ids=ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(unpadded[real], padded[real], atol=1e-5, rtol=1e-5)
    model.set_attn_implementation("sdpa")  # and back
    torch.testing.assert_close(model(input_ids=ids, attention_mask=mask).last_hidden_state, padded)


def test_gradients_through_the_unpadded_attention_equal_sdpa_s(on_reference: None) -> None:
    model = _llama()
    ids, mask = _batch(left=False)
    real = mask.bool()
    model(input_ids=ids, attention_mask=mask).last_hidden_state[real].square().sum().backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.set_attn_implementation(varlen.TORCH_VARLEN)
    model(input_ids=ids, attention_mask=mask).last_hidden_state[real].square().sum().backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], atol=1e-5, rtol=1e-4, msg=name)


def test_a_batch_without_padding_attends_over_whole_rows(on_reference: None) -> None:
    model = _bert()
    ids = torch.randint(1, 64, (3, 6), generator=torch.Generator().manual_seed(1))
    expected = model(input_ids=ids).last_hidden_state
    model.set_attn_implementation(varlen.TORCH_VARLEN)
    torch.testing.assert_close(model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state, expected, atol=1e-5, rtol=1e-5)


def test_unpad_layout() -> None:
    indices, cu, longest = varlen.unpad_layout(None, 3, 4, torch.device("cpu"))
    assert indices is None and cu.tolist() == [0, 4, 8, 12] and cu.dtype == torch.int32 and longest == 4
    mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 1, 1]])
    indices, cu, longest = varlen.unpad_layout(mask, 4, 3, torch.device("cpu"))
    assert indices.tolist() == [0, 1, 6, 7, 8, 10, 11] and cu.tolist() == [0, 2, 2, 5, 7] and longest == 3
    with pytest.raises(ValueError, match=r"2D padding mask of shape \(4, 3\), got \(4, 1, 3, 3\)"):
        varlen.unpad_layout(torch.ones(4, 1, 3, 3), 4, 3, torch.device("cpu"))


def test_unsupported_attention_features_are_refused(on_reference: None) -> None:
    q = torch.randn(1, 2, 3, 8)
    with pytest.raises(NotImplementedError, match="sliding-window"):
        varlen.varlen_attention_forward(torch.nn.Module(), q, q, q, None, sliding_window=2)
    with pytest.raises(NotImplementedError, match="query and key lengths differ"):
        varlen.varlen_attention_forward(torch.nn.Module(), q, torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8), None)


def test_the_kernel_computes_in_a_half_dtype() -> None:
    assert varlen.kernel_dtype(torch.zeros(1, dtype=torch.float16)) == torch.float16
    assert varlen.kernel_dtype(torch.zeros(1, dtype=torch.bfloat16)) == torch.bfloat16
    assert varlen.kernel_dtype(torch.zeros(1)) == torch.bfloat16  # fp32 outside autocast, on a device with bf16
    with torch.autocast("cpu", dtype=torch.float16):
        assert varlen.kernel_dtype(torch.zeros(1)) == torch.float16


def test_the_private_op_keeps_the_signature_called() -> None:
    """aten::_flash_attention_forward is private to torch: its arguments, outputs and autograd are pinned."""
    op = torch.ops.aten._flash_attention_forward.default
    names = [a.name for a in op._schema.arguments]
    assert names[:10] == ["query", "key", "value", "cum_seq_q", "cum_seq_k", "max_q", "max_k", "dropout_p", "is_causal", "return_debug_mask"]
    assert "scale" in names and next(a for a in op._schema.arguments if a.name == "scale").kwarg_only
    assert op._schema.returns[0].name == "output"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Autograd")  # differentiable
    q = torch.empty(10, 4, 64, dtype=torch.bfloat16, device="meta")
    cu = torch.tensor([0, 3, 10], dtype=torch.int32, device="meta")
    out = torch.ops.aten._flash_attention_forward(q, q, q, cu, cu, 7, 7, 0.1, True, False, scale=0.125)[0]
    assert out.shape == (10, 4, 64) and out.dtype == torch.bfloat16  # (tokens, heads, head_dim) in, the same out


# ------------------------------------------------------------------ choosing it


def test_auto_with_unpad_falls_back_to_torch_varlen_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _bert()
    monkeypatch.setattr(attention, "flash_attn_installed", lambda: False)
    monkeypatch.setattr(varlen, "kernel_available", lambda: True)
    assert choose_attention(model, "auto", "cuda", unpad=True) == "torch_varlen"
    assert choose_attention(model, "auto", "cuda") == "sdpa"  # without unpad the padded kernel stays
    assert choose_attention(model, "auto", "cpu", unpad=True) == "sdpa"  # and never on the CPU (check_unpadding refuses)
    monkeypatch.setattr(attention, "flash_attn_installed", lambda: True)
    assert choose_attention(model, "auto", "cuda", unpad=True) == "flash_attention_2"
    monkeypatch.setattr(attention, "flash_attn_installed", lambda: False)
    monkeypatch.setattr(varlen, "kernel_available", lambda: False)
    assert choose_attention(model, "auto", "cuda", unpad=True) == "sdpa"
    with pytest.raises(ConfigError, match=r"unpad: needs attn_implementation flash_attention_2 .* or torch_varlen .*runs sdpa"):
        apply_attention(model, "auto", "cuda", unpad=True)


def test_torch_varlen_by_name_is_checked(monkeypatch: pytest.MonkeyPatch, on_reference: None) -> None:
    model = _bert()
    with pytest.raises(ConfigError, match="torch_varlen runs on CUDA only, the model is on cpu"):
        choose_attention(model, "torch_varlen", "cpu")
    monkeypatch.setattr(varlen, "kernel_available", lambda: False)
    with pytest.raises(ConfigError, match="needs a CUDA build of torch with FlashAttention and a GPU of compute capability 8.0"):
        choose_attention(model, "torch_varlen", "cuda")
    monkeypatch.setattr(varlen, "kernel_available", lambda: True)
    assert apply_attention(model, "torch_varlen", "cuda", unpad=True) == "torch_varlen"
    assert model.config._attn_implementation == "torch_varlen"
    check_unpadding(model, "torch_varlen")


def test_kernel_available_is_false_without_cuda() -> None:
    if torch.cuda.is_available():
        pytest.skip("this test checks a machine without CUDA")
    assert varlen.kernel_available() is False


def test_train_config_accepts_torch_varlen() -> None:
    from anglekit.training.config import TrainConfig

    config = TrainConfig.from_dict({"train_data": "x.jsonl", "attn_implementation": "torch_varlen", "unpad": True})
    assert config.model.attn_implementation == "torch_varlen"


def test_registering_needs_a_mask_function_transformers_has() -> None:
    from anglekit.llm.registry import register_attention

    assert register_attention("anglekit_test_no_mask", varlen.varlen_attention_forward, "no_such_mask_function") is False
    from transformers import AttentionInterface

    assert "anglekit_test_no_mask" not in AttentionInterface._global_mapping  # nothing half-registered
