"""The operator's cordon wins after a cleared re-check too (issue 32, item 3): a person cordoned the node before
gpu-remedy acted, replace-node's re-check finds the fault gone and puts the node back in service, and the cordon
stays (on main the cleared path uncordoned it), recorded in the ledger and said on the Node as an Event. A node
gpu-remedy cordoned itself still goes back fully in service."""

from __future__ import annotations

import pytest

from remedy.domain import events
from tests.fixtures.prefect import run_to_state
from tests.flows.test_operator_wins import _kubectl_cordon
from tests.flows.test_reconfirm import _incident
from tests.flows.test_replace_node import prevalidate_spares

pytestmark = pytest.mark.prefect


def test_a_persons_cordon_before_a_cleared_recheck_stays(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node
    from remedy import runtime

    prevalidate_spares()
    node = "gpu004"
    _kubectl_cordon(runtime, node)
    inc = _incident(node, "row-remap-pending", gpu=2, alert_resolved=True)
    state, out = run_to_state(replace_node, node=node, cause="row remap pending", signal="row-remap-pending", gpu=2,
                              incident_id=inc.id)
    assert state.is_completed() and state.name == "Cleared before acting", (state, out)
    live = runtime.cluster().get_node(node)
    assert live.unschedulable, "the operator's cordon was lifted by the cleared re-check"
    assert not live.has_taint("remedy.io/quarantine")  # gpu-remedy's own taint is lifted
    led = runtime.ledger()
    assert led.actions(incident_id=inc.id, kind="uncordon_node") == []
    [kept] = led.actions(incident_id=inc.id, kind="keep_operator_cordon")
    assert "cordoned by a person" in kept.detail["detail"] and kept.detail["cordoned_by"] == "person"
    notes = [e for e in runtime.cluster().node_events(node) if e.get("reason") == events.KEPT_OPERATOR_CORDON]
    assert len(notes) == 1 and "cordoned by a person" in notes[0]["message"]
    assert "before gpu-remedy acted" in notes[0]["message"] and "alert" in notes[0]["message"]
    assert led.get_incident(inc.id).status.value == "resolved"


def test_gpu_remedys_own_cordon_is_lifted_after_a_cleared_recheck(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node
    from remedy import runtime

    prevalidate_spares()
    node = "gpu006"
    inc = _incident(node, "row-remap-pending", gpu=1, alert_resolved=True)
    state, out = run_to_state(replace_node, node=node, cause="row remap pending", signal="row-remap-pending", gpu=1,
                              incident_id=inc.id)
    assert state.is_completed() and state.name == "Cleared before acting", (state, out)
    assert not runtime.cluster().get_node(node).unschedulable
    led = runtime.ledger()
    assert led.actions(incident_id=inc.id, kind="keep_operator_cordon") == []
    assert [e for e in runtime.cluster().node_events(node) if e.get("reason") == events.KEPT_OPERATOR_CORDON] == []
