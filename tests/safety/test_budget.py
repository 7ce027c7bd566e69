"""Capacity budget: one minimum-healthy gate from the absolute and percent caps (stricter wins)."""

from __future__ import annotations

import pytest

from remedy.config import CapacityBudget
from remedy.safety.budget import allowed_disruptions, check_budget, max_out_of_service, min_healthy


@pytest.mark.parametrize(
    ("total", "nodes", "pct", "expected"),
    [
        (128, 4, 10.0, 4),  # absolute cap stricter: 10 % of 128 = 12.8
        (30, 4, 10.0, 3),  # percent stricter: floor(3.0) = 3
        (15, 4, 10.0, 1),  # floor(1.5) = 1: round down, never up
        (5, 4, 10.0, 0),  # floor(0.5) = 0: a 5-node fleet lets automation take nothing out
        (63, 4, 5.0, 3),  # seed 002's 63-node cluster at 5 %: floor(3.15) = 3
    ],
)
def test_stricter_limit_wins(total, nodes, pct, expected):
    budget = CapacityBudget(max_nodes_in_remediation=nodes, max_percent_in_remediation=pct)
    assert max_out_of_service(total, budget) == expected
    assert min_healthy(total, budget) == total - expected


def test_minimum_healthy_gate_holds_everything_when_too_many_look_unhealthy():
    budget = CapacityBudget(max_nodes_in_remediation=4, max_percent_in_remediation=10)
    assert allowed_disruptions(128, 4, budget) == 4  # exactly at the budget: still allowed
    assert allowed_disruptions(128, 5, budget) == 0  # one more: healthy 123 < min healthy 124
    with pytest.raises(ValueError, match="cannot exceed the 10 managed nodes"):
        allowed_disruptions(10, 11, budget)


def test_check_budget_separates_full_budget_from_suspect_detector():
    budget = CapacityBudget(max_nodes_in_remediation=4, max_percent_in_remediation=10)
    full = check_budget(128, out_now=4, unhealthy_now=5, budget=budget)
    assert not full.ok and not full.detector_suspect and "4 nodes already out of service" in full.detail
    suspect = check_budget(128, out_now=1, unhealthy_now=9, budget=budget)
    assert not suspect.ok and suspect.detector_suspect and "9 of 128 nodes look unhealthy" in suspect.detail
    fine = check_budget(128, out_now=3, unhealthy_now=4, budget=budget)
    assert fine.ok
    tiny = check_budget(5, out_now=0, unhealthy_now=1, budget=budget)
    assert not tiny.ok and "allows no node out" in tiny.detail
