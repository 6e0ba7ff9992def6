"""EmbedderSettings: the typed layers a model's settings are merged from (defaults < a
sentence-transformers folder < a saved anglekit_config.json < the caller's arguments)."""

from __future__ import annotations

import pytest

from anglekit.errors import ConfigError
from anglekit.model.config import EmbedderConfig, EmbedderSettings


def test_a_layer_overrides_only_what_it_gives() -> None:
    lower = EmbedderSettings(pooling="cls", max_length=128, normalize=True)
    upper = EmbedderSettings(pooling="last_avg")
    merged = upper.over(lower)
    assert merged == EmbedderSettings(pooling="last_avg", max_length=128, normalize=True)
    assert merged.resolve() == EmbedderConfig(pooling="last_avg", max_length=128, normalize=True)


def test_nothing_given_resolves_to_the_defaults() -> None:
    assert EmbedderSettings().resolve() == EmbedderConfig()
    assert EmbedderSettings().given() == {}


def test_a_full_config_round_trips_through_a_layer() -> None:
    config = EmbedderConfig(pooling="last_token", prompt="paper", max_length=64, padding_side="left", bidirectional=True)
    assert EmbedderSettings.of(config).resolve() == config


def test_a_new_template_decides_the_preprocessing_again() -> None:
    saved = EmbedderSettings.of(EmbedderConfig(prompt="paper"))  # quotes {text}: preprocessing on
    assert saved.resolve().prompt_preprocess is True
    plain = EmbedderSettings(prompt="query: {text}").over(saved)
    assert plain.prompt_preprocess is None and plain.resolve().prompt_preprocess is False
    kept = EmbedderSettings(max_length=32).over(saved)  # no new template: the saved choice stays
    assert kept.resolve().prompt_preprocess is True
    forced = EmbedderSettings(prompt="query: {text}", prompt_preprocess=True).over(saved)
    assert forced.resolve().prompt_preprocess is True


def test_resolve_validates_and_names_the_source() -> None:
    with pytest.raises(ConfigError, match="my-model: .*unknown pooling"):
        EmbedderSettings(pooling="mean").resolve(source="my-model")
    with pytest.raises(ConfigError, match="max_length"):
        EmbedderSettings(max_length=0).resolve()
