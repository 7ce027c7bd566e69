"""Validation levels and check dispatch."""

from __future__ import annotations

import pytest

from remedy.health.result import CheckOutputError, Verdict
from remedy.health.suite import Level, parse_check_output, probe_output_result, suite_for
from remedy.settings.health import HealthCheckSettings

SIM_CHECKS = {"nvml-probe", "dcgm-diag", "nccl", "stress", "ib", "fio"}


def test_levels_are_cumulative_and_labelled():
    quick, standard, extended = (suite_for(level) for level in Level)
    assert [s.id for s in quick] == ["nvml-probe", "dcgm-diag-r1", "ib"]
    assert [s.id for s in standard] == [s.id for s in quick] + ["dcgm-diag-r2", "nccl-single-node", "fio"]
    assert [s.id for s in extended] == [s.id for s in standard] + ["dcgm-diag-r4", "stress", "nccl-multi-node"]
    assert {s.check for s in extended} == SIM_CHECKS
    assert len({s.id for s in extended}) == len(extended)
    assert [s.id for s in extended if s.multi_node] == ["nccl-multi-node"]
    assert all(s.privileged for s in extended if s.check in ("dcgm-diag", "ib"))
    assert max(s.timeout_seconds for s in quick) <= 600  # quick means minutes


def test_settings_shape_the_commands():
    s = HealthCheckSettings(gpus_per_node=4, gpu_model="NVIDIA B200", extended_dcgm_level=3, stress_seconds=600)
    specs = {spec.id: spec for spec in suite_for("extended", s)}
    assert specs["nvml-probe"].command == ("remedy", "probe", "--json", "--expect-gpus", "4", "--expect-model", "NVIDIA B200")
    assert specs["nccl-single-node"].command[-2:] == ("-g", "4")
    assert specs["dcgm-diag-r3"].command == ("dcgmi", "diag", "-r", "3", "-j")
    assert specs["stress"].timeout_seconds == 1200
    assert "--expect-model" not in suite_for("quick")[0].command  # default: the node's own label decides


def test_unknown_level_and_check():
    with pytest.raises(ValueError, match="unknown health-check level 'deep'"):
        suite_for("deep")
    with pytest.raises(CheckOutputError, match="unknown check 'memtest'"):
        parse_check_output("memtest", "")


def test_probe_output_error_and_garbage():
    r = probe_output_result('{"verdict": "error", "error": "NVML library not found"}')
    assert r.verdict is Verdict.FAIL and r.reasons == ["cannot probe: NVML library not found"]
    with pytest.raises(CheckOutputError, match="no JSON report"):
        probe_output_result("Traceback (most recent call last):")


def test_settings_refuse_warn_levels_above_fail_levels():
    from pydantic import ValidationError

    from remedy.settings.health import IbThresholds, ProbeThresholds

    with pytest.raises(ValidationError, match=r"temperature_warn_c \(95\) must not exceed temperature_fail_c \(87\)"):
        ProbeThresholds(temperature_warn_c=95)
    with pytest.raises(ValidationError, match="symbol_error_warn"):
        IbThresholds(symbol_error_warn=500)
