"""The rule for quarantine at intake (remedy.safety.intake): what the receiver may cordon before any flow runs."""

from __future__ import annotations

import pytest

from remedy.detect.signals import Signal, classify
from remedy.domain.model import NodeState
from remedy.domain.xid import RemediationPath
from remedy.safety.intake import IntakeSkip, decide_intake, intake_owner

BASE = dict(path=RemediationPath.REPLACE, node_state=NodeState.ACTIVE, cordoned=False, open_loop=False,
            scopes_not_closed=[], quarantined_by_intake=0, max_nodes=4, dry_run=False)


def test_a_node_fault_on_an_active_node_is_cordoned():
    d = decide_intake(**BASE)
    assert d.quarantine and d.skip is None and "1 of at most 4" in d.reason


@pytest.mark.parametrize("change, skip", [
    ({"enabled": False}, IntakeSkip.DISABLED),
    ({"max_nodes": 0}, IntakeSkip.DISABLED),
    ({"path": RemediationPath.RESTART_APP}, IntakeSkip.NOT_NODE_OUT),
    ({"path": RemediationPath.WATCH}, IntakeSkip.NOT_NODE_OUT),
    ({"path": RemediationPath.ESCALATE}, IntakeSkip.NOT_NODE_OUT),
    ({"path": "no-such-path"}, IntakeSkip.NOT_NODE_OUT),
    ({"node_state": NodeState.SPARE}, IntakeSkip.NOT_IN_SERVICE),
    ({"node_state": None}, IntakeSkip.NOT_IN_SERVICE),
    ({"cordoned": True}, IntakeSkip.ALREADY_CORDONED),
    ({"open_loop": True}, IntakeSkip.OPEN_LOOP),
    ({"scopes_not_closed": ["rack:r1"]}, IntakeSkip.BREAKER),
    ({"quarantined_by_intake": 4}, IntakeSkip.LIMIT),
    ({"dry_run": True}, IntakeSkip.DRY_RUN),
])
def test_each_rule_refuses_with_its_reason(change, skip):
    d = decide_intake(**(BASE | change))
    assert not d.quarantine and d.skip is skip and d.reason


def test_the_limit_is_decided_without_the_nodes_facts():
    # a receiver at its limit does not read the node: unknown facts must not turn the answer into anything else
    d = decide_intake(**(BASE | {"quarantined_by_intake": 4, "node_state": None}))
    assert d.skip is IntakeSkip.LIMIT and "limit 4" in d.reason


@pytest.mark.parametrize("xid, cordons", [(79, True), (48, True), (119, True), (13, False), (31, False), (43, False)])
def test_the_catalog_decides_which_xids_cordon_at_intake(xid, cordons):
    # XID 79 (fell off the bus), 48 (DBE), 119 (GSP) take the node out; 13/31/43 are the application's
    path = classify(Signal(node="n1", kind="xid", gpu=0, xid=xid)).path
    assert decide_intake(**(BASE | {"path": path})).quarantine is cordons, path


def test_the_owner_names_the_incident():
    assert intake_owner(7) != intake_owner(8) and "7" in intake_owner(7)
