"""remedy.deployments: every declared flow exists, triggers template safely, and the specs become Prefect objects."""

from __future__ import annotations

import inspect

import pytest

from remedy.deployments import (
    DEPLOYMENTS,
    INCIDENT_OPENED,
    INCIDENT_TRIGGER,
    DeploymentSpec,
    Schedule,
    by_name,
    check_entrypoints,
    runner_deployment,
    trigger_parameters,
)
from remedy.errors import RemedyError


def test_every_spec_loads_and_names_are_unique() -> None:
    flows = check_entrypoints()
    assert set(flows) == {s.name for s in DEPLOYMENTS}
    assert {"triage", "replace-node", "fix-in-place", "escalate", "isolate-fault"} <= set(flows)
    assert flows["triage"].name == "triage"


def test_missing_flow_module_fails_loudly() -> None:
    specs = DEPLOYMENTS + (DeploymentSpec("not-there", "flows.no_such_flow:fix"),)
    with pytest.raises(RemedyError, match="deployment not-there: module flows.no_such_flow not found"):
        check_entrypoints(specs)
    with pytest.raises(RemedyError, match="not a Prefect flow"):
        check_entrypoints((DeploymentSpec("x", "remedy.deployments:by_name"),))
    with pytest.raises(RemedyError, match="duplicate deployment names"):
        check_entrypoints((DEPLOYMENTS[0], DEPLOYMENTS[0]))
    with pytest.raises(RemedyError, match="no deployment named 'nope'"):
        by_name("nope")


def test_incident_trigger_templates_match_triage_and_tolerate_missing_keys() -> None:
    spec = by_name("triage")
    assert spec.triggers == (INCIDENT_TRIGGER,)
    assert INCIDENT_TRIGGER.expect == (INCIDENT_OPENED,)
    params = inspect.signature(check_entrypoints()["triage"].fn).parameters
    for name, template in INCIDENT_TRIGGER.parameters.items():
        assert name in params, name
        # a bare {{ event.payload.k }} fails silently when k is missing (shared/notes/environment.md)
        assert template == "{{ event.payload.get('%s', '') }}" % name
    payload = {"incident_id": 5, "node": "gpu001", "xid": 79, "detected_at": "t"}
    assert trigger_parameters(INCIDENT_TRIGGER, payload) == {
        "incident_id": 5, "node": "gpu001", "signal": "", "xid": 79, "detected_at": "t", "ledger": ""}


def test_schedule_needs_exactly_one_kind() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Schedule()
    with pytest.raises(ValueError, match="exactly one"):
        Schedule(interval_seconds=60, cron="* * * * *")


def test_runner_deployment_carries_trigger_and_schedule() -> None:
    dep = runner_deployment(by_name("triage"))
    (trigger,) = dep.triggers
    assert trigger.expect == {INCIDENT_OPENED} and trigger.enabled
    assert trigger.match.root == {"prefect.resource.id": "remedy.node.*"}
    assert dep.entrypoint.endswith("flows/triage.py:triage")
    off = runner_deployment(by_name("triage"), triggers_enabled=False)
    assert not off.triggers[0].enabled
    periodic = runner_deployment(DeploymentSpec("every-10-min", "flows.triage:triage",
                                                schedules=(Schedule(interval_seconds=600),)))
    assert periodic.schedules[0].schedule.interval.total_seconds() == 600


def test_periodic_flows_have_their_schedules() -> None:
    every = {s.name: s.schedules[0].interval_seconds for s in DEPLOYMENTS if s.schedules}
    assert every == {"spare-cycle": 6 * 3600, "lemon-review": 24 * 3600, "nfs-audit": 24 * 3600,
                     "warning-scan": 600, "fleet-dashboard": 600}
