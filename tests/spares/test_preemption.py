"""Preemption choice for a gang-scheduled job when no spare is ready (seed 002 §4.3.5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.settings.safety import SpareSettings
from remedy.spares.preemption import NoPreemption, PreemptionPlan, Workload, choose_preemption

T0 = datetime(2026, 11, 1, tzinfo=UTC)
SETTINGS = SpareSettings(preempt_below_priority=100)


def test_preempts_the_cheapest_single_node_sessions_first():
    work = [
        Workload("train-60", tuple(f"gpu{i:03d}" for i in range(57)), 500),
        Workload("notebook-a", ("gpu074",), 10, T0),
        Workload("notebook-b", ("gpu119",), 10, T0 + timedelta(hours=5)),  # younger: less work lost
        Workload("eval-c", ("gpu086",), 50, T0),
        Workload("infer-d", ("gpu090",), 200, T0),  # above the threshold: never touched
    ]
    plan = choose_preemption("train-60", 500, 2, work, SETTINGS)
    assert isinstance(plan, PreemptionPlan)
    assert [w.name for w in plan.victims] == ["notebook-b", "notebook-a"]
    assert plan.freed_nodes == ("gpu074", "gpu119")
    assert plan.approval_required
    text = plan.explain()
    assert "needs a person's approval" in text
    assert "kept infer-d: priority 200 is not below the preemption threshold 100" in text


def test_shared_node_is_freed_only_when_every_tenant_goes():
    work = [
        Workload("low", ("n1",), 5),
        Workload("high-on-n1", ("n1",), 150),
        Workload("low2", ("n2",), 20),
    ]
    plan = choose_preemption("gang", 500, 1, work, SETTINGS)
    assert [w.name for w in plan.victims] == ["low2"] and plan.freed_nodes == ("n2",)
    assert "its nodes also carry work that may not be preempted (n1)" in plan.explain()


def test_not_enough_and_priority_relative_to_the_job():
    work = [Workload("a", ("n1",), 40), Workload("b", ("n2",), 60)]
    # the job itself has priority 50: b (60) may not be preempted for it
    out = choose_preemption("gang", 50, 2, work, SETTINGS)
    assert isinstance(out, NoPreemption)
    assert "frees 1 node(s), gang needs 2" in out.explain()
    assert "kept b: priority 60 is not below gang's 50" in out.explain()
    no_approval = choose_preemption("gang", 500, 2, work, SpareSettings(preemption_requires_approval=False))
    assert not no_approval.approval_required and no_approval.freed_nodes == ("n1", "n2")


def test_work_on_unhealthy_nodes_is_not_a_candidate():
    work = [Workload("a", ("bad",), 1), Workload("b", ("n2",), 2)]
    plan = choose_preemption("gang", 500, 1, work, SETTINGS, unhealthy_nodes={"bad"})
    assert plan.freed_nodes == ("n2",)
    with pytest.raises(ValueError, match="nodes_needed must be >= 1"):
        choose_preemption("gang", 500, 0, work, SETTINGS)
    with pytest.raises(ValueError, match="listed twice: a"):
        choose_preemption("gang", 500, 1, work + [work[0]], SETTINGS)
