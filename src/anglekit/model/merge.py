"""Weight averaging of a trained model with the model it started from (WiSE-FT, LM-Cocktail).

Fine-tuning on one narrow collection costs a model elsewhere; averaging the trained weights with
the start's wins much of that back while keeping most of the gain (Wortsman et al. 2022, "Robust
fine-tuning of zero-shot models", WiSE-FT; Xiao et al. 2023, LM-Cocktail). Every floating-point
parameter and buffer of the merged backbone is

    (1 - weight) * start + weight * trained

so ``weight`` is the trained model's share: 0 gives the start exactly, 1 the trained model
exactly. It is WiSE-FT's alpha, and LM-Cocktail's ``mix_models([start, trained], weights=[1 - weight, weight])``.

Both models must embed alike but for their weights: the same backbone class and config, tokenizer
(vocabulary, special tokens, the ids of a probe text) and embedding settings (pooling, prompts,
normalisation, max length, ...); :func:`differences` names every field that differs. Integer
buffers (e.g. position ids) must be equal. LoRA adapters are folded into their base first.

:func:`merge_embedders` merges two loaded models in memory; :func:`merge_models` loads them by
name (``pypi:``, hub, folder) and writes one complete folder per weight, atomically, with the
merge recorded in the model card (:attr:`~anglekit.model.card.ModelCardData.merge`).
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from anglekit.errors import ConfigError, OutputError
from anglekit.io.atomic import same_file, settle_modes, staging_dir
from anglekit.llm.lora import unwrap
from anglekit.model.card import ModelCardData, write_card
from anglekit.model.identity import RUNTIME_CONFIG_KEYS, embedding_settings, tokenizer_identity
from anglekit.model.load_settings import LoadSettings

FORMULA = "(1 - weight) * start + weight * trained"
"""What every floating-point parameter and buffer of a merged model is."""
HEAD_CONFIG_KEYS = frozenset({"architectures", "id2label", "label2id", "finetuning_task", "problem_type", "task_specific_params", "gradient_checkpointing"})
"""Backbone config keys left out of the comparison: they describe heads the embedding backbone does
not have (a checkpoint saved with its LM head says ``...ForCausalLM``, anglekit saves the bare
model) or the run that trained it, not what the backbone computes. The backbone's class is compared instead."""
SETTING_FLAGS = "--max-length, --pooling, --prompt, --prompts, --normalize"
"""The flags of ``anglekit merge`` that set an embedding setting for both models."""


# ----------------------------------------------------------------- weights


def check_weight(weight: Any) -> float:
    """``weight`` as a float if it is a number in [0, 1], else a ConfigError naming it."""
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
        raise ConfigError(f"weight must be a number between 0 and 1, got {type(weight).__name__} {weight!r}")
    value = float(weight)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"weight must be between 0 and 1 (the trained model's share), got {weight!r}")
    return value


def check_weights(weights: Sequence[Any]) -> list[float]:
    """Each of ``weights`` checked by :func:`check_weight`; none, or two that would share a folder
    (:func:`folder_name`: one given twice), is a ConfigError."""
    values = [check_weight(w) for w in weights]
    if not values:
        raise ConfigError("give at least one weight")
    seen: dict[str, float] = {}
    for value in values:
        name = folder_name(value)
        if name in seen:
            twice = f"weight {value:g} is given twice" if seen[name] == value else f"weights {seen[name]!r} and {value!r} would share the folder {name}"
            raise ConfigError(twice)
        seen[name] = value
    return values


def folder_name(weight: float) -> str:
    """The subfolder of one weight when several are written: ``w0.25``, ``w0.5``, ``w1``."""
    return f"w{weight:g}"


# ----------------------------------------------------------------- what must agree


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config as ``{"a.b": value}``."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: data}


def _backbone_config(embedder: Any) -> dict[str, Any]:
    config = unwrap(embedder.backbone).config.to_dict()
    flat = _flat(config)
    return {key: value for key, value in flat.items() if not set(key.split(".")) & (RUNTIME_CONFIG_KEYS | HEAD_CONFIG_KEYS)}


def _compare(label: str, start: dict[str, Any], trained: dict[str, Any], show: Any = _shown) -> list[str]:
    missing = object()
    out = []
    for key in dict.fromkeys([*start, *trained]):
        a, b = start.get(key, missing), trained.get(key, missing)
        if a != b:
            shown_a = "absent" if a is missing else show(a)
            shown_b = "absent" if b is missing else show(b)
            out.append(f"{label}{key} ({shown_a} vs {shown_b})")
    return out


def differences(start: Any, trained: Any) -> list[str]:
    """What differs between two Embedders beside their weights, one ``field (start's vs trained's)``
    each: the embedding settings (``pooling``, ``max_length``, prompts, ...), the backbone's class
    (``architecture``) and config (``config.hidden_size``, ...) and the tokenizer
    (``tokenizer.vocab`` by hash, ``tokenizer.special``, ``tokenizer.probe``: the ids of a probe
    text). Empty when they can be averaged (shapes and integer buffers are checked while averaging)."""
    out = _compare("", embedding_settings(start.config), embedding_settings(trained.config))
    kinds = type(unwrap(start.backbone)).__name__, type(unwrap(trained.backbone)).__name__
    if kinds[0] != kinds[1]:
        out.append(f"architecture ({kinds[0]} vs {kinds[1]})")
    out += _compare("config.", _backbone_config(start), _backbone_config(trained))
    tokens = tokenizer_identity(start.tokenizer), tokenizer_identity(trained.tokenizer)
    out += _compare("tokenizer.", *tokens, show=lambda v: _shown(v, 24))
    return out


def check_mergeable(start: Any, trained: Any, names: tuple[str, str] = ("start", "trained")) -> None:
    """A ConfigError naming every field in which ``start`` and ``trained`` differ (:func:`differences`)."""
    for name, model in zip(names, (start, trained), strict=True):
        if model.has_lora:
            raise ConfigError(f"{name}: has LoRA adapters; merge them into their base first (Embedder.merge_lora)")
        if getattr(unwrap(model.backbone), "quantization_method", None) is not None:
            raise ConfigError(f"{name}: k-bit (quantised) weights cannot be averaged; load it in full precision")
    found = differences(start, trained)
    if found:
        raise ConfigError(
            f"cannot merge {names[0]} and {names[1]}: they differ in {'; '.join(found)} (values: start vs trained); "
            f"both must embed alike but for their weights (an embedding setting can be given for both: {SETTING_FLAGS})"
        )


# ----------------------------------------------------------------- averaging


def _tensors(module: Any) -> dict[str, Any]:
    """Every parameter and buffer (non-persistent ones too) of ``module`` by name, shared ones once."""
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def average_backbone(target: Any, start: Any, trained: Any, weight: float) -> None:
    """Set every tensor of ``target`` (a module shaped like ``start`` and ``trained``) to
    :data:`FORMULA`, computed in float64 and stored in the wider of the two dtypes; weight 0 and 1
    copy the start's and the trained model's tensors exactly. Integer and boolean tensors must be
    equal in both; another name set, shape or such a difference is a ConfigError naming the tensors."""
    import torch

    weight = check_weight(weight)
    ours, theirs, goal = _tensors(start), _tensors(trained), _tensors(target)
    if set(ours) != set(theirs):
        only = sorted(set(ours) ^ set(theirs))
        raise ConfigError(f"the models hold different tensors: {', '.join(only[:5])}{' ...' if len(only) > 5 else ''} in one of them only")
    shapes = [f"{n} {tuple(ours[n].shape)} vs {tuple(theirs[n].shape)}" for n in ours if ours[n].shape != theirs[n].shape]
    integers = [n for n in ours if not ours[n].is_floating_point() and not torch.equal(ours[n].cpu(), theirs[n].cpu())]
    if shapes or integers:
        raise ConfigError("cannot average: " + "; ".join([*(f"shape of {s}" for s in shapes[:5]), *(f"integer tensor {n} differs" for n in integers[:5])]))
    with torch.no_grad():
        for name, tensor in goal.items():
            a, b = ours[name].detach(), theirs[name].detach()
            if not a.is_floating_point():
                value = b
            else:
                dtype = torch.promote_types(a.dtype, b.dtype)
                if weight == 0.0 or torch.equal(a.to(dtype), b.to(dtype)):
                    value = a.to(dtype)
                elif weight == 1.0:
                    value = b.to(dtype)
                else:
                    value = ((1.0 - weight) * a.double() + weight * b.to(a.device).double()).to(dtype)
            tensor.data = value.to(tensor.device).clone()


def merge_embedders(
    start: Any, trained: Any, weight: float, *, names: tuple[str, str] | None = None, fingerprints: tuple[str, str] | None = None, lora: bool = False
) -> Any:
    """A new Embedder with ``trained``'s tokenizer and settings and the weights
    ``(1 - weight) * start + weight * trained`` (:func:`average_backbone`); both models are left as
    they were. The settings' ``early_exit`` holds only when both had it.

    ``names`` name the models in errors and in the card (default: where they were loaded from);
    ``fingerprints`` are theirs as recorded (default: computed now); ``lora``: adapters were folded
    in before. The new model's card (:func:`merged_card`) records the merge.
    """
    import copy

    from anglekit.model.embedder import Embedder

    weight = check_weight(weight)
    names = names or (start.source or "start", trained.source or "trained")
    check_mergeable(start, trained, names)
    backbone = copy.deepcopy(trained.backbone)
    average_backbone(backbone, start.backbone, trained.backbone, weight)
    config = replace(trained.config, early_exit=start.config.early_exit and trained.config.early_exit, base_model=None, base_gguf_file=None)
    record = provenance(names, fingerprints or (start.fingerprint(), trained.fingerprint()), weight, lora=lora)
    return Embedder(backbone, trained.tokenizer, config, source=trained.source, card=merged_card(trained.card, names[0], record))


def provenance(names: tuple[str, str], fingerprints: tuple[str, str], weight: float, *, lora: bool = False) -> dict[str, Any]:
    """The merge as the model card records it: both models (local paths made absolute), their
    fingerprints, the weight and the formula."""

    def where(name: str) -> str:
        path = Path(name).expanduser()
        return str(path.resolve()) if not name.startswith("pypi:") and path.exists() else name

    record = {"start": where(names[0]), "start_fingerprint": fingerprints[0], "trained": where(names[1]),
              "trained_fingerprint": fingerprints[1], "weight": weight, "formula": FORMULA}  # fmt: skip
    if lora:
        record["lora"] = "adapters folded into their base before averaging"
    return record


def merged_card(trained_card: ModelCardData | None, start: str, record: dict[str, Any]) -> ModelCardData:
    """The trained model's card (its data and training kept, its scores dropped: they are not the
    merged model's) with ``start`` as its base and the merge ``record`` (:func:`provenance`)."""
    card = ModelCardData.from_dict((trained_card or ModelCardData()).to_dict())
    card.scores = {}
    card.base_model, card.base_gguf_file = start, None
    card.merge = record
    card.tags = list(dict.fromkeys([*card.tags, "merge"]))
    return card


# ----------------------------------------------------------------- from names to folders


@dataclass
class Loaded:
    """A model loaded for merging: the Embedder (adapters folded in), as given, its fingerprint as loaded."""

    name: str
    model: Any
    fingerprint: str
    had_lora: bool


def load_for_merge(name: str, settings: LoadSettings | None = None) -> Loaded:
    """``name`` loaded with the torch backend (default on the CPU), its fingerprint taken as it loads
    (adapters included), then its LoRA adapters, if any, folded into the base."""
    from anglekit.model.embedder import Embedder

    settings = LoadSettings.of(settings, backend="torch")
    if settings.device is None:
        settings = replace(settings, device="cpu")
    model = Embedder.from_pretrained(name, settings)
    fingerprint = model.fingerprint()
    had_lora = model.has_lora
    if had_lora:
        model.merge_lora()
    return Loaded(name, model, fingerprint, had_lora)


def check_output(output: str | os.PathLike[str], inputs: Sequence[str]) -> Path:
    """``output`` if it is none of ``inputs`` and is not a non-empty folder, else an OutputError."""
    target = Path(output).expanduser()
    for given in inputs:
        if given and Path(given).expanduser().exists() and same_file(target, given):
            raise OutputError(f"{output}: the output is an input ({given}); give another --output-dir")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise OutputError(f"{output}: exists and is not an empty folder; remove it or give another --output-dir")
    return target


def merge_models(start: str, trained: str, weights: Sequence[float], output_dir: str | os.PathLike[str], settings: LoadSettings | None = None) -> list[Path]:
    """Merge ``trained`` with ``start`` at each of ``weights`` (the trained model's share) into
    ``output_dir``: the folder itself for one weight, ``output_dir/w{weight}`` for several.

    ``settings`` load both models (default: torch on the CPU; its embedding settings apply to both
    and to the output). Every check (weights, output, settings) runs before anything is written;
    the folders are built in a temporary sibling and renamed into place at the end, so a failure
    leaves nothing at ``output_dir``. Returns the folders written.
    """
    values = check_weights(weights)
    target = check_output(output_dir, (start, trained))
    first, second = load_for_merge(start, settings), load_for_merge(trained, settings)
    check_output(target, (first.model.source, second.model.source))
    check_mergeable(first.model, second.model, (start, trained))
    created = _missing_parents(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_dir(target)
    try:
        folders = [(w, staging if len(values) == 1 else staging / folder_name(w)) for w in values]
        for weight, folder in folders:
            _write(first, second, weight, folder, final=target / folder.relative_to(staging))
        settle_modes(staging)
        _rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for parent in created:
            _remove_if_empty(parent)
        raise
    return [target / folder.relative_to(staging) for _, folder in folders]


def _write(start: Loaded, trained: Loaded, weight: float, folder: Path, *, final: Path) -> None:
    """One merged model saved in ``folder`` (to be renamed to ``final``, the name its card shows)."""
    merged = merge_embedders(start.model, trained.model, weight, names=(start.name, trained.name),
                             fingerprints=(start.fingerprint, trained.fingerprint), lora=start.had_lora or trained.had_lora)  # fmt: skip
    merged.save_pretrained(folder)
    write_card(merged, folder, name=str(final))  # the card names the folder where it ends up, not the staging one


def _missing_parents(target: Path) -> list[Path]:
    """The ancestors of ``target`` that do not exist yet, deepest first."""
    out = []
    parent = target.absolute().parent
    while not parent.exists():
        out.append(parent)
        parent = parent.parent
    return out


def _remove_if_empty(folder: Path) -> None:
    """Remove a folder this merge made, unless something else was put there meanwhile."""
    with contextlib.suppress(OSError):  # not empty (or gone): it is not ours to remove
        folder.rmdir()


def _rename(staging: Path, target: Path) -> None:
    """Move the finished folder into place (onto an empty folder too); an OutputError when ``target``
    was filled meanwhile."""
    try:
        os.replace(staging, target)
    except OSError as exc:
        raise OutputError(f"{target}: cannot move the merged model into place ({exc.strerror or exc}); nothing was written there") from None


__all__ = [
    "FORMULA",
    "Loaded",
    "average_backbone",
    "check_mergeable",
    "check_output",
    "check_weight",
    "check_weights",
    "differences",
    "folder_name",
    "load_for_merge",
    "merge_embedders",
    "merge_models",
    "merged_card",
    "provenance",
]
