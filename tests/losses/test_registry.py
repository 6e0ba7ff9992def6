"""Tests of anglekit.losses.registry: one name space for every objective preset, building either
kind of objective (pairs or contrastive)."""

from __future__ import annotations

import pytest
from loss_helpers import _emb

from anglekit.errors import ConfigError
from anglekit.losses import (
    AnglEObjective,
    ContrastiveObjective,
    ObjectiveOutput,
    get_objective,
)

# --------------------------------------------------------------------------------------------
# Configs, presets, registry
# --------------------------------------------------------------------------------------------


def test_get_objective_builds_either_kind_and_names_components() -> None:
    pair = get_objective("paper", positive_threshold=1.0)
    assert isinstance(pair, AnglEObjective) and pair.batch_kind == "pairs"
    simace = get_objective("simace-unsup", tau=0.06)
    assert isinstance(simace, ContrastiveObjective) and simace.batch_kind == "sentences" and simace.config.tau == 0.06
    a, p = _emb(4, seed=24), _emb(4, seed=25)
    out = simace(a, p)
    assert isinstance(out, ObjectiveOutput) and list(out.components) == ["simace"]
    assert list(get_objective("simcse-sup")(a, p, _emb(4, seed=26)).components) == ["simcse"]
    with pytest.raises(ConfigError, match="margin_degrees"):
        get_objective("paper", margin_degrees=10.0)
    with pytest.raises(ConfigError, match="cosine_weight"):
        get_objective("simcse-unsup", cosine_weight=1.0)
