"""Approval vocabulary without Prefect: button values, Slack payload parsing, allowlist, waits, message rendering."""

from __future__ import annotations

import json

import pytest

from remedy.approvals import messages
from remedy.approvals.model import (
    ApprovalAction,
    ApprovalOutcome,
    BadInteraction,
    ButtonValue,
    is_approver,
    parse_click,
    wait_phases,
)
from remedy.approvals.open_loop import is_open_loop, node_pool
from remedy.approvals.signing import click_payload, form_body, signed_headers
from remedy.domain.model import Node


def test_button_value_round_trip_and_bad_values():
    v = ButtonValue(7, "3f1c5d2e-0000-4000-8000-000000000001")
    assert ButtonValue.decode(v.encode()) == v
    for raw in ("", "7", '{"approval_id": "x", "flow_run_id": "y"}', '{"flow_run_id": "y"}'):
        with pytest.raises(BadInteraction):
            ButtonValue.decode(raw)


def test_parse_click_and_allowlist():
    p = click_payload(approval_id=3, flow_run_id="run-1", approve=False, user_id="U1", user_name="alice",
                      channel_id="C1", message_ts="17.5")
    click = parse_click(p)
    assert (click.action, click.value, click.who, click.channel_id, click.message_ts) == (
        ApprovalAction.DENY, ButtonValue(3, "run-1"), "alice", "C1", "17.5")
    assert click.action.decision == "deny"
    assert is_approver(click, ["U1"])
    # a user name is chosen by its owner: "alice" on the list does not let whoever calls themselves alice approve
    assert not is_approver(click, ["alice"]) and not is_approver(click, ["@alice"])
    assert not is_approver(click, ["U2", "bob"]) and not is_approver(click, [])
    with pytest.raises(BadInteraction, match="unsupported interaction type"):
        parse_click({"type": "view_submission"})
    with pytest.raises(BadInteraction, match="no approval button"):
        parse_click({"type": "block_actions", "user": {"id": "U1"}, "actions": [{"action_id": "other"}]})


def test_outcome_approved_follows_the_default_only_on_timeout():
    assert ApprovalOutcome("approve", "a", "", 1).approved
    assert not ApprovalOutcome("deny", "a", "", 1, default_on_timeout="approve").approved
    assert not ApprovalOutcome("timeout", "timeout", "", 1).approved
    assert ApprovalOutcome("timeout", "timeout", "", 1, default_on_timeout="approve").approved


def test_wait_phases():
    assert wait_phases(3600, 900) == [900, 2700]
    assert wait_phases(60, 900) == [60]
    assert wait_phases(60, None) == [60]
    with pytest.raises(ValueError):
        wait_phases(0, 10)


def test_signature_matches_slack_sdk_verifier():
    from slack_sdk.signature import SignatureVerifier

    body = form_body(click_payload(approval_id=1, flow_run_id="r", approve=True, user_id="U1"))
    h = signed_headers("secret", body)
    assert SignatureVerifier("secret").is_valid(body, h["X-Slack-Request-Timestamp"], h["X-Slack-Signature"])
    assert not SignatureVerifier("other").is_valid(body, h["X-Slack-Request-Timestamp"], h["X-Slack-Signature"])
    with pytest.raises(ValueError, match="signing secret"):
        signed_headers("", body)


def test_request_message_has_enum_buttons_and_escapes_text():
    blocks = messages.request_blocks(approval_id=5, flow_run_id="run-5", title='Replace "gpu042"?',
                                     summary="line 1\n*bold* `code` \\ backslash", timeout_seconds=900,
                                     default_on_timeout="deny", node="gpu042", incident_id=9)
    json.dumps(blocks)
    assert blocks[0]["text"]["text"] == 'Replace "gpu042"?'
    assert blocks[1]["text"]["text"].endswith("\\ backslash")
    buttons = blocks[-1]["elements"]
    assert [b["action_id"] for b in buttons] == [a.value for a in ApprovalAction]
    assert {ButtonValue.decode(b["value"]) for b in buttons} == {ButtonValue(5, "run-5")}
    assert "15 min" in blocks[2]["elements"][0]["text"] and "*deny*" in blocks[2]["elements"][0]["text"]
    decided = messages.decided_blocks(title="t", summary="s", decision="approve", by="alice", reason="ok")
    assert decided[-1]["elements"][0]["text"] == "Approved by @alice: ok"
    assert all(b["type"] != "actions" for b in decided)


def test_node_pool_and_open_loop_match():
    eks = Node("a", instance_type="p5.48xlarge", labels={"eks.amazonaws.com/nodegroup": "gpu-ng-1"})
    bare = Node("b", instance_type="p6-b200.48xlarge")
    assert node_pool(eks) == "gpu-ng-1" and node_pool(bare) == "p6-b200.48xlarge"
    assert is_open_loop(eks, ["gpu-ng-1"]) and not is_open_loop(eks, ["p5.48xlarge"])
    assert is_open_loop(bare, ["*"]) and not is_open_loop(bare, []) and not is_open_loop(Node("c"), ["", " "])
