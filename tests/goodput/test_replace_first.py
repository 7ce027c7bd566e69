"""Replace first, repair in the background, act on warnings: the simulator's gpu-remedy policy."""

from __future__ import annotations

import pytest

from remedy.domain.model import NodeState
from remedy.goodput.compare import make_policy, pooled_goodput, simulate
from remedy.goodput.gpu_remedy_policy import GpuRemedy, at
from remedy.goodput.scenarios import SCENARIOS, load_scenario_file, scenario
from remedy.goodput.sim import FleetSim


class Recorder(GpuRemedy):
    """gpu-remedy, noting when the job got its spare and when the off-path repair of the failed node began."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.events: list[tuple[float, int, bool]] = []

    def _repair_off_path(self, sim, node, resolution, tried, code="", **kw):
        # when the off-path repair starts, and whether the failed node is still in the job at that moment
        self.events.append((sim.clock.now, node, node in sim.slot_of))
        yield from super()._repair_off_path(sim, node, resolution, tried, code, **kw)


def test_the_job_gets_the_spare_before_the_failed_node_is_reset_and_the_node_returns_to_the_pool():
    sc = scenario("seed002-63", days=55, warning_share=0.0, rack_events_per_rack_year=0.0, lemon_fraction=0.0)
    policy = Recorder()
    sim = FleetSim(sc, policy, seed=3)
    sim.run()
    replaced = [i for i in sim.incidents if i.actions and i.actions[-1] == "replaced"]
    assert replaced
    for inc in replaced:
        assert inc.resumed_at is not None
        t, node, still_in_job = min(e for e in policy.events if e[1] == inc.node and e[0] >= inc.start)
        # the reset starts once the spare has taken the node's place (detect 0.5 + drain 0.5 + join 4), while the
        # job reloads on the spare — never before, and never with the failed node still in the job
        assert not still_in_job
        assert t == pytest.approx(inc.start + 0.5 + 0.5 + sc.spare_join_minutes)
        assert t <= inc.resumed_at
    fixed_off_path = [n for n in policy.returned]
    assert fixed_off_path, "some failed nodes should pass the off-path reset/reboot"
    for n in fixed_off_path:
        assert sim.state[n] in (NodeState.SPARE, NodeState.ACTIVE, NodeState.BURN_IN, NodeState.QUARANTINED,
                                NodeState.REPAIR)
    # at least one came back through burn-in as a warm spare and was used again
    assert any(sim.validations.get(n) for n in fixed_off_path)


def test_replace_first_beats_auto_replace_and_sends_fewer_nodes_to_repair_on_the_same_seeds():
    for name in ("seed000-1k", "seed002-63"):
        ours = [simulate(name, "gpu-remedy", seed=s) for s in range(2)]
        base = [simulate(name, "auto-replace", seed=s) for s in range(2)]
        assert pooled_goodput(ours) > pooled_goodput(base)
        assert sum(r.nodes_to_repair for r in ours) < 0.6 * sum(r.nodes_to_repair for r in base)


def test_acting_on_warnings_avoids_failures_that_would_have_rolled_work_back():
    sc = scenario("seed000-1k", days=90, warning_share=0.5, false_warnings_per_true=0.0)
    acting = FleetSim(sc, make_policy("gpu-remedy"), seed=1).run()
    waiting = FleetSim(sc, make_policy("gpu-remedy/no-warnings"), seed=1).run()
    assert acting.warnings > 0 and waiting.warnings > 0
    assert acting.warning_swaps > 0 and acting.failures_avoided > 0 and waiting.warning_swaps == 0
    assert acting.minutes["rollback"] < waiting.minutes["rollback"]
    assert acting.goodput > waiting.goodput


def test_shipped_scenarios_are_files_and_llama3_follows_the_paper():
    assert {"seed000-1k", "seed002-63", "meta-16k", "llama3-405b"} <= set(SCENARIOS)
    llama = SCENARIOS["llama3-405b"]
    assert sum(k.share for k in llama.fault_mix) == 419  # Table 5's unexpected interruptions
    assert llama.days == 54 and llama.training_nodes * llama.gpus_per_node == 16384
    # failures arrive only while the job trains: the MTBF in training hours is below the calendar one (54 × 24 / 419)
    assert llama.job_mtbf_hours < 54 * 24 / 419
    assert not {145, 149} & {x for k in llama.fault_mix for x in k.xids}  # Blackwell-only XIDs on an H100 cluster
    assert llama.published["effective training time"] == "> 90 %"
    r = simulate("llama3-405b", "gpu-remedy", days=5)
    assert 0.5 < r.goodput < 1.0


def test_a_scenario_file_is_checked_field_by_field(tmp_path):
    from remedy.goodput.scenarios import ScenarioFileError

    good = tmp_path / "tiny.yaml"
    good.write_text("name: tiny\ntraining_nodes: 8\nspares: 2\ndays: 3\njob_mtbf_hours: 12\n"
                    "checkpoint_interval_minutes: 30\ncheckpoint_cost_minutes: 1\n"
                    "fault_mix:\n  - {name: gpu, share: 1, xids: [79], needs: {reboot: 0.5, replace: 0.5}}\n")
    sc = load_scenario_file(good)
    assert sc.fault_mix[0].needs == (("reboot", 0.5), ("replace", 0.5))
    assert FleetSim(sc, make_policy("gpu-remedy"), seed=0).run().incidents > 0
    for body, expected in (("name: x\n", "training_nodes: Field required"),
                           ("name: x\ntraining_nodes: 8\nspares: 1\ndays: 1\njob_mtbf_hours: 1\n"
                            "checkpoint_interval_minutes: 30\ncheckpoint_cost_minutes: 1\nspare_count: 3\n",
                            "spare_count: Extra inputs are not permitted"),
                           ("a: [\n", "not valid YAML"),
                           ("name: x\ntraining_nodes: 8\nspares: 1\ndays: 1\njob_mtbf_hours: 1\n"
                            "checkpoint_interval_minutes: 30\ncheckpoint_cost_minutes: 1\n"
                            "fault_mix: [{name: g, share: 1, needs: {fix-it: 1}}]\n", "needs must map")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(body)
        with pytest.raises(ScenarioFileError, match=expected):
            load_scenario_file(bad)


def test_simulate_cli_plays_a_file_and_draws_the_comparison(tmp_path, capsys):
    from remedy.cli import main

    png = tmp_path / "out.png"
    assert main(["simulate", "--scenario-file", str(load_path()), "--days", "5", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "against auto-replace on the same seeds:" in out and "published: effective training time > 90 %" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["simulate", "--scenario-file", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read it" in capsys.readouterr().err


def load_path():
    from remedy.goodput.scenarios import SCENARIO_DIR

    return SCENARIO_DIR / "llama3-405b.yaml"


def test_only_the_spare_reserve_left_asks_a_person_for_a_yes_then_automation_swaps():
    # one spare and a reserve of one: every replacement needs a person's approval. The flow asks and acts on the
    # answer (page + triage), it does not hand the incident to the manual runbook.
    sc = scenario("seed002-63", spares=1, warning_share=0.0, rack_events_per_rack_year=0.0, lemon_fraction=0.0)
    sim = FleetSim(sc, GpuRemedy(ask_ahead=False), seed=2)
    result = sim.run()
    approved = [i for i in sim.incidents if any(a.startswith("approval:spare-reserve") for a in i.actions)]
    assert result.approvals == len(approved) > 0
    for inc in approved:
        assert inc.actions[-1] == "replaced" and not inc.human_acted
    # asked ahead (when the pool fell to the reserve), the next failure takes the reserve without waiting for a person
    ahead = FleetSim(scenario("seed002-63", spares=2, job_mtbf_hours=10.0, warning_share=0.0, rack_events_per_rack_year=0.0,
                              lemon_fraction=0.0), GpuRemedy(), seed=2)
    ahead.run()
    used = [i for i in ahead.incidents if "approval-ahead:spare-reserve" in i.actions and i.resumed_at is not None]
    assert used
    for inc in used:  # no page + triage on the critical path: detect, drain, join, reload (under a few hours)
        assert not any(a.startswith("approval:") for a in inc.actions)


def test_a_warning_swap_never_stops_the_job_without_a_spare_to_swap_in():
    for seed in range(4):
        sim = FleetSim(scenario("seed002-63"), make_policy("gpu-remedy"), seed=seed)
        sim.run()
        for inc in sim.incidents:
            assert not (any(a.startswith("warning:") for a in inc.actions) and "no-spare" in inc.actions), inc.actions


def test_nodes_of_a_rack_that_lost_power_go_back_to_the_pool_not_to_repair():
    sc = scenario("seed002-63", job_mtbf_hours=1e7, rack_events_per_rack_year=5.0, warning_share=0.0,
                  lemon_fraction=0.0, spares=8)
    sim = FleetSim(sc, make_policy("gpu-remedy"), seed=1, check_invariants=True)
    result = sim.run()
    rack = [i for i in sim.incidents if i.fault.kind.name == "rack" and i.actions and i.actions[-1] == "replaced"]
    assert rack, "some rack nodes should have been swapped for spares"
    assert result.nodes_to_repair == 0, result.repair_reasons
    back = [i.node for i in rack if sim.validations.get(i.node, [0])[-1] > i.start]
    assert back, "a swapped rack node should pass validation and return once its rack is up"


def _seed002_with_spares():
    """gpu-remedy's policy set up on seed 002 (no warnings): the policy, its simulator and the ready spares."""
    policy = GpuRemedy()
    sim = FleetSim(scenario("seed002-63", warning_share=0.0), policy, seed=0)
    policy._setup(sim)
    return policy, sim, sim.ready_spares()


def test_a_spare_just_back_from_an_off_path_fix_is_used_last():
    policy, sim, ready = _seed002_with_spares()
    assert len(ready) == 3
    policy.returned = {ready[0]: 0.0, ready[1]: 0.0}  # both came back from a reset a moment ago
    assert policy._pick_spare(sim, 0, False, ready) == ready[2]
    policy.returned[ready[2]] = 0.0  # all of them did: any will do, rather than none
    assert policy._pick_spare(sim, 0, False, ready) in ready


def test_a_lemon_candidate_the_budget_defers_is_never_handed_out_as_a_spare():
    policy, sim, ready = _seed002_with_spares()
    policy.suspects = {ready[0]}  # a candidate the retirement budget deferred: it waits in the pool
    assert ready[0] not in policy._spares(sim) and len(policy._spares(sim)) == 2
    assert policy._pick_spare(sim, 0, False, ready) != ready[0]
    policy.suspects = set(ready[:2])
    assert policy._pick_spare(sim, 0, False, ready) == ready[2]
    policy.suspects = set(ready)  # only candidates left: no spare rather than a lemon back in the job
    assert policy._pick_spare(sim, 0, False, ready) is None and policy._spare_state(sim)[0] is False


def test_a_noisy_detector_is_learned_from_the_warnings_left_to_run_and_stops_costing_swaps():
    """A detector right one time in seven (busy but healthy nodes flagged six times per true warning). The policy
    is not told that: it learns the detector's record from the warnings it leaves to run (remedy.warn.record, the
    function triage calls) and stops swapping healthy nodes once the record shows acting does not pay. Without the
    warnings left to check it, nearly every warning is acted on and almost none is ever judged. (Without early
    promotion: with the spare joined before the checkpoint a swap costs the job 30 s, and even a 1-in-5 warning is
    worth that; here the swap costs the join too.)"""
    sc = scenario("seed000-1k", days=200, warning_share=0.3, false_warnings_per_true=6.0)
    policy = GpuRemedy(early_promotion=False)
    learned = FleetSim(sc, policy, seed=1).run()
    told = FleetSim(sc, GpuRemedy(early_promotion=False, learn_warning_precision=False), seed=1).run()
    assert told.warning_swaps == 0  # told 1 in 7, swapping never pays here
    assert learned.warning_swaps < 0.3 * learned.warnings, (learned.warning_swaps, learned.warnings)
    late = [w for w in policy.warnings if w.at >= at(100 * 1440)]  # the second half: the record is learned
    assert late and sum(w.swapped for w in late) < 0.1 * len(late)


def test_a_reliable_detector_is_still_acted_on_while_it_proves_itself():
    sc = scenario("seed000-1k", days=90, warning_share=0.3, false_warnings_per_true=0.0)
    learned = FleetSim(sc, make_policy("gpu-remedy"), seed=1).run()
    told = FleetSim(sc, make_policy("gpu-remedy/told-warning-precision"), seed=1).run()
    assert told.warning_swaps > 0
    assert learned.warning_swaps >= 0.9 * told.warning_swaps, (learned.warning_swaps, told.warning_swaps)
