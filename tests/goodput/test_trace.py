"""A failure trace drawn from a scenario, replayed by the discrete-event simulator and accounted from a timeline."""

from __future__ import annotations

import pytest

from remedy.goodput.compare import make_policy
from remedy.goodput.scenarios import scenario
from remedy.goodput.sim import FleetSim
from remedy.goodput.trace import RACK, draw_trace, timeline_goodput


def test_a_trace_follows_the_scenario_and_its_seed():
    sc = scenario("meta-16k")
    trace = draw_trace(sc, hours=240, seed=3)
    faults = [e for e in trace if e.kind != RACK]
    racks = [e for e in trace if e.kind == RACK]
    # 240 h at a 1.8-h MTBF: 133 expected; Poisson sd ≈ 11.5
    assert 95 < len(faults) < 175
    assert {e.kind for e in faults} <= {k.name for k in sc.fault_mix}
    assert all(0 <= e.slot < sc.training_nodes for e in faults)
    for e in faults:
        kind = next(k for k in sc.fault_mix if k.name == e.kind)
        assert e.needs in dict(kind.needs)
        assert (e.xid in kind.xids) if kind.xids else e.xid is None
    # 0.5 events per rack-year over 528 racks and 10 days: 7.2 expected
    assert 1 <= len(racks) <= 18
    assert all(e.clears_after_minutes == sc.rack_event_hours * 60 for e in racks)
    assert [e.minute for e in trace] == sorted(e.minute for e in trace)
    assert draw_trace(sc, hours=240, seed=3) == trace
    assert draw_trace(sc, hours=240, seed=4) != trace
    with pytest.raises(ValueError):
        draw_trace(sc, hours=0)


def test_timeline_goodput_by_hand():
    # up 0–25: two checkpoints (18 useful, 2 checkpointing), 5 rolled back; down 25–30; up 30–100: seven
    # checkpoints (63 + 7), nothing partial left
    g = timeline_goodput([(25.0, 30.0)], 100.0, 10.0, 1.0)
    assert g["useful"] == pytest.approx(81.0)
    assert g["checkpoint"] == pytest.approx(9.0)
    assert g["rollback"] == pytest.approx(5.0)
    assert g["down"] == pytest.approx(5.0)
    assert g["goodput"] == pytest.approx(0.81)
    # overlapping outages are one outage; a partial interval at the horizon is kept
    g = timeline_goodput([(25.0, 28.0), (27.0, 30.0)], 105.0, 10.0, 1.0)
    assert g["stops"] == 1 and g["useful"] == pytest.approx(81.0 + 5.0)


@pytest.mark.parametrize("policy", ["auto-replace", "gpu-remedy"])
def test_the_simulator_replays_the_trace_and_its_timeline_gives_the_same_goodput(policy):
    sc = scenario("meta-16k", days=2.0, restart_loading_median_minutes=0.0, warning_share=0.0, lemon_fraction=0.0)
    trace = draw_trace(sc, hours=48, seed=1)
    sim = FleetSim(sc, make_policy(policy), seed=0, trace=trace, check_invariants=True)
    result = sim.run()
    faults = [e for e in trace if e.kind != RACK]
    hits = [i for i in sim.incidents if i.fault.kind.name != "rack"]
    # every failure of the trace, at its minute (none lands on a slot that is already broken in this trace)
    assert [round(i.start, 6) for i in hits] == [round(e.minute, 6) for e in faults]
    assert [i.fault.kind.name for i in hits] == [e.kind for e in faults]
    assert result.job_failures == len(faults)
    down = [(i.start, i.resumed_at if i.resumed_at is not None else sim.clock.now)
            for i in sim.incidents if i.slot is not None]
    g = timeline_goodput(down, sc.days * 24 * 60, sc.checkpoint_interval_minutes, sc.checkpoint_cost_minutes)
    assert g["goodput"] == pytest.approx(result.goodput, abs=1e-9)
    assert g["rollback"] == pytest.approx(result.minutes["rollback"], abs=1e-6)
