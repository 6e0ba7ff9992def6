"""The fused gated MLP: ``silu(gate) * up`` bit for bit, its gradients, what it keeps for the
backward pass, and the swap of a decoder's MLPs for the training loop (with LoRA and fast dropout)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from anglekit.training.speed.fast_dropout import faster_dropout
from anglekit.training.speed.fused_mlp import MLP_CLASSES, fused_mlps, swiglu

import helpers

BF16 = torch.bfloat16


def _pair(dtype: torch.dtype, shape: tuple[int, ...] = (3, 7, 40)) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(0)
    return (torch.randn(shape, generator=generator) * 3).to(dtype), torch.randn(shape, generator=generator).to(dtype)


def _rel(a: Tensor, b: Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.parametrize("dtype", [torch.float32, BF16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("autocast", [False, True], ids=["plain", "autocast"])
def test_forward_is_bit_identical_and_gradients_match_autograd(dtype: torch.dtype, autocast: bool) -> None:
    gate, up = _pair(dtype)
    grads = {}
    outs = {}
    for name, fn in (("autograd", lambda g, u: F.silu(g) * u), ("fused", swiglu)):
        g, u = gate.clone().requires_grad_(), up.clone().requires_grad_()
        with torch.autocast("cpu", dtype=BF16, enabled=autocast):
            out = fn(g, u)
        outs[name] = out
        (out.float() * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
        grads[name] = (g.grad, u.grad)
    assert torch.equal(outs["fused"], outs["autograd"]) and outs["fused"].dtype == outs["autograd"].dtype
    tol = 1e-6 if dtype == torch.float32 else 1e-2  # bf16: autograd rounds silu(gate) and its derivative to bf16, the fused maths does not
    for fused, reference in zip(grads["fused"], grads["autograd"], strict=False):
        assert fused.dtype == reference.dtype and _rel(fused, reference) < tol


def test_gradcheck_in_float64() -> None:
    gate, up = (t.double().requires_grad_() for t in _pair(torch.float32, (2, 5)))
    assert torch.autograd.gradcheck(swiglu, (gate, up))


def test_keeps_gate_and_up_only() -> None:
    gate, up = (t.requires_grad_() for t in _pair(BF16, (8, 37, 1536)))
    saved: dict[str, int] = {}
    for name, fn in (("autograd", lambda g, u: F.silu(g) * u), ("fused", swiglu)):
        total = 0

        def pack(t: Tensor) -> Tensor:
            nonlocal total
            total += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn(gate, up)
        saved[name] = total
    one = gate.numel() * gate.element_size()
    assert saved["fused"] == 2 * one and saved["autograd"] == 3 * one


def _tiny_lora_llama(dtype: torch.dtype) -> Any:
    return helpers.tiny_lora_llama(dtype, ["q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"])


def _loss_and_grads(model: Any, autocast: bool) -> tuple[Tensor, dict[str, Tensor]]:
    ids = torch.randint(0, 128, (3, 12), generator=torch.Generator().manual_seed(4))
    model.zero_grad(set_to_none=True)
    torch.manual_seed(7)  # the same dropout masks in every call
    with torch.autocast("cpu", dtype=BF16, enabled=autocast):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("precision", ["fp32", "bf16-autocast"])
def test_lora_training_step_unchanged_by_the_swap_with_fast_dropout(precision: str, caplog: pytest.LogCaptureFixture) -> None:
    autocast = precision != "fp32"
    model = _tiny_lora_llama(BF16 if autocast else torch.float32)
    keys = list(model.state_dict())
    mlps = [m for m in model.modules() if type(m).__name__ == "LlamaMLP"]
    with faster_dropout(model, enabled=True, device="cpu"):
        loss, grads = _loss_and_grads(model, autocast)
        with caplog.at_level(logging.INFO, logger="anglekit.training.speed.fused_mlp"), fused_mlps(model, enabled=True, device="cpu") as count:
            assert count == 2 and all("forward" in m.__dict__ for m in mlps)
            assert list(model.state_dict()) == keys
            fused_loss, fused_grads = _loss_and_grads(model, autocast)
    assert "fused MLP: 2 gated MLP(s)" in caplog.text
    assert torch.equal(fused_loss, loss)  # the same forward, the same dropout masks
    assert grads.keys() == fused_grads.keys() and all("lora_" in n for n in grads)
    for name, grad in grads.items():
        assert _rel(fused_grads[name], grad) < (1e-5 if not autocast else 2e-2), name
    assert all("forward" not in m.__dict__ for m in mlps) and list(model.state_dict()) == keys


def test_restored_after_an_error_and_nothing_swapped_off_cpu() -> None:
    model = _tiny_lora_llama(torch.float32)
    mlps = [m for m in model.modules() if type(m).__name__ == "LlamaMLP"]
    with pytest.raises(RuntimeError, match="boom"), fused_mlps(model, enabled=True, device="cpu") as count:
        assert count == 2
        raise RuntimeError("boom")
    assert all("forward" not in m.__dict__ for m in mlps)
    for kwargs in ({"enabled": True, "device": "cuda"}, {"enabled": False, "device": "cpu"}):
        with fused_mlps(model, **kwargs) as count:
            assert count == 0 and all("forward" not in m.__dict__ for m in mlps)


def test_an_mlp_with_another_activation_is_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    model = _tiny_lora_llama(torch.float32)
    for module in model.modules():
        if type(module).__name__ == "LlamaMLP":
            module.act_fn = torch.nn.GELU()
    with caplog.at_level(logging.WARNING, logger="anglekit.training.speed.forward_swaps"), fused_mlps(model, enabled=True, device="cpu") as count:
        assert count == 0
    assert "LlamaMLP computes something else" in caplog.text


def test_a_class_that_changed_its_forward_is_left_alone(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from transformers.models.llama.modeling_llama import LlamaMLP

    monkeypatch.setattr(LlamaMLP, "forward", lambda self, x: self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x) * 2))
    model = _tiny_lora_llama(torch.float32)
    with caplog.at_level(logging.WARNING, logger="anglekit.training.speed.forward_swaps"), fused_mlps(model, enabled=True, device="cpu") as count:
        assert count == 0
    assert "LlamaMLP computes something else" in caplog.text


def test_a_probe_that_fails_leaves_the_class_alone(caplog: pytest.LogCaptureFixture) -> None:
    model = _tiny_lora_llama(torch.float32)
    for module in model.modules():
        if type(module).__name__ == "LlamaMLP":
            module.up_proj = torch.nn.Linear(3, 3)  # cannot take the probe's width
    with caplog.at_level(logging.WARNING, logger="anglekit.training.speed.forward_swaps"), fused_mlps(model, enabled=True, device="cpu") as count:
        assert count == 0
    assert "LlamaMLP could not be checked" in caplog.text


def test_allowlist_names_gated_silu_mlps() -> None:
    import importlib

    from anglekit.training.speed.forward_swaps import imported_classes

    for module_name, _ in MLP_CLASSES:
        importlib.import_module(module_name)
    classes = imported_classes(MLP_CLASSES)
    assert len(classes) == len(MLP_CLASSES)
    for cls in classes:
        for attr in ("gate_proj", "up_proj", "down_proj", "act_fn"):
            assert attr in cls.__init__.__code__.co_names, (cls.__name__, attr)
