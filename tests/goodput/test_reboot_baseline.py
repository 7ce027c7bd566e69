"""auto-replace-reboot: the baseline that reboots a pulled node before sending it to repair, knowing nothing of
the fault (issue 34). Same seeds as auto-replace, so the difference is the reboot alone."""

from __future__ import annotations

from remedy.goodput.compare import make_policy, simulate
from remedy.goodput.scenarios import scenario
from remedy.goodput.sim import FleetSim

SEEDS = range(3)


def test_a_reboot_keeps_reboot_fixable_nodes_out_of_repair():
    plain = [simulate("seed002-63", "auto-replace", seed=s) for s in SEEDS]
    reboot = [simulate("seed002-63", "auto-replace-reboot", seed=s) for s in SEEDS]
    assert sum(r.nodes_to_repair for r in reboot) < sum(r.nodes_to_repair for r in plain)
    # the spare pool is refilled by the rebooted nodes, so no fewer spares are at hand
    assert sum(r.min_spares_in_pool for r in reboot) >= sum(r.min_spares_in_pool for r in plain)


def test_what_a_reboot_cannot_clear_still_goes_to_repair():
    sim = FleetSim(scenario("meta-16k", days=20), make_policy("auto-replace-reboot"), seed=2, check_invariants=True)
    sim.run()
    reasons = sim.acc.repair_reasons
    assert reasons.get("a reboot did not clear it", 0) > 0, reasons
    assert "replaced" not in reasons  # every pulled node got its reboot first
    assert sim.acc.in_place_fixes > 0
