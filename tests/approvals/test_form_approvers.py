"""An answer in the Prefect form counts only from a listed Prefect approver (approvals.approvers); Slack approvers'
ids (slack.approvers) answer only through Slack, where Slack signs who pressed the button (issue 32, residual
risk: "a Slack approver id typed into the Prefect form is accepted": anyone who reaches the Prefect API could
answer as any Slack approver)."""

from __future__ import annotations

import time
from uuid import UUID

import httpx
import pytest
from prefect import flow

from remedy.approvals.model import ANSWERED_ELSEWHERE, may_answer
from remedy.approvals.signing import click_payload, form_body, signed_headers
from tasks.approvals import request_approval
from tests.approvals.helpers import (  # noqa: F401 - remedy_env is a fixture
    APPROVER,
    SECRET,
    FlowThread,
    remedy_env,
    run_receiver,
    wait_for,
    wait_paused_approval,
)


def test_only_listed_prefect_approvers_may_answer_in_the_form() -> None:
    assert may_answer("bob", ["bob", "carol"]) and may_answer(" bob ", [" bob"])
    assert not may_answer(APPROVER, ["bob"])  # a Slack approver's id is no Prefect approver
    assert not may_answer(APPROVER, [])  # nor when no Prefect approver is listed (the free-text form)
    assert not may_answer(ANSWERED_ELSEWHERE, ["bob"]) and not may_answer("", ["bob"]) and not may_answer("  ", [" "])


@flow(name="form-approver-check")
def _asks(timeout: float) -> dict:
    o = request_approval(kind="test", title="Replace gpu003?", summary_markdown="XID 79 twice", incident_id=None,
                         node="gpu003", timeout_seconds=timeout, default_on_timeout="deny")
    return {"decision": o.decision, "by": o.by}


@pytest.mark.prefect
def test_a_slack_approver_id_typed_into_the_form_is_refused_and_slack_still_works(prefect_server, remedy_env):
    from prefect.flow_runs import resume_flow_run

    # no Prefect approver listed: the form's approver is free text, the way a Slack id could be typed into it
    runtime = remedy_env(APPROVALS__APPROVERS=[])
    led = runtime.ledger()
    with run_receiver() as url:
        run = FlowThread(lambda: _asks(60))
        pending = wait_paused_approval(led)
        resume_flow_run(UUID(pending.flow_run_id), run_input={"decision": "approve", "approver": APPROVER})
        refused = wait_for("the form answer refused", lambda: led.actions(kind="approval_refused"), timeout=30)
        assert refused[-1].detail["approver"] == APPROVER and refused[-1].error == f"{APPROVER} is not an approver"
        assert led.get_approval(pending.id).pending  # nothing decided: the run waits for a real answer
        wait_for("the run paused again", lambda: _paused(pending.flow_run_id), timeout=30)
        # the same person through Slack (signed by Slack) is an answer
        body = form_body(click_payload(approval_id=pending.id, flow_run_id=pending.flow_run_id, approve=True,
                                       user_id=APPROVER, channel_id="C0REMEDY1", message_ts=""))
        r = httpx.post(f"{url}/v1/slack/interactions", content=body, headers=signed_headers(SECRET, body), timeout=30)
        assert r.status_code == 200, r.text
        assert run.result(60) == {"decision": "approve", "by": APPROVER}


def _paused(flow_run_id: str) -> bool:
    from remedy.approvals.decide import is_paused

    time.sleep(0.05)
    return is_paused(flow_run_id)
