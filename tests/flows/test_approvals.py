"""request_approval on a real Prefect server: Slack buttons + pause_flow_run, timeout → safe default + reminder,
Slack down or slow → the flow carries on with the Prefect UI path."""

from __future__ import annotations

import contextlib
import time

import httpx
import pytest
from prefect import flow

from remedy.approvals.decide import decide_and_resume
from remedy.approvals.model import ANSWERED_ELSEWHERE as ELSEWHERE
from remedy.approvals.model import ApprovalAction, ButtonValue
from remedy.approvals.signing import click_payload, form_body, signed_headers
from tasks.approvals import request_approval
from tests.approvals.helpers import (  # noqa: F401 - remedy_env is a fixture
    APPROVER,
    SECRET,
    FlowThread,
    remedy_env,
    run_receiver,
    wait_paused_approval,
)
from tests.fixtures.prefect import run_to_state_result

pytestmark = pytest.mark.prefect


@flow(name="needs-approval")
def needs_approval(timeout: float, default: str = "deny") -> dict:
    o = request_approval(kind="test", title="Replace gpu003?", summary_markdown="XID 79 twice: *replace*",
                         incident_id=None, node="gpu003", timeout_seconds=timeout, default_on_timeout=default)
    return {"decision": o.decision, "by": o.by, "approved": o.approved, "id": o.approval_id}


def _click(url: str, approval, approve: bool, user: str = APPROVER) -> httpx.Response:
    body = form_body(click_payload(approval_id=approval.id, flow_run_id=approval.flow_run_id, approve=approve,
                                   user_id=user, channel_id="C0REMEDY1", message_ts=approval.slack_ts or ""))
    return httpx.post(f"{url}/v1/slack/interactions", content=body, headers=signed_headers(SECRET, body), timeout=30)


def test_signed_click_resumes_the_paused_flow_and_updates_slack(prefect_server, slack_stub, remedy_env):
    runtime = remedy_env(slack=slack_stub)
    with run_receiver() as url:
        run = FlowThread(lambda: needs_approval(60))
        pending = wait_paused_approval(runtime.ledger())
        posted = slack_stub.calls_to("chat.postMessage")
        assert len(posted) == 1
        buttons = [e for b in posted[0].body["blocks"] if b["type"] == "actions" for e in b["elements"]]
        assert [b["action_id"] for b in buttons] == [ApprovalAction.APPROVE.value, ApprovalAction.DENY.value]
        assert ButtonValue.decode(buttons[0]["value"]) == ButtonValue(pending.id, pending.flow_run_id)
        assert pending.slack_ts in slack_stub.messages

        r = _click(url, pending, approve=True)
        assert r.status_code == 200, r.text
        out = run.result(60)
        assert out == {"decision": "approve", "by": APPROVER, "approved": True, "id": pending.id}
        assert "Approved by @U0ALICE" in slack_stub.messages[pending.slack_ts]["text"]
        again = _click(url, pending, approve=False)
        assert again.status_code == 200 and f"already decided by {APPROVER}" in again.json()["text"]
    rec = runtime.ledger().get_approval(pending.id)
    assert (rec.decision, rec.decided_by) == ("approve", APPROVER)


def test_deny_from_the_prefect_ui_input(prefect_server, remedy_env):
    runtime = remedy_env()  # no Slack at all: the UI form is the only way to answer
    run = FlowThread(lambda: needs_approval(60))
    pending = wait_paused_approval(runtime.ledger())
    from uuid import UUID

    from prefect.flow_runs import resume_flow_run

    resume_flow_run(UUID(pending.flow_run_id), run_input={"decision": "deny", "reason": "busy", "approver": "bob"})
    out = run.result(60)
    assert out["decision"] == "deny" and out["by"] == "bob" and not out["approved"]
    assert runtime.ledger().get_approval(pending.id).reason == "busy"


def test_an_answer_by_someone_not_listed_is_refused_and_the_run_keeps_waiting(prefect_server, remedy_env):
    """The embedded Prefect API has no auth: a resume through it with a made-up approver must not count."""
    from uuid import UUID

    from prefect.flow_runs import resume_flow_run

    runtime = remedy_env()
    run = FlowThread(lambda: needs_approval(60))
    led = runtime.ledger()
    pending = wait_paused_approval(led)
    # the form lists the approvers; its last entry is what Slack / go-ahead answers resume with (the ledger holds
    # theirs): picked by a person, it is no listed approver's answer
    resume_flow_run(UUID(pending.flow_run_id), run_input={"decision": "approve", "approver": ELSEWHERE})
    refused = wait_for_refusal(led)
    assert refused.detail["approver"] == ELSEWHERE and refused.error == f"{ELSEWHERE} is not an approver"
    assert led.get_approval(pending.id).pending  # nothing decided: the run paused again for a real answer
    wait_paused(pending.flow_run_id)
    # the form shown again says why the answer did not count and which setting lists approvers
    from prefect.input.run_input import read_flow_run_input

    form = read_flow_run_input(f"paused-approval-{pending.id}-2-description", flow_run_id=UUID(pending.flow_run_id))
    assert form.startswith(f"**Answer 'approve' by {ELSEWHERE} refused: {ELSEWHERE} is not on the approver list.")
    assert "approvals.approvers (REMEDY_APPROVALS__APPROVERS)" in form
    resume_flow_run(UUID(pending.flow_run_id), run_input={"decision": "deny", "approver": "bob", "reason": "no"})
    out = run.result(60)
    assert (out["decision"], out["by"]) == ("deny", "bob")


def test_the_form_has_no_default_decision_and_requires_an_approver(prefect_server, remedy_env):
    """Resume → Submit without a choice is refused by Prefect's own input validation, not read as a deny."""
    from uuid import UUID

    from prefect.flow_runs import resume_flow_run

    runtime = remedy_env()
    run = FlowThread(lambda: needs_approval(60))
    led = runtime.ledger()
    pending = wait_paused_approval(led)
    for missing in ({"approver": "bob"}, {"decision": "approve"}, {"decision": "approve", "approver": ""}):
        with contextlib.suppress(Exception):
            resume_flow_run(UUID(pending.flow_run_id), run_input=missing)
        time.sleep(0.5)
        assert led.get_approval(pending.id).pending, missing
        wait_paused(pending.flow_run_id)
    resume_flow_run(UUID(pending.flow_run_id), run_input={"decision": "approve", "approver": "bob"})
    assert run.result(60)["decision"] == "approve"


def _resume(url: str, body: dict) -> httpx.Response:
    """POST a raw resume; the test Prefect server's SQLite may answer 500 "database is locked" under load, which
    says nothing about the answer: try again (Prefect's own client retries its server's 5xx the same way)."""
    for _ in range(5):
        r = httpx.post(url, json=body, timeout=30)
        if r.status_code < 500:
            return r
        time.sleep(1)
    return r


def test_raw_prefect_api_resumes_without_a_listed_approver_are_refused(prefect_server, remedy_env):
    """`POST /api/flow_runs/<id>/resume` straight to the embedded Prefect API (no auth there; the issue's attack):
    no input, no approver, an empty approver and a made-up approver are each refused and the run keeps waiting.
    The first three are rejected by Prefect itself, which validates run_input against the form's schema before it
    resumes a run paused for input (prefect/server/api/flow_runs.py, resume_flow_run: REJECT "Reason: …"); the
    made-up name too, as the form lists the approvers (issue 33); the list's entry for Slack / go-ahead answers gets
    through Prefect and is refused by the run (no ledger answer behind it), recorded as approval_refused."""
    from prefect.settings import PREFECT_API_URL

    runtime = remedy_env()
    run = FlowThread(lambda: needs_approval(60))
    led = runtime.ledger()
    pending = wait_paused_approval(led)
    url = f"{PREFECT_API_URL.value()}/flow_runs/{pending.flow_run_id}/resume"
    for body in ({}, {"run_input": {"decision": "approve"}}, {"run_input": {"decision": "approve", "approver": ""}},
                 {"run_input": {"approver": "bob"}},
                 {"run_input": {"decision": "approve", "approver": "mallory"}}):  # not in the form's list
        r = _resume(url, body)
        assert r.status_code in (200, 201) and r.json()["status"] == "REJECT", (body, r.text)
        assert led.get_approval(pending.id).pending, body
        wait_paused(pending.flow_run_id)
    r = _resume(url, {"run_input": {"decision": "approve", "approver": ELSEWHERE}})
    assert r.json()["status"] == "ACCEPT", r.text  # in the list, but no ledger answer behind it: the run checks
    refused = wait_for_refusal(led)
    assert refused.detail == {"approval_id": pending.id, "decision": "approve", "approver": ELSEWHERE}
    assert led.get_approval(pending.id).pending
    wait_paused(pending.flow_run_id)
    r = _resume(url, {"run_input": {"decision": "deny", "approver": "bob", "reason": "not now"}})
    assert r.json()["status"] == "ACCEPT", r.text
    out = run.result(60)
    assert (out["decision"], out["by"]) == ("deny", "bob")
    assert len(led.actions(kind="approval_refused")) == 1


def wait_for_refusal(led, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = led.actions(kind="approval_refused")
        if found:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError("no approval_refused action recorded")


def wait_paused(flow_run_id: str, timeout: float = 30) -> None:
    from remedy.approvals.decide import is_paused

    deadline = time.monotonic() + timeout
    while not is_paused(flow_run_id):
        assert time.monotonic() < deadline, "the run did not pause again"
        time.sleep(0.1)


def test_timeout_takes_the_safe_default_and_posts_a_reminder(prefect_server, slack_stub, remedy_env):
    runtime = remedy_env(slack=slack_stub)
    start = time.monotonic()
    out = needs_approval(2)
    assert time.monotonic() - start < 30
    assert out["decision"] == "timeout" and out["approved"] is False and out["by"] == "timeout"
    assert runtime.ledger().get_approval(out["id"]).decision == "timeout"
    posts = slack_stub.calls_to("chat.postMessage")
    assert len(posts) == 2 and "Reminder" in posts[1].body["text"]
    assert "safe default (*deny*)" in posts[1].body["blocks"][0]["text"]["text"]
    first_ts = next(iter(slack_stub.messages))
    assert slack_stub.messages[first_ts]["text"] == "No answer in time"


def test_timeout_with_approve_default_is_approved(prefect_server, remedy_env):
    remedy_env()
    out = needs_approval(1, default="approve")
    assert out["decision"] == "timeout" and out["approved"] is True


def test_slack_down_the_flow_still_waits_for_the_ui(prefect_server, slack_stub, remedy_env):
    slack_stub.stop()  # nothing listens on its port any more
    runtime = remedy_env(slack=slack_stub)
    run = FlowThread(lambda: needs_approval(60))
    pending = wait_paused_approval(runtime.ledger())
    assert pending.slack_ts is None
    res = decide_and_resume(runtime.ledger(), pending.id, decision="approve", by="carol")
    assert res.first and res.resumed
    assert run.result(60)["decision"] == "approve"
    failures = [a for a in runtime.ledger().actions(kind="notify_slack")]
    assert failures and failures[0].outcome.value == "failed" and "unreachable" in failures[0].error


def test_slack_slow_does_not_hold_the_flow(prefect_server, slack_stub, remedy_env):
    runtime = remedy_env(slack=slack_stub)
    slack_stub.delay(120, times=10)  # far beyond any load's slowness, so the check below says "did not wait"
    start = time.monotonic()
    run = FlowThread(lambda: needs_approval(60))
    pending = wait_paused_approval(runtime.ledger())
    assert time.monotonic() - start < 90  # the 3 s Slack timeout, not the stub's 120 s
    decide_and_resume(runtime.ledger(), pending.id, decision="deny", by="carol")
    assert run.result(60)["decision"] == "deny"
    errors = [a.error for a in runtime.ledger().actions(kind="notify_slack")]
    assert errors and "did not answer within 3 s" in errors[0]


def test_still_open_after_reminder_after_nudges_once_then_an_answer_still_resumes(prefect_server, slack_stub,
                                                                                   remedy_env):
    runtime = remedy_env(slack=slack_stub, APPROVALS__REMINDER_AFTER_SECONDS=1)
    with run_receiver() as url:
        run = FlowThread(lambda: needs_approval(60))
        from tests.approvals.helpers import wait_for

        wait_for("the nudge", lambda: len(slack_stub.calls_to("chat.postMessage")) == 2, timeout=30)
        assert "Still waiting" in slack_stub.calls_to("chat.postMessage")[1].body["text"]
        pending = wait_paused_approval(runtime.ledger())  # still the one pause, for the whole timeout
        assert _click(url, pending, approve=True).status_code == 200
        assert run.result(60)["decision"] == "approve"
    assert len(slack_stub.calls_to("chat.postMessage")) == 2  # one nudge, no reminder after an answer


def _spares(sim) -> list[str]:
    with sim.cluster.lock:
        return sorted(n for n in sim.cluster.node_names()
                      if sim.cluster.node(n)["metadata"]["labels"].get("remedy.io/pool") == "spare")


def test_escalation_timeout_keeps_the_node_quarantined_and_replaces_nothing(prefect_server, sim, slack_stub,
                                                                              remedy_env):
    from flows.escalate import escalate

    runtime = remedy_env(sim=sim, slack=slack_stub)
    spares = _spares(sim)
    out = run_to_state_result(escalate, node="gpu011", reason="XID 58 (CONTACT_SUPPORT)", ask_replace=True, approval_timeout_seconds=2)
    assert out["approval"]["decision"] == "timeout" and out["replacement"] is None and out["status"] == "escalated"
    with sim.cluster.lock:
        node = sim.cluster.node("gpu011")
    assert node["spec"].get("unschedulable") and "remedy.io/quarantine" in [t["key"] for t in node["spec"]["taints"]]
    assert _spares(sim) == spares  # no spare was promoted
    kinds = {a.kind for a in runtime.ledger().actions()}
    assert not kinds & {"drain_node", "label_node", "untaint_node"}
    texts = [c.body["text"] for c in slack_stub.calls_to("chat.postMessage")]
    assert texts[0].startswith("Needs a human: gpu011") and "Reminder" in texts[-1]


@pytest.mark.parametrize("via_receiver", [False, True])
def test_auto_approver_answers_through_the_real_path(prefect_server, sim, slack_stub, remedy_env, via_receiver):
    from flows.escalate import escalate
    from remedy.approvals.auto import AutoApprover
    from remedy.demo import _spares_validated_at_build

    runtime = remedy_env(sim=sim, slack=slack_stub, SLACK__APPROVERS=["demo-operator"])
    _spares_validated_at_build(runtime)
    spares = _spares(sim)
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(run_receiver()) if via_receiver else None
        auto = stack.enter_context(AutoApprover(decision=True, receiver_url=url))
        out = run_to_state_result(escalate, node="gpu012", reason="XID 58 (CONTACT_SUPPORT)", ask_replace=True,
                       approval_timeout_seconds=60)
    assert out["approval"]["decision"] == "approve" and out["approval"]["by"] == "demo-operator"
    assert out["status"] == "replaced" and out["replacement"] in spares
    assert auto.answered[0]["via"] == ("receiver" if via_receiver else "direct")
    if via_receiver:
        assert auto.answered[0]["status"] == 200
        ts = runtime.ledger().approvals()[0].slack_ts
        assert "Approved by @demo-operator" in slack_stub.messages[ts]["text"]


def test_an_answer_between_the_pause_and_its_saved_form_still_resumes(prefect_server):
    """Prefect marks a run PAUSED first and saves its input form after (prefect/flow_runs.py, pause_flow_run with
    wait_for_input); until the form is saved the server rejects a resume: "Run input schema not found"
    (prefect/server/api/flow_runs.py). An answer landing in that gap must wait for the form, not be dropped
    (CI saw the open-loop go-ahead answer `resumed: false` this way). The gap is built by hand here, and held
    open for 1 s."""
    import threading
    from uuid import UUID

    from prefect import get_client
    from prefect.input.run_input import keyset_from_paused_state
    from prefect.states import Paused, Running

    from remedy.approvals.decide import resume
    from tasks.approvals import ApprovalInput

    with get_client(sync_client=True) as client:
        run = client.create_flow_run(needs_approval, parameters={"timeout": 60})
        client.set_flow_run_state(run.id, Running(), force=True)
        paused = Paused(timeout_seconds=60, reschedule=False, pause_key="approval-gap")
        keyset = keyset_from_paused_state(paused)
        paused.state_details.run_input_keyset = keyset
        client.set_flow_run_state(run.id, paused)
    form_saved = threading.Timer(1.0, lambda: ApprovalInput.with_initial_data(reason="").save(keyset, run.id))
    form_saved.start()
    try:
        resume(str(run.id), {"decision": "approve", "approver": "carol", "reason": ""}, wait_seconds=10)
    finally:
        form_saved.join()
    with get_client(sync_client=True) as client:
        assert client.read_flow_run(UUID(str(run.id))).state.is_running()
