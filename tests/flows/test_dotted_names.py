"""Names are data (issue 32, item 2): nodes named as EKS and bare metal name them (`ip-10-0-1-2.ec2.internal`, an
FQDN) go through replace-node, fix-in-place, escalate and triage on the simulator. Before, an artifact key built
from such a name was rejected after the node had been replaced: the run ended Failed and a spare was lost."""

from __future__ import annotations

import pytest

from tests.fixtures.prefect import run_to_state

pytestmark = pytest.mark.prefect

EKS = "ip-10-0-1-{n}.ec2.internal"
FQDN = "gpu-{n}.rack-a.dc1.example.com"


@pytest.fixture(params=[EKS, FQDN], ids=["eks", "fqdn"])
def sim(request, sim_factory):
    """The small GPU cluster of tests.fixtures.sim, its nodes named like EKS's or like bare-metal hosts."""
    return sim_factory(nodes=16, spares=2, prefix=request.param)


def _working_node(sim) -> str:
    """An active node that runs a pod of the training job."""
    from tests.flows.test_replace_node import prevalidate_spares

    prevalidate_spares()
    with sim.cluster.lock:
        on = sorted({p["spec"]["nodeName"] for p in sim.cluster.store.objects("Pod", "training")
                     if (p.get("spec") or {}).get("nodeName")})
    assert on and "." in on[0], on
    return on[0]


def _artifact_keys(state) -> set[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id])))
    return {a.key for a in found if a.key}


def test_replace_node_with_a_dotted_name(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node
    from remedy import runtime
    from remedy.domain.names import artifact_key
    from tests.flows.test_replace_node import promotions

    node = _working_node(remedy_on_sim)
    state, out = run_to_state(replace_node, node=node, cause="XID 79", xid=79, gpu=0)
    assert state.is_completed() and out["status"] == "replaced", (state, out)
    assert state.message.startswith(f"{node}: replaced by ")  # the operator reads the real name
    assert _artifact_keys(state) == {artifact_key("replace", node, "timeline"), artifact_key("replace", node, "story")}
    assert len(promotions(out["incident_id"])) == 1 and runtime.ledger().get_node(node).state.value == "repair"


def test_fix_in_place_with_a_dotted_name(prefect_server, remedy_on_sim):
    from flows.fix_in_place import fix_in_place
    from remedy.sim.faults import inject

    node = _working_node(remedy_on_sim)
    inject(remedy_on_sim.cluster, "xid", node, gpu=3, code=145)
    state, out = run_to_state(fix_in_place, node=node, xid=145, gpu=3)
    assert state.is_completed() and out["status"] == "fixed", (state, out)
    assert all("." not in k for k in _artifact_keys(state))


def test_escalate_with_a_dotted_name_asks_a_person(prefect_server, remedy_on_sim):
    from flows.escalate import escalate
    from tests.flows.test_outcomes import remedy_notes

    node = _working_node(remedy_on_sim)
    state, out = run_to_state(escalate, node=node, reason="XID 58 (contact support)", quarantine=True)
    assert state.is_failed() and state.name == "Escalated", (state, out)  # escalated, not crashed
    assert out["quarantined"] is True and [n["reason"] for n in remedy_notes(node)] == ["RemedyEscalated"]


def test_triage_with_a_dotted_name_replaces_once(prefect_server, remedy_on_sim):
    from flows.triage import triage
    from remedy import runtime
    from remedy.domain.model import IncidentStatus
    from remedy.sim.faults import inject
    from tests.flows.test_triage import artifact, open_incident

    node = _working_node(remedy_on_sim)
    inject(remedy_on_sim.cluster, "xid", node, gpu=2, code=64)
    inc = open_incident(node, xid=64)
    state, out = run_to_state(triage, incident_id=str(inc.id), node=node, xid=64,
                              detected_at=inc.first_seen.isoformat())
    assert (out["action"], out["path"], out["status"]) == ("remediate", "replace", "replaced"), (state, out)
    assert runtime.ledger().get_incident(inc.id).status is IncidentStatus.RESOLVED
    assert "→ **replace**" in artifact(inc)
