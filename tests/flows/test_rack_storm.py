"""Five nodes of one rack fail within seconds: the configured number are acted on, the rest held, ONE approval
message goes to Slack (local stub of the Web API), and a signed approval click through the receiver resumes the
held work. Seed 000: several nodes of one rack within a minute is a switch, PDU or config push, not N bad nodes."""

from __future__ import annotations

import time

import httpx
import pytest

from remedy.approvals.signing import click_payload, form_body, signed_headers
from tests.approvals.helpers import (  # noqa: F401 - remedy_env is a fixture
    APPROVER,
    SECRET,
    rack_storm,
    remedy_env,
    run_receiver,
    wait_for,
    wait_paused_approval,
)
from tests.fixtures.prefect import run_to_state_result

pytestmark = pytest.mark.prefect


def test_rack_storm_trips_the_rack_breaker_and_one_signed_approval_resumes_the_held_work(
        prefect_server, sim_factory, slack_stub, remedy_env):  # noqa: F811
    from remedy.domain.model import ActionOutcome

    sim = sim_factory(nodes=32, spares=4)
    runtime, runs = rack_storm(remedy_env, sim, run_to_state_result, slack=slack_stub, APPROVALS__TIMEOUT_SECONDS=120)
    led = runtime.ledger()

    # decided: the row is written when the gate starts and finished with its verdict a moment later
    gates = wait_for("five gate decisions", lambda: (g := led.actions(kind="gate_decision")) and len(g) == 5
                     and all(a.finished_at for a in g) and g, timeout=120)
    acted = sorted(a.node for a in gates if a.outcome is ActionOutcome.SUCCEEDED)
    held = sorted(a.node for a in gates if a.outcome is ActionOutcome.SKIPPED)
    assert len(acted) == 2, [(a.node, a.error) for a in gates]  # rack limit: min(2 nodes, 50% of 8)
    assert len(held) == 3
    assert all("rack rack-2" in a.error for a in gates if a.node in held)

    with run_receiver() as url:
        pending = wait_paused_approval(led, kind="breaker:rack:rack-2", timeout=120)
        asks = [c for c in slack_stub.calls_to("chat.postMessage") if c.body.get("blocks")]
        assert len(asks) == 1, [c.body.get("text") for c in asks]  # one question for the whole storm
        trips = [(e.scope, e.from_state, e.to_state) for e in led.breaker_events()]
        assert trips == [("rack-2", "closed", "open")]

        def approve(a) -> None:
            body = form_body(click_payload(approval_id=a.id, flow_run_id=a.flow_run_id, approve=True,
                                           user_id=APPROVER, channel_id="C0REMEDY1", message_ts=a.slack_ts or ""))
            r = httpx.post(f"{url}/v1/slack/interactions", content=body, headers=signed_headers(SECRET, body),
                           timeout=30)
            assert r.status_code == 200, r.text

        approve(pending)
        # The rack approval answered one question. The held work went through the rest of the gate: the first
        # one took a spare; the next would take the pool below its reserve of 1, so a person is asked about that.
        reserve_q = wait_paused_approval(led, kind="hold:spare-reserve", timeout=120)
        texts = [str(c.body.get("blocks")) for c in slack_stub.calls_to("chat.postMessage") if c.body.get("blocks")]
        assert any("waiting on this answer" in t and "other scopes not closed" in t for t in texts), texts
        approve(reserve_q)  # a named person spends the reserve for this node only
        settle_by = time.monotonic() + 300
        while any(r.running for r in runs.values()):
            assert time.monotonic() < settle_by, "the held runs never settled"
            more = [a for a in led.approvals(pending=True) if a.kind == "hold:spare-reserve"]
            for a in more:  # any other node asking about the reserve is denied: no spare left to spend anyway
                body = form_body(click_payload(approval_id=a.id, flow_run_id=a.flow_run_id, approve=False,
                                               user_id=APPROVER, channel_id="C0REMEDY1", message_ts=a.slack_ts or ""))
                httpx.post(f"{url}/v1/slack/interactions", content=body, headers=signed_headers(SECRET, body),
                           timeout=30)
            wait_for("the runs to move", lambda: True, timeout=1)
        results = {node: run.result(180) for node, run in runs.items()}

    statuses = {node: out["status"] for node, out in results.items()}
    assert all(statuses[n] == "replaced" for n in acted), statuses
    spares = [out["replacement"] for out in results.values() if out["status"] == "replaced"]
    assert len(spares) == len(set(spares)) == 4, results  # 3 by the gate + 1 by the reserve approval
    assert all(statuses[n] in ("replaced", "held", "no-spare") for n in held), statuses
    assert [(e.from_state, e.to_state, e.by) for e in led.breaker_events()][-1] == ("open", "closed", APPROVER)
    assert led.get_approval(pending.id).decision == "approve"
    assert all(a.kind != "breaker:rack:rack-2" for a in led.approvals(pending=True))
