"""bench/fleet_replay.py's two measurements: what the job waits on in the Kubernetes simulator, and the discrete-event
run told the orchestration the stack measured."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from remedy.goodput.scenarios import scenario
from remedy.goodput.sim import FleetSim
from remedy.goodput.trace import RACK, draw_trace
from remedy.sim.cluster import TRAINING_NAMESPACE, build_cluster
from remedy.sim.controller import delete_pod

BENCH = Path(__file__).resolve().parents[2] / "bench" / "fleet_replay.py"


@pytest.fixture
def replay(monkeypatch):
    # the bench sets these defaults for its own process at import; keep them out of the test session
    for var in ("DO_NOT_TRACK", "PREFECT_SERVER_ANALYTICS_ENABLED", "PREFECT_LOGGING_LEVEL"):
        monkeypatch.setenv(var, "x")
    spec = importlib.util.spec_from_file_location("fleet_replay_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_job_waits_on_the_simulators_clocks_only_while_they_run(replay):
    # time scale 1 and no clock thread: nothing the test starts ends while it looks
    cl = build_cluster(nodes=16, spares=2, time_scale=1.0)
    r = replay.Replayer(SimpleNamespace(sim=SimpleNamespace(cluster=cl)), 1.0, 60.0, 60.0)
    faulty, other = r.job_nodes()[:2]
    rec = replay.Injected(0.0, "xid", "reset", [faulty], 48, 0)
    r.watched[faulty] = rec
    assert r._sim_waits(rec, {}) == (False, False)  # nothing running: the job waits on orchestration
    assert r._sim_waits(rec, {faulty: 1.0}) == (True, True)  # the replay's crash-again delay
    cl.reboot_node(faulty)  # a fix on the fault's own node: on the job's path only if the job comes back there
    assert r._sim_waits(rec, {}) == (False, True)
    cl.reboot_node(other)  # a reboot elsewhere is waited on either way
    assert r._sim_waits(rec, {}) == (True, True)


def test_a_training_pod_in_its_termination_grace_is_a_simulator_wait(replay):
    cl = build_cluster(nodes=16, spares=2, time_scale=1.0)
    r = replay.Replayer(SimpleNamespace(sim=SimpleNamespace(cluster=cl)), 1.0, 60.0, 60.0)
    node = r.job_nodes()[0]
    rec = replay.Injected(0.0, "xid", "reset", [node], 48, 0)
    r.watched[node] = rec
    pod = r._job_pods(node)[0]
    assert pod["metadata"]["namespace"] == TRAINING_NAMESPACE
    delete_pod(cl, TRAINING_NAMESPACE, pod["metadata"]["name"], grace=30)
    assert r._sim_waits(rec, {}) == (True, True)


def test_a_faults_split_keeps_its_downtime_and_node_fixes_count_only_in_place(replay):
    e = replay.Injected(0.0, "xid", "reset", ["n"], 48, 0, down_real=10.0, wait_base_real=2.0, wait_fix_real=5.0)
    assert (e.wait_real, e.orchestration_real) == (2.0, 8.0)
    e.in_place = True
    assert (e.wait_real, e.orchestration_real) == (5.0, 5.0)
    # production clock: waits read at 1/scale, orchestration at 1x; stretched: all of it at 1/scale
    [(a, b)] = replay.stack_downtime([e], 0.01, 1.0)
    assert (a, b) == (0.0, pytest.approx((5.0 / 0.01 + 5.0) / 60))
    [(a, b)] = replay.stack_downtime([e], 0.01, 100.0)
    assert b == pytest.approx(10.0 / 0.01 / 60)
    person = replay.Injected(3.0, "xid", "reset", ["n"], 48, 0, down_real=10.0, wait_base_real=2.0, person=True)
    assert replay.stack_downtime([person], 0.01, 1.0) == [(3.0, pytest.approx(3.0 + 10.0 / 0.01 / 60))]
    assert replay.orchestration_by_kind([e, person]) == {"xid": 5.0}


def test_the_discrete_event_run_adds_the_measured_orchestration_to_each_fault_of_its_class(replay):
    sc = scenario("meta-16k", days=0.5, restart_loading_median_minutes=0.0, spare_join_minutes=0.0,
                  warning_share=0.0, lemon_fraction=0.0)
    trace = [e for e in draw_trace(sc, hours=12, seed=2) if e.kind != RACK]
    assert len({e.kind for e in trace}) >= 2
    kind = trace[0].kind

    def outages(policy):
        sim = FleetSim(sc, policy, seed=0, trace=trace)
        result = sim.run()
        return result, {round(i.start, 6): i.resumed_at - i.start for i in sim.incidents if i.slot is not None}

    base, plain = outages(replay.FlowsAsBuilt(detect_minutes=0.0))
    slow, added = outages(replay.FlowsAsBuilt(detect_minutes=0.0, orchestration_minutes={kind: 20.0}))
    assert plain.keys() == added.keys() == {round(e.minute, 6) for e in trace}
    for e in trace:
        extra = added[round(e.minute, 6)] - plain[round(e.minute, 6)]
        assert extra == pytest.approx(20.0 if e.kind == kind else 0.0)
    assert slow.goodput < base.goodput
    # a fault's own measurement wins over its class's mean
    first = round(trace[0].minute, 6)
    _, own = outages(replay.FlowsAsBuilt(detect_minutes=0.0, orchestration_minutes={kind: 20.0},
                                         orchestration_by_fault={first: 3.0}))
    assert own[first] - plain[first] == pytest.approx(3.0)
    assert all(own[k] == pytest.approx(added[k]) for k in plain if k != first)
    # the shipped model's detection stays as it was when no measurement is given
    _, shipped = outages(replay.FlowsAsBuilt())
    alone = [round(b.minute, 6) for a, b, c in zip([None] + trace, trace, trace[1:] + [None])
             if (a is None or b.minute - a.minute > 30) and (c is None or c.minute - b.minute > 30)]
    assert alone and all(shipped[k] == pytest.approx(plain[k] + 0.5) for k in alone)


def test_a_rack_event_lands_on_job_racks_in_the_model_as_on_the_kubernetes_simulator(replay):
    sc = scenario("meta-16k")
    trace = draw_trace(sc, hours=24 * 60, seed=0, racks=-(-sc.total_nodes // replay.SIM_RACK_SIZE))
    racks = [e for e in trace if e.kind == RACK]
    job_racks = sc.training_nodes // replay.SIM_RACK_SIZE
    assert any(e.rack >= job_racks for e in racks)  # the drawn trace does hit the model's spare-only racks
    played = replay.des_trace(trace, sc.training_nodes)
    assert [e.rack for e in played if e.kind == RACK] == [e.rack % job_racks for e in racks]
    assert [e for e in played if e.kind != RACK] == [e for e in trace if e.kind != RACK]
    # in the model, each of those events now stops the job
    same = scenario("meta-16k", days=60.0, rack_size=replay.SIM_RACK_SIZE, warning_share=0.0, lemon_fraction=0.0)
    sim = FleetSim(same, replay.FlowsAsBuilt(), seed=0, trace=[e for e in played if e.kind == RACK])
    sim.run()
    assert {round(i.start, 6) for i in sim.incidents if i.slot is not None} == {round(e.minute, 6) for e in racks}
