"""seed002-63 (issue 34): a detector is acted on once its record shows acting pays, and a node taken out on a warning
that finds nothing wrong starts no recurrence clock. Plain Python on the simulator's policy."""

from __future__ import annotations

from remedy.domain.xid import Resolution
from remedy.goodput.compare import make_policy, simulate
from remedy.goodput.gpu_remedy_policy import GpuRemedy
from remedy.goodput.incidents import Fault
from remedy.goodput.scenarios import RESET, SCENARIOS, scenario
from remedy.goodput.sim import FleetSim


def _off_path(warned: bool, fault: bool) -> tuple[GpuRemedy, FleetSim, int]:
    """A job node goes through the off-path fix after a swap (on a warning or not), healthy or with a fault a reset
    clears."""
    policy = GpuRemedy()
    sim = FleetSim(scenario("seed002-63", days=1, warning_share=0.0), policy, seed=0)
    policy._setup(sim)
    node = sim.slots[0]
    if fault:
        kind = SCENARIOS["seed002-63"].fault_mix[0]
        sim.faults[node] = Fault(kind, None, RESET)
    sim.clock.spawn(policy._repair_off_path(sim, node, Resolution.UNKNOWN, 0, warned=warned))
    sim.clock.run_until(60.0)
    return policy, sim, node


def test_a_node_swapped_on_a_warning_that_passes_its_check_starts_no_recurrence_clock():
    policy, sim, node = _off_path(warned=True, fault=False)
    assert node not in policy.returned  # nothing was fixed: its next failure is not "a fix that did not hold"
    assert sim.state[node].value == "burn-in" and not sim.acc.fix_attempts
    # a warned node with a real fault is fixed (and the clock starts), as is any failed node
    policy, sim, node = _off_path(warned=True, fault=True)
    assert node in policy.returned and sim.acc.fix_attempts == {"reset-gpu": 1}
    policy, sim, node = _off_path(warned=False, fault=False)
    assert node in policy.returned


def test_an_unproved_detector_never_stops_the_job_on_seed002():
    """63 nodes and 55 days give seed 002's detector (right one time in two) too few warnings to prove itself: acting
    on evidence, the policy takes no node out on a warning and its runs are no-warnings' runs exactly."""
    for seed in range(3):
        ours = simulate("seed002-63", "gpu-remedy", seed=seed)
        none = simulate("seed002-63", "gpu-remedy/no-warnings", seed=seed)
        assert ours.warnings > 0 and ours.warning_swaps == 0
        assert ours.minutes == none.minutes
    prior = [simulate("seed002-63", "gpu-remedy/check-one-in-three", seed=s) for s in range(3)]
    assert sum(r.warning_swaps for r in prior) > 0  # on the assumed 2/3 it would have stopped the job


def test_a_reliable_detector_is_acted_on_once_its_record_shows_it():
    """A detector that is always right: its first warnings run (and come true), then the record shows acting pays and
    the job stops for its warnings from then on."""
    sc = scenario("seed000-1k", days=60, warning_share=0.3, false_warnings_per_true=0.0)
    policy = make_policy("gpu-remedy")
    sim = FleetSim(sc, policy, seed=1)
    r = sim.run()
    assert r.warning_swaps > 0.5 * r.warnings, (r.warning_swaps, r.warnings)
    first = sorted(policy.warnings, key=lambda w: w.at)[:3]
    assert not any(w.swapped for w in first)  # before any record: left to run, judged
