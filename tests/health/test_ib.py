"""ibstat port state and sysfs error counters."""

from __future__ import annotations

import pytest

from remedy.health.ib import check_ib, parse_ibstat, read_ib_counters
from remedy.health.result import CheckOutputError, Verdict
from remedy.settings.health import IbThresholds

T = IbThresholds()


def test_parse_ports(sample):
    ports = parse_ibstat(sample("ibstat_one_down.txt"))
    assert [(p.name, p.state, p.physical_state, p.rate_gbps, p.link_layer) for p in ports] == [
        ("mlx5_0/1", "Active", "LinkUp", 400, "InfiniBand"), ("mlx5_1/1", "Down", "Disabled", 10, "InfiniBand")]


def test_port_down_fails_and_rate_is_only_judged_on_active_ports(sample):
    result = check_ib(sample("ibstat_one_down.txt"), T, expected_ports=2)
    assert result.verdict is Verdict.FAIL
    assert result.reasons == ["mlx5_1/1: state Down (physical Disabled)"]
    assert result.measurements["active_ports"] == 1
    healthy = sample("ibstat_one_down.txt").replace("State: Down", "State: Active").replace(
        "Physical state: Disabled", "Physical state: LinkUp").replace("Rate: 10\n", "Rate: 400\n")
    assert check_ib(healthy, T, expected_ports=2).verdict is Verdict.PASS
    assert check_ib(healthy, T, expected_ports=8).reasons == ["2 InfiniBand ports found, expected 8"]
    hdr = healthy.replace("Rate: 400\n", "Rate: 200\n", 1)
    assert check_ib(hdr, T).reasons == ["mlx5_0/1: rate 200 Gb/s below 400"]


def _sysfs(root, dev: str, port: int, **values: int) -> None:
    d = root / dev / "ports" / str(port) / "counters"
    d.mkdir(parents=True)
    for name, value in values.items():
        (d / name).write_text(f"{value}\n")


def test_counters_from_a_sysfs_tree(tmp_path, sample):
    _sysfs(tmp_path, "mlx5_0", 1, symbol_error=3, link_downed=0, link_error_recovery=0, port_rcv_errors=0, port_xmit_data=99)
    _sysfs(tmp_path, "mlx5_1", 1, symbol_error=0, link_downed=2, link_error_recovery=0, port_rcv_errors=150)
    counters = read_ib_counters(tmp_path)
    assert counters[("mlx5_0", 1)] == {"symbol_error": 3, "link_downed": 0, "link_error_recovery": 0, "port_rcv_errors": 0}
    result = check_ib(sample("ibstat_one_down.txt"), T, counters=tmp_path)
    assert "warning: mlx5_0/1: symbol_error = 3 (warn at 1)" in result.reasons
    assert "mlx5_1/1: link_downed = 2 (fail at 1)" in result.reasons
    assert "mlx5_1/1: port_rcv_errors = 150 (fail at 100)" in result.reasons


def test_counters_as_dict_and_as_job_output_lines(sample):
    text = sample("ibstat_one_down.txt").replace("State: Down", "State: Active").replace("Disabled", "LinkUp").replace(
        "Rate: 10\n", "Rate: 400\n")
    assert check_ib(text, T, counters={("mlx5_0", 1): {"symbol_error": 100}}).reasons == [
        "mlx5_0/1: symbol_error = 100 (fail at 100)"]
    job_log = text + "/sys/class/infiniband/mlx5_1/ports/1/counters/link_error_recovery: 12\n"
    assert check_ib(job_log, T).reasons == ["mlx5_1/1: link_error_recovery = 12 (fail at 10)"]


def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(CheckOutputError, match="no \"CA '<device>'\""):
        parse_ibstat("ibstat: command not found\n")
    with pytest.raises(CheckOutputError, match="counters directory not found"):
        read_ib_counters(tmp_path / "nope")
    _sysfs(tmp_path, "mlx5_0", 1, symbol_error="x")
    with pytest.raises(CheckOutputError, match="symbol_error: counter is not a number"):
        read_ib_counters(tmp_path)
