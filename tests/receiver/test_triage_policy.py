"""Triage's decision (plain Python): paths from the XID catalog and signal kinds, gates, the explanation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.model import Node
from remedy.domain.xid import RemediationPath as P
from remedy.receiver.triage_policy import (
    PATH_FLOWS,
    decide,
    explain_markdown,
    parse_incident_id,
    parse_time,
)

NOW = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)


def incident(signal="xid", xid=79, gpu=3, status="open", age_s=5.0, **kw) -> dict:
    return {"id": 7, "node": "gpu071", "signal": signal, "xid": xid, "gpu": gpu, "status": status, "count": 1,
            "severity": "critical", "fingerprint": "f", "first_seen": NOW - timedelta(seconds=age_s), "detail": "",
            **kw}


def run(inc: dict, *, recurrences=1, node_state="active", live=None, max_age=300.0):
    return decide(inc, recurrences=recurrences, node_state=node_state, now=NOW, detected_at=None,
                  max_age_seconds=max_age, live_node=live)


@pytest.mark.parametrize(("xid", "path", "flow"), [
    (79, P.REBOOT, "flows.fix_in_place:fix_in_place"),  # seed 002 Table 3: RESTART_BM
    (31, P.RESTART_APP, "flows.fix_in_place:fix_in_place"),  # 31/43/94 restart the app
    (94, P.RESTART_APP, "flows.fix_in_place:fix_in_place"),
    (119, P.RESET_GPU, "flows.fix_in_place:fix_in_place"),  # 119/145/149 reset the GPU
    (145, P.RESET_GPU, "flows.fix_in_place:fix_in_place"),
    (149, P.RESET_GPU, "flows.fix_in_place:fix_in_place"),
    (64, P.REPLACE, "flows.replace_node:replace_node"),  # row remap failure
    (9999, P.ESCALATE, "flows.escalate:escalate"),  # unknown XID: a human decides, never dropped
])
def test_xid_paths_choose_their_flow(xid, path, flow) -> None:
    d = run(incident(xid=xid))
    assert (d.action, d.path, d.entrypoint) == ("remediate", path, flow)
    assert d.verdict.rule in ("xid-catalog", "xid-unknown")


def test_recurring_xid_79_stops_retrying_and_replaces() -> None:
    # seed 002 §4.3.5: a recurring XID 79 is not rebooted again
    d = run(incident(xid=79), recurrences=2)
    assert (d.path, d.verdict.rule, d.entrypoint) == (P.REPLACE, "xid-recurrence", "flows.replace_node:replace_node")


@pytest.mark.parametrize(("signal", "xid", "path", "action"), [
    ("xid", 63, P.WATCH, "record"),
    ("xid", 14, P.IGNORE, "record"),
    ("row-remap-failure", None, P.REPLACE, "remediate"),
    ("nccl-timeout", None, P.ISOLATE, "remediate"),
    ("something-new", None, P.ESCALATE, "remediate"),  # a kind this version does not know: escalated
])
def test_signal_kinds(signal, xid, path, action) -> None:
    d = run(incident(signal=signal, xid=xid))
    assert (d.path, d.action) == (path, action)
    if action == "record":
        assert d.entrypoint == "" and d.path not in PATH_FLOWS


def test_gates_stop_before_acting() -> None:
    handled = run(incident(status="acting"))
    assert handled.action == "stop" and "acting, not open" in handled.reason
    out = run(incident(), node_state="quarantined")
    assert out.action == "stop" and "already quarantined" in out.reason
    # a node already out does not stop a record-only path from being recorded
    assert run(incident(xid=63), node_state="repair").action == "record"


@pytest.mark.parametrize("state", ["spare", "burn-in"])
@pytest.mark.parametrize("xid", [64, 79, 145, 94])
def test_a_fault_on_a_node_without_work_escalates_instead_of_spending_a_spare(state, xid) -> None:
    d = run(incident(xid=xid), node_state=state)
    assert (d.action, d.path, d.entrypoint) == ("remediate", P.ESCALATE, "flows.escalate:escalate")
    assert f"gpu071 is a {state} node and carries no work" in d.reason and "quarantined" in d.reason
    # record-only paths stay record-only, and an active node still gets its fix
    assert run(incident(xid=63), node_state=state).action == "record"
    assert run(incident(xid=xid), node_state="active").path is not P.ESCALATE


def test_stale_incident_rereads_the_live_node() -> None:
    old = incident(age_s=3600)
    cordoned = run(old, live=Node("gpu071", unschedulable=True))
    assert cordoned.action == "stop" and cordoned.stale and "already cordoned" in cordoned.reason
    gone = run(old, live=None)
    assert gone.action == "stop" and "not in the cluster" in gone.reason
    still_bad = run(old, live=Node("gpu071", unschedulable=False))
    assert still_bad.action == "remediate" and still_bad.stale
    fresh = run(incident(age_s=10), live=None)  # fresh: the live node is not consulted
    assert fresh.action == "remediate" and not fresh.stale


def test_explanation_says_what_was_seen_which_rule_and_what_happens() -> None:
    inc = incident(xid=64)
    md = explain_markdown(inc, run(inc))
    assert "xid (XID 64) on gpu071 GPU 3" in md
    assert "`xid-catalog` → **replace**" in md
    assert "flows.replace_node:replace_node" in md
    stopped = explain_markdown(inc, run(inc, node_state="retired"), "recorded, no action")
    assert "nothing: gpu071 is already retired" in stopped and "**Outcome**: recorded, no action" in stopped


def test_parameter_parsing_names_the_bad_value() -> None:
    assert parse_incident_id("12") == 12 and parse_incident_id(12) == 12
    for bad in ("", "x", 0, -3, True, None):
        with pytest.raises(ValueError, match="incident_id must be a positive integer"):
            parse_incident_id(bad)
    assert parse_time("2026-11-22T01:00:00Z") == NOW
    assert parse_time("") is None
    with pytest.raises(ValueError, match="time zone"):
        parse_time("2026-11-22T01:00:00")
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_time("yesterday")


def test_not_ready_without_a_duration_is_measured_on_the_live_node():
    """A NotReady alert that does not say how long used to be only watched; triage now reads the live node: still
    NotReady past the grace (Kubernetes' default 300 s) → replace; Ready again → watched; gone → as before."""
    from remedy.receiver.triage_policy import not_ready_seconds, not_ready_without_duration, with_not_ready_duration

    bare = incident(signal="node-not-ready", xid=None, gpu=None, age_s=400.0)
    assert not_ready_without_duration(bare)
    assert not not_ready_without_duration(incident(signal="node-not-ready", xid=None, evidence={"value": 12}))
    assert not not_ready_without_duration(incident())  # an XID carries no duration and needs none
    assert run(bare, max_age=3600).path is P.WATCH  # what triage did with it before measuring
    down = not_ready_seconds(bare, Node("gpu071", ready=False), NOW)
    assert down == pytest.approx(400.0)
    measured = with_not_ready_duration(bare, down)
    assert run(measured, max_age=3600).path is P.REPLACE and "NotReady for 6.7 min" in run(measured, max_age=3600).reason
    back = with_not_ready_duration(bare, not_ready_seconds(bare, Node("gpu071", ready=True), NOW))
    assert run(back, max_age=3600).path is P.WATCH
    assert not_ready_seconds(bare, None, NOW) is None
