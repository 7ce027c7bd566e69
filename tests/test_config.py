"""The one settings model: YAML < environment < keyword overrides; bad config fails at start naming the field."""

from __future__ import annotations

import pytest

from remedy.cli import main
from remedy.config import ConfigError, load_settings


def test_yaml_then_environment_then_keywords(tmp_path, monkeypatch):
    cfg = tmp_path / "remedy.yaml"
    cfg.write_text("dry_run: true\ndrain:\n  grace_period_seconds: 45\nbudget:\n  max_nodes_in_remediation: 7\n")
    monkeypatch.setenv("REMEDY_DRAIN__GRACE_PERIOD_SECONDS", "10")
    s = load_settings(cfg)
    assert s.dry_run is True and s.budget.max_nodes_in_remediation == 7  # from YAML
    assert s.drain.grace_period_seconds == 10  # environment beats YAML
    assert s.drain.eviction_deadline_seconds == 300  # untouched default
    s = load_settings(cfg, drain={"grace_period_seconds": 5})
    assert s.drain.grace_period_seconds == 5  # a caller's explicit value (a CLI flag) beats the environment
    assert s.budget.max_nodes_in_remediation == 7  # and leaves the other layers' fields alone


def test_environment_lists_and_unrelated_remedy_variables(monkeypatch):
    monkeypatch.setenv("REMEDY_SLACK__APPROVERS", '["U1", "U2"]')
    monkeypatch.setenv("REMEDY_NVML", "fake:/tmp/x.json")  # selects a library, not a setting: ignored
    assert load_settings().slack.approvers == ["U1", "U2"]


@pytest.mark.parametrize("text, field", [
    ("drain:\n  grace_period_seconds: -1\n", "drain.grace_period_seconds"),
    ("budget:\n  max_percent_in_remediation: 250\n", "budget.max_percent_in_remediation"),
    ("cluster:\n  mode: carrier-pigeon\n", "cluster.mode"),
    ("no_such_section: {}\n", "no_such_section"),
    ("workload:\n  when_no_spare: sometimes\n", "workload.when_no_spare"),
])
def test_invalid_config_names_the_field(tmp_path, text, field):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    assert str(err.value).startswith(field), str(err.value)


def test_malformed_yaml_and_missing_file_are_one_line_errors(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("drain: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(bad)
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "nope.yaml")
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_settings(listy)


def test_bad_environment_value_names_the_field(monkeypatch):
    monkeypatch.setenv("REMEDY_DRAIN__GRACE_PERIOD_SECONDS", "soon")
    with pytest.raises(ConfigError, match=r"^drain\.grace_period_seconds"):
        load_settings()


def test_cli_reports_config_errors_in_one_line(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("cluster:\n  mode: carrier-pigeon\n")
    monkeypatch.setenv("REMEDY_CONFIG", str(cfg))
    monkeypatch.setenv("REMEDY_DB_URL", f"sqlite:///{tmp_path / 'l.db'}")
    from remedy import runtime

    runtime.reset()
    try:
        assert main(["breaker", "status"]) == 2
    finally:
        runtime.reset()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [err[0]] and err[0].startswith("remedy: error: cluster.mode")


@pytest.mark.parametrize("text, message", [
    ("drain:\n  grace_period_secnds: 10\n",
     "drain.grace_period_secnds: unknown setting in {cfg}; did you mean drain.grace_period_seconds?"),
    ("breaker:\n  rack:\n    max_nodse: 2\n", "breaker.rack.max_nodse: unknown setting in {cfg}"),
    ("health:\n  nccl_profiles:\n    - gpu_model: B200\n      sizes: [{size_bytes: 1, busbw_gbs: 2}]\n",
     "health.nccl_profiles[0].sizes[0].busbw_gbs: unknown setting in {cfg}"),
])
def test_a_misspelt_nested_key_is_rejected_with_its_path(tmp_path, text, message):
    cfg = tmp_path / "typo.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    assert str(err.value).startswith(message.format(cfg=cfg)), str(err.value)


def test_a_misspelt_nested_environment_variable_is_rejected(monkeypatch):
    monkeypatch.setenv("REMEDY_DRAIN__GRACE_PERIOD_SECNDS", "10")
    with pytest.raises(ConfigError, match=r"^drain\.grace_period_secnds: unknown setting \(environment variable "
                       r"REMEDY_DRAIN__GRACE_PERIOD_SECNDS\); did you mean drain\.grace_period_seconds\?"):
        load_settings()


def test_lease_renewal_must_fit_well_inside_the_lease(monkeypatch):
    monkeypatch.setenv("REMEDY_LEASES__TTL_SECONDS", "10")
    monkeypatch.setenv("REMEDY_LEASES__RENEW_SECONDS", "6")
    with pytest.raises(ConfigError, match=r"leases: .*renew_seconds \(6\) must be at most half of ttl_seconds \(10\)"):
        load_settings()
    monkeypatch.setenv("REMEDY_LEASES__RENEW_SECONDS", "5")
    assert load_settings().leases.renew_seconds == 5
