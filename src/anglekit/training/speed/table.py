"""The table of speed swaps (:data:`SWAPS`), one entry per swap, in the order they are applied.

| swap | flag | devices | matches |
| --- | --- | --- | --- |
| ``compact_embeddings`` | ``compact_embeddings`` | cpu | the input embedding (plain ``nn.Embedding``) |
| ``fast_dropout`` | ``fast_dropout`` | cpu | ``nn.Dropout`` with ``p`` > 0 |
| ``fused_rms_norm`` | ``fused_layers`` | cpu | Llama-style ``*RMSNorm``, or a layer ``kernels`` marks ``RMSNorm`` |
| ``fused_mlp`` | ``fused_layers`` | cpu | Llama-style ``*MLP`` with SiLU |
| ``fused_lora`` | ``fused_layers`` | cpu | PEFT's LoRA ``Linear`` |
| ``packed_tokens`` | ``pack_tokens`` | cpu | ``BertLayer``, ``RobertaLayer``, ``XLMRobertaLayer`` |
| ``fp32_attention`` | ``fp32_attention`` | cpu, bf16 autocast | the backbone's ``sdpa`` attention |
| ``lora_input_casts`` | (always) | any, under autocast | PEFT's LoRA layers' input casts |

Like Liger-Kernel's table of patches per model type, one place says what is swapped where; unlike
it, nothing is patched on a class or for good: each swap is per instance, for the training loop,
after its probe agreed on this installation. Like transformers' ``kernelize(...,
use_fallback=True)``, a swap that cannot be used leaves the model's own code in place.
:func:`anglekit.training.speed.plan.plan` reads the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from anglekit.plugins import Registry
from anglekit.training.speed.autocast_swaps import attention_in_fp32, attention_problem, lora_input_casts_problem, lora_inputs_uncast
from anglekit.training.speed.fast_dropout import dropouts, fast_dropouts
from anglekit.training.speed.forward_swaps import swapped_forwards
from anglekit.training.speed.fused_mlp import MLP_CLASSES, fused_mlp_forward, mlp_agrees
from anglekit.training.speed.fused_norm import NORM_CLASSES, fused_rms_norm_forward, rms_norm_agrees
from anglekit.training.speed.lora_update import LORA_CLASSES, fused_lora_forward, lora_agrees
from anglekit.training.speed.packed_layers import LAYER_CLASSES, packed_agrees, packed_layer_forward
from anglekit.training.speed.swap import Matches, SpeedSettings, Swap, agreement, check_swap
from anglekit.training.speed.vocab_rows import compact_embedding, compact_rows

SWAPS: Registry[Swap] = Registry("speed swap", check=check_swap)
"""Name -> :class:`~anglekit.training.speed.swap.Swap`, in the order the plan applies them."""

CPU = ("cpu",)


def _forward_swap(*, label: str, does: str, flag: str, matches: Matches, forward: Any, agrees: Any) -> Swap:
    """A CPU swap that gives the matched modules an instance ``forward`` where ``agrees`` accepts their class."""

    def apply(model: nn.Module, modules: list[nn.Module], settings: SpeedSettings) -> Any:
        return swapped_forwards(modules, forward)

    return Swap(label=label, does=does, flag=flag, devices=CPU, matches=matches, apply=apply, probe=agreement(agrees, label, matches))


def _input_embedding(model: nn.Module, settings: SpeedSettings) -> list[nn.Module]:
    backbone = getattr(settings.embedder, "backbone", None)
    embedding = backbone.get_input_embeddings() if hasattr(backbone, "get_input_embeddings") else None
    return [embedding] if isinstance(embedding, nn.Module) else []


def _compact_probe(model: nn.Module, module: nn.Module, settings: SpeedSettings) -> str | None:
    rows, note = compact_rows(settings.embedder, model, settings.dataset, weight_decay=settings.weight_decay, optim=settings.optim, pad_id=settings.pad_id)
    if rows is None:
        return note
    settings.found["compact_embeddings"] = (rows, note)
    return None


@contextmanager
def _compact(model: nn.Module, modules: list[nn.Module], settings: SpeedSettings) -> Iterator[str]:
    rows, note = settings.found["compact_embeddings"]
    with compact_embedding(settings.embedder.backbone, rows):
        yield note


def _backbone(model: nn.Module, settings: SpeedSettings) -> list[nn.Module]:
    from anglekit.llm.lora import unwrap

    backbone = getattr(settings.embedder, "backbone", None)
    return [unwrap(backbone)] if isinstance(backbone, nn.Module) else []


def _bf16_autocast(settings: SpeedSettings) -> str | None:
    return None if settings.autocast == torch.bfloat16 else f"needs bf16 autocast (this run computes in {settings.arithmetic()})"


def _autocast(settings: SpeedSettings) -> str | None:
    return None if settings.autocast is not None else "needs autocast (this run computes in fp32)"


def _lora_layers(model: nn.Module, settings: SpeedSettings) -> list[nn.Module]:
    return [m for m in model.modules() if hasattr(m, "cast_input_dtype_enabled")]


LLAMA = "Llama-style decoders (Llama, Mistral, Qwen2/3, SmolLM3)"

SWAPS.register(
    "compact_embeddings",
    Swap(
        label="compact embeddings",
        does="input embedding(s) train only the rows the training set reaches",
        flag="compact_embeddings",
        devices=CPU,
        matches=Matches("the backbone's input embedding (a plain nn.Embedding)", find=_input_embedding),
        probe=_compact_probe,
        apply=_compact,
    ),
)
SWAPS.register(
    "fast_dropout",
    Swap(
        label="fast dropout",
        does="dropout module(s) draw 16-bit masks for training",
        flag="fast_dropout",
        devices=CPU,
        matches=Matches("torch.nn.Dropout with p > 0", find=lambda model, settings: dropouts(model)),
        apply=lambda model, modules, settings: fast_dropouts(model, modules),
    ),
)
SWAPS.register(
    "fused_rms_norm",
    _forward_swap(
        label="fused RMSNorm",
        does="norm(s) keep their input and an fp32 rstd per row for backward",
        flag="fused_layers",
        matches=Matches(f"the RMSNorms of {LLAMA}, or a layer transformers' kernels mark RMSNorm", NORM_CLASSES, kernel_layers=("RMSNorm",)),
        forward=fused_rms_norm_forward,
        agrees=rms_norm_agrees,
    ),
)
SWAPS.register(
    "fused_mlp",
    _forward_swap(
        label="fused MLP",
        does="gated MLP(s) keep gate and up, not silu(gate), for backward",
        flag="fused_layers",
        matches=Matches(f"the SiLU-gated MLPs of {LLAMA}", MLP_CLASSES),
        forward=fused_mlp_forward,
        agrees=mlp_agrees,
    ),
)
SWAPS.register(
    "fused_lora",
    _forward_swap(
        label="fused LoRA",
        does="adapted layer(s) add their update inside one matmul",
        flag="fused_layers",
        matches=Matches("PEFT's LoRA Linear layers", LORA_CLASSES),
        forward=fused_lora_forward,
        agrees=lora_agrees,
    ),
)
SWAPS.register(
    "packed_tokens",
    _forward_swap(
        label="packed tokens",
        does="encoder layer(s) run their matmuls over the real tokens only",
        flag="pack_tokens",
        matches=Matches("the layers of BERT-style encoders (BERT, RoBERTa, XLM-R)", LAYER_CLASSES),
        forward=packed_layer_forward,
        agrees=packed_agrees,
    ),
)
SWAPS.register(
    "fp32_attention",
    Swap(
        label="fp32 attention",
        does="backbone(s) compute attention without dropout in fp32 under bf16 autocast",
        flag="fp32_attention",
        devices=CPU,
        matches=Matches("the backbone's sdpa attention", find=_backbone),
        needs=_bf16_autocast,
        probe=lambda model, module, settings: attention_problem(module),
        apply=lambda model, modules, settings: attention_in_fp32(modules[0]),
    ),
)
SWAPS.register(
    "lora_input_casts",
    Swap(
        label="no LoRA input casts",
        does="LoRA layer(s) leave their input's dtype to autocast",
        flag=None,
        devices=None,
        matches=Matches("PEFT's LoRA layers (their input casts)", find=_lora_layers),
        needs=_autocast,
        probe=lambda model, module, settings: lora_input_casts_problem(),
        apply=lambda model, modules, settings: lora_inputs_uncast(model),
    ),
)

__all__ = ["SWAPS"]
