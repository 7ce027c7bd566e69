"""The remediation chooser: expected job downtime per option, with what follows when an option does not clear."""

from __future__ import annotations

import math

import pytest

from remedy.domain.xid import Resolution
from remedy.remediate.choice import (
    PRIORS,
    Durations,
    FixOdds,
    Option,
    Situation,
    WarningAction,
    choose,
    choose_on_warning,
    estimate_odds,
)
from remedy.safety.held_swap import may_swap_while_held
from remedy.safety.scopes import Skip, SkipReason

QUICK = Durations(reload=0.0)  # seed 000: restart folded into remediation
SLOW_RELOAD = Durations(reload=31.0)  # seed 002: 31-min checkpoint reload


def test_app_fault_restarts_in_place_when_reload_is_cheap():
    c = choose(Situation(Resolution.RESTART_APP, PRIORS[Resolution.RESTART_APP], spare_ready=True, durations=QUICK))
    assert c.option is Option.RESTART
    restart = c.chosen
    # reload 0 + 15 % × (detect 0.5 + what follows, a spare: 4.5)
    assert restart.downtime_minutes == pytest.approx(0.15 * (0.5 + 4.5))
    assert {x.option for x in c.costs} == {Option.RESTART, Option.RESET, Option.REBOOT, Option.REPLACE, Option.ESCALATE}


def test_node_fault_with_a_spare_is_replaced_first():
    c = choose(Situation(Resolution.RESET_GPU, PRIORS[Resolution.RESET_GPU], spare_ready=True, durations=SLOW_RELOAD))
    assert c.option is Option.REPLACE
    assert c.chosen.downtime_minutes == pytest.approx(0.5 + 4.0 + 31.0)
    assert "least expected job downtime" in c.reason and "catalog prior" in c.reason
    md = c.markdown()
    assert "**replace**" in md and md.count("\n|") == len(c.costs) + 2


def test_without_a_spare_the_ladder_runs_on_the_critical_path():
    c = choose(Situation(Resolution.RESET_GPU, PRIORS[Resolution.RESET_GPU], spare_ready=False, durations=SLOW_RELOAD))
    assert c.option is Option.RESET and Option.REPLACE not in {x.option for x in c.costs}
    assert "no spare ready" in c.reason
    after = choose(Situation(Resolution.RESET_GPU, PRIORS[Resolution.RESET_GPU], spare_ready=False,
                             durations=SLOW_RELOAD, tried_depth=1))
    assert after.option is Option.REBOOT  # the reset did not clear it: the next step, never the same one again
    last = choose(Situation(Resolution.RESET_GPU, PRIORS[Resolution.RESET_GPU], spare_ready=False,
                            durations=SLOW_RELOAD, tried_depth=2))
    assert last.option is Option.ESCALATE


def test_a_near_tie_keeps_the_spare():
    # restart costs 0 + 0.5 × (0.5 + 4.5) = 2.5; replace 4.5 → restart; with a 3-min tolerance restart still wins
    # because it spends fewer spares, and the reason says so when it is not the fastest
    odds = FixOdds(0.5, 0.9, 0.95)
    c = choose(Situation(Resolution.RESTART_APP, odds, spare_ready=True, durations=QUICK, tolerance_minutes=3.0))
    assert c.option is Option.RESTART


def test_an_unreachable_node_is_replaced_unless_it_usually_comes_back():
    durations = Durations(reload=8.0, not_ready_grace=5.0)
    down = choose(Situation(Resolution.RESTART_BM, FixOdds(0.05, 0.2, 0.6), spare_ready=True, durations=durations,
                            unreachable=True))
    assert down.option is Option.REPLACE
    blips = choose(Situation(Resolution.RESTART_BM, FixOdds(0.95, 0.96, 0.97), spare_ready=True,
                             durations=durations, unreachable=True))
    assert blips.option is Option.RESTART and "back in" in blips.chosen.arithmetic


def test_odds_learn_from_recorded_outcomes_and_stay_monotone():
    prior = PRIORS[Resolution.RESTART_APP]
    assert estimate_odds(prior, []) is prior
    failed = estimate_odds(prior, [(Option.RESTART, False)] * 40)
    assert failed.restart < 0.25 and failed.samples == 40
    assert failed.restart <= failed.reset <= failed.reboot
    # with the restart odds learnt low, an app fault with a spare is now replaced
    c = choose(Situation(Resolution.RESTART_APP, failed, spare_ready=True, durations=SLOW_RELOAD))
    assert c.option is Option.REPLACE and "40 recorded outcomes" in c.reason
    with pytest.raises(ValueError):
        FixOdds(0.9, 0.5, 0.95)


def test_warning_swaps_at_the_next_checkpoint_or_takes_one_now():
    kw = dict(checkpoint_interval_minutes=30.0, checkpoint_cost_minutes=1.0, spare_ready=True, durations=QUICK)
    soon = choose_on_warning(precision=0.8, lead_minutes=60, minutes_to_next_checkpoint=10, **kw)
    assert soon.action is WarningAction.AT_NEXT_CHECKPOINT and soon.act_cost_minutes == pytest.approx(4.5)
    late = choose_on_warning(precision=0.8, lead_minutes=5, minutes_to_next_checkpoint=20, **kw)
    assert late.action is WarningAction.CHECKPOINT_NOW and late.act_cost_minutes == pytest.approx(5.5)
    noisy = choose_on_warning(precision=0.1, lead_minutes=60, minutes_to_next_checkpoint=10, **kw)
    assert noisy.action is WarningAction.WAIT  # 0.1 × (15 + 0.5 + 4.5) = 2 < 4.5: not worth a swap
    kw["spare_ready"] = False
    assert choose_on_warning(precision=1.0, lead_minutes=60, minutes_to_next_checkpoint=10, **kw).action \
        is WarningAction.WAIT


def test_a_held_rack_keeps_its_nodes_but_not_the_job():
    rack = Skip(SkipReason.BREAKER_TRIPPED, "3 nodes of rack-01 in 60 s", "rack:rack-01")
    assert may_swap_while_held(rack, ready_spares_outside=3, spare_reserve=1).allowed
    assert not may_swap_while_held(rack, ready_spares_outside=1, spare_reserve=1).allowed
    fleet = Skip(SkipReason.BREAKER_OPEN, "cluster open", "cluster:cluster")
    assert not may_swap_while_held(fleet, ready_spares_outside=10, spare_reserve=1).allowed
    budget = Skip(SkipReason.CAPACITY_BUDGET, "too many out")
    assert not may_swap_while_held(budget, ready_spares_outside=10, spare_reserve=1).allowed


def test_after_a_failed_rung_the_choice_may_skip_rungs_but_never_go_back():
    from remedy.domain.xid import RemediationPath as P
    from remedy.remediate.choice import after_failed_rung, tried_depth
    from remedy.safety.ladder import LADDERS

    assert tried_depth([]) == -1 and tried_depth([P.REPLACE]) == -1
    assert tried_depth([P.RESTART_APP, P.RESTART_APP]) == 0 and tried_depth([P.RESET_GPU, P.RESTART_APP]) == 1
    app = LADDERS[Resolution.RESTART_APP]  # restart → reset → reboot → replace
    # the ladder would restart again after a back-off: the spare (or a reset) is deeper, so it wins
    assert after_failed_rung(app, P.RESTART_APP, Option.REPLACE) is P.REPLACE
    assert after_failed_rung(app, P.RESTART_APP, Option.RESET) is P.RESET_GPU
    # a choice shallower than the ladder's next rung, or a person, keeps the ladder's step
    assert after_failed_rung(app, P.REBOOT, Option.RESET) is P.REBOOT
    assert after_failed_rung(app, P.RESET_GPU, Option.ESCALATE) is P.RESET_GPU
    # an option the fault's ladder does not have (a restart for a reboot-only fault) keeps the ladder's step
    assert after_failed_rung(LADDERS[Resolution.RESTART_BM], P.REBOOT, Option.RESTART) is P.REBOOT
    # and with tried_depth the chooser offers only deeper fixes
    s = Situation(Resolution.RESTART_APP, PRIORS[Resolution.RESTART_APP], spare_ready=False, durations=SLOW_RELOAD,
                  tried_depth=0)
    assert Option.RESTART not in {c.option for c in choose(s).costs}
    assert choose(s).option is Option.RESET  # no spare: climb


def test_a_warning_is_worth_a_swap_only_if_the_job_would_still_be_running_when_it_fails():
    """meta-16k: the job fails every 108 min (any node); a failure 60 min ahead finds it still running with
    exp(-60/108) = 57 %, else the job is down anyway first. Counting that, a 2-in-3 warning does not pay a 12-min
    swap there; on a job that rarely fails (seed 000's 1k GPUs) it still does."""
    d = Durations(reload=7.5)
    kw = dict(precision=2 / 3, lead_minutes=60, minutes_to_next_checkpoint=5, checkpoint_interval_minutes=14.7,
              checkpoint_cost_minutes=1.0, spare_ready=True, durations=d)
    assert choose_on_warning(**kw).action is WarningAction.AT_NEXT_CHECKPOINT  # without the job's MTBF
    busy = choose_on_warning(**kw, job_mtbf_minutes=108.0)
    assert busy.action is WarningAction.WAIT and "57% still running" in busy.arithmetic
    assert busy.wait_cost_minutes == pytest.approx(2 / 3 * math.exp(-60 / 108) * (7.35 + 0.5 + 12.0))
    assert choose_on_warning(**kw, job_mtbf_minutes=28 * 60.0).action is WarningAction.AT_NEXT_CHECKPOINT
