"""Slack messages fit a real channel (issue 33): valid Block Kit (tests/approvals/blockkit.py: the reference's
limits), a header of at most 150 characters cut at a word, Slack mrkdwn (`*bold*`), the reason once, a link to the
Prefect run, approver mentions, alert text escaped; `remedy slack preview` renders every kind."""

from __future__ import annotations

import json
import re

import pytest

from remedy.approvals import messages
from remedy.cli import main
from tests.approvals.blockkit import problems

LONG_REASON = ("rack rack-2 has had 5 failures within 10 min (limit 2): a switch, PDU or config push is more likely "
               "than five bad nodes, so the breaker holds automation for every node in the rack until a person "
               "answers this question in Slack or in the Prefect UI")


def _request(**kw):
    args = dict(approval_id=7, flow_run_id="run-7", title=f"gpu-remedy paused automation: {LONG_REASON}",
                summary=f"**gpu011**: {LONG_REASON}\n- waiting on this answer: gpu012", timeout_seconds=900,
                default_on_timeout="deny", node="gpu011", incident_id=3, approvers=["U024BE7LH", "W0ABCDEF1", "bob"])
    return messages.request_blocks(**(args | kw))


def test_every_previewed_kind_is_valid_block_kit():
    found = messages.preview_messages()
    assert set(found) == {"request", "decided", "nudge", "reminder", "escalation"}
    for kind, blocks in found.items():
        assert problems(blocks) == [], kind


def test_the_validator_catches_what_slack_refuses():
    good = _request()
    assert problems(good) == []
    too_long = json.loads(json.dumps(good))
    too_long[0]["text"]["text"] = "x" * 151
    assert any("is too long" in p for p in problems(too_long))
    bold_header = json.loads(json.dumps(good))
    bold_header[0]["text"]["type"] = "mrkdwn"  # a header is plain text only
    assert problems(bold_header)
    odd = json.loads(json.dumps(good))
    odd[-1]["elements"][0]["style"] = "warning"
    assert problems(odd)


@pytest.mark.parametrize("title", ["Replace gpu042?", "x" * 400, "word " * 60,
                                   "a " + "verylongwordwithoutspaces" * 10])
def test_header_is_at_most_150_characters_cut_at_a_word(title):
    header = messages.request_blocks(approval_id=1, flow_run_id="r", title=title, summary="s", timeout_seconds=60,
                                     default_on_timeout="deny", node=None, incident_id=None,
                                     approvers=[])[0]["text"]["text"]
    assert len(header) <= 150
    if len(" ".join(title.split())) <= 150:
        assert header == " ".join(title.split())
    else:
        assert header.endswith("…")
        kept = header.removesuffix("…")
        if title.strip()[:149].rfind(" ") > 75:  # words to cut at: what is kept ends where a word ended
            assert " ".join(title.split()).startswith(kept) and " ".join(title.split())[len(kept)] == " "


def test_request_says_the_reason_once_in_mrkdwn_with_run_link_and_mentions(monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    monkeypatch.delenv("PREFECT_UI_URL", raising=False)
    blocks = _request()
    text = json.dumps(blocks)
    assert text.count("a switch, PDU or config push") == 1
    assert blocks[0]["text"]["text"] == "gpu-remedy paused automation: gpu011"
    assert blocks[1]["text"]["text"].startswith("*gpu011*:") and "**" not in text
    context = [e["text"] for e in blocks[2]["elements"]]
    assert "<http://127.0.0.1:4200/runs/flow-run/run-7|Open the run in Prefect>" in context
    assert "asking <@U024BE7LH> <@W0ABCDEF1>" in context  # a name is no Slack user id: not mentioned


def test_alert_text_cannot_ping_the_channel_or_forge_a_link():
    blocks = _request(summary="node says <!channel> & <http://evil|click>", title="t")
    body = blocks[1]["text"]["text"]
    assert "<!channel>" not in body and "&lt;!channel&gt; &amp; &lt;http://evil|click&gt;" in body
    esc = messages.escalation_blocks(node="gpu1", reason="**XID 58** <!here>", incident_id=1, quarantined=True)
    assert esc[1]["text"]["text"] == "*XID 58* &lt;!here&gt;"
    assert problems(esc) == []


def test_slack_preview_cli_renders_each_kind_and_html(tmp_path, capsys):
    page = tmp_path / "slack.html"
    assert main(["slack", "preview", "--html", str(page)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"request", "decided", "nudge", "reminder", "escalation"}
    assert all(problems(v["blocks"]) == [] for v in out.values())
    html = page.read_text()
    assert html.count('class="msg"') == 5 and "<b>gpu011</b>" in html and "Open the run in Prefect</a>" in html
    assert main(["slack", "preview", "--kind", "request"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["request"]
    assert main(["slack", "preview", "--kind", "nope"]) == 2
    assert re.search(r"unknown message kind 'nope'", capsys.readouterr().err)
