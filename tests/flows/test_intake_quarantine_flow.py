"""A quarantine at intake handed to the flows: replace-node takes the cordon over; a run that stops short (held at
the gate) releases it at the end of triage; an operator's uncordon in between stands.

Real parts: a Prefect server (test harness), the cluster simulator over HTTP, a SQLite ledger; the quarantine is
the receiver's own (`IntakeQuarantine`, as the announcer calls it before the triage run exists)."""

from __future__ import annotations

import pytest

from remedy.adapters.kubernetes import ANN_CORDONED_BY
from remedy.domain.model import IncidentStatus
from remedy.safety.intake import intake_owner
from tests.fixtures.prefect import run_to_state_result
from tests.flows.test_triage import fleet, open_incident  # noqa: F401 - fixture

pytestmark = pytest.mark.prefect


def _quarantine(inc):
    from remedy import runtime
    from remedy.receiver.quarantine import IntakeQuarantine

    q = IntakeQuarantine(runtime.ledger(), runtime.settings(), runtime.cluster)
    q([inc], ["replace"])
    [(_, decision)] = q.decisions
    assert decision.quarantine, decision
    node = runtime.cluster().get_node(inc.node)
    assert node.unschedulable and node.annotations[ANN_CORDONED_BY] == intake_owner(inc.id)


def _events(node: str, reason: str) -> list[str]:
    from kubernetes import client as k8s

    from remedy import runtime

    api = k8s.CoreV1Api(runtime.cluster().api)
    return [e.message for e in api.list_namespaced_event("default").items
            if e.involved_object.name == node and e.reason == reason]


def test_replace_node_takes_the_intake_cordon_over(prefect_server, fleet) -> None:
    from flows.triage import triage
    from remedy import runtime
    from remedy.sim.faults import inject

    inject(fleet.cluster, "xid", "gpu003", gpu=2, code=64)
    inc = open_incident("gpu003", xid=64)
    _quarantine(inc)
    out = run_to_state_result(triage, incident_id=inc.id, node="gpu003", xid=64,
                              detected_at=inc.first_seen.isoformat())
    assert out["status"] == "replaced", out
    node = runtime.cluster().get_node("gpu003")
    owner = node.annotations[ANN_CORDONED_BY]
    assert node.unschedulable and owner.startswith("flow-run:") and "replace" in owner, owner
    [cordon] = [a for a in runtime.ledger().actions(kind="cordon_node") if a.incident_id == inc.id]
    assert "took over the cordon of " + intake_owner(inc.id) in cordon.detail["detail"]
    assert not _events("gpu003", "RemedyUncordon")  # never released: the replacement owns it


def test_a_held_run_releases_the_intake_cordon(prefect_server, fleet, monkeypatch) -> None:
    from flows.triage import triage
    from remedy import runtime
    from remedy.sim.faults import inject

    # the spare reserve is larger than the pool: the gate holds and asks a person, who does not answer in 2 s
    monkeypatch.setenv("REMEDY_BREAKER__SPARE_RESERVE", "5")
    monkeypatch.setenv("REMEDY_APPROVALS__TIMEOUT_SECONDS", "2")
    runtime.reset()
    inject(fleet.cluster, "xid", "gpu005", gpu=1, code=64)
    inc = open_incident("gpu005", xid=64, gpu=1)
    _quarantine(inc)
    out = run_to_state_result(triage, incident_id=inc.id, node="gpu005", xid=64,
                              detected_at=inc.first_seen.isoformat())
    assert out["outcome"]["status"] == "held", out
    node = runtime.cluster().get_node("gpu005")
    assert not node.unschedulable, "a held run leaves the node as it found it"
    released = _events("gpu005", "RemedyUncordon")
    assert released and "quarantine at intake released" in released[0], released
    assert runtime.ledger().get_incident(inc.id).status is IncidentStatus.ESCALATED


def test_an_operator_uncordon_after_intake_stands(prefect_server, fleet) -> None:
    from kubernetes import client as k8s

    from flows.triage import triage
    from remedy import runtime
    from remedy.sim.faults import inject

    inject(fleet.cluster, "xid", "gpu006", gpu=0, code=64)
    inc = open_incident("gpu006", xid=64, gpu=0)
    _quarantine(inc)
    k8s.CoreV1Api(runtime.cluster().api).patch_node(  # kubectl uncordon: the annotation stays
        "gpu006", {"spec": {"unschedulable": False}}, _content_type="application/strategic-merge-patch+json")
    out = run_to_state_result(triage, incident_id=inc.id, node="gpu006", xid=64,
                              detected_at=inc.first_seen.isoformat())
    assert out["outcome"]["status"] == "stopped-by-operator", out
    assert not runtime.cluster().get_node("gpu006").unschedulable  # never re-cordoned
    assert runtime.ledger().get_node("gpu006").state.value != "repair"
