"""A lemon candidate the review defers stays in the spare pool but is never handed out (issue 15, as in the
simulator's gpu-remedy policy) — until a later review no longer flags it or a person declines its retirement."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture
from tests.fixtures.prefect import run_to_state_result
from tests.flows.test_lemon_review import DAY, load_fleet_history, seeded  # noqa: F401 - fixture

LEMON_SPARE = "gpu056"  # a planted lemon of seed 11, and (4 spares over 8 racks of 8) the last node of rack 7


@pytest.fixture
def lemon_in_spare_pool(sim_factory, slack_stub, aws_endpoint, remedy_env):  # noqa: F811
    """63 nodes, spares gpu008/024/040/056, seed-11 history in the ledger; the lemon gpu056 is back in the spare
    pool and validated last, so every other rule ranks it first. No retirement budget: the review defers."""
    from remedy.domain.model import NodeState
    from remedy.lemon.history import simulate_fleet

    sim = sim_factory(nodes=63, spares=4)
    runtime = remedy_env(sim=sim, slack=slack_stub, AWS__ENDPOINT_URL=aws_endpoint, APPROVALS__TIMEOUT_SECONDS=60,
                         DRAIN__GRACE_PERIOD_SECONDS=30, LEMON__RETIREMENT_BUDGET=0)
    now = datetime.now(UTC)
    fleet = simulate_fleet(11, start=now - 73 * DAY)
    assert LEMON_SPARE in fleet.lemons
    led = runtime.ledger()
    load_fleet_history(led, fleet, runtime.cluster().list_gpu_nodes())
    spares = [n.name for n in runtime.cluster().list_gpu_nodes() if n.state is NodeState.SPARE]
    assert LEMON_SPARE in spares and len(spares) == 4
    for name in sorted(spares, key=lambda s: s == LEMON_SPARE):  # the lemon last: the freshest validation
        led.transition(name, NodeState.SPARE, reason="test: in the spare pool", requested_by="test")
        led.record_validation(name, level="standard", passed=True, summary={}, requested_by="test")
    return sim, runtime


@pytest.mark.prefect
def test_deferred_lemon_is_not_promoted_until_a_review_clears_it(prefect_server, lemon_in_spare_pool):
    from flows.lemon_review import lemon_review
    from flows.replace_node import replace_node
    from remedy.sim.faults import inject
    from remedy.spares.lemons import lemon_candidates

    sim, runtime = lemon_in_spare_pool
    led = runtime.ledger()

    review = lemon_review()
    assert review["retire"] == [] and LEMON_SPARE in {d["node"] for d in review["deferred"]}
    marked = lemon_candidates(led)
    assert set(marked) == {c["node"] for c in review["candidates"]}
    assert marked[LEMON_SPARE]["decision"] == "deferred" and marked[LEMON_SPARE]["p_value"] < 0.01
    # The breaker's spare reserve counts what may be handed out: 3 of the 4 spares (the simulator's rule too).
    from tasks.gate import fleet_view, load_board

    assert fleet_view(load_board()).ready_spares == 3

    # A node fails: replace-node (which passes no lemons itself) takes another spare, and says why not the lemon.
    inject(sim.cluster, "xid", "gpu003", gpu=3, code=79)
    out = run_to_state_result(replace_node, node="gpu003", cause="XID 79", xid=79, gpu=3)
    assert out["status"] == "replaced", out
    assert out["replacement"] in ("gpu008", "gpu024", "gpu040")
    why = led.actions(kind="claim_spare", incident_id=out["incident_id"])[-1].detail["why"]
    assert f"not {LEMON_SPARE}: it is a lemon candidate" in why

    # A review months later no longer flags it (its incidents left the lookback window): a spare like any other.
    later = (datetime.now(UTC) + 200 * DAY).isoformat()
    clean = lemon_review(as_of=later)
    assert LEMON_SPARE not in {c["node"] for c in clean["candidates"]}
    assert LEMON_SPARE in clean["lemon_candidates_cleared"]
    assert LEMON_SPARE not in lemon_candidates(led)

    inject(sim.cluster, "xid", "gpu011", gpu=2, code=79)
    again = run_to_state_result(replace_node, node="gpu011", cause="XID 79", xid=79, gpu=2)
    assert again["status"] == "replaced", again
    # no longer kept out: ranked like any spare, by its record — its incidents of the last 73 days (the ledger's,
    # as of now) put it after the spares with none, though it was validated last
    why = led.actions(kind="claim_spare", incident_id=again["incident_id"])[-1].detail["why"]
    assert "lemon candidate" not in why, why
    usable = next(line for line in why.splitlines() if line.startswith("usable, in order: "))
    assert f"not {LEMON_SPARE}:" not in why and usable.endswith(LEMON_SPARE), why
    assert again["replacement"] != LEMON_SPARE


@pytest.mark.prefect
def test_declined_retirement_clears_the_candidate_and_deferred_stay(prefect_server, seeded):
    from flows.lemon_review import lemon_review
    from remedy.approvals.auto import AutoApprover
    from remedy.spares.lemons import lemon_candidates

    runtime, fleet = seeded
    with AutoApprover(decision=False, by="U0ALICE"):
        out = lemon_review()
    declined = set(out["retire"])
    assert len(declined) == 2 and out["retired"] == []
    assert all(r["status"] == "not-retired" for r in out["retirements"])
    marked = lemon_candidates(runtime.ledger())
    assert set(marked) == {d["node"] for d in out["deferred"]} and not declined & set(marked)
    cleared = [a for a in runtime.ledger().actions(kind="clear_lemon_candidate") if a.node in declined]
    assert len(cleared) == 2 and all(a.requested_by == "operator:U0ALICE" for a in cleared)


def test_ledger_rule_latest_candidate_or_clear_row_wins(tmp_path):
    """The ledger rule alone: latest of candidate / cleared wins; a clear of a non-candidate writes nothing."""
    from remedy.ledger import Ledger
    from remedy.spares.lemons import clear_candidate, lemon_candidates, record_review

    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    led.migrate()
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    record_review(led, {"a": {"p_value": 1e-4}, "b": {"p_value": 2e-3}}, reviewed_at=t0, requested_by="t")
    assert set(lemon_candidates(led)) == {"a", "b"}
    assert clear_candidate(led, "a", by="operator:alice", why="retirement declined") is True
    assert clear_candidate(led, "zzz", by="operator:alice", why="not one") is False
    assert set(lemon_candidates(led)) == {"b"}
    # The next review flags a again and no longer b.
    view = record_review(led, {"a": {"p_value": 1e-5}}, reviewed_at=t0 + timedelta(days=1), requested_by="t")
    assert view == {"flagged": ["a"], "cleared": ["b"]}
    assert lemon_candidates(led) == {"a": {"reviewed_at": (t0 + timedelta(days=1)).isoformat(), "p_value": 1e-5}}
    assert [a.kind for a in led.actions(node="zzz")] == []


def test_the_spare_with_the_cleanest_record_goes_first(remedy_on_sim):
    """select_spare counts each spare's incidents in the lemon lookback window from the ledger: a spare that failed
    last month ranks after one that never did, though it was validated later; an incident older than the window, or
    a planned retirement move, does not count."""
    from remedy import runtime
    from remedy.domain.model import PLANNED_RETIREMENT_SIGNAL, Incident, IncidentStatus
    from tasks.spares import select_spare

    led = runtime.ledger()
    for n in runtime.cluster().list_gpu_nodes():
        led.upsert_node(n)
    now = datetime.now(UTC)
    led.record_validation("gpu016", level="standard", passed=True, summary={}, requested_by="test",
                          at=now - timedelta(hours=5))
    led.record_validation("gpu008", level="standard", passed=True, summary={}, requested_by="test")  # fresher

    def incident(node, days_ago, signal="xid"):
        t = now - timedelta(days=days_ago)
        led.open_incident(Incident(node=node, signal=signal, gpu=1, xid=79 if signal == "xid" else None,
                                   first_seen=t, last_seen=t, status=IncidentStatus.RESOLVED), window_seconds=0)

    assert select_spare.fn("gpu003").spare == "gpu008"  # clean records: the fresher validation
    incident("gpu008", 30)
    choice = select_spare.fn("gpu003")
    assert choice.spare == "gpu016", choice.why
    incident("gpu016", 100)  # outside the 73-day window
    incident("gpu016", 1, signal=PLANNED_RETIREMENT_SIGNAL)  # not a failure
    assert select_spare.fn("gpu003").spare == "gpu016"
    incident("gpu016", 20)
    incident("gpu016", 10)
    choice = select_spare.fn("gpu003")
    assert choice.spare == "gpu008" and "1 incident(s) in the lemon lookback window" in choice.why, choice.why
