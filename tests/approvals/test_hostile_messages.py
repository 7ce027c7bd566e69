"""Every Slack message gpu-remedy builds (remedy.approvals.messages) makes alert- and node-provided text inert through
the one escaper, remedy.domain.escape (issue 32, item 7): a hostile label cannot ping the channel, forge a "Click
to approve" link, or open bold, italics, strike or code; gpu-remedy's own markup (its **bold**, `node` code spans,
the run link, approver mentions) still renders."""

from __future__ import annotations

import json
import re

import pytest

from remedy.approvals import messages
from remedy.domain.escape import ZWSP, markdown
from tests.approvals.blockkit import problems

HOSTILE = "<!channel> <http://x|Click to approve> *now* _it_ `rm -rf` & ~gone~ @here <@U0MALLORY> <#C0OPS>"
INERT = ["&lt;!channel&gt;", "&lt;http://x|Click to approve&gt;", f"*{ZWSP}now*{ZWSP}", f"_{ZWSP}it_{ZWSP}",
         "&amp;", f"~{ZWSP}gone~{ZWSP}", f"@{ZWSP}here", "&lt;@U0MALLORY&gt;", "&lt;#C0OPS&gt;"]
OUR_CONTROLS = re.compile(r"<@U024BE7LH>|<http://127\.0\.0\.1:4200/runs/flow-run/run-7\|Open the run in Prefect>")


def _texts(blocks: list[dict]) -> list[str]:
    out = []
    for b in blocks:
        if isinstance(b.get("text"), dict) and b["text"]["type"] == "mrkdwn":
            out.append(b["text"]["text"])
        out += [e["text"] for e in b.get("elements", []) if e.get("type") == "mrkdwn"]
    return out


def _no_control_but_ours(text: str) -> None:
    rest = OUR_CONTROLS.sub("", text)
    assert "<" not in rest and ">" not in rest, text  # Slack's only control syntax is <…>
    assert not re.search(r"(?<![\w\u200b])@(channel|here|everyone)\b", rest), text


@pytest.fixture(autouse=True)
def _ui(monkeypatch):
    monkeypatch.setenv("PREFECT_UI_URL", "http://127.0.0.1:4200")


def _all_kinds(summary: str, node: str, by: str) -> dict[str, list[dict]]:
    return {
        "request": messages.request_blocks(approval_id=7, flow_run_id="run-7", title=f"Replace {node}?",
                                           summary=summary, timeout_seconds=600, default_on_timeout="deny",
                                           node=node, incident_id=3, approvers=["U024BE7LH"]),
        "decided": messages.decided_blocks(title=f"Replace {node}?", summary=summary, decision="approve", by=by,
                                           reason=HOSTILE),
        "nudge": messages.nudge_blocks(title=f"Replace {node}? {HOSTILE}", waited_seconds=60, left_seconds=60,
                                       default_on_timeout="deny", approval_id=7),
        "reminder": messages.reminder_blocks(title=f"Replace {node}? {HOSTILE}", timeout_seconds=60,
                                             default_on_timeout="deny", approval_id=7, consequence="nothing changed"),
        "escalation": messages.escalation_blocks(node=node, reason=summary, incident_id=3, quarantined=True),
    }


@pytest.mark.parametrize("how", ["raw", "escaped for Markdown"])
def test_hostile_labels_are_inert_in_every_message_kind(how: str) -> None:
    """The summary is gpu-remedy's Markdown quoting the alert as it came, or as remedy.domain.escape.markdown
    made it for the Prefect UI: either way Slack gets inert text."""
    quoted = HOSTILE if how == "raw" else markdown(HOSTILE)
    summary = f"**gpu011**: XID 79 from the alert: {quoted}\n- waiting on this answer: `gpu011`"
    found = _all_kinds(summary, node="gpu011", by="<!channel>")
    for kind, blocks in found.items():
        assert problems(blocks) == [], kind
        texts = _texts(blocks)
        for t in texts:
            _no_control_but_ours(t)
        joined = "\n".join(texts)
        if kind != "request":  # the request quotes the summary; its context has the link and mention too
            assert OUR_CONTROLS.search(joined) is None, kind
        for inert in INERT:
            if kind in ("request", "decided", "escalation") and how == "raw" and inert.startswith("`"):
                continue
            assert inert in joined, (kind, inert, joined)
    request = "\n".join(_texts(found["request"]))
    assert request.startswith("*gpu011*: XID 79")  # our bold is still bold
    assert "`gpu011`" in request  # our code span is still code
    assert "<@U024BE7LH>" in request and "|Open the run in Prefect>" in request
    # a backslash-escaped character is the character, not a backslash, in Slack
    assert "\\" not in "".join(_texts(found["escalation"]))
    assert "Approved by @&lt;!channel&gt;: &lt;!channel&gt;" in _texts(found["decided"])[-1]


def test_a_hostile_node_name_stays_inside_its_code_span() -> None:
    node = "gpu1` <!channel> *x*"
    blocks = messages.request_blocks(approval_id=1, flow_run_id="r", title="t", summary="s", timeout_seconds=60,
                                     default_on_timeout="deny", node=node, incident_id=None, approvers=[])
    context = blocks[2]["elements"][0]["text"]
    assert context.startswith(f"node `gpu1`{ZWSP} &lt;!channel&gt; *{ZWSP}x*{ZWSP}`")
    esc = messages.escalation_blocks(node=node, reason="r", incident_id=None, quarantined=False)
    assert "&lt;!channel&gt;" in esc[2]["elements"][0]["text"] and "<!channel>" not in json.dumps(esc[2])


def test_who_answered_is_escaped_but_a_mention_we_wrote_is_kept() -> None:
    assert messages.verdict_text("approve", "<@U024BE7LH>") == "Approved by <@U024BE7LH>"
    assert messages.verdict_text("deny", "alice", "ok & done") == "Denied by @alice: ok &amp; done"
    assert messages.verdict_text("approve", "<@U0X> <!channel>") == "Approved by @&lt;@U0X&gt; &lt;!channel&gt;"
    assert messages.verdict_text("approve", "@_x_") == f"Approved by @_{ZWSP}x_{ZWSP}"


def test_the_notification_text_is_inert_and_one_short_line() -> None:
    text = messages.fallback_text(f"Needs a human: gpu1: {HOSTILE}\n" + "x " * 400)
    _no_control_but_ours(text)
    assert "\n" not in text and len(text) <= 300 and "&lt;!channel&gt;" in text
