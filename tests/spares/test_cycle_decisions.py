"""The spare-cycle flow's decisions without Prefect, a ledger or a cluster."""

from __future__ import annotations

import pytest

from remedy.settings.safety import SpareSettings
from remedy.spares.cycle import below_target, check_domain, pool_health, spares, stop_after_domain
from remedy.spares.pool import size_pool


def row(name: str, state: str = "spare", ready: bool = True, rack: str = "r1", switch: str = "s1",
        pdu: str = "p1") -> dict:
    return {"name": name, "state": state, "ready": ready, "gpu_model": "H100", "rack": rack, "switch": switch,
            "pdu": pdu, "validated_at": None}


@pytest.mark.parametrize("domain", ["rack", "switch", "pdu"])
def test_known_domains_pass(domain):
    assert check_domain(domain) == domain


@pytest.mark.parametrize("domain", ["row", "", None, "Rack"])
def test_unknown_domain_refused(domain):
    with pytest.raises(ValueError, match="domain must be rack, switch or pdu"):
        check_domain(domain)


def test_spares_in_the_pool():
    fleet = [row("a"), row("b", ready=False), row("c", state="active"), row("d", state="repair")]
    assert [n["name"] for n in spares(fleet)] == ["a"]
    assert [n["name"] for n in spares(fleet, ready_only=False)] == ["a", "b"]


def test_a_domain_whose_every_spare_fails_stops_the_cycle():
    stop = stop_after_domain("rack", "r7", 2, ["gpu-1", "gpu-2"])
    assert stop == ("every spare in rack r7 failed (gpu-1, gpu-2): suspect the check or a shared cause before "
                    "cycling more spares")
    assert stop_after_domain("rack", "r7", 3, ["gpu-1", "gpu-2"]) is None  # one passed: bad nodes, not the check
    assert stop_after_domain("rack", "r7", 1, ["gpu-1"]) is None  # one spare alone proves nothing shared
    assert stop_after_domain("rack", "r7", 0, []) is None


def test_pool_health_counts_only_fresh_ready_spares_against_the_active_fleet():
    settings = SpareSettings()
    fleet = ([row(f"act-{i}", state="active") for i in range(100)]
             + [row("fresh-1", rack="r1"), row("fresh-2", rack="r2"), row("stale-1", rack="r3"),
                row("down-1", ready=False)])
    health = pool_health(fleet, {"stale-1", "down-1"}, settings)
    assert health["ready_spares"] == ["fresh-1", "fresh-2"]
    expected = size_pool(100, 2, settings)
    s = health["sizing"]
    assert (s["active_nodes"], s["ready"], s["target"], s["shortfall"]) == (100, 2, expected.target, expected.shortfall)
    assert s["explain"] == expected.explain() and below_target(health) is (expected.shortfall > 0)
    # both fresh spares share switch s1 and pdu p1: the diversity check says so
    assert {w["domain"] for w in health["diversity"]} >= {"switch", "pdu"}
    assert all(w["total"] == 2 for w in health["diversity"])


def test_no_shortfall_is_not_below_target():
    assert below_target({"sizing": {"shortfall": 0}}) is False
    assert below_target({"sizing": {"shortfall": 3}}) is True
