"""LemonSettings: composed into the one config model, overridable from the environment, validated."""

from __future__ import annotations

import pytest

from remedy.config import ConfigError, load_settings
from remedy.settings.lemon import EarlyWarningSettings, LemonSettings


def test_every_field_is_described() -> None:
    for model in (LemonSettings, EarlyWarningSettings, LemonSettings.model_fields["isolation"].annotation):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"


def test_environment_overrides_nested_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMEDY_LEMON__ISOLATION__MIN_NODES", "4")
    monkeypatch.setenv("REMEDY_LEMON__EARLY_WARNING__PERSIST_K", "2")
    s = load_settings()
    assert s.lemon.isolation.min_nodes == 4 and s.lemon.early_warning.persist_k == 2
    assert s.lemon.rate_alpha == 0.001


def test_invalid_values_name_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMEDY_LEMON__EARLY_WARNING__PERSIST_K", "9")
    with pytest.raises(ConfigError, match="persist_k \\(9\\) must not exceed persist_n \\(5\\)"):
        load_settings()
    monkeypatch.delenv("REMEDY_LEMON__EARLY_WARNING__PERSIST_K")
    monkeypatch.setenv("REMEDY_LEMON__RATE_ALPHA", "2")
    with pytest.raises(ConfigError, match="lemon.rate_alpha"):
        load_settings()
