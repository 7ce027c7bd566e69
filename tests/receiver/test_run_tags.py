"""The receiver creates each triage run already tagged as the flows tag their runs (node, stage, rack, XID), so the
run spends no API round trip tagging itself before the cordon (remedy.platform.dispatcher._run_tags)."""

from __future__ import annotations

from datetime import UTC, datetime, timezone

from remedy.domain.model import IncidentStatus
from remedy.domain.run_tags import run_tags
from remedy.ledger.records import IncidentRecord
from remedy.platform.dispatcher import _run_tags
from remedy.receiver.events import incident_event


def _record(**over) -> IncidentRecord:
    now = datetime(2026, 11, 27, 4, 0, tzinfo=UTC)
    fields = dict(id=7, fingerprint="f", node="gpu042", gpu=3, signal="xid", xid=79, first_seen=now, last_seen=now,
                  count=1, status=IncidentStatus.OPEN, detail="", severity="critical", flow_run_id=None,
                  resolved_at=None, rack="rack-6", switch="leaf-3", pdu="pdu-6a")
    return IncidentRecord(**(fields | over))


def test_a_triage_run_is_created_with_the_tags_the_flow_would_add():
    tags = _run_tags(incident_event(_record()))
    assert tags == run_tags("gpu042", stage="triage", xid=79, rack="rack-6")
    assert tags == ["node:gpu042", "stage:triage", "rack:rack-6", "xid:79"]


def test_no_rack_or_xid_no_such_tag():
    tags = _run_tags(incident_event(_record(rack="", xid=None, signal="node-not-ready", gpu=None)))
    assert tags == ["node:gpu042", "stage:triage"]
