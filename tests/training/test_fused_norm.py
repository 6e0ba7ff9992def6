"""The fused RMSNorm: bit for bit transformers' Llama RMSNorm forward, its gradients, what it keeps
for the backward pass, and the swap of a model's norms for the training loop."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import logging  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from torch import Tensor  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRMSNorm  # noqa: E402

from anglekit.training.speed.forward_swaps import imported_classes  # noqa: E402
from anglekit.training.speed.fused_norm import NORM_CLASSES, fused_rms_norms, rms_norm_forward  # noqa: E402

HIDDEN = 96
BF16 = torch.bfloat16


def _norm(weight_dtype: torch.dtype, *, hidden: int = HIDDEN, requires_grad: bool = False, seed: int = 0) -> LlamaRMSNorm:
    norm = LlamaRMSNorm(hidden, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(hidden, generator=torch.Generator().manual_seed(seed)) * 0.3 + 1)
    return norm.to(weight_dtype).requires_grad_(requires_grad)


def _input(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 1) -> Tensor:
    # Rows of different scales, so that rstd differs per row.
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    x = x * torch.linspace(0.05, 20, x[..., :1].numel()).view(*shape[:-1], 1)
    return x.to(dtype)


def _rel(a: Tensor, b: Tensor) -> float:
    """Relative difference of ``a`` from ``b`` (Frobenius norms, float64)."""
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def _fused(norm: LlamaRMSNorm) -> Callable[[Tensor], Tensor]:
    return lambda x: rms_norm_forward(x, norm.weight, norm.variance_epsilon)


# ====================================================================== forward: bit for bit

DTYPES = pytest.mark.parametrize("x_dtype, w_dtype", [(xd, wd) for xd in (torch.float32, BF16) for wd in (torch.float32, BF16)], ids=lambda d: str(d)[6:])


@DTYPES
@pytest.mark.parametrize("autocast", [False, True], ids=["plain", "autocast"])
@pytest.mark.parametrize("shape", [(13, HIDDEN), (3, 11, HIDDEN)], ids=["2d", "3d"])
def test_forward_is_bit_identical_to_transformers(x_dtype: torch.dtype, w_dtype: torch.dtype, autocast: bool, shape: tuple[int, ...]) -> None:
    norm = _norm(w_dtype, requires_grad=True)
    x = _input(shape, x_dtype).requires_grad_()
    with torch.autocast("cpu", dtype=BF16, enabled=autocast):
        expected = norm(x)
        got = rms_norm_forward(x, norm.weight, norm.variance_epsilon)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert torch.equal(got, expected)
    with torch.no_grad(), torch.autocast("cpu", dtype=BF16, enabled=autocast):
        assert torch.equal(rms_norm_forward(x, norm.weight, norm.variance_epsilon), expected)


# ====================================================================== gradients


def _grads(forward: Callable[[Tensor], Tensor], norm: LlamaRMSNorm, x: Tensor, grad_out_seed: int, autocast: bool) -> tuple[Tensor, Tensor | None]:
    x = x.detach().clone().requires_grad_()
    norm.weight.grad = None
    with torch.autocast("cpu", dtype=BF16, enabled=autocast):
        out = forward(x)
        # backward() inside autocast, as a loop that computes its loss there may do.
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_out_seed)).to(out.dtype))
    assert x.grad is not None and x.grad.dtype == x.dtype
    weight_grad = norm.weight.grad
    if norm.weight.requires_grad:
        assert weight_grad is not None and weight_grad.dtype == norm.weight.dtype
    else:
        assert weight_grad is None
    return x.grad, weight_grad


def _reference_grads(norm: LlamaRMSNorm, x: Tensor, grad_out_seed: int, out_dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """float64 gradients of the same maths: xhat rounded to x's dtype for the weight's gradient (as
    the forward scales the rounded rows), the rounding taken as identity for x's."""
    x64 = x.detach().double().requires_grad_()
    w64 = norm.weight.detach().double().requires_grad_()
    xhat = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    rounded = xhat.detach().to(x.dtype).double()
    out = w64 * (xhat + (rounded - xhat).detach())
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_out_seed)).to(out_dtype).double()
    out.backward(grad_out)
    assert x64.grad is not None and w64.grad is not None
    return x64.grad, w64.grad


@DTYPES
@pytest.mark.parametrize("weight_grad", [False, True], ids=["frozen", "trained"])
@pytest.mark.parametrize("autocast", [False, True], ids=["plain", "autocast"])
def test_gradients_match_autograd_through_transformers(x_dtype: torch.dtype, w_dtype: torch.dtype, weight_grad: bool, autocast: bool) -> None:
    norm = _norm(w_dtype, requires_grad=weight_grad)
    x = _input((4, 9, HIDDEN), x_dtype)
    gx_fused, gw_fused = _grads(_fused(norm), norm, x, 7, autocast)
    gx_auto, gw_auto = _grads(norm, norm, x, 7, autocast)
    if x_dtype == torch.float32:
        # fp32 all the way: the same maths, rounded in another order.
        assert _rel(gx_fused, gx_auto) < 1e-5
        torch.testing.assert_close(gx_fused, gx_auto, rtol=1e-5, atol=1e-5 * gx_auto.abs().max().item())
        if weight_grad:
            assert gw_fused is not None and gw_auto is not None
            tol = 1e-5 if w_dtype == torch.float32 else 2**-8  # a bf16 weight's gradient: within one rounding
            assert _rel(gw_fused, gw_auto) < tol
        return
    # bf16 inputs: autograd rounds the upstream gradient to bf16 on the way (the backward of the
    # cast to x's dtype, and of the bf16 product with the weight); the fused backward keeps fp32
    # until the end. Both are within bf16 precision of the float64 gradient, the fused one closer.
    gx_ref, gw_ref = _reference_grads(norm, x, 7, torch.promote_types(x_dtype, w_dtype))
    assert _rel(gx_fused, gx_auto) < 1e-2
    assert _rel(gx_fused, gx_ref) < 2**-8
    assert _rel(gx_fused, gx_ref) <= _rel(gx_auto, gx_ref)
    if weight_grad:
        assert gw_fused is not None and gw_auto is not None
        assert _rel(gw_fused, gw_auto) < 1e-2
        assert _rel(gw_fused, gw_ref) <= _rel(gw_auto, gw_ref) * 1.01 + 1e-6


def test_gradcheck_in_float64() -> None:
    # transformers' forward computes in fp32 even for float64 inputs (and so does this one, bit for
    # bit): finite differences carry fp32 noise of about 6e-8 / eps, hence eps = 1e-2. The exact
    # check is against autograd through the same maths in float64, just below.
    x = torch.randn(3, 5, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).requires_grad_()
    weight = (torch.randn(16, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 0.3 + 1).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, w: rms_norm_forward(a, w, 1e-6), (x, weight), eps=1e-2, atol=1e-4, rtol=1e-3)

    def reference(a: Tensor, w: Tensor) -> Tensor:
        return w * (a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6))

    fused = torch.autograd.functional.jacobian(lambda a, w: rms_norm_forward(a, w, 1e-6), (x, weight))
    exact = torch.autograd.functional.jacobian(reference, (x, weight))
    for got, want in zip(fused, exact, strict=False):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("autocast", [False, True], ids=["plain", "autocast"])
def test_works_under_non_reentrant_checkpoint(autocast: bool) -> None:
    norm = _norm(BF16, requires_grad=True)
    x = _input((4, 9, HIDDEN), BF16)
    results = []
    for use_checkpoint in (False, True):
        leaf = x.clone().requires_grad_()
        norm.weight.grad = None
        with torch.autocast("cpu", dtype=BF16, enabled=autocast):
            hidden = leaf * 2  # not a leaf: checkpoint's input is an activation
            out = checkpoint(_fused(norm), hidden, use_reentrant=False) if use_checkpoint else _fused(norm)(hidden)
            loss = (out.float() * torch.linspace(-1, 1, HIDDEN)).sum()
        loss.backward()
        results.append((out.detach(), leaf.grad, norm.weight.grad))
    for plain, checkpointed in zip(*results, strict=False):
        assert checkpointed is not None and torch.equal(plain, checkpointed)


# ====================================================================== what is kept for backward


def _saved_bytes(forward: Callable[[Tensor], Tensor], x: Tensor) -> int:
    sizes: list[int] = []

    def pack(tensor: Tensor) -> Tensor:
        sizes.append(tensor.numel() * tensor.element_size())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), torch.autocast("cpu", dtype=BF16):
        out = forward(x)
    out.float().sum().backward()
    return sum(sizes)


@pytest.mark.parametrize("weight_grad", [False, True], ids=["frozen", "trained"])
def test_fused_norm_saves_only_input_rstd_and_weight(weight_grad: bool) -> None:
    norm = _norm(BF16, hidden=576, requires_grad=weight_grad)
    x = _input((8, 37, 576), BF16).requires_grad_()
    fused = _saved_bytes(_fused(norm), x)
    original = _saved_bytes(norm, x)
    x_bytes = x.numel() * x.element_size()
    allowed = x_bytes + 8 * 37 * 4 + norm.weight.numel() * norm.weight.element_size()
    assert fused <= allowed
    assert original >= 2 * x_bytes  # at least the fp32 copy of the input (autograd keeps it twice, and more)


# ====================================================================== the swap on a model


def _tiny_llama(dtype: torch.dtype) -> Any:
    config = LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # norm weights away from 1, so that they matter
        for module in model.modules():
            if isinstance(module, LlamaRMSNorm):
                module.weight.uniform_(0.5, 1.5)
    return model.to(dtype)


def _lora(model: Any) -> Any:
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(1)
    lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False))
    return lora.train()


def _loss_and_lora_grads(model: Any, autocast: bool) -> tuple[Tensor, dict[str, Tensor]]:
    ids = torch.randint(0, 128, (3, 12), generator=torch.Generator().manual_seed(4))
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=BF16, enabled=autocast):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad and p.grad is not None}
    assert grads and all("lora_" in name for name in grads)
    return loss.detach(), grads


@pytest.mark.parametrize("precision", ["fp32", "bf16-autocast"])
def test_lora_loss_and_gradients_unchanged_by_the_swap(precision: str) -> None:
    autocast = precision != "fp32"
    model = _lora(_tiny_llama(BF16 if autocast else torch.float32))
    keys = list(model.state_dict())
    loss, grads = _loss_and_lora_grads(model, autocast)
    with fused_rms_norms(model, enabled=True, device="cpu") as count:
        assert count == 2 * 2 + 1
        assert list(model.state_dict()) == keys
        fused_loss, fused_grads = _loss_and_lora_grads(model, autocast)
    assert torch.equal(fused_loss, loss)  # the forward is bit for bit the same
    assert fused_grads.keys() == grads.keys()
    # fp32: rounding order only. bf16: the fused backward skips two bf16 roundings of the gradient
    # per norm, so the LoRA gradients move by about a bf16 rounding.
    tol = 1e-5 if not autocast else 2e-2
    for name, grad in grads.items():
        assert _rel(fused_grads[name], grad) < tol, name
    assert list(model.state_dict()) == keys
    if autocast:
        # That is bf16 noise: both sit about 1% from the same weights run in fp32, the fused no further.
        _, fp32_grads = _loss_and_lora_grads(model.float(), autocast=False)
        flat = {label: torch.cat([g[name].flatten() for name in sorted(grads)]) for label, g in (("orig", grads), ("fused", fused_grads), ("fp32", fp32_grads))}
        assert _rel(flat["fused"], flat["fp32"]) <= 1.1 * _rel(flat["orig"], flat["fp32"]) < 3e-2


def test_swap_counts_restores_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    model = _tiny_llama(torch.float32)
    norms = [m for m in model.modules() if isinstance(m, LlamaRMSNorm)]
    assert len(norms) == 5
    keys = list(model.state_dict())
    with caplog.at_level(logging.INFO, logger="anglekit.training.speed.fused_norm"), fused_rms_norms(model, enabled=True, device=torch.device("cpu")) as count:
        assert count == 5
        assert all("forward" in norm.__dict__ for norm in norms)
        assert list(model.state_dict()) == keys
    assert "fused RMSNorm: 5 norm(s)" in caplog.text
    assert all("forward" not in norm.__dict__ for norm in norms)
    assert all(type(norm) is LlamaRMSNorm and norm.forward.__func__ is LlamaRMSNorm.forward for norm in norms)
    assert list(model.state_dict()) == keys


def test_originals_come_back_when_the_body_raises() -> None:
    model = _tiny_llama(torch.float32)
    norms = [m for m in model.modules() if isinstance(m, LlamaRMSNorm)]
    with pytest.raises(RuntimeError, match="boom"), fused_rms_norms(model, enabled=True, device="cpu") as count:
        assert count == 5
        raise RuntimeError("boom")
    assert all("forward" not in norm.__dict__ for norm in norms)


@pytest.mark.parametrize("enabled, device", [(True, "cuda"), (True, "cuda:0"), (True, "meta"), (False, "cpu")])
def test_nothing_swapped_off_cpu_or_when_disabled(enabled: bool, device: str) -> None:
    model = _tiny_llama(torch.float32)
    with fused_rms_norms(model, enabled=enabled, device=device) as count:
        assert count == 0
        assert all("forward" not in m.__dict__ for m in model.modules())


def test_instance_forwards_and_subclasses_are_left_alone() -> None:
    class Custom(LlamaRMSNorm):
        pass

    model = _tiny_llama(torch.float32)
    hooked = model.model.norm
    own = hooked.forward
    hooked.forward = own  # an instance-level forward (as accelerate's hooks set)
    model.model.layers[0].input_layernorm = Custom(64)
    with fused_rms_norms(model, enabled=True, device="cpu") as count:
        assert count == 3
        assert hooked.__dict__["forward"] is own
        assert "forward" not in model.model.layers[0].input_layernorm.__dict__
    assert hooked.__dict__["forward"] is own


def test_a_norm_class_with_other_maths_is_not_swapped(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def gemma_like(self: LlamaRMSNorm, hidden_states: Tensor) -> Tensor:
        x = hidden_states.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return (x * (1.0 + self.weight.float())).to(hidden_states.dtype)

    model = _tiny_llama(torch.float32)
    monkeypatch.setattr(LlamaRMSNorm, "forward", gemma_like)
    with caplog.at_level(logging.WARNING, logger="anglekit.training.speed.forward_swaps"), fused_rms_norms(model, enabled=True, device="cpu") as count:
        assert count == 0
    assert "LlamaRMSNorm computes something else" in caplog.text


def test_allowlist_resolves_to_the_llama_maths_classes() -> None:
    import importlib

    for module_name, _ in NORM_CLASSES:
        importlib.import_module(module_name)
    classes = imported_classes(NORM_CLASSES)
    assert LlamaRMSNorm in classes and len(classes) == len(NORM_CLASSES)
    for cls in classes:
        norm = cls(HIDDEN, eps=1e-6)
        with torch.no_grad():
            norm.weight.normal_(1, 0.3, generator=torch.Generator().manual_seed(3))
        for dtype in (torch.float32, BF16):
            x = _input((5, HIDDEN), dtype)
            assert torch.equal(norm(x), rms_norm_forward(x, norm.weight, norm.variance_epsilon)), cls.__name__
