"""LoRA adapters through PEFT: attach, load, make trainable, merge.

The backbone an adapter wraps is the embedder's base model (e.g. ``LlamaModel``, no LM head), so
``all-linear`` targets every linear layer of the transformer blocks: attention projections and
the MLP. PEFT is imported only inside these functions.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError

ADAPTER_CONFIG = "adapter_config.json"
ALL_LINEAR = "all-linear"

DEFAULT_RANK = 32
DEFAULT_ALPHA = 32.0
DEFAULT_DROPOUT = 0.1
"""Defaults of the official AnglE-LLaMA recipe (``--lora_r 32 --lora_alpha 32 --lora_dropout 0.1``)."""


def require_peft() -> None:
    """Raise a clear error when PEFT is missing."""
    if importlib.util.find_spec("peft") is None:
        raise ConfigError("LoRA needs the 'peft' package: pip install 'anglekit[llm]' (or peft)")


def parse_target_modules(value: str | list[str] | tuple[str, ...] | None) -> str | list[str]:
    """``all-linear`` (default) or a list of module names from a comma-separated string or a list."""
    if value is None or value == ALL_LINEAR:
        return ALL_LINEAR
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [str(n).strip() for n in names]
    if not names or any(not n for n in names):
        raise ConfigError(f"lora target modules must be '{ALL_LINEAR}' or comma-separated names, got {value!r}")
    return names


@dataclass(frozen=True)
class LoraSettings:
    """Rank, scaling, dropout and targets of new LoRA adapters."""

    rank: int = DEFAULT_RANK
    alpha: float = DEFAULT_ALPHA
    dropout: float = DEFAULT_DROPOUT
    target_modules: str | tuple[str, ...] = ALL_LINEAR
    """``all-linear`` (every linear layer but the LM head) or module names such as ``q_proj,v_proj``."""

    def __post_init__(self) -> None:
        if not isinstance(self.rank, int) or isinstance(self.rank, bool) or self.rank < 1:
            raise ConfigError(f"lora rank must be a positive integer, got {self.rank!r}")
        if not isinstance(self.alpha, (int, float)) or isinstance(self.alpha, bool) or self.alpha <= 0:
            raise ConfigError(f"lora alpha must be positive, got {self.alpha!r}")
        if not isinstance(self.dropout, (int, float)) or isinstance(self.dropout, bool) or not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"lora dropout must be in [0, 1), got {self.dropout!r}")
        targets = parse_target_modules(self.target_modules)  # type: ignore[arg-type]
        object.__setattr__(self, "target_modules", targets if isinstance(targets, str) else tuple(targets))

    def peft_config(self) -> Any:
        require_peft()
        from peft import LoraConfig

        targets = self.target_modules if isinstance(self.target_modules, str) else list(self.target_modules)
        return LoraConfig(
            task_type="FEATURE_EXTRACTION",
            r=self.rank,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=targets,
            bias="none",
        )


def is_peft_model(model: Any) -> bool:
    """Whether ``model`` is wrapped by PEFT (without importing PEFT when it is not loaded)."""
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def unwrap(model: Any) -> Any:
    """The transformers model under a PEFT wrapper (or ``model`` itself)."""
    return model.get_base_model() if is_peft_model(model) else model


def add_lora(backbone: Any, settings: LoraSettings) -> Any:
    """Wrap ``backbone`` with new adapters; only the adapters are trainable afterwards."""
    if is_peft_model(backbone):
        raise ConfigError("the backbone already has LoRA adapters; merge them first (merge_lora) to add new ones")
    require_peft()
    from peft import get_peft_model

    try:
        return get_peft_model(backbone, settings.peft_config())
    except ValueError as exc:  # PEFT names the modules it could not find
        raise ConfigError(f"cannot add LoRA adapters: {exc}") from exc


def load_adapters(backbone: Any, adapter_dir: str, *, trainable: bool = False, revision: str | None = None) -> Any:
    """Wrap ``backbone`` with the adapters saved in ``adapter_dir`` (a folder or hub repository)."""
    require_peft()
    from peft import PeftModel

    kwargs: dict[str, Any] = {"is_trainable": trainable}
    if revision is not None:
        kwargs["revision"] = revision
    try:
        return PeftModel.from_pretrained(backbone, adapter_dir, **kwargs)
    except KeyError as exc:  # a key PEFT needs is missing from the adapters' config
        raise ConfigError(f"{adapter_dir}: cannot load LoRA adapters (adapter_config.json has no {exc} key)") from exc
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{adapter_dir}: cannot load LoRA adapters ({exc})") from exc


def mark_adapters_trainable(model: Any) -> None:
    """Train the adapters (and only them) of a PEFT model loaded for inference."""
    if not is_peft_model(model):
        raise ConfigError("the backbone has no LoRA adapters to train")
    for config in model.peft_config.values():
        config.inference_mode = False
    for name, param in model.named_parameters():
        param.requires_grad = "lora_" in name


def merge(model: Any) -> Any:
    """The base model with the adapters folded into its weights (a standalone transformers model).

    Bases whose weights are plain floating-point tensors merge, GGUF files included (transformers
    de-quantises them when loading); truly quantised weights (bitsandbytes k-bit, packed GGUF
    blocks) are refused: merging into them would round the adapters away.
    """
    if not is_peft_model(model):
        raise ConfigError("the backbone has no LoRA adapters to merge")
    base = unwrap(model)
    method = getattr(base, "quantization_method", None)
    if method is not None and not _all_float(base):
        name = getattr(method, "value", method)
        raise ConfigError(
            f"cannot merge adapters into a k-bit model (weights quantised with {name}); load the adapters onto "
            "a full-precision base (Embedder.from_pretrained(adapter_dir) without load_in_kbit) and merge that"
        )
    merged = model.merge_and_unload()
    if method is not None:
        from anglekit.llm.gguf import drop_quantization_marker

        drop_quantization_marker(merged)
    return merged


def _all_float(model: Any) -> bool:
    """Whether every weight of ``model`` is an ordinary floating-point tensor (nothing packed)."""
    import torch

    if any(not p.is_floating_point() or p.dtype not in (torch.float32, torch.float16, torch.bfloat16) for p in model.parameters()):
        return False
    return not any(type(p).__module__.startswith("bitsandbytes") for p in model.parameters())


def set_adapter_base(model: Any, base: str | None) -> None:
    """Record ``base`` as ``base_model_name_or_path`` of every adapter (what PEFT writes into
    ``adapter_config.json``), instead of the path the base happened to be loaded from."""
    if base is None or not is_peft_model(model):
        return
    for config in model.peft_config.values():
        config.base_model_name_or_path = base


def read_adapter_base(adapter_dir: Path) -> str | None:
    """``base_model_name_or_path`` recorded by PEFT in ``adapter_config.json`` (None if absent)."""
    try:
        data = json.loads((adapter_dir / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{adapter_dir / ADAPTER_CONFIG}: cannot read adapter config ({exc})") from exc
    path = adapter_dir / ADAPTER_CONFIG
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the adapter config must be a JSON object, got {type(data).__name__}")
    value = data.get("base_model_name_or_path")
    if value is not None and not isinstance(value, str):
        raise ConfigError(
            f"{path}: base_model_name_or_path must be a model name or path (a string) or null, got {type(value).__name__} {json.dumps(value)[:80]}"
        )
    return value or None


def trainable_parameter_names(model: Any) -> list[str]:
    return [name for name, param in model.named_parameters() if param.requires_grad]


__all__ = [
    "ALL_LINEAR",
    "LoraSettings",
    "add_lora",
    "is_peft_model",
    "load_adapters",
    "mark_adapters_trainable",
    "merge",
    "parse_target_modules",
    "read_adapter_base",
    "require_peft",
    "set_adapter_base",
    "unwrap",
]
