"""Incidents: one row per fault on one GPU of one node, deduplicated within a time window."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy import Connection, bindparam, func, select, text, update

from remedy.domain.model import PLANNED_RETIREMENT_SIGNAL, Incident, IncidentStatus, Topology
from remedy.ledger import schema
from remedy.ledger.base import LedgerBase, inserted_id
from remedy.ledger.convert import as_enum, incident_record, require_aware, require_choice, require_text
from remedy.ledger.errors import RecordNotFound
from remedy.ledger.records import Fence, IncidentRecord

SEVERITIES = ("critical", "warning")

# The alert intake's statements, built once. Building a SQLAlchemy statement and its cache key cost more than running
# it on SQLite (profiled: about half of an incident's open), and an alert storm runs these for every alert.
_i, _o = schema.incidents.c, schema.alert_occurrences.c
_RESOLVED = IncidentStatus.RESOLVED.value
_BY_OCCURRENCE = (select(schema.incidents).join(schema.alert_occurrences, _o.incident_id == _i.id)
                  .where(_o.occurrence == bindparam("occurrence")))
_NEWEST_OF_ALERT = (select(schema.incidents).join(schema.alert_occurrences, _o.incident_id == _i.id)
                    .where(_o.alert_fingerprint == bindparam("alert_fingerprint"), _i.status != _RESOLVED,
                           _i.last_seen >= bindparam("since"))
                    .order_by(_o.starts_at.desc()).limit(1))
_NEWEST_LIVE = (select(schema.incidents)
                .where(_i.fingerprint == bindparam("fingerprint"),
                       _i.status.in_((IncidentStatus.OPEN.value, IncidentStatus.ACTING.value)),
                       _i.last_seen >= bindparam("since"))
                .order_by(_i.last_seen.desc(), _i.id.desc()).limit(1))
_NEWEST_UNRESOLVED = (select(schema.incidents)
                      .where(_i.fingerprint == bindparam("fingerprint"), _i.status != _RESOLVED,
                             _i.last_seen >= bindparam("since"))
                      .order_by(_i.last_seen.desc(), _i.id.desc()).limit(1))
_BY_ID = select(schema.incidents).where(_i.id == bindparam("incident_id"))
_UPDATE_BY_ID = update(schema.incidents).where(_i.id == bindparam("incident_id"))  # SET from the parameters' keys
_MARK_ANNOUNCED = (update(schema.incidents).where(_i.id == bindparam("incident_id"), _i.flow_run_id.is_(None))
                   .values(flow_run_id=bindparam("mark")))
_NODE_FAULTS = select(_i.fingerprint).where(_i.node == bindparam("node"), _i.last_seen >= bindparam("since"))
_NODE_TOPOLOGY = (select(schema.nodes.c.zone, schema.nodes.c.rack, schema.nodes.c.switch, schema.nodes.c.pdu)
                  .where(schema.nodes.c.name == bindparam("node")))


def _pg_lock_key(fingerprint: str) -> int:
    """Signed 64-bit advisory-lock key for one fingerprint (namespaced so it cannot collide with other locks)."""
    digest = hashlib.sha256(f"remedy-incident|{fingerprint}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _statuses(status: IncidentStatus | str | Iterable[IncidentStatus | str]) -> list[str]:
    items = [status] if isinstance(status, str) else list(status)
    return [as_enum(IncidentStatus, s, "incident status").value for s in items]


class IncidentsMixin(LedgerBase):
    def open_incident(
        self,
        incident: Incident,
        *,
        window_seconds: float,
        severity: str = "critical",
        topology: Topology | None = None,
    ) -> tuple[IncidentRecord, bool]:
        """Record a fault; a sighting of one already recorded bumps that incident (see `_same_incident`).

        Returns (record, created). A repeat adds `incident.count` to the count, moves last_seen forward and
        raises severity to critical if the repeat is critical. Two receivers racing on one fault still make
        one incident: writers are serialised per fingerprint (PostgreSQL advisory lock; SQLite write lock).
        The topology snapshot comes from `topology`, else from the node's ledger row if there is one.
        """
        require_text(incident.node, "incident node")
        require_text(incident.signal, "incident signal")
        require_choice(severity, SEVERITIES, "severity")
        if isinstance(window_seconds, bool) or not isinstance(window_seconds, (int, float)) or window_seconds < 0:
            raise ValueError(f"window_seconds must be a number >= 0, got {window_seconds!r}")
        if not isinstance(incident.count, int) or incident.count < 1:
            raise ValueError(f"incident count must be an integer >= 1, got {incident.count!r}")
        require_aware(incident.first_seen, "incident first_seen")
        require_aware(incident.last_seen, "incident last_seen")
        status = as_enum(IncidentStatus, incident.status, "incident status")
        fp = incident.fingerprint
        with self._write() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _pg_lock_key(fp)})
            row, known = self._same_incident(conn, incident, fp, window_seconds)
            if row is not None:
                values = {"count": row.count + incident.count, "last_seen": max(row.last_seen, incident.last_seen)}
                if row.evidence and "alert_cleared_at" in row.evidence and status is not IncidentStatus.RESOLVED:
                    # it fires again: the earlier "resolved" no longer says the fault is gone
                    values["evidence"] = {k: v for k, v in row.evidence.items() if k != "alert_cleared_at"}
                if severity == "critical":
                    values["severity"] = "critical"
                conn.execute(_UPDATE_BY_ID, {"incident_id": row.id, **values})
                if not known:  # a re-send of a remembered occurrence (most of an alert storm) writes nothing more
                    self._remember_occurrence(conn, incident, row.id)
                # the row as just written, without reading it back (a storm's re-sends are this path)
                return replace(incident_record(row), **values), False
            topo = topology or self._node_topology(conn, incident.node)
            values = {
                "fingerprint": fp, "node": incident.node, "gpu": incident.gpu, "signal": incident.signal,
                "xid": incident.xid, "first_seen": incident.first_seen, "last_seen": incident.last_seen,
                "count": incident.count, "status": status.value, "detail": incident.detail or "",
                "severity": severity, "flow_run_id": None,
                "resolved_at": incident.last_seen if status is IncidentStatus.RESOLVED else None,
                "rack": topo.rack, "switch": topo.switch, "pdu": topo.pdu, "evidence": incident.evidence or None,
            }
            new_id = inserted_id(conn.execute(schema.incidents.insert(), values))
            self._remember_occurrence(conn, incident, new_id)
            return self._incident(conn, new_id), True

    @staticmethod
    def _same_incident(conn: Connection, incident: Incident, fp: str, window_seconds: float):
        """(The incident this sighting belongs to, or None for a new one; whether its occurrence is remembered).

        With an alert identity (`incident.occurrence`): the same occurrence is always the same incident (a re-send
        after Alertmanager's repeat_interval, a re-delivery, a batch repeat); the same alert firing again within
        the hold-down after it was last seen is flapping, one incident; another alert for the same fault joins an
        incident only while that one is still open or being acted on (a settled incident and a new alert are new
        evidence, e.g. a throttle that persisted past its replace threshold). Without one (a run by hand, the
        CLI), a repeat of the fault within the window joins any unresolved incident."""
        since = incident.last_seen - timedelta(seconds=window_seconds)
        if incident.occurrence:
            hit = conn.execute(_BY_OCCURRENCE, {"occurrence": incident.occurrence}).first()
            if hit is not None:
                return hit, True
            if incident.alert_fingerprint:
                prev = conn.execute(_NEWEST_OF_ALERT, {
                    "alert_fingerprint": incident.alert_fingerprint,
                    "since": incident.first_seen - timedelta(seconds=window_seconds)}).first()
                if prev is not None:
                    return prev, False
            return conn.execute(_NEWEST_LIVE, {"fingerprint": fp, "since": since}).first(), False
        return conn.execute(_NEWEST_UNRESOLVED, {"fingerprint": fp, "since": since}).first(), False

    @staticmethod
    def _remember_occurrence(conn: Connection, incident: Incident, incident_id: int) -> None:
        """Called in the transaction whose `_same_incident` found the occurrence not remembered, which holds the
        fault's lock since (SQLite's write lock, PostgreSQL's advisory lock): no second look is needed."""
        if not incident.occurrence:
            return
        conn.execute(schema.alert_occurrences.insert(), {
            "occurrence": incident.occurrence, "alert_fingerprint": incident.alert_fingerprint or incident.occurrence,
            "incident_id": incident_id, "starts_at": incident.first_seen})

    @staticmethod
    def _node_topology(conn: Connection, node: str) -> Topology:
        row = conn.execute(_NODE_TOPOLOGY, {"node": node}).first()
        return Topology(zone=row.zone, rack=row.rack, switch=row.switch, pdu=row.pdu) if row else Topology()

    @staticmethod
    def _incident(conn: Connection, incident_id: int) -> IncidentRecord:
        row = conn.execute(_BY_ID, {"incident_id": incident_id}).first()
        if row is None:
            raise RecordNotFound("incident", incident_id)
        return incident_record(row)

    def get_incident(self, incident_id: int) -> IncidentRecord:
        with self._read() as conn:
            return self._incident(conn, incident_id)

    def set_incident_status(
        self,
        incident_id: int,
        status: IncidentStatus,
        *,
        detail: str = "",
        flow_run_id: str | None = None,
        at: datetime | None = None,
        fence: Fence | None = None,
    ) -> IncidentRecord:
        """Set status (resolved stamps resolved_at; any other status clears it). Empty detail keeps the old one.

        `fence` (a run speaking for the incident it holds): refused with LeaseLost unless that run (or a run that
        started it) still holds the incident; the holder is kept, or becomes `fence.run` if nobody held it, so a
        subflow never writes its own id over its parent's claim."""
        status = as_enum(IncidentStatus, status, "incident status")
        given, at = at, self._now(at)
        values: dict = {"status": status.value, "resolved_at": at if status is IncidentStatus.RESOLVED else None}
        if detail:
            values["detail"] = detail
        if flow_run_id is not None:
            values["flow_run_id"] = flow_run_id
        with self._write() as conn:
            self._fenced(conn, incident_id, fence, given)
            current = self._incident(conn, incident_id)
            if fence is not None:
                values["flow_run_id"] = current.flow_run_id or fence.run
            conn.execute(update(schema.incidents).where(schema.incidents.c.id == incident_id).values(**values))
            return self._incident(conn, incident_id)

    def incidents(
        self,
        *,
        node: str | None = None,
        since: datetime | None = None,
        status: IncidentStatus | str | Iterable[IncidentStatus | str] | None = None,
        severity: str | None = None,
    ) -> list[IncidentRecord]:
        """Incidents oldest first. `since` keeps those still seen at or after it (last_seen >= since)."""
        i = schema.incidents.c
        q = select(schema.incidents).order_by(i.first_seen, i.id)
        if node is not None:
            q = q.where(i.node == node)
        if since is not None:
            q = q.where(i.last_seen >= require_aware(since, "since"))
        if status is not None:
            q = q.where(i.status.in_(_statuses(status)))
        if severity is not None:
            q = q.where(i.severity == require_choice(severity, SEVERITIES, "severity"))
        with self._read() as conn:
            return [incident_record(r) for r in conn.execute(q)]

    def fault_counts(self, nodes: Iterable[str], since: datetime) -> dict[str, int]:
        """Per node of `nodes`, its failures still seen at or after `since` (every incident but a planned retirement,
        as `is_fault` says): select_spare's cleanest-record order, one grouped query over the candidate spares
        (the `node` index) instead of every incident of the window — it runs inside the breaker lock."""
        names = sorted(set(nodes))
        if not names:
            return {}
        i = schema.incidents.c
        q = (select(i.node, func.count()).where(i.node.in_(names), i.last_seen >= require_aware(since, "since"),
                                                i.signal != PLANNED_RETIREMENT_SIGNAL).group_by(i.node))
        with self._read() as conn:
            return {node: n for node, n in conn.execute(q)}

    def check_fence(self, incident_id: int, fence: Fence | None) -> None:
        """Raise LeaseLost unless the fence's run (or a run that started it) may still act on the incident: for a
        step that writes nothing of its own (a replay of an earlier run's) yet must stop a run that lost the
        incident, as every fenced write would."""
        with self._write() as conn:
            self._fenced(conn, incident_id, fence, None)

    def warning_history(self, since: datetime) -> tuple[list[IncidentRecord], dict[str, list[datetime]]]:
        """What a detector's record is judged on (remedy.warn.record), in two queries instead of every incident of
        the window: the early warnings still seen at or after `since` (the early-warning signal, or an XID the driver
        raises as one: `remedy.detect.signals.is_early_warning`), oldest first; and for each node they warned
        about, when its failures were first seen — every other incident but a planned retirement or one closed as
        ignored (a duplicate, a monitor failure)."""
        from remedy.domain.xid import EARLY_WARNING_XIDS

        i = schema.incidents.c
        since = require_aware(since, "since")
        warned = (i.signal == "early-warning") | (
            (i.signal == "xid") & func.coalesce(i.xid, -1).in_(sorted(EARLY_WARNING_XIDS)))
        with self._read() as conn:
            warnings = [incident_record(r) for r in conn.execute(
                select(schema.incidents).where(warned, i.last_seen >= since).order_by(i.first_seen, i.id))]
            nodes = sorted({w.node for w in warnings})
            failures: dict[str, list[datetime]] = {}
            if nodes:
                q = (select(i.node, i.first_seen)
                     .where(i.node.in_(nodes), i.last_seen >= since, ~warned, i.signal != PLANNED_RETIREMENT_SIGNAL,
                            i.status != IncidentStatus.IGNORED.value)
                     .order_by(i.first_seen))
                for node, first in conn.execute(q):
                    failures.setdefault(node, []).append(first)
        return warnings, failures

    def fault_fingerprints(self, node: str, since: datetime) -> set[str]:
        """Fingerprints of `node`'s incidents still seen at or after `since` (the receiver's per-node cap)."""
        with self._read() as conn:
            return set(conn.execute(_NODE_FAULTS, {"node": node, "since": require_aware(since, "since")}).scalars())

    # ---- the receiver's outbox (remedy.receiver.outbox): unannounced incidents live in this table too
    def unannounced_incidents(self, detail_prefix: str, limit: int = 500) -> list[IncidentRecord]:
        """Open incidents with no flow run yet whose detail starts with `detail_prefix`, oldest first."""
        i = schema.incidents.c
        q = (
            select(schema.incidents)
            .where(i.status == IncidentStatus.OPEN.value, i.flow_run_id.is_(None), i.detail.like(f"{detail_prefix}%"))
            .order_by(i.id)
            .limit(limit)
        )
        with self._read() as conn:
            return [incident_record(r) for r in conn.execute(q)]

    def mark_incidents_announced(self, marks: dict[int, str]) -> int:
        """Set flow_run_id to the given mark where no run has claimed the incident yet; returns how many changed."""
        if not marks:
            return 0
        with self._write() as conn:  # one executemany: the announcer marks a whole batch
            return conn.execute(_MARK_ANNOUNCED, [{"incident_id": k, "mark": v} for k, v in marks.items()]).rowcount

    def touch_incident(self, fingerprint: str, at: datetime, *, alert_cleared: bool = False) -> int | None:
        """Move the newest unresolved incident of `fingerprint` to last_seen = at (never backwards); its id or None.
        `alert_cleared`: the alert resolved; kept on the incident (evidence `alert_cleared_at`) for the re-check
        before anything destructive (remedy.detect.reconfirm)."""
        i = schema.incidents.c
        with self._write() as conn:
            row = conn.execute(
                select(i.id, i.last_seen, i.evidence)
                .where(i.fingerprint == fingerprint, i.status != IncidentStatus.RESOLVED.value)
                .order_by(i.last_seen.desc(), i.id.desc())
                .limit(1)
            ).first()
            if row is None:
                return None
            values: dict = {}
            if require_aware(at, "at") > row.last_seen:
                values["last_seen"] = at
            if alert_cleared:
                values["evidence"] = dict(row.evidence or {}) | {"alert_cleared_at": at.isoformat()}
            if values:
                conn.execute(update(schema.incidents).where(i.id == row.id).values(**values))
            return int(row.id)
