"""Safety round 3's own attacks (docs/safety-attacks.md): each test is one attack as it was run, on the real receiver
routes, the real ledger (SQLite and PostgreSQL where it races) and the real settings loader. An attack that held
stays here as a regression test; one that found a defect has the fix's commit in the doc."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from remedy.approvals.model import ANSWERED_ELSEWHERE, may_answer
from remedy.approvals.signing import click_payload, form_body, signed_headers
from remedy.config import ConfigError, load_settings
from remedy.domain.model import Incident
from remedy.ledger import LedgerConflict
from remedy.ledger.leases import _ttl
from remedy.sim.alerts import make_alert, webhook_payload
from tests.approvals.helpers import APPROVER, SECRET, remedy_env, run_receiver  # noqa: F401 - fixture
from tests.ledger.conftest import _pg_ledger_url, db_url  # noqa: F401 - fixtures
from tests.receiver.conftest import TOKEN, ledger, post, receiver_factory, settings  # noqa: F401 - fixtures

FIVE_MIN = 300


# ------------------------------------------------------------------------------------------------ Slack interactions
@pytest.fixture
def slack_receiver(remedy_env):
    runtime = remedy_env()
    led = runtime.ledger()
    led.migrate()
    with run_receiver() as url:
        yield url, led


def _click(url: str, approval_id: int, run: str, *, ts: int | None = None, user: str = APPROVER, approve=True,
           sign=None) -> httpx.Response:
    body = form_body(click_payload(approval_id=approval_id, flow_run_id=run, approve=approve, user_id=user,
                                   channel_id="C0REMEDY1"))
    headers = signed_headers(SECRET, body, ts)
    if sign is not None:
        headers["X-Slack-Signature"] = sign(headers["X-Slack-Signature"])
    return httpx.post(f"{url}/v1/slack/interactions", content=body, headers=headers, timeout=30)


@pytest.mark.parametrize("skew", [FIVE_MIN + 60, -(FIVE_MIN + 60), 10**12])
def test_a_validly_signed_click_outside_five_minutes_is_refused(slack_receiver, skew) -> None:
    """A captured click replayed later (or post-dated) carries Slack's real signature over its old timestamp."""
    url, led = slack_receiver
    rec = led.request_approval(incident_id=None, flow_run_id="run-1", kind="test")
    r = _click(url, rec.id, "run-1", ts=int(time.time()) - skew)
    assert r.status_code == 401, r.text
    assert led.get_approval(rec.id).pending


def test_a_replayed_click_after_the_answer_changes_nothing(slack_receiver) -> None:
    url, led = slack_receiver
    rec = led.request_approval(incident_id=None, flow_run_id="run-1", kind="test")
    led.decide_approval(rec.id, decision="deny", decided_by=APPROVER, reason="no")
    r = _click(url, rec.id, "run-1", approve=True)
    assert r.status_code == 200 and "already decided" in r.json()["text"]
    assert led.get_approval(rec.id).decision == "deny"


@pytest.mark.parametrize("sign", [str.upper, lambda s: s.replace("v0=", "v1="), lambda s: s + "," + s,
                                  lambda s: "v0=" + "0" * 64])
def test_a_mangled_signature_is_refused(slack_receiver, sign) -> None:
    url, led = slack_receiver
    rec = led.request_approval(incident_id=None, flow_run_id="run-1", kind="test")
    assert _click(url, rec.id, "run-1", sign=sign).status_code == 401
    assert led.get_approval(rec.id).pending


@pytest.mark.parametrize("approval_id,run", [(10**30, "run-1"), (-1, "run-1"), (1, "another-run")])
def test_a_click_for_no_such_approval_or_another_run_is_a_4xx(slack_receiver, approval_id, run) -> None:
    url, led = slack_receiver
    rec = led.request_approval(incident_id=None, flow_run_id="run-1", kind="test")
    r = _click(url, approval_id, run)
    assert 400 <= r.status_code < 500, r.text
    assert led.get_approval(rec.id).pending


@pytest.mark.parametrize("user", [APPROVER + " ", APPROVER.lower(), APPROVER + "\u200b", "U0АLICE"])  # Cyrillic А
def test_a_lookalike_slack_user_id_is_not_an_approver(slack_receiver, user) -> None:
    url, led = slack_receiver
    rec = led.request_approval(incident_id=None, flow_run_id="run-1", kind="test")
    assert _click(url, rec.id, "run-1", user=user).status_code == 403
    assert led.get_approval(rec.id).pending


# ------------------------------------------------------------------------------------------------ the Prefect form
@pytest.mark.parametrize("name", ["bob\u200b", "bоb", "BOB", ANSWERED_ELSEWHERE, "timeout", "gpu-remedy"])
def test_a_lookalike_or_reserved_name_in_the_form_is_no_approver(name) -> None:
    assert not may_answer(name, ["bob"])


def test_extra_fields_in_a_resume_are_refused() -> None:
    """`resume_flow_run(run_input={…, "approver": "bob", "approved_by": "admin", "decision_override": …})`: the
    form (Prefect's RunInput forbids extra fields) refuses the whole answer, it does not pick what it knows."""
    from pydantic import ValidationError

    from tasks.approvals import approval_form

    form = approval_form(["bob"])
    with pytest.raises(ValidationError, match="approved_by"):
        form.model_validate({"decision": "deny", "approver": "bob", "reason": "", "approved_by": "admin",
                             "decision_override": "approve"})
    assert form.model_validate({"decision": "deny", "approver": "bob", "reason": ""}).decision == "deny"


# ------------------------------------------------------------------------------------------------ ledger races
def test_sixteen_concurrent_answers_to_one_approval_record_exactly_one(db_url) -> None:  # noqa: F811
    from remedy.ledger import Ledger
    from tests.ledger.conftest import race

    with Ledger(db_url) as led:
        rec = led.request_approval(incident_id=None, flow_run_id="run-1", kind="test")
        results = race(16, lambda i: led.decide_approval(rec.id, decision="approve" if i % 2 else "deny",
                                                         decided_by=f"p{i}", reason=""))
        won = [r for r in results if not isinstance(r, Exception)]
        assert len(won) == 1 and all(isinstance(r, LedgerConflict) for r in results if r not in won), results
        final = led.get_approval(rec.id)
        assert (final.decision, final.decided_by) == (won[0].decision, won[0].decided_by)


def test_sixteen_concurrent_claims_of_one_incident_give_it_to_one_run(db_url) -> None:  # noqa: F811
    from remedy.ledger import Ledger
    from tests.ledger.conftest import race

    with Ledger(db_url) as led:
        inc, _ = led.open_incident(Incident(node="gpu-001", signal="xid", gpu=0, xid=79), window_seconds=600)
        for i in range(16):
            led.start_lease(f"run-{i}", ttl_seconds=30)
        results = race(16, lambda i: led.claim(inc.id, f"run-{i}").claimed)
        assert results.count(True) == 1, results


# ------------------------------------------------------------------------------------------------ settings
@pytest.mark.parametrize("field,value", [("ttl_seconds", float("inf")), ("ttl_seconds", 1e300),
                                         ("ttl_seconds", float("nan")), ("watchdog_seconds", float("inf"))])
def test_an_endless_lease_or_watchdog_period_is_a_config_error(field, value) -> None:
    """inf or 1e300 passed `gt=0`; every flow's lease then failed with OverflowError (timedelta), and an inf
    watchdog period with OverflowError in Event.wait: a traceback in every run instead of one line at start."""
    with pytest.raises(ConfigError, match=f"leases.{field}"):
        load_settings(leases={field: value, "renew_seconds": 1.0})
    for bad in (float("inf"), 1e300, float("nan"), 0, -1, True):
        with pytest.raises(ValueError, match="ttl_seconds"):
            _ttl(bad)


# ------------------------------------------------------------------------------------------------ the alert webhook
def _alert(node: str, **labels) -> dict:
    return make_alert({"alertname": "GpuXidError", "Hostname": node, "gpu": "0", "xid": "79", "signal": "xid"}
                      | labels, {"summary": "XID 79"})


def test_ten_thousand_alerts_in_one_webhook_open_a_bounded_number(receiver_factory, post, ledger) -> None:  # noqa: F811
    server = receiver_factory()
    alerts = [_alert(f"gpu{i % 16:03d}", gpu=str(i % 8), xid=str(40 + i % 60)) for i in range(10_000)]
    t0 = time.monotonic()
    r = post(server, webhook_payload(alerts))
    took = time.monotonic() - t0
    assert r.status_code in (200, 413, 422, 429), r.text
    assert len(ledger.incidents()) <= load_settings().receiver.limits.max_incidents_per_request
    assert took < 60, took  # a generous bound: it is not a hang (no speed claim)


@pytest.mark.parametrize("node", ["gpu\u202e100", "gpu001\u200b", "ｇｐｕ００１", "\u202egpu001", "../../gpu001",
                                  "gpu001" + "x" * 5000, "gpu001\x00"])
def test_unicode_rtl_and_path_node_names_open_nothing_and_never_500(receiver_factory, post, ledger, node) -> None:  # noqa: F811
    server = receiver_factory()
    r = post(server, webhook_payload([_alert(node)]))
    assert r.status_code < 500, r.text
    assert [i.node for i in ledger.incidents()] == [] or all(i.node == node for i in ledger.incidents())
    assert all(i.node != "gpu001" for i in ledger.incidents())  # a lookalike is never the real node


def test_one_alert_through_two_receivers_at_once_is_one_incident(receiver_factory, post, ledger) -> None:  # noqa: F811
    a, b = receiver_factory(), receiver_factory()
    payload = webhook_payload([_alert("gpu003")])
    barrier, codes = threading.Barrier(8), []

    def send(server) -> None:
        barrier.wait()
        codes.append(post(server, payload).status_code)

    threads = [threading.Thread(target=send, args=(s,)) for s in (a, b) * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert codes == [200] * 8, codes
    assert len([i for i in ledger.incidents() if i.node == "gpu003"]) == 1


# ------------------------------------------------------------------------------------------------ the breaker CLI
@pytest.mark.parametrize("scope", ["rack:a/b", "rack:../../etc", "rack:", "nope:r1", "rack:" + "r" * 5000,
                                   "rack:r1\n--all"])
def test_odd_breaker_scope_names_are_one_line_never_a_traceback(scope, tmp_path, monkeypatch, capsys) -> None:
    from remedy.cli import main
    from remedy.ledger import Ledger

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger(url) as led:
        led.migrate()
    monkeypatch.setenv("REMEDY_DB_URL", url)
    code = main(["breaker", "close", scope, "--by", "alice"])
    err = capsys.readouterr().err
    assert code in (0, 1, 2) and "Traceback" not in err, err
    if code:
        assert len(err.strip().splitlines()) == 1, err


def test_json_nested_ten_thousand_deep_in_a_click_is_a_400(slack_receiver) -> None:
    url, _ = slack_receiver
    payload = "[" * 10_000 + "]" * 10_000
    body = "payload=" + payload
    r = httpx.post(f"{url}/v1/slack/interactions", content=body, headers=signed_headers(SECRET, body), timeout=30)
    assert r.status_code == 400, r.text
    json.dumps(r.json())
