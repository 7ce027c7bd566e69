"""spare_cycle on the cluster simulator through the real client, with a real Prefect server (test harness)."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.fixtures.prefect import artifacts_newest_first

pytestmark = pytest.mark.prefect


@pytest.fixture
def sim(sim_factory):
    """16 idle nodes in 2 racks of 8 (no training job); spares gpu008 (rack-1) and gpu016 (rack-2)."""
    return sim_factory(nodes=16, spares=2, training_job=False)


def point_at(sim, tmp_path, monkeypatch) -> None:
    from remedy import runtime

    monkeypatch.setenv("REMEDY_CLUSTER__MODE", "simulator")
    monkeypatch.setenv("REMEDY_CLUSTER__SIMULATOR_URL", sim.url)
    monkeypatch.setenv("REMEDY_DB_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    runtime.reset()


def validated(node: str, hours_ago: float) -> None:
    """The spare passed a validation `hours_ago` hours ago (as burn-in or an earlier cycle left it)."""
    from remedy import runtime
    from tasks.ledger import sync_fleet

    sync_fleet.fn()
    at = datetime.now(UTC) - timedelta(hours=hours_ago)
    runtime.ledger().record_validation(node, level="standard", passed=True, summary={}, requested_by="test", at=at)


def spares_in_pool() -> list[str]:
    from remedy import runtime

    return sorted(n.name for n in runtime.cluster().list_gpu_nodes() if n.labels.get("remedy.io/pool") == "spare")


def read_artifact(key: str):
    found = artifacts_newest_first(key)  # the newest version: every test's flow writes the same key
    return found[0] if found else None


def read_events(name: str, since: datetime, timeout: float = 15.0) -> list[dict]:
    """Events of this name that occurred after `since` (they are sent in the background: wait for them)."""
    from prefect.client.orchestration import get_client

    async def go():
        async with get_client() as client:
            resp = await client.request("POST", "/events/filter", json={
                "filter": {"event": {"name": [name]}, "occurred": {"since": since.isoformat()}}, "limit": 50})
            return resp.json().get("events", [])

    deadline = time.monotonic() + timeout
    while True:
        events = asyncio.run(go())
        if events or time.monotonic() > deadline:
            return events
        time.sleep(0.5)


def test_stale_spare_is_revalidated_and_a_fresh_one_is_not(prefect_server, remedy_on_sim, monkeypatch):
    from flows.spare_cycle import spare_cycle
    from remedy import runtime

    validated("gpu008", hours_ago=1)
    validated("gpu016", hours_ago=100)  # outside the default 72 h freshness window
    out = spare_cycle()
    assert out["stale"] == ["gpu016"] and list(out["checked"]) == ["gpu016"]
    assert out["checked"]["gpu016"]["status"] == "spare" and out["left_pool"] == []
    led = runtime.ledger()
    assert len(led.validations("gpu008")) == 1
    v = led.validations("gpu016")
    assert len(v) == 2 and v[-1].passed and v[-1].level == "quick"
    assert datetime.now(UTC) - led.get_node("gpu016").validated_at < timedelta(minutes=5)
    assert led.get_node("gpu016").state.value == "spare"
    # Out of the pool while checked (burn-in), back in after: the transitions say so.
    assert [t.to_state.value for t in led.transitions("gpu016")][-2:] == ["burn-in", "spare"]
    assert spares_in_pool() == ["gpu008", "gpu016"]
    assert runtime.cluster().get_node("gpu016").has_taint("remedy.io/spare")
    assert out["ready_spares"] == ["gpu008", "gpu016"]


def test_pool_size_matches_a_hand_computed_poisson_case(prefect_server, remedy_on_sim, monkeypatch):
    """14 active nodes, node MTBF 672 h → fleet MTBF 48 h; lead time 48 h → λ = 1 failure per lead time.

    P(N > k) for Poisson(1): k=3 → 1 − e⁻¹(1 + 1 + 1/2 + 1/6) = 0.01899 > 0.01; k=4 → 0.00366 ≤ 0.01: target 4.
    With 2 spares ready: shortfall 2, P(run dry) = P(N > 2) = 1 − 2.5/e = 0.0803."""
    from flows.spare_cycle import BELOW_TARGET_EVENT, spare_cycle
    from remedy import runtime

    monkeypatch.setenv("REMEDY_SPARES__NODE_MTBF_HOURS", "672")
    monkeypatch.setenv("REMEDY_SPARES__REPLACEMENT_LEAD_TIME_HOURS", "48")
    monkeypatch.setenv("REMEDY_SPARES__SIZING_RISK", "0.01")
    runtime.reset()
    validated("gpu008", hours_ago=1)
    validated("gpu016", hours_ago=1)
    started = datetime.now(UTC)
    out = spare_cycle()
    s = out["sizing"]
    assert s["active_nodes"] == 14 and s["lam"] == pytest.approx(1.0)
    assert (s["target"], s["ready"], s["shortfall"]) == (4, 2, 2)
    assert s["risk_at_ready"] == pytest.approx(1 - 2.5 / math.e, rel=1e-9)
    table = _rows(read_artifact("spare-pool-health"))
    assert table["target pool size"] == 4 and table["shortfall"] == 2 and table["ready spares (fresh)"] == 2
    events = read_events(BELOW_TARGET_EVENT, since=started)
    assert len(events) == 1 and events[0]["payload"]["shortfall"] == 2 and events[0]["payload"]["target"] == 4
    assert events[0]["resource"]["prefect.resource.id"] == "remedy.spares.pool"


def _rows(artifact) -> dict:
    import json

    data = artifact.data if not isinstance(artifact.data, str) else json.loads(artifact.data)
    return {row["measure"]: row["value"] for row in data}


def test_enough_spares_emit_no_event_and_no_shortfall(prefect_server, remedy_on_sim, monkeypatch):
    from flows.spare_cycle import spare_cycle
    from remedy import runtime

    # λ = 0.1: P(N > 0) = 0.095 > 0.01, P(N > 1) = 1 − 1.1·e^−0.1 = 0.0047 ≤ 0.01: one spare is the target.
    monkeypatch.setenv("REMEDY_SPARES__NODE_MTBF_HOURS", str(14 * 48 * 10))
    runtime.reset()
    validated("gpu008", hours_ago=1)
    validated("gpu016", hours_ago=1)
    out = spare_cycle()
    assert out["sizing"]["target"] == 1 and out["sizing"]["shortfall"] == 0 and "event" not in out
    # One spare per rack and PDU, but racks 1 and 2 hang off the same leaf switch: that is flagged.
    assert [(w["domain"], w["name"]) for w in out["diversity"]] == [("switch", "leaf-1")]


def test_failing_spare_leaves_the_pool_for_repair(prefect_server, remedy_on_sim):
    from flows.spare_cycle import spare_cycle
    from remedy import runtime
    from remedy.sim.faults import inject

    validated("gpu008", hours_ago=1)
    validated("gpu016", hours_ago=100)
    inject(remedy_on_sim.cluster, "pcie-degraded", "gpu016", gpu=3, width=8)
    out = spare_cycle()
    assert out["left_pool"] == ["gpu016"] and out["checked"]["gpu016"]["status"] == "repair"
    assert "x8" in out["checked"]["gpu016"]["why"]
    led = runtime.ledger()
    assert led.get_node("gpu016").state.value == "repair"
    assert [a.node for a in led.actions(kind="open_repair")] == ["gpu016"]
    assert spares_in_pool() == ["gpu008"] and out["ready_spares"] == ["gpu008"]


def test_all_spares_in_one_rack_are_flagged(prefect_server, sim_factory, tmp_path, monkeypatch):
    from flows.spare_cycle import spare_cycle

    one_rack = sim_factory(nodes=8, spares=2, training_job=False)  # 8 nodes per rack: a single rack
    point_at(one_rack, tmp_path, monkeypatch)
    spares = spares_in_pool()
    for n in spares:
        validated(n, hours_ago=1)
    out = spare_cycle()
    racks = [w for w in out["diversity"] if w["domain"] == "rack"]
    assert len(racks) == 1 and racks[0]["name"] == "rack-1" and racks[0]["count"] == racks[0]["total"] == 2
    assert "all 2 spares are in rack rack-1" in racks[0]["message"]
    story = read_artifact("spare-pool-story")
    assert "all 2 spares are in rack rack-1" in story.data


def test_one_rack_at_a_time_and_a_rack_that_fails_entirely_stops_the_cycle(prefect_server, sim_factory, tmp_path,
                                                                          monkeypatch):
    from flows.spare_cycle import spare_cycle
    from remedy import runtime
    from remedy.sim.faults import inject

    sim = sim_factory(nodes=16, spares=4, training_job=False)  # two spares in each of the two racks
    point_at(sim, tmp_path, monkeypatch)
    spares = spares_in_pool()
    by_rack = {}
    for n in runtime.cluster().list_gpu_nodes():
        if n.name in spares:
            by_rack.setdefault(n.topology.rack, []).append(n.name)
            validated(n.name, hours_ago=100)
    assert sorted(by_rack) == ["rack-1", "rack-2"] and all(len(v) == 2 for v in by_rack.values())
    for n in by_rack["rack-1"]:
        inject(sim.cluster, "row-remap-pending", n, gpu=0)
    out = spare_cycle()
    assert sorted(out["checked"]) == sorted(by_rack["rack-1"])  # rack-2 was never taken out of the pool
    assert out["stopped"] and "rack-1" in out["stopped"]
    assert spares_in_pool() == sorted(by_rack["rack-2"])


def test_dry_run_changes_nothing(prefect_server, remedy_on_sim):
    from flows.spare_cycle import spare_cycle
    from remedy import runtime
    from remedy.sim.faults import inject

    validated("gpu008", hours_ago=100)
    validated("gpu016", hours_ago=100)
    inject(remedy_on_sim.cluster, "pcie-degraded", "gpu016", gpu=3, width=8)
    before = {n.name: (n.labels, n.taints, n.unschedulable) for n in runtime.cluster().list_gpu_nodes()}
    out = spare_cycle(dry_run=True)
    assert out["stale"] == ["gpu008", "gpu016"] and out["dry_run"]
    after = {n.name: (n.labels, n.taints, n.unschedulable) for n in runtime.cluster().list_gpu_nodes()}
    assert after == before
    led = runtime.ledger()
    assert [len(led.validations(n)) for n in ("gpu008", "gpu016")] == [1, 1]
    assert led.get_node("gpu016").state.value == "spare"
    assert not remedy_on_sim.cluster.store.objects("Job")


def test_stale_spares_and_failure_domains_plain_logic():
    from tasks.burn_in import by_failure_domain, stale_spares

    now = datetime(2026, 11, 22, tzinfo=UTC)
    spares = [{"name": "a", "rack": "r2", "validated_at": (now - timedelta(hours=73)).isoformat()},
              {"name": "b", "rack": "r1", "validated_at": (now - timedelta(hours=71)).isoformat()},
              {"name": "c", "rack": "", "validated_at": None}]
    assert [s["name"] for s in stale_spares(spares, now, 72)] == ["a", "c"]
    assert by_failure_domain(spares) == [("(no rack label)", ["c"]), ("r1", ["b"]), ("r2", ["a"])]
