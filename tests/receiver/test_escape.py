"""Alert text a person reads is inert (issue 32, item 7): hostile labels through the real receiver, then into Slack
mrkdwn and Markdown through `remedy.domain.escape`; the Slack stub receives what slack-sdk would send."""

from __future__ import annotations

import json
import re

import jinja2

from remedy.approvals import messages
from remedy.domain.escape import JINJA_FILTERS, ZWSP, code, markdown, mrkdwn
from remedy.sim.alerts import make_alert, webhook_payload

HOSTILE = {
    "alertname": "GpuXidError <!channel>",
    "summary": "XID 79 <https://evil.example/approve|Click to approve> *urgent* _now_ `rm -rf` <@U024BE7LH> "
               "[Click to approve](https://evil.example/approve) &amp; @here\n# heading",
}


def _hostile_alert(node: str = "gpu003") -> dict:
    return make_alert({"alertname": HOSTILE["alertname"], "Hostname": node, "gpu": "0", "xid": "79",
                       "signal": "xid", "team": "<!everyone>"},
                      {"summary": HOSTILE["summary"]})


def _no_slack_control(text: str) -> None:
    assert "<!" not in text and "<@" not in text and "<http" not in text, text
    assert not re.search(r"<[^>]*\|[^>]*>", text), text  # no <url|label> link
    assert not re.search(r"(?<![\w\u200b])@(channel|here|everyone)\b", text), text
    for ch in "*_~`":  # every formatting character is followed by a zero-width space: it opens nothing
        assert all(text[i + 1:i + 2] == ZWSP for i, c in enumerate(text) if c == ch), (ch, text)


def test_mrkdwn_makes_slack_controls_inert() -> None:
    out = mrkdwn(HOSTILE["summary"] + " " + HOSTILE["alertname"])
    _no_slack_control(out)
    assert "&lt;!channel&gt;" in out and "&amp;amp;" in out  # shown as typed, not acted on
    assert mrkdwn("gpu042 GPU 3") == "gpu042 GPU 3"  # plain text unchanged
    assert mrkdwn(None) == ""


def test_markdown_makes_links_html_and_blocks_inert() -> None:
    out = markdown(HOSTILE["summary"])
    assert "<" not in out and ">" not in out and "\n" not in out
    assert "\\[Click to approve\\]\\(https://evil.example/approve\\)" in out
    assert "\\# heading" in out and "\\*urgent\\*" in out
    span = code("a `b` c")
    assert span.startswith("``") and span.endswith("``") and "a `b` c" in span


def test_hostile_labels_through_the_receiver_reach_slack_inert(receiver_factory, post, ledger, slack_stub) -> None:
    server = receiver_factory()
    r = post(server, webhook_payload([_hostile_alert()]))
    assert r.status_code == 200 and r.json()["opened"] == 1
    [incident] = ledger.incidents()
    # what the receiver kept is the alert's own text (evidence, never altered) ...
    assert incident.evidence["labels"]["team"] == "<!everyone>"
    assert "<https://evil.example/approve|Click to approve>" in incident.detail
    # ... and what a person reads of it goes through the escape: the real escalation template, rendered by the
    # real jinja environment, posted through slack-sdk to the Slack stub
    blocks = messages.escalation_blocks(node=incident.node, reason=mrkdwn(incident.detail),
                                        incident_id=incident.id, quarantined=False)
    from remedy.adapters.slack import SlackNotifier

    SlackNotifier("xoxb-test", "#gpu", base_url=slack_stub.base_url).post(mrkdwn(incident.detail), blocks)
    [sent] = slack_stub.calls_to("chat.postMessage")
    blocks_sent = sent.body["blocks"]
    blocks_sent = json.loads(blocks_sent) if isinstance(blocks_sent, str) else blocks_sent
    texts = [sent.body["text"]] + [b["text"]["text"] for b in blocks_sent if isinstance(b.get("text"), dict)]
    hostile = [t for t in texts if "Click to approve" in t]
    assert hostile
    for t in hostile:
        _no_slack_control(t)


def test_jinja_filters_escape_inside_templates() -> None:
    env = jinja2.Environment(autoescape=False)
    env.filters.update(JINJA_FILTERS)
    out = env.from_string("{{ s | mrkdwn }} / {{ s | md }} / {{ s | mdcode }}").render(s="<!channel> [x](y)")
    assert "&lt;!channel&gt;" in out and "\\[x\\]\\(y\\)" in out and "`<!channel> [x](y)`" in out
