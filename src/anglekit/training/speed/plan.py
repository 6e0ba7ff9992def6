"""Which speed swaps a run uses: :func:`plan` (what applies, what is skipped and why) and
:func:`applied` (the swaps in place for the training loop, the plan logged once).

For each swap of the table, in order: off when its flag is false; skipped off its devices or where
the run lacks what it needs (autocast); skipped where no module matches; else its probe runs on the
first module of each matched class, and the classes it accepts are swapped. A probe that raises
anything (an ImportError from an older library, an AttributeError, ...) skips its swap with a
warning naming it, and so does a swap that fails to apply: no speed swap can stop a run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from anglekit.errors import ConfigError
from anglekit.plugins import Registry
from anglekit.training.speed.swap import SpeedSettings, Swap
from anglekit.training.speed.table import SWAPS

logger = logging.getLogger(__name__)


@dataclass
class Decision:
    """One swap's part of a plan: the modules it swaps (``reason`` None), or why it is skipped."""

    name: str
    swap: Swap
    modules: list[nn.Module] = field(default_factory=list)
    reason: str | None = None
    note: str | None = None
    """What the swap reported when applied (compact embeddings: the rows it trains)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Matched classes its probe refused, where it swaps others (class name -> why)."""

    @property
    def applies(self) -> bool:
        return self.reason is None

    def classes(self) -> list[str]:
        """The class names of the modules it swaps, sorted."""
        return sorted({type(m).__name__ for m in self.modules})

    def skip(self, reason: str) -> None:
        self.modules, self.reason = [], reason

    def line(self) -> str:
        """How the plan's log shows it."""
        if not self.applies:
            return f"skipped {self.name}: {self.reason}"
        note = f"; {self.note}" if self.note else ""
        note += "".join(f"; {name} left alone: {why}" for name, why in self.refused.items())
        return f"{self.swap.label}: {len(self.modules)} {self.swap.does} ({', '.join(self.classes())}{note})"


@dataclass
class SpeedPlan:
    """What a run's speed swaps do on ``model`` (``architecture``: its ``model_type``)."""

    architecture: str
    device: str
    decisions: list[Decision]
    model: nn.Module
    settings: SpeedSettings

    @property
    def applied(self) -> list[Decision]:
        return [d for d in self.decisions if d.applies]

    @property
    def skipped(self) -> list[Decision]:
        return [d for d in self.decisions if not d.applies]

    def flags(self) -> dict[str, bool]:
        """Each swap flag -> whether a swap of it changed a module (what train_config.json records)."""
        out: dict[str, bool] = {}
        for decision in self.decisions:
            if decision.swap.flag is not None:
                out[decision.swap.flag] = out.get(decision.swap.flag, False) or decision.applies
        return out

    def record(self) -> dict[str, Any]:
        """The plan as train_config.json and results.json record it."""
        applied = {}
        for d in self.applied:
            applied[d.name] = {"flag": d.swap.flag, "modules": len(d.modules), "classes": d.classes()}
            applied[d.name].update({"note": d.note} if d.note else {}, **({"refused": dict(d.refused)} if d.refused else {}))
        return {"architecture": self.architecture, "device": self.device, "applied": applied, "skipped": {d.name: d.reason for d in self.skipped}}

    def message(self) -> str:
        """The plan in one log message: a headline, then one line per swap."""
        arithmetic = self.settings.arithmetic()
        where = f"{self.architecture} on {self.device} ({arithmetic if arithmetic == 'fp32' else arithmetic + ' autocast'})"
        head = f"speed swaps for {where}: {len(self.applied)} applied" if self.applied else f"no speed swap for architecture {where}"
        return "\n  ".join([head, *(d.line() for d in self.applied), *(d.line() for d in self.skipped)])


def architecture(model: nn.Module) -> str:
    """The ``model_type`` of the first module of ``model`` with a transformers config, else its class name."""
    for module in model.modules():
        model_type = getattr(getattr(module, "config", None), "model_type", None)
        if isinstance(model_type, str) and model_type:
            return model_type
    return type(model).__name__


def _off(swap: Swap, settings: SpeedSettings) -> str | None:
    """Why ``swap`` is not considered for this run at all (its flag, device, needs), or None."""
    if swap.flag is not None and not settings.flags.get(swap.flag, True):
        return f"off ({swap.flag} false, --no-{swap.flag.replace('_', '-')})"
    if swap.devices is not None and settings.device not in swap.devices:
        return f"for {', '.join(swap.devices)} only, where it was measured; this run is on {settings.device}"
    return swap.needs(settings) if swap.needs is not None else None


def _decide(name: str, swap: Swap, model: nn.Module, settings: SpeedSettings) -> Decision:
    """One swap's decision: its conditions, its matches, its probe on each matched class."""
    reason = _off(swap, settings)
    if reason is not None:
        return Decision(name, swap, reason=reason)
    modules = swap.matches.modules(model, settings)
    if not modules:
        return Decision(name, swap, reason=f"no module matches ({swap.matches.what})")
    if swap.probe is None:
        return Decision(name, swap, modules)
    verdicts: dict[type, str | None] = {}
    for module in modules:
        if type(module) not in verdicts:
            verdicts[type(module)] = swap.probe(model, module, settings)
    kept = [m for m in modules if verdicts[type(m)] is None]
    refused = {cls.__name__: why for cls, why in verdicts.items() if why is not None}
    if kept:
        return Decision(name, swap, kept, refused=refused)
    return Decision(name, swap, reason="; ".join(dict.fromkeys(refused.values())))


def plan(model: nn.Module, settings: SpeedSettings, swaps: Registry[Swap] | None = None) -> SpeedPlan:
    """What each swap of ``swaps`` (default: :data:`~anglekit.training.speed.table.SWAPS`) does on
    ``model`` under ``settings``: the modules it swaps, or why it is skipped. Nothing is swapped
    yet (a probe may run the model's modules on a probe batch); :func:`applied` swaps them."""
    swaps = SWAPS if swaps is None else swaps
    flags = {swap.flag for swap in swaps.values() if swap.flag is not None}
    unknown = sorted(set(settings.flags) - flags)
    if unknown:
        raise ConfigError(f"speed settings: unknown flag(s) {', '.join(unknown)}; the swaps' flags are {', '.join(sorted(flags))}")
    decisions = []
    for name, swap in swaps.items():
        try:
            decision = _decide(name, swap, model, settings)
        except Exception as exc:  # noqa: BLE001 - whatever a probe or finder raises, its swap is skipped and the run goes on
            logger.warning("speed swap %s (%s) is skipped: its check raised %s: %s", name, swap.label, type(exc).__name__, exc)
            decision = Decision(name, swap, reason=f"its check raised {type(exc).__name__}: {exc}")
        decisions.append(decision)
    return SpeedPlan(architecture(model), settings.device, decisions, model, settings)


@contextmanager
def applied(speed_plan: SpeedPlan) -> Iterator[SpeedPlan]:
    """For the body, the swaps ``speed_plan`` applies are in place (undone afterwards, whatever
    happens, in reverse order); the plan is logged once, as applied, and yielded (a swap that
    failed to apply is moved to the skipped ones with a warning)."""
    with ExitStack() as stack:
        for decision in speed_plan.applied:
            try:
                value = stack.enter_context(decision.swap.apply(speed_plan.model, decision.modules, speed_plan.settings))
            except Exception as exc:  # noqa: BLE001 - a swap that cannot be applied is skipped, the run goes on
                logger.warning("speed swap %s (%s) is skipped: applying it raised %s: %s", decision.name, decision.swap.label, type(exc).__name__, exc)
                decision.skip(f"applying it raised {type(exc).__name__}: {exc}")
                continue
            if isinstance(value, str):
                decision.note = value
        logger.info("%s", speed_plan.message())
        yield speed_plan


def settings_for(run: Any, *, device: str, embedder: Any = None, dataset: Any = None, pad_id: int | None = None, autocast: Any = None,
                 swaps: Registry[Swap] | None = None) -> SpeedSettings:  # fmt: skip
    """The speed settings of a trainer section ``run`` (its swap flags, weight decay, optimizer)."""
    swaps = SWAPS if swaps is None else swaps
    flags: Mapping[str, bool] = {swap.flag: bool(getattr(run, swap.flag)) for swap in swaps.values() if swap.flag is not None}
    return SpeedSettings(flags, device, autocast, embedder, dataset, pad_id, float(run.weight_decay), run.optim)


__all__ = ["Decision", "SpeedPlan", "applied", "architecture", "plan", "settings_for"]
