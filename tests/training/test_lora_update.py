"""LoRA's update added inside one matmul: the same sum as PEFT's (within rounding), the same
gradients, PEFT's own forward wherever the layer is not the plain case, and the swap undone."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
from torch import Tensor

from anglekit.training.speed.autocast_swaps import uncast_lora_inputs
from anglekit.training.speed.fast_dropout import faster_dropout
from anglekit.training.speed.lora_update import add_update, fused_lora

import helpers

BF16 = torch.bfloat16
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _rel(a: Tensor, b: Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def test_add_update_is_the_scaled_sum_in_place() -> None:
    generator = torch.Generator().manual_seed(0)
    result, h, weight = torch.randn(6, 5, generator=generator), torch.randn(6, 3, generator=generator), torch.randn(5, 3, generator=generator)
    expected = result + (h @ weight.T) * 2.5
    base = result.clone()
    out = add_update(base, h, weight, 2.5)
    torch.testing.assert_close(out, expected)
    assert out.data_ptr() == base.data_ptr()  # in place: no copy of the base output
    leaf = result.clone().requires_grad_()
    torch.testing.assert_close(add_update(leaf, h, weight, 2.5), expected)  # a leaf is left as it was
    torch.testing.assert_close(leaf, result.requires_grad_())
    view = result.clone().view(2, 3, 5)[0]  # a view: written through a copy, never in place
    before = view.clone()
    torch.testing.assert_close(add_update(view, h[:3], weight, 1.0), before + h[:3] @ weight.T)
    torch.testing.assert_close(view, before)


def _tiny_lora_llama(dtype: torch.dtype, **lora: Any) -> Any:
    return helpers.tiny_lora_llama(dtype, TARGETS, **lora)


def _step(model: Any, autocast: bool) -> tuple[Tensor, dict[str, Tensor], Any]:
    ids = torch.randint(0, 128, (3, 12), generator=torch.Generator().manual_seed(4))
    model.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    with torch.autocast("cpu", dtype=BF16, enabled=autocast):
        loss = model(input_ids=ids, labels=ids).loss
    graph = loss.grad_fn
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, graph


def _node_names(root: Any) -> set[str]:
    names, stack, seen = set(), [root], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.add(type(node).__name__)
        stack.extend(n for n, _ in node.next_functions)
    return names


@pytest.mark.parametrize("precision", ["fp32", "bf16-autocast"])
def test_loss_and_gradients_match_peft_s_forward(precision: str, caplog: pytest.LogCaptureFixture) -> None:
    autocast = precision != "fp32"
    model = _tiny_lora_llama(BF16 if autocast else torch.float32)  # scaling 2.0: folded into the matmul
    keys = list(model.state_dict())
    with faster_dropout(model, enabled=True, device="cpu"), uncast_lora_inputs(model, autocast_dtype=BF16 if autocast else None):
        loss, grads, _ = _step(model, autocast)
        with caplog.at_level(logging.INFO, logger="anglekit.training.speed.lora_update"), fused_lora(model, enabled=True, device="cpu") as count:
            assert count == len(TARGETS) * 2
            assert list(model.state_dict()) == keys
            fused_loss, fused_grads, graph = _step(model, autocast)
    assert "fused LoRA: 14 adapted layer(s)" in caplog.text
    assert "AddmmBackward0" in _node_names(graph) and "CopySlices" not in _node_names(graph)  # in place on 2D rows, no view
    tol = 1e-5 if not autocast else 2e-2  # the same dropout masks; the sums differ by their rounding only
    assert abs(fused_loss.item() - loss.item()) <= tol * abs(loss.item())
    assert grads.keys() == fused_grads.keys() and len(grads) == 2 * len(TARGETS) * 2
    if not autocast:
        for name, grad in grads.items():
            assert _rel(fused_grads[name], grad) < tol, name
    else:  # bf16 rounding moves both by a few percent: the fused gradients are no further from fp32's
        with faster_dropout(model, enabled=True, device="cpu"):
            _, exact, _ = _step(model.float(), autocast=False)
        names = sorted(exact)
        flat = {label: torch.cat([g[n].flatten().float() for n in names]) for label, g in (("peft", grads), ("fused", fused_grads), ("fp32", exact))}
        assert _rel(flat["fused"], flat["fp32"]) <= 1.1 * _rel(flat["peft"], flat["fp32"]) < 5e-2
    assert all("forward" not in m.__dict__ for m in model.modules()) and list(model.state_dict()) == keys


@pytest.mark.parametrize("case", ["dora", "lora_bias", "merged"])
def test_layers_other_than_the_plain_case_run_peft_s_forward(case: str) -> None:
    extra = {"dora": {"use_dora": True}, "lora_bias": {"lora_bias": True}, "merged": {}}[case]
    model = _tiny_lora_llama(torch.float32, lora_dropout=0.0, **extra).eval()
    if case == "merged":
        for module in model.modules():
            if hasattr(module, "merge") and hasattr(module, "lora_A"):
                module.merge()
    ids = torch.randint(0, 128, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(input_ids=ids).logits
        with fused_lora(model, enabled=True, device="cpu"):
            got = model(input_ids=ids).logits
    assert torch.equal(got, expected)  # PEFT's own forward, bit for bit


def test_undone_after_an_error_and_nothing_swapped_off_cpu() -> None:
    model = _tiny_lora_llama(torch.float32)
    with pytest.raises(RuntimeError, match="boom"), fused_lora(model, enabled=True, device="cpu") as count:
        assert count == 14
        raise RuntimeError("boom")
    assert all("forward" not in m.__dict__ for m in model.modules())
    for kwargs in ({"enabled": True, "device": "cuda"}, {"enabled": False, "device": "cpu"}):
        with fused_lora(model, **kwargs) as count:
            assert count == 0


def test_a_model_without_lora_has_nothing_to_fuse() -> None:
    from transformers import BertConfig, BertModel

    model = BertModel(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=48))
    with fused_lora(model, enabled=True, device="cpu") as count:
        assert count == 0


def test_torch_dropout_is_applied_as_peft_applies_it() -> None:
    """Without fast dropout (nn.Dropout on the adapter's input) the masks are drawn by the module
    itself, in the same order: the same loss and gradients as PEFT's forward."""
    model = _tiny_lora_llama(torch.float32)
    loss, grads, _ = _step(model, autocast=False)
    with fused_lora(model, enabled=True, device="cpu") as count:
        assert count == 14
        fused_loss, fused_grads, _ = _step(model, autocast=False)
    assert abs(fused_loss.item() - loss.item()) <= 1e-5 * abs(loss.item())
    for name, grad in grads.items():
        assert _rel(fused_grads[name], grad) < 1e-5, name
