"""Run a module's computation through a cheaper function for the training loop, per instance.

:func:`instance_forwards` gives every module of exactly the listed classes an instance-level
``forward`` (the class, its ``state_dict`` and every other module are untouched) for the body of a
``with`` block and removes it afterwards, whatever happens. Before the first module of a class is
swapped, ``agrees(module)`` must confirm that the class's own ``forward`` and the replacement
compute the same thing in this installation (a guard against a library release that changes the
maths under the same class name); a class that does not agree, or whose probe raises anything, is
logged and left alone. Modules whose ``forward`` is already replaced on the instance (hooks, hub
kernels) are left alone too. The speed table (:mod:`anglekit.training.speed.table`) uses the same
pieces: :func:`unswapped` to find, :func:`agreeing` to probe, :func:`swapped_forwards` to swap.
"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from torch import nn

logger = logging.getLogger(__name__)


LLAMA_STYLE: tuple[tuple[str, str], ...] = (("llama", "Llama"), ("mistral", "Mistral"), ("qwen2", "Qwen2"), ("qwen3", "Qwen3"), ("smollm3", "SmolLM3"))
"""(transformers module, class prefix) of the decoders built like Llama (RMSNorm, SiLU-gated MLP)."""


def llama_style(suffix: str) -> tuple[tuple[str, str], ...]:
    """``(module, class)`` of each :data:`LLAMA_STYLE` family's class named ``<Prefix><suffix>``."""
    return tuple((f"transformers.models.{module}.modeling_{module}", f"{prefix}{suffix}") for module, prefix in LLAMA_STYLE)


def imported_classes(names: Sequence[tuple[str, str]]) -> tuple[type[nn.Module], ...]:
    """The ``(module, class)`` names among the modules already imported: a class whose module was
    never imported cannot be in any model, so nothing is imported here."""
    found = []
    for module_name, class_name in names:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(cls, type) and issubclass(cls, nn.Module):
            found.append(cls)
    return tuple(found)


def check_class(agrees: Callable[[nn.Module], bool], module: nn.Module, label: str, *, named: bool = True) -> str | None:
    """None where ``agrees(module)`` accepts the module's class in this installation, else why not.

    A probe that raises anything (an ImportError from an older library, an AttributeError, ...)
    is a warning naming ``label`` and the class, and the class is left alone: no speed swap can
    stop a run. A class that computes something else is a warning where it is ``named`` among the
    swap's classes (a library release changed it under the same name), else only the reason."""
    name = type(module).__name__
    try:
        accepted = agrees(module)
    except Exception as exc:  # noqa: BLE001 - whatever a probe raises, its swap is skipped and the run goes on
        logger.warning("%s: %s could not be checked (%s: %s); left as it is", label, name, type(exc).__name__, exc)
        return f"{name} could not be checked ({type(exc).__name__}: {exc})"
    if accepted:
        return None
    if named:
        logger.warning("%s: %s computes something else in this installation; left as it is", label, name)
    return f"{name} computes something else in this installation"


def agreeing(modules: Sequence[nn.Module], agrees: Callable[[nn.Module], bool], label: str) -> tuple[list[nn.Module], dict[str, str]]:
    """The ``modules`` whose class :func:`check_class` accepts (the first module of each class is
    probed), and why each other class was refused (class name -> reason)."""
    verdicts: dict[type, str | None] = {}
    for module in modules:
        if type(module) not in verdicts:
            verdicts[type(module)] = check_class(agrees, module, label)
    refused = {cls.__name__: reason for cls, reason in verdicts.items() if reason is not None}
    return [m for m in modules if verdicts[type(m)] is None], refused


@contextmanager
def swapped_forwards(modules: Sequence[nn.Module], forward: Callable[..., Any]) -> Iterator[int]:
    """For the body, each of ``modules`` runs ``forward`` (bound to it, on the instance); yields how
    many; the class's own forward is back afterwards, whatever happens."""
    swapped: list[tuple[nn.Module, types.MethodType]] = []
    try:
        for module in modules:
            bound = types.MethodType(forward, module)
            module.forward = bound  # type: ignore[method-assign]
            swapped.append((module, bound))
        yield len(swapped)
    finally:
        for module, bound in swapped:
            if module.__dict__.get("forward") is bound:
                del module.__dict__["forward"]


def unswapped(model: nn.Module, classes: tuple[type[nn.Module], ...]) -> list[nn.Module]:
    """The modules of ``model`` whose type is exactly one of ``classes`` and whose ``forward`` is not
    replaced on the instance already (hooks, hub kernels)."""
    return [m for m in model.modules() if type(m) in classes and "forward" not in m.__dict__]


@contextmanager
def instance_forwards(
    model: nn.Module,
    classes: tuple[type[nn.Module], ...],
    forward: Callable[..., Any],
    *,
    agrees: Callable[[nn.Module], bool],
    label: str,
) -> Iterator[int]:
    """For the body, every module of ``model`` whose type is one of ``classes`` runs ``forward``
    (bound to the module) where ``agrees`` accepted its class; yields how many do."""
    accepted, _ = agreeing(unswapped(model, classes), agrees, label)
    with swapped_forwards(accepted, forward) as count:
        yield count


def probe_both(module: nn.Module, forward: Callable[..., Any], weight: Any) -> tuple[Any, Any]:
    """``module``'s class forward and ``forward`` on the same probe (2 x 3 rows of ``weight``'s input
    width, device and dtype), each from the same random state (so any dropout draws alike), without
    gradients, under autocast to ``weight``'s dtype where it is a half one (as in training, where
    autocast handles fp32 adapters on a half base); the caller's random state is left as it was."""
    import torch

    probe = torch.randn(2, 3, weight.shape[-1], generator=torch.Generator().manual_seed(0)).to(weight.device, weight.dtype)
    half = weight.dtype in (torch.bfloat16, torch.float16)
    outputs = []
    with torch.no_grad(), torch.random.fork_rng(devices=[]), torch.autocast(weight.device.type, dtype=weight.dtype, enabled=half):
        for run in (type(module).forward, forward):
            torch.manual_seed(0)
            outputs.append(run(module, probe))
    return outputs[0], outputs[1]


@contextmanager
def on_cpus(
    model: nn.Module,
    *,
    enabled: bool,
    device: Any,
    classes: tuple[type[nn.Module], ...],
    forward: Callable[..., Any],
    agrees: Callable[[nn.Module], bool],
    label: str,
    done: str,
) -> Iterator[int]:
    """:func:`instance_forwards` where it was measured, on CPUs and when ``enabled`` (else
    nothing is swapped: yields 0); logs ``"<label>: <count> <done>"`` when some module was."""
    import torch

    if not enabled or torch.device(device).type != "cpu":
        yield 0
        return
    with instance_forwards(model, classes, forward, agrees=agrees, label=label) as count:
        if count:
            logging.getLogger(forward.__module__).info("%s: %d %s", label, count, done)
        yield count


__all__ = [
    "LLAMA_STYLE",
    "agreeing",
    "check_class",
    "imported_classes",
    "instance_forwards",
    "llama_style",
    "on_cpus",
    "probe_both",
    "swapped_forwards",
    "unswapped",
]
