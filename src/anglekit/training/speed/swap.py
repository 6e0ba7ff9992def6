"""What one speed swap is (:class:`Swap`): what it matches, its probe, its flag, its devices, and how
it is applied; and what a plan reads besides the model (:class:`SpeedSettings`).

A swap matches modules by exact class (``(module, class)`` names, looked up only among modules
already imported), or by the layer name transformers' ``kernels`` integration marks a class with
(``kernel_layer_name``, e.g. ``"RMSNorm"``; present where the ``kernels`` package is installed), or
through its own finder (the input embedding, the backbone). Its probe runs on the first module of
each matched class and says whether the swap computes what the class computes in this
installation; whatever a probe raises, the swap is skipped with a warning (:mod:`.plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields
from typing import Any

from torch import nn

from anglekit.errors import ConfigError
from anglekit.training.speed.forward_swaps import check_class, imported_classes

DEVICES = ("cpu", "cuda", "mps", "xpu")
"""Device types a swap may name."""


@dataclass
class SpeedSettings:
    """What the swaps read besides the model: the flags (flag -> on; a flag left out is on), the
    device type the loop runs on, the autocast dtype (None: fp32), and for the swaps that need them
    the embedder (its backbone and tokenizer), the tokenized training set and its padding id, and
    the optimizer's weight decay and name. ``found``: what a probe hands its swap's apply step."""

    flags: Mapping[str, bool] = field(default_factory=dict)
    device: str = "cpu"
    autocast: Any = None
    embedder: Any = None
    dataset: Any = None
    pad_id: int | None = None
    weight_decay: float = 0.0
    optim: str | None = None
    found: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError(f"speed settings: device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        wrong = [name for name, value in self.flags.items() if not isinstance(value, bool)]
        if wrong:
            raise ConfigError(f"speed settings: flags must be true or false: {', '.join(wrong)}")

    def arithmetic(self) -> str:
        """What the loop computes in: ``fp32``, or the autocast dtype's name (``bfloat16``)."""
        return "fp32" if self.autocast is None else str(self.autocast).removeprefix("torch.")


@dataclass(frozen=True)
class Matches:
    """What a swap applies to, in words (``what``), by exact class names (``classes``), by the layer
    names transformers' ``kernels`` integration gives classes (``kernel_layers``), or by ``find``
    (the model and settings -> the modules) where it is neither. Modules whose ``forward`` is
    replaced on the instance already (hooks, hub kernels) are not matched by class or layer name."""

    what: str
    classes: tuple[tuple[str, str], ...] = ()
    kernel_layers: tuple[str, ...] = ()
    find: Callable[[nn.Module, SpeedSettings], list[nn.Module]] | None = None

    def modules(self, model: nn.Module, settings: SpeedSettings) -> list[nn.Module]:
        """The modules of ``model`` this matches, in the model's order."""
        if self.find is not None:
            return list(self.find(model, settings))
        classes = imported_classes(self.classes)
        found = []
        for module in model.modules():
            if "forward" in module.__dict__:
                continue
            if type(module) in classes or (self.kernel_layers and getattr(type(module), "kernel_layer_name", None) in self.kernel_layers):
                found.append(module)
        return found

    def names(self, module: nn.Module) -> bool:
        """Whether ``module``'s class is one of :attr:`classes` (not only a marked kernel layer)."""
        cls = type(module)
        return (cls.__module__, cls.__name__) in self.classes


Probe = Callable[[nn.Module, nn.Module, SpeedSettings], "str | None"]
"""The model, a module (the first of its class) and the settings -> None where the swap applies to
the module's class, else why not. It may raise: the plan skips the swap with a warning."""

Apply = Callable[[nn.Module, list[nn.Module], SpeedSettings], AbstractContextManager[Any]]
"""The model, the modules the plan chose and the settings -> a context in which they are swapped
(undone on exit, whatever happens); it may yield a note for the plan's record (a string)."""


@dataclass(frozen=True)
class Swap:
    """One speed swap: ``label`` (how logs name it) and ``does`` (logged as ``<count> <does>``);
    ``flag``, the trainer setting that turns it off (None: always on where it applies); ``devices``,
    the device types it is used on, where it was measured (None: any); ``matches``; ``probe`` (None:
    the match is enough); ``needs``, a condition on the run (None where it holds, else why not:
    autocast, ...); ``apply``."""

    label: str
    does: str
    flag: str | None
    devices: tuple[str, ...] | None
    matches: Matches
    apply: Apply
    probe: Probe | None = None
    needs: Callable[[SpeedSettings], str | None] | None = None


def agreement(agrees: Callable[[nn.Module], bool], label: str, matches: Matches) -> Probe:
    """A probe from a class check ``agrees(module) -> bool`` (the swap computes what the class does):
    a class named in ``matches`` that disagrees is a warning (its library changed it), one matched
    only as a marked kernel layer is just skipped (another variant of that layer)."""

    def probe(model: nn.Module, module: nn.Module, settings: SpeedSettings) -> str | None:
        return check_class(agrees, module, label, named=matches.names(module))

    return probe


def check_swap(name: str, swap: Any, others: dict[str, Swap]) -> Swap:
    """The registry's check: a :class:`Swap` whose flag is a boolean trainer setting and whose
    devices are known device types."""
    from anglekit.training.config import TrainerSection

    if not isinstance(swap, Swap):
        raise ConfigError(f"speed swap {name!r} must be a Swap, got {type(swap).__name__}")
    flags = {f.name for f in fields(TrainerSection) if f.type in (bool, "bool")}
    if swap.flag is not None and swap.flag not in flags:
        raise ConfigError(f"speed swap {name!r}: flag {swap.flag!r} is not a true/false trainer setting ({', '.join(sorted(flags))})")
    if swap.devices is not None and (not swap.devices or any(d not in DEVICES for d in swap.devices)):
        raise ConfigError(f"speed swap {name!r}: devices must be None (any) or some of {', '.join(DEVICES)}, got {swap.devices!r}")
    return swap


__all__ = ["DEVICES", "Apply", "Matches", "Probe", "SpeedSettings", "Swap", "agreement", "check_swap"]
