"""SlackNotifier through slack-sdk's WebClient against the local Slack stub (real HTTP)."""

import time

import pytest
from slack_sdk import WebClient

from remedy.adapters.slack import SlackError, SlackNotifier
from tests.fixtures.slack import CHANNEL_ID


def _notifier(stub, **kw):
    return SlackNotifier("xoxb-test", "#gpu-remedy", base_url=stub.base_url, **kw)


def test_post_then_update_the_same_message(slack_stub):
    n = _notifier(slack_stub)
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*gpu074* cordoned"}}]
    ts = n.post("gpu074: cordoned", blocks=blocks)
    n.update(ts, "gpu074: drained", blocks=[])
    post, update = slack_stub.calls
    assert (post.method, post.token, post.body["channel"], post.body["text"]) == (
        "chat.postMessage", "xoxb-test", "#gpu-remedy", "gpu074: cordoned")  # fmt: skip
    assert post.body["blocks"] == blocks
    # chat.update must carry the channel id Slack returned, not the "#name"
    assert (update.method, update.body["ts"], update.body["channel"]) == ("chat.update", ts, CHANNEL_ID)
    assert slack_stub.messages[ts]["text"] == "gpu074: drained"


def test_stub_speaks_form_bodies_too(slack_stub):
    client = WebClient(token="xoxb-test", base_url=slack_stub.base_url)
    assert client.auth_test()["user_id"] == "U0REMEDY"
    resp = client.api_call("chat.postMessage", data={"channel": "#x", "text": "form body"})
    assert resp["ok"] and slack_stub.calls[-1].body == {"channel": "#x", "text": "form body"}


def test_429_is_retried_after_retry_after(slack_stub):
    slack_stub.rate_limit(times=1, retry_after=1)
    n = _notifier(slack_stub)
    t0 = time.monotonic()
    ts = n.post("after a rate limit")
    waited = time.monotonic() - t0
    assert ts and [c.status for c in slack_stub.calls] == [429, 200]
    assert waited >= 1.0  # honoured Retry-After: 1
    assert slack_stub.calls[1].at - slack_stub.calls[0].at >= 1.0


def test_429_forever_gives_up_with_a_clear_error(slack_stub):
    slack_stub.rate_limit(times=10, retry_after=0)
    n = _notifier(slack_stub, rate_limit_retries=2)
    with pytest.raises(SlackError, match=r"kept rate-limiting chat.postMessage \(HTTP 429\)"):
        n.post("x")
    assert len(slack_stub.calls) == 3


def test_slow_slack_raises_instead_of_hanging(slack_stub):
    slack_stub.delay(3.0)
    n = _notifier(slack_stub, timeout=1)
    t0 = time.monotonic()
    with pytest.raises(SlackError, match=r"Slack did not answer within 1 s \(chat.postMessage\)"):
        n.post("slow")
    assert time.monotonic() - t0 < 2.5


def test_slack_errors_are_one_line(slack_stub):
    slack_stub.fail("channel_not_found")
    with pytest.raises(SlackError, match="Slack refused chat.postMessage: channel_not_found"):
        _notifier(slack_stub).post("x")
    bad = SlackNotifier("xoxb-invalid", "#c", base_url=slack_stub.base_url)
    with pytest.raises(SlackError, match="invalid_auth"):
        bad.post("x")
    with pytest.raises(SlackError, match="message_not_found"):
        _notifier(slack_stub).update("123.456", "nothing there")


def test_dry_run_sends_nothing(slack_stub):
    n = _notifier(slack_stub, dry_run=True)
    ts = n.post("would post")
    n.update(ts, "would update")
    assert slack_stub.calls == []
    assert [(m.text, m.updates) for m in n.sent] == [("would post", ["would update"])]


def test_unreachable_slack():
    from tests.fixtures.prometheus import free_port

    n = SlackNotifier("xoxb-test", "#c", base_url=f"http://127.0.0.1:{free_port()}/api/", timeout=1)
    with pytest.raises(SlackError, match="Slack unreachable"):
        n.post("x")
