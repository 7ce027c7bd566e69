"""POST /v1/slack/interactions on a real receiver (uvicorn, loopback) in front of a paused flow run.

Forged signature → 401, stale timestamp → 401, approver not on the list → 403 — and in each case nothing is
recorded and the run stays paused; then a valid click resumes it.
"""

from __future__ import annotations

import time

import httpx
import pytest
from prefect import flow

from remedy.approvals.signing import click_payload, form_body, signed_headers
from tasks.approvals import request_approval
from tests.approvals.helpers import (  # noqa: F401 - remedy_env is a fixture
    APPROVER,
    SECRET,
    FlowThread,
    flow_state,
    remedy_env,
    run_receiver,
    wait_paused_approval,
)

pytestmark = pytest.mark.prefect


@flow(name="held-for-approval")
def held(timeout: float = 60) -> dict:
    o = request_approval(kind="test", title="Reboot gpu009?", summary_markdown="XID 79", incident_id=None,
                         node="gpu009", timeout_seconds=timeout)
    return {"decision": o.decision, "by": o.by}


def _post(url: str, approval, *, user: str = APPROVER, secret: str = SECRET, ts: int | None = None,
          approve: bool = True, user_name: str = "") -> httpx.Response:
    body = form_body(click_payload(approval_id=approval.id, flow_run_id=approval.flow_run_id, approve=approve,
                                   user_id=user, user_name=user_name, channel_id="C0REMEDY1"))
    return httpx.post(f"{url}/v1/slack/interactions", content=body, headers=signed_headers(secret, body, ts),
                      timeout=30)


@pytest.fixture
def paused(prefect_server, remedy_env):
    """A receiver and a flow run paused on an approval; the test must answer it (or it times out in 60 s)."""
    runtime = remedy_env()
    with run_receiver() as url:
        run = FlowThread(lambda: held(60))
        approval = wait_paused_approval(runtime.ledger())
        yield url, approval, run, runtime.ledger()
        if run.running:  # let the run finish so the next test starts clean
            _post(url, approval, approve=False)
            run.result(60)


def _nothing_happened(led, approval) -> None:
    time.sleep(1.5)  # longer than the flow's 1 s resume poll: a resume would have landed by now
    assert led.get_approval(approval.id).pending
    assert flow_state(approval.flow_run_id) == "PAUSED"


def test_forged_signature_is_refused(paused):
    url, approval, run, led = paused
    r = _post(url, approval, secret="not-the-signing-secret")
    assert r.status_code == 401 and "signature" in r.json()["error"]
    body = form_body(click_payload(approval_id=approval.id, flow_run_id=approval.flow_run_id, approve=True,
                                   user_id=APPROVER))
    unsigned = httpx.post(f"{url}/v1/slack/interactions", content=body,
                          headers={"Content-Type": "application/x-www-form-urlencoded"}, timeout=30)
    assert unsigned.status_code == 401
    _nothing_happened(led, approval)


def test_stale_timestamp_is_refused(paused):
    url, approval, run, led = paused
    r = _post(url, approval, ts=int(time.time()) - 6 * 60)  # correctly signed, but 6 minutes old
    assert r.status_code == 401 and "stale" in r.json()["error"]
    _nothing_happened(led, approval)


def test_approver_not_on_the_list_is_forbidden_then_an_approver_resumes(paused):
    url, approval, run, led = paused
    r = _post(url, approval, user="U0MALLORY")
    assert r.status_code == 403 and "U0MALLORY" in r.json()["error"]
    _nothing_happened(led, approval)
    ok = _post(url, approval, approve=True)
    assert ok.status_code == 200 and ok.json()["decision"] == "approve" and ok.json()["resumed"] is True
    assert run.result(60) == {"decision": "approve", "by": APPROVER}


def test_a_user_name_that_spells_an_approver_is_not_an_approver(paused):
    """Slack user names are chosen by their owners; only the id on slack.approvers counts, and it is recorded."""
    url, approval, run, led = paused
    r = _post(url, approval, user="U0MALLORY", user_name=APPROVER)
    assert r.status_code == 403
    _nothing_happened(led, approval)
    ok = _post(url, approval, approve=False, user_name="alice")
    assert ok.status_code == 200 and "alice" in ok.json()["text"]
    assert run.result(60) == {"decision": "deny", "by": APPROVER}
    assert led.get_approval(approval.id).decided_by == APPROVER  # the id, not the display name


def test_bad_payloads_are_400(prefect_server, remedy_env):
    remedy_env()
    with run_receiver() as url:
        for body in ("payload=not-json", "nothing=here", form_body({"type": "view_submission"})):
            r = httpx.post(f"{url}/v1/slack/interactions", content=body, headers=signed_headers(SECRET, body),
                           timeout=30)
            assert r.status_code == 400, (body, r.text)
