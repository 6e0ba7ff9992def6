"""The one registry of objectives: every preset name, its knobs, its batch kind and its builder.

An *objective family* is registered once with :func:`register_objective_family`: its typed config
(a frozen dataclass), its named presets (configs), the batch kind a preset trains on, and the
function that builds the objective module from a config. The config's fields declared with
:func:`anglekit.config.setting` are the family's *knobs*: each is a flag and a YAML key of
``anglekit train`` (``--angle-weight``, ``contrastive_tau: 0.1``), generated when the command line
is built. The trainer asks this registry, and only it, which batch kind a preset needs
(:func:`preset_batch_kind`), which knobs apply (:func:`knob_overrides`), and for the objective
(:func:`objective_config`, :func:`build_objective`); an unknown preset or a knob of another family
is a ConfigError listing the valid ones. :func:`resolve_objective` does all of that once and
returns a :class:`ResolvedObjective` (preset, family, overrides, config) that the trainer hands
down instead of asking again.

===============  =====================================================  ==================
batch_kind       built-in presets                                       a batch is
===============  =====================================================  ==================
``pairs``        paper, paper-phase, official-defaults, cosine, ...     labelled pairs
``sentences``    simcse-unsup, simace-unsup                             sentences (the
                                                                        trainer makes two
                                                                        dropout views)
``triplets``     simcse-sup, simace-sup                                 anchor, positive,
                                                                        [hard negative]
``scored``       margin-mse, distill-kl, embed-distill                  n-tuples with the
                                                                        teacher's scores
===============  =====================================================  ==================

The objective module takes the batch kind's tensors and returns an
:class:`~anglekit.losses.combined.ObjectiveOutput`: for ``pairs`` ``(x, y, labels, ids1, ids2)``
(as :class:`~anglekit.losses.combined.AnglEObjective`), for ``sentences`` and ``triplets``
``(anchors, positives[, hard_negatives], *, anchor_ids, positive_ids, negative_ids, offset)`` (as
:class:`~anglekit.losses.contrastive.ContrastiveObjective`), for ``scored`` ``(anchors, positives,
negatives, *, teacher, valid, anchor_ids, positive_ids, negative_ids)`` (as
:class:`~anglekit.losses.distill.DistillObjective`).

A family lists its *terms* (:class:`Term`): which knobs act only through one term, and when that
term is off (its weight is 0, or a condition on the config). A knob given for a term that is off
changes nothing; :func:`knob_overrides` logs one warning per such knob (``--cosine-tau`` with the
``angle`` preset, whose cosine term weighs 0), for every family through this one declaration.

A plugin is a module that calls :func:`register_objective_family` once when imported; import it
before the command line is built (e.g. in the script that calls ``anglekit.cli.main``) and its
presets and knobs are there. An installed distribution declares it instead with an entry point of
the group ``anglekit.objectives`` (:mod:`anglekit.plugins`) whose object is the family (its name is
the family's); it is registered when the registry is first read::

    @dataclass(frozen=True)
    class ScaledConfig:
        scale: float = setting(1.0, minimum=0, help="Scale of the scores.")  # --scale, scale:

    register_objective_family(ObjectiveFamily(
        name="scaled", config_cls=ScaledConfig, presets={"scaled": ScaledConfig()},
        build=ScaledLoss, batch_kind="pairs"))

This module imports no torch (``anglekit train --help`` lists the knobs without it): the built-in
families' configs are in :mod:`anglekit.losses.configs` and their modules are imported when built.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anglekit.config import Setting, settings_of
from anglekit.errors import ConfigError
from anglekit.losses._common import preset_with_overrides
from anglekit.losses.configs import CONTRASTIVE_PRESETS, PRESETS, ContrastiveConfig, ObjectiveConfig
from anglekit.losses.distill_configs import DISTILL_PRESETS, DistillConfig
from anglekit.plugins import GROUPS, Registry

logger = logging.getLogger(__name__)

__all__ = [
    "FAMILIES",
    "ObjectiveFamily",
    "ResolvedObjective",
    "Term",
    "all_presets",
    "applicable_knobs",
    "build_objective",
    "family_of",
    "get_objective",
    "inert_settings",
    "knob_overrides",
    "objective_config",
    "objective_knobs",
    "preset_batch_kind",
    "register_objective_family",
    "resolve_objective",
    "unregister_objective_family",
]


@dataclass(frozen=True)
class Term:
    """One term of a family's objective and the config fields that act only through it.

    The term is off when its ``weight`` field is 0, or, for a term without a weight field, when
    ``active(config)`` is false (``off`` says why, in the warning); its ``settings`` then do nothing.
    ``refuse``: a setting of it given while it is off is a ConfigError rather than a warning (one
    that asks for a model, ``--guide``, must not be loaded for nothing nor ignored in silence).
    """

    name: str
    settings: tuple[str, ...]
    weight: str | None = None
    active: Callable[[Any], bool] | None = None
    off: str = ""
    refuse: bool = False

    def __post_init__(self) -> None:
        if (self.weight is None) == (self.active is None):
            raise ConfigError(f"term {self.name!r}: give a weight field or an active condition, not both")

    def why_off(self, config: Any) -> str | None:
        """Why the term is off in ``config`` (None when it is on)."""
        if self.weight is not None:
            value = getattr(config, self.weight)
            return None if value > 0 else f"the {self.name} term weighs 0 ({self.weight} {value:g})"
        assert self.active is not None
        return None if self.active(config) else (self.off or f"the {self.name} term is off")


@dataclass(frozen=True)
class ObjectiveFamily:
    """Objectives sharing one typed config: its presets, knobs, batch kind and builder.

    ``config_cls``: a frozen dataclass; its fields declared with :func:`anglekit.config.setting`
    are the knobs (``setting(key=...)`` names the flag differently from the field). ``presets``:
    preset name -> config. ``build``: config -> the objective module. ``batch_kind``: what a batch
    is (``pairs``, ``sentences``, ``triplets``), or a function of the preset's config when it
    varies. ``description``: who the knobs apply to, in error messages (default: the presets).
    ``terms``: the objective's terms and the fields each one alone uses (:class:`Term`).
    ``check_sizes``: a check of embedding sizes that only some terms need, ``(config, sizes, what)``
    -> why ``sizes`` (``what`` names them: "hidden size", "matryoshka_dims size") do not fit
    ``config``, or None when they do (the angle term's even split).
    """

    name: str
    config_cls: type
    presets: Mapping[str, Any]
    build: Callable[[Any], Any]
    batch_kind: str | Callable[[Any], str]
    description: str = ""
    terms: tuple[Term, ...] = ()
    check_sizes: Callable[[Any, Sequence[int], str], str | None] | None = None
    knobs: Mapping[str, Setting] = field(init=False, repr=False, compare=False)
    """Flat key -> knob (``name``: the config field it sets), from ``config_cls``."""

    def __post_init__(self) -> None:
        if not (isinstance(self.config_cls, type) and dataclasses.is_dataclass(self.config_cls)):
            raise ConfigError(f"objective family {self.name!r}: config_cls must be a dataclass, got {self.config_cls!r}")
        if not self.presets:
            raise ConfigError(f"objective family {self.name!r} has no presets")
        wrong = [name for name, config in self.presets.items() if not isinstance(config, self.config_cls)]
        if wrong:
            raise ConfigError(f"objective family {self.name!r}: presets {wrong} are not {self.config_cls.__name__} instances")
        if not self.description:
            object.__setattr__(self, "description", f"the {self.name} objectives ({', '.join(self.presets)})")
        knobs = {s.key: dataclasses.replace(s, default=None, optional=True) for s in settings_of(self.config_cls, declared_only=True)}
        fields = {f.name for f in dataclasses.fields(self.config_cls)}
        for term in self.terms:
            unknown = sorted({*term.settings, *([term.weight] if term.weight else [])} - fields)
            if unknown:
                raise ConfigError(f"objective family {self.name!r}: term {term.name!r} names fields {unknown} that {self.config_cls.__name__} lacks")
        object.__setattr__(self, "knobs", knobs)

    def kind_of(self, preset: str) -> str:
        """The batch kind of this family's preset ``preset``."""
        kind = self.batch_kind
        return kind if isinstance(kind, str) else kind(self.presets[preset])


@dataclass(frozen=True)
class ResolvedObjective:
    """Preset ``name`` resolved once: its family, the config overrides from the knobs given (by
    field name) and the typed config they make. What the trainer hands down to tasks and checks."""

    name: str
    family: ObjectiveFamily
    overrides: Mapping[str, Any]
    config: Any

    @property
    def batch_kind(self) -> str:
        """The batch kind the preset trains on (``pairs``, ``sentences``, ``triplets``)."""
        return self.family.kind_of(self.name)

    def with_settings(self, **settings: Any) -> ResolvedObjective:
        """This objective with more config fields set (what a task derives from its data)."""
        if not settings:
            return self
        overrides = {**self.overrides, **settings}
        config = preset_with_overrides(self.family.presets, self.name, overrides, kind="objective")
        return ResolvedObjective(self.name, self.family, overrides, config)

    def build(self) -> Any:
        """The objective module for :attr:`config`."""
        return self.family.build(self.config)

    def size_problem(self, sizes: Sequence[int], what: str) -> str | None:
        """Why embedding ``sizes`` do not fit this objective (the family's ``check_sizes``), or None."""
        return None if self.family.check_sizes is None else self.family.check_sizes(self.config, list(sizes), what)


def _checked(name: str, family: Any, others: dict[str, ObjectiveFamily]) -> ObjectiveFamily:
    """``family`` as registered under ``name``: its presets are its own, and a knob key another
    family declares has the same type and range there (a key is one flag)."""
    if not isinstance(family, ObjectiveFamily):
        raise ConfigError(f"objective family {name!r} must be an anglekit.losses.registry.ObjectiveFamily, got {type(family).__name__}")
    if family.name != name:
        raise ConfigError(f"objective family {name!r}: its ObjectiveFamily is named {family.name!r}")
    for other in others.values():
        taken = sorted(set(other.presets) & set(family.presets))
        if taken:
            raise ConfigError(f"objective family {family.name!r}: preset(s) {taken} already belong to {other.name!r}")
        for key in set(other.knobs) & set(family.knobs):
            mine, theirs = family.knobs[key], other.knobs[key]
            if (mine.base, mine.item, mine.choices, mine.bounds) != (theirs.base, theirs.item, theirs.choices, theirs.bounds):
                raise ConfigError(f"objective family {family.name!r}: knob {key!r} is declared differently by {other.name!r}")
    return family


FAMILIES: Registry[ObjectiveFamily] = Registry(
    "objective family",
    GROUPS["objectives"],
    unknown=lambda name, known: ConfigError(f"unknown objective family {name!r}; registered: {', '.join(known)}"),
    check=_checked,
)
"""Family name -> family, in registration order: the built-ins, then the installed plugins'
families (entry points ``anglekit.objectives``)."""


def register_objective_family(family: ObjectiveFamily, *, replace: bool = False) -> ObjectiveFamily:
    """Make ``family``'s presets and knobs known; returns it.

    A :class:`~anglekit.errors.DuplicateNameError` for a family name already registered (unless
    ``replace``); a ConfigError when one of its presets belongs to another family, or a knob's key
    is declared by another family with another type or range (a key is one flag).
    """
    return FAMILIES.register(family.name, family, replace=replace)


def unregister_objective_family(name: str) -> ObjectiveFamily:
    """Forget the family ``name`` (its presets and knobs); returns it."""
    return FAMILIES.unregister(name)


def family_of(name: str) -> ObjectiveFamily:
    """The family of preset ``name``; a ConfigError listing every preset for an unknown one."""
    for family in FAMILIES.values():
        if name in family.presets:
            return family
    raise ConfigError(f"unknown objective preset {name!r}; valid presets: {', '.join(sorted(all_presets()))}")


def all_presets() -> dict[str, str]:
    """Every preset name -> the batch kind it consumes (``pairs``, ``sentences``, ``triplets``)."""
    return {preset: family.kind_of(preset) for family in FAMILIES.values() for preset in family.presets}


def preset_batch_kind(name: str) -> str:
    """The batch kind of preset ``name``; ConfigError listing every preset for an unknown one."""
    return family_of(name).kind_of(name)


def objective_knobs() -> list[Setting]:
    """Every registered family's knobs, one per key (the flags and YAML keys of ``anglekit train``)."""
    knobs: dict[str, Setting] = {}
    for family in FAMILIES.values():
        for key, knob in family.knobs.items():
            knobs.setdefault(key, knob)
    return list(knobs.values())


def knob_overrides(name: str, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """The config overrides (field name -> value) of preset ``name`` from knob values by flat key
    (None: not given), checked by building the config (:func:`resolve_objective`)."""
    return dict(resolve_objective(name, knobs).overrides)


def resolve_objective(name: str, knobs: Mapping[str, Any]) -> ResolvedObjective:
    """Preset ``name`` with knob values by flat key (None: not given): its family, overrides and
    config, resolved once. A knob of another family, or of none, is a ConfigError naming its flag,
    whom it applies to, and this family's knobs; a knob that does nothing is a warning."""
    family = family_of(name)
    given = {key: value for key, value in knobs.items() if value is not None}
    wrong = [key for key in given if key not in family.knobs]
    if wrong:
        owner = next((f for f in FAMILIES.values() if wrong[0] in f.knobs), None)
        flags = ", ".join(_flag(key) for key in wrong)
        valid = ", ".join(_flag(key) for key in family.knobs) or "none"
        where = f"{'applies' if len(wrong) == 1 else 'apply'} to {owner.description}, not to" if owner else "is not a setting of"
        raise ConfigError(f"{flags} {where} the objective {name!r} (its settings: {valid})")
    overrides = {family.knobs[key].name: value for key, value in given.items()}
    config = preset_with_overrides(family.presets, name, overrides, kind="objective")
    refused = inert_settings(name, config, given, refused=True)
    if refused:
        raise ConfigError(refused[0])
    for message in inert_settings(name, config, given):
        logger.warning("%s", message)
    return ResolvedObjective(name, family, overrides, config)


def applicable_knobs(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The knobs of ``given`` (flat key -> value) that preset ``name`` takes: those of its family,
    less those a term of it refuses because the term is off (:attr:`Term.refuse`). For one dataset
    of a multi-dataset run: ``--guide`` goes to the datasets whose objective has in-batch negatives."""
    family = family_of(name)
    knobs = {key: value for key, value in given.items() if key in family.knobs and value is not None}
    config = preset_with_overrides(family.presets, name, {family.knobs[key].name: value for key, value in knobs.items()}, kind="objective")
    refused = {field_name for term in family.terms if term.refuse and term.why_off(config) is not None for field_name in term.settings}
    return {key: value for key, value in knobs.items() if family.knobs[key].name not in refused}


def inert_settings(name: str, config: Any, given: Mapping[str, Any], *, refused: bool = False) -> list[str]:
    """One message per knob in ``given`` (flat key -> value) that does nothing in ``config`` (preset
    ``name``'s config with them applied) because the only term it acts through is off; with
    ``refused``, only those of terms that refuse it (:attr:`Term.refuse`), else only the others."""
    family = family_of(name)
    by_field = {knob.name: key for key, knob in family.knobs.items()}
    out = []
    for term in family.terms:
        reason = term.why_off(config)
        if reason is None or term.refuse != refused:
            continue
        for field_name in term.settings:
            key = by_field.get(field_name)
            if key is not None and key in given and given[key] is not None:
                if refused:
                    out.append(f"{_flag(key)} {_show(given[key])} needs the {term.name} term, and in the objective {name!r} {reason}")
                else:
                    out.append(f"{_flag(key)} {_show(given[key])} does nothing: in the objective {name!r} {reason}")
    return out


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def objective_config(name: str, **overrides: Any) -> Any:
    """The typed config of preset ``name`` with some fields replaced (by field name; unknown ones
    and invalid values are ConfigErrors)."""
    return preset_with_overrides(family_of(name).presets, name, overrides, kind="objective")


def build_objective(name: str, config: Any) -> Any:
    """The objective module of preset ``name``'s family for ``config`` (from :func:`objective_config`)."""
    return family_of(name).build(config)


def get_objective(name: str, **overrides: Any) -> Any:
    """The objective module of preset ``name`` with ``overrides``; its ``batch_kind`` (built-ins)
    says which batches it takes."""
    return build_objective(name, objective_config(name, **overrides))


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _angle_sizes(config: ObjectiveConfig, sizes: Sequence[int], what: str) -> str | None:
    """The angle term splits each embedding into real and imaginary halves: every size is even."""
    odd = [size for size in sizes if size % 2]
    if config.angle_weight <= 0 or not odd:
        return None
    return (
        f"the angle term splits each embedding into real and imaginary halves, so every {what} must be even "
        f"({', '.join(map(str, odd))} {'is' if len(odd) == 1 else 'are'} not); use --angle-weight 0, even sizes or an objective without the angle term (cosine, ibn)"
    )


def _guide_terms(*, weight: str | None = None, active: Callable[[Any], bool] | None = None, off: str = "") -> tuple[Term, Term]:
    """The guide's terms: ``--guide`` needs the in-batch-negative term (refused without it); its
    margin settings need ``--guide``."""
    return (
        Term("in-batch-negative", ("guide",), weight=weight, active=active, off=off, refuse=True),
        Term("guide", ("guide_margin", "guide_margin_strategy"), active=lambda config: config.guide is not None, off="no --guide is given"),
    )


def _angle_objective(config: ObjectiveConfig) -> Any:
    from anglekit.losses.combined import AnglEObjective

    return AnglEObjective(config)


def _contrastive_objective(config: ContrastiveConfig) -> Any:
    from anglekit.losses.contrastive import ContrastiveObjective

    return ContrastiveObjective(config)


def _distill_objective(config: DistillConfig) -> Any:
    from anglekit.losses.distill import DistillObjective

    return DistillObjective(config)


register_objective_family(
    ObjectiveFamily(
        name="angle",
        config_cls=ObjectiveConfig,
        presets=PRESETS,
        build=_angle_objective,
        batch_kind="pairs",
        description="the AnglE pair objectives (paper, cosine, ibn, ...)",
        terms=(
            Term("cosine", ("cosine_tau",), weight="cosine_weight"),
            Term("in-batch-negative", ("ibn_tau", "ibn_similarity", "ibn_detect_duplicates"), weight="ibn_weight"),
            *_guide_terms(weight="ibn_weight"),
            Term("angle", ("angle_tau", "angle_variant"), weight="angle_weight"),
        ),
        check_sizes=_angle_sizes,
    )
)
register_objective_family(
    ObjectiveFamily(
        name="contrastive",
        config_cls=ContrastiveConfig,
        presets=CONTRASTIVE_PRESETS,
        build=_contrastive_objective,
        batch_kind=lambda config: config.batch_kind,
        description="the contrastive objectives (simcse-*, simace-*)",
        terms=(
            Term(
                "hard-negative",
                ("hard_negative_weight",),
                active=lambda config: config.batch_kind == "triplets",
                off="the batches are sentences, which have no hard negatives (use a *-sup preset and triplets)",
            ),
            *_guide_terms(
                active=lambda config: config.batch_kind == "triplets",
                off="its batches are sentences whose positive is a dropout view of the anchor itself, so there are no false negatives to guide "
                "against (use a *-sup preset and triplets)",
            ),
        ),
    )
)
register_objective_family(
    ObjectiveFamily(
        name="distill",
        config_cls=DistillConfig,
        presets=DISTILL_PRESETS,
        build=_distill_objective,
        batch_kind="scored",
        description="the distillation objectives (margin-mse, distill-kl, embed-distill)",
        terms=(
            Term("distill-kl", ("distill_temperature", "teacher_temperature"), weight="distill_kl_weight"),
            Term("embed-distill", ("distill_teacher",), weight="embed_distill_weight"),
            Term("cosine", ("cosine_tau",), weight="cosine_weight"),
            Term("in-batch-negative", ("ibn_tau", "ibn_similarity", "ibn_detect_duplicates"), weight="ibn_weight"),
            *_guide_terms(weight="ibn_weight"),
            Term("angle", ("angle_tau", "angle_variant"), weight="angle_weight"),
        ),
        check_sizes=_angle_sizes,
    )
)
