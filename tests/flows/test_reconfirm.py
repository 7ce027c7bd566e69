"""Re-confirm before anything destructive (issue 14, item 5), end to end on the simulator: replace-node cordons,
then re-checks the alert and probes the GPUs through a real node Job before the drain that stops the job."""

from __future__ import annotations

from datetime import UTC, datetime, timezone

import pytest

from tests.fixtures.prefect import run_to_state
from tests.flows.test_replace_node import prevalidate_spares, promotions

pytestmark = pytest.mark.prefect

HOSTENGINE = "Error: Unable to connect to host engine. Host engine connection invalid/disconnected."


def _incident(node: str, signal: str, *, xid: int | None = None, gpu: int = 0, detail: str = "",
              alert_resolved: bool = False) -> dict:
    from remedy import runtime
    from tasks.ledger import open_incident

    inc = open_incident.fn(node, signal, gpu=gpu, xid=xid, detail=detail).incident
    if alert_resolved:  # what the receiver does with Alertmanager's resolved notification
        runtime.ledger().touch_incident(inc.fingerprint, datetime.now(UTC), alert_cleared=True)
    return inc


def _spares_promoted(incident_id: int, failed: str) -> list:
    return [a for a in promotions(incident_id) if a.node != failed]  # the failed node itself went back to active


def _touched(incident_id: int) -> list[str]:
    """Actions of the incident that touch the node: a ladder attempt (fix_*), cordon, drain, reboot, job."""
    from flows.fix_in_place import ATTEMPT_PREFIX
    from remedy import runtime

    return [a.kind for a in runtime.ledger().actions(incident_id=incident_id)
            if a.kind.startswith((ATTEMPT_PREFIX, "job_", "reboot")) or a.kind in ("cordon_node", "drain_node")]


def _in_service(node: str) -> bool:
    from remedy import runtime

    live = runtime.cluster().get_node(node)
    return not live.unschedulable and not live.has_taint("remedy.io/quarantine")


def test_a_fault_gone_before_acting_is_cleared_and_the_node_stays(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node
    from remedy import runtime

    prevalidate_spares()
    inc = _incident("gpu004", "row-remap-pending", gpu=2, alert_resolved=True)
    state, out = run_to_state(replace_node, node="gpu004", cause="row remap pending", signal="row-remap-pending",
                              gpu=2, incident_id=inc.id)
    assert state.is_completed() and state.name == "Cleared before acting", (state, out)
    assert out["recheck"]["evidence"] == {"alert": "resolved", "probe": "passed", "probe_reasons": []}
    assert _in_service("gpu004") and not _spares_promoted(inc.id, "gpu004")  # no spare spent, no drain
    assert not runtime.ledger().actions(incident_id=inc.id, kind="drain_node")
    assert runtime.ledger().get_incident(inc.id).status.value == "resolved"
    # the gate let it through, so it entered the breaker board; cleared, it leaves it — else every re-sent or
    # flapping alert cleared this way would hold capacity budget for good
    from tasks.gate import load_board

    assert not load_board().is_active("gpu004")


def test_a_monitor_failure_is_not_a_gpu_fault(prefect_server, remedy_on_sim):
    from flows.replace_node import replace_node
    from remedy import runtime

    prevalidate_spares()
    inc = _incident("gpu005", "xid", xid=79, gpu=1, detail=HOSTENGINE)
    state, out = run_to_state(replace_node, node="gpu005", cause="XID 79", xid=79, gpu=1, incident_id=inc.id)
    assert state.is_failed() and state.name == "Monitor failure", (state, out)  # a person must fix the monitor
    assert "DCGM host engine" in state.message and "not a GPU fault" in state.message
    assert _in_service("gpu005") and not _spares_promoted(inc.id, "gpu005")
    assert runtime.ledger().get_incident(inc.id).status.value == "ignored"
    from tasks.gate import load_board

    assert not load_board().is_active("gpu005")  # back in service: off the breaker board


def test_a_real_fault_is_replaced_even_when_its_alert_resolved(prefect_server, remedy_on_sim):
    """XID alerts resolve on their own; the independent probe still sees the GPU gone, so the node is replaced."""
    from flows.replace_node import replace_node
    from remedy.sim.faults import inject

    prevalidate_spares()
    inject(remedy_on_sim.cluster, "xid", "gpu006", gpu=3, code=79)
    inc = _incident("gpu006", "xid", xid=79, gpu=3, alert_resolved=True)
    state, out = run_to_state(replace_node, node="gpu006", cause="XID 79", xid=79, gpu=3, incident_id=inc.id)
    assert state.is_completed() and out["status"] == "replaced", out
    assert out["recheck"]["verdict"] == "confirmed" and out["recheck"]["evidence"]["probe"] == "failed"


def test_a_resolved_alert_that_fires_again_is_no_longer_cleared(remedy_on_sim):
    from remedy import runtime
    from remedy.domain.model import Incident

    led = runtime.ledger()
    now = datetime.now(UTC)
    rec, _ = led.open_incident(Incident(node="gpu007", signal="thermal-throttle", gpu=0, first_seen=now,
                                        last_seen=now), window_seconds=600)
    led.touch_incident(rec.fingerprint, now, alert_cleared=True)
    assert "alert_cleared_at" in led.get_incident(rec.id).evidence
    again, created = led.open_incident(Incident(node="gpu007", signal="thermal-throttle", gpu=0, first_seen=now,
                                                last_seen=now), window_seconds=600)
    assert not created and again.id == rec.id and "alert_cleared_at" not in (again.evidence or {})


def test_fix_in_place_does_not_reset_a_gpu_whose_fault_cleared(prefect_server, remedy_on_sim):
    from flows.fix_in_place import fix_in_place
    from remedy import runtime

    inc = _incident("gpu008", "xid", xid=145, gpu=4, alert_resolved=True)
    state, out = run_to_state(fix_in_place, node="gpu008", xid=145, gpu=4, incident_id=inc.id)
    assert state.is_completed() and state.name == "Cleared before acting", (state, out)
    assert not _touched(inc.id)
    assert _in_service("gpu008")


def test_fix_in_place_does_not_reboot_for_a_failed_monitor(prefect_server, remedy_on_sim):
    from flows.fix_in_place import fix_in_place
    from remedy import runtime

    inc = _incident("gpu010", "xid", xid=79, gpu=0, detail=HOSTENGINE)
    state, out = run_to_state(fix_in_place, node="gpu010", xid=79, gpu=0, incident_id=inc.id)
    assert state.is_failed() and state.name == "Monitor failure", (state, out)
    assert not _touched(inc.id)
    assert _in_service("gpu010")
