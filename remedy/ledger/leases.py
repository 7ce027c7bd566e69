"""Run leases: which flow runs are alive, and taking over an incident whose run is gone.

A flow run that works on an incident holds a lease (`run_leases`), renewed by its process (`LeaseKeeper`, one daemon
thread per process) while it lives, paused for an approval included. SIGKILL, OOM or a stopped `remedy up` stop the
renewals; once the lease has expired the run is gone, and

- `claim` hands its incident to the next run that asks (a trigger, a person's run) and settles what the gone run
  left half-done: its running actions are recorded failed ("abandoned"), so the new run's replay does them again
  (every action is idempotent on the cluster) and replays the finished ones; its pending approvals are closed;
- the receiver's watchdog finds incidents left `acting` by a gone run (`stranded_incidents`) and re-announces them
  (`reannounce_incident`), or hands one whose runs keep dying to a person (`escalate_stranded`).

Lease times are the database server's clock (`LedgerBase._lease_now`), never this host's: hosts whose clocks
disagree still agree on whether a lease has run out.

A holder without a lease row (a claim written by hand, a run from before leases) is never taken over here: the
caller decides from Prefect's view of that run (tasks.ledger.claim_remediation).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import Connection, func, select, update

from remedy.domain.model import ActionOutcome, IncidentStatus
from remedy.ledger import schema
from remedy.ledger.base import LedgerBase
from remedy.ledger.convert import incident_record, lease_record, require_text
from remedy.ledger.errors import LeaseLost
from remedy.ledger.records import Claim, IncidentRecord, LeaseRecord

log = logging.getLogger(__name__)

TAKEOVER_KIND = "take_over_incident"
REANNOUNCE_KIND = "reannounce_incident"
STRANDED_KIND = "escalate_stranded"
SETTLED_BY = "gpu-remedy"  # who closes the approvals of a gone run
ABANDONED = "abandoned: "  # error prefix of an action its run left unfinished (it says nothing about the step)


def process_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


MAX_TTL_SECONDS = 86400.0  # as settings.leases.ttl_seconds allows: an endless lease is a run never taken over


def _ttl(seconds: float) -> timedelta:
    if (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
            or not 0 < seconds <= MAX_TTL_SECONDS):  # NaN fails both comparisons
        raise ValueError(f"lease ttl_seconds must be a number > 0 and at most {MAX_TTL_SECONDS:g}, got {seconds!r}")
    return timedelta(seconds=seconds)


def gone_since(lease: LeaseRecord) -> str:
    """"ended at …: why" or "stopped renewing its lease at …" for the operator."""
    if lease.ended_at is not None:
        return f"ended {lease.ended_at:%H:%M:%S} UTC ({lease.end_reason or 'no reason recorded'})"
    return f"stopped renewing its lease ({lease.process or 'unknown process'}); it expired {lease.expires_at:%H:%M:%S} UTC"


class LeasesMixin(LedgerBase):
    if TYPE_CHECKING:  # from IncidentsMixin, beside this one in Ledger

        @staticmethod
        def _incident(conn: Connection, incident_id: int) -> IncidentRecord: ...

    # --- a run's own lease ---------------------------------------------------------------------------------
    def start_lease(self, run_id: str, *, ttl_seconds: float, process: str = "", at: datetime | None = None
                    ) -> LeaseRecord:
        """Begin (or begin again: a retried flow run keeps its id) this run's lease, valid `ttl_seconds` from now."""
        require_text(run_id, "run_id")
        ttl = _ttl(ttl_seconds)
        r = schema.run_leases.c
        with self._write() as conn:
            now = self._lease_now(conn, at)
            values = {"process": process or "", "renewed_at": now, "expires_at": now + ttl, "ended_at": None,
                      "end_reason": ""}
            if conn.execute(select(r.run_id).where(r.run_id == run_id)).first() is None:
                conn.execute(schema.run_leases.insert().values(run_id=run_id, acquired_at=now, **values))
            else:
                conn.execute(update(schema.run_leases).where(r.run_id == run_id).values(**values))
            lease = self._lease(conn, run_id)
            assert lease is not None  # written just above, in this transaction
            return lease

    def renew_lease(self, run_id: str, *, ttl_seconds: float, at: datetime | None = None) -> bool:
        """Extend a live lease; False once it has expired or ended (the run is gone: it must not act any more)."""
        ttl = _ttl(ttl_seconds)
        r = schema.run_leases.c
        with self._write() as conn:
            now = self._lease_now(conn, at)
            return conn.execute(
                update(schema.run_leases)
                .where(r.run_id == run_id, r.ended_at.is_(None), r.expires_at > now)
                .values(renewed_at=now, expires_at=now + ttl)
            ).rowcount == 1

    def end_lease(self, run_id: str, *, reason: str, at: datetime | None = None) -> bool:
        """The run finished (or was found gone): it holds nothing from now on. False if it had ended already."""
        with self._write() as conn:
            return self._end(conn, run_id, reason, self._lease_now(conn, at))

    @staticmethod
    def _end(conn: Connection, run_id: str, reason: str, now: datetime) -> bool:
        r = schema.run_leases.c
        row = conn.execute(select(r.expires_at).where(r.run_id == run_id, r.ended_at.is_(None))).first()
        if row is None:
            return False
        return conn.execute(update(schema.run_leases).where(r.run_id == run_id, r.ended_at.is_(None)).values(
            ended_at=now, end_reason=reason[:2000], expires_at=min(row.expires_at, now))).rowcount == 1

    @staticmethod
    def _lease(conn: Connection, run_id: str) -> LeaseRecord | None:
        row = conn.execute(select(schema.run_leases).where(schema.run_leases.c.run_id == run_id)).first()
        return lease_record(row) if row else None

    def get_lease(self, run_id: str) -> LeaseRecord | None:
        with self._read() as conn:
            return self._lease(conn, run_id)

    def run_gone(self, run_id: str, at: datetime | None = None) -> LeaseRecord | None:
        """The run's lease if the run is gone (expired or ended); None if it is alive or never held a lease."""
        with self._read() as conn:
            lease = self._lease(conn, run_id)
            return lease if lease is not None and not lease.live(self._lease_now(conn, at)) else None

    # --- claiming an incident ------------------------------------------------------------------------------
    def claim_incident(self, incident_id: int, flow_run_id: str, at: datetime | None = None) -> bool:
        """open → acting for this flow run, or a takeover from a gone holder (see `claim`). False if another live
        run (or one without a lease) holds it, or it is no longer open. The same run claiming again gets True."""
        return self.claim(incident_id, flow_run_id, at=at).claimed

    def claim(self, incident_id: int, holder: str, *, at: datetime | None = None) -> Claim:
        """May `holder` act on the incident? Open → acting for it; its own claim again → yes; held by a run whose
        lease has expired → taken over (recorded, the gone run's leftovers settled); otherwise no, with who holds
        it and that holder's lease (None: a holder without one, for the caller to judge)."""
        require_text(holder, "holder")
        i = schema.incidents.c
        with self._write() as conn:
            now = self._lease_now(conn, at)
            if conn.execute(
                update(schema.incidents)
                .where(i.id == incident_id, i.status == IncidentStatus.OPEN.value)
                .values(status=IncidentStatus.ACTING.value, flow_run_id=holder)
            ).rowcount == 1:
                return Claim(True, holder, IncidentStatus.ACTING)
            rec = self._incident(conn, incident_id)
            current = rec.flow_run_id or ""
            if rec.status is not IncidentStatus.ACTING:
                return Claim(False, current, rec.status)
            if current == holder:
                return Claim(True, holder, IncidentStatus.ACTING)
            lease = self._lease(conn, current) if current else None
            if lease is None or lease.live(now):
                return Claim(False, current, rec.status, holder_lease=lease)
            why = f"run {current} {gone_since(lease)}"
            return self._take_over(conn, rec, holder, lease, why, now)

    def take_over_incident(self, incident_id: int, holder: str, *, expected_holder: str | None, reason: str,
                           holder_over: bool, at: datetime | None = None) -> Claim:
        """Hand the incident to `holder` if `expected_holder` still holds it (any status: a person's run re-opens a
        settled one). For holders without a lease, judged by the caller from Prefect: `holder_over` says the
        previous run has ended, so what it left running is settled; otherwise (a person re-opening an incident
        whose last run may still be waiting) only the incident changes hands."""
        require_text(holder, "holder")
        with self._write() as conn:
            now = self._lease_now(conn, at)
            rec = self._incident(conn, incident_id)
            if (rec.flow_run_id or None) != (expected_holder or None):
                return Claim(False, rec.flow_run_id or "", rec.status)
            lease = self._lease(conn, expected_holder) if expected_holder else None
            return self._take_over(conn, rec, holder, lease, reason, now, holder_over=holder_over)

    def _take_over(self, conn: Connection, rec: IncidentRecord, holder: str, gone: LeaseRecord | None, why: str,
                   now: datetime, *, holder_over: bool = True) -> Claim:
        i = schema.incidents.c
        previous = rec.flow_run_id
        same = i.flow_run_id.is_(None) if previous is None else i.flow_run_id == previous
        if conn.execute(
            update(schema.incidents)
            .where(i.id == rec.id, same, i.status == rec.status.value)
            .values(status=IncidentStatus.ACTING.value, flow_run_id=holder, resolved_at=None,
                    detail=f"taken over by {holder}: {why}"[:2000])
        ).rowcount != 1:  # another claimer got there first (PostgreSQL; SQLite serialises writers)
            now_rec = self._incident(conn, rec.id)
            return Claim(False, now_rec.flow_run_id or "", now_rec.status)
        abandoned, reaped = self._settle_gone(conn, rec, previous if holder_over else None,
                                              f"taken over by {holder}: {why}", now)
        self._note(conn, rec, TAKEOVER_KIND, holder, now, {
            "from": previous, "why": why, "abandoned": list(abandoned), "reaped": list(reaped),
            "lease_expired_at": gone.expires_at.isoformat() if gone else None})
        return Claim(True, holder, IncidentStatus.ACTING, took_over_from=previous, holder_lease=gone,
                     abandoned=abandoned, reaped=reaped)

    def _settle_gone(self, conn: Connection, rec: IncidentRecord, gone_holder: str | None, why: str,
                     now: datetime) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """What the incident's gone runs left behind. `gone_holder` (None: the previous holder may be alive) is
        over, and so is every run whose lease has run out: their running actions → failed ("abandoned"), so a
        replay acts again; pending approvals they wait on → closed (nobody waits any more); their leases → ended.
        A run with a live lease is never touched. Returns (abandoned action ids, ended run ids)."""
        a, p = schema.actions.c, schema.approvals.c
        running = []
        if gone_holder is not None:
            running = [r.id for r in conn.execute(
                select(a.id).where(a.incident_id == rec.id, a.finished_at.is_(None),
                                   a.outcome == ActionOutcome.RUNNING.value))]
        if running:
            conn.execute(update(schema.actions).where(a.id.in_(running)).values(
                outcome=ActionOutcome.FAILED.value, finished_at=now, error=f"{ABANDONED}{why}"[:2000]))
        runs = {gone_holder} if gone_holder else set()
        for ap in conn.execute(select(p.id, p.flow_run_id).where(p.incident_id == rec.id, p.decision.is_(None))):
            lease = self._lease(conn, ap.flow_run_id)
            if lease is not None and lease.live(now):
                continue
            if ap.flow_run_id == gone_holder or lease is not None:
                conn.execute(update(schema.approvals).where(p.id == ap.id).values(
                    decision="timeout", decided_by=SETTLED_BY, decided_at=now,
                    reason=f"the run waiting for this answer ({ap.flow_run_id}) is gone: {why}"[:2000]))
                runs.add(ap.flow_run_id)
        reaped = tuple(sorted(r for r in runs if not self._live(conn, r, now) and self._end(conn, r, f"gone: {why}", now)))
        return tuple(running), reaped

    def _live(self, conn: Connection, run_id: str, now: datetime) -> bool:
        lease = self._lease(conn, run_id)
        return lease is not None and lease.live(now)

    @staticmethod
    def _note(conn: Connection, rec: IncidentRecord, kind: str, by: str, now: datetime, detail: dict) -> None:
        conn.execute(schema.actions.insert().values(
            kind=kind, node=rec.node, incident_id=rec.id, requested_by=by, dry_run=False, started_at=now,
            finished_at=now, outcome=ActionOutcome.SUCCEEDED.value, error="", detail=detail, idempotency_key=None))

    # --- the watchdog's side -------------------------------------------------------------------------------
    def stranded_incidents(self, *, at: datetime | None = None, limit: int = 100
                           ) -> list[tuple[IncidentRecord, LeaseRecord]]:
        """Incidents `acting` under a run whose lease has expired or ended, oldest first, with that lease."""
        i, r = schema.incidents.c, schema.run_leases.c
        with self._read() as conn:
            now = self._lease_now(conn, at)
            q = (select(schema.incidents, schema.run_leases)
                 .join(schema.run_leases, r.run_id == i.flow_run_id)
                 .where(i.status == IncidentStatus.ACTING.value, r.expires_at <= now)
                 .order_by(i.id).limit(limit))
            return [(incident_record(row), lease_record(row)) for row in conn.execute(q)]

    def gone_runs(self, *, at: datetime | None = None, limit: int = 100) -> list[LeaseRecord]:
        """Runs whose lease expired without the run ending it (their process died), not yet reaped."""
        r = schema.run_leases.c
        with self._read() as conn:
            now = self._lease_now(conn, at)
            q = (select(schema.run_leases).where(r.ended_at.is_(None), r.expires_at <= now)
                 .order_by(r.expires_at).limit(limit))
            return [lease_record(row) for row in conn.execute(q)]

    def reannounces(self, incident_id: int) -> int:
        """How often the watchdog has re-announced this incident."""
        a = schema.actions.c
        with self._read() as conn:
            return conn.execute(select(func.count()).where(
                a.incident_id == incident_id, a.kind == REANNOUNCE_KIND)).scalar_one()

    def reannounce_incident(self, incident_id: int, gone_holder: str, mark: str, *, reason: str, by: str,
                            at: datetime | None = None, detail: dict | None = None) -> bool:
        """acting under the gone `gone_holder` → open, announced as `mark` (a new run claims it). False if the
        incident moved on meanwhile (taken over, settled) or its holder is alive after all."""
        return self._release_stranded(incident_id, gone_holder, IncidentStatus.OPEN, mark, reason, by,
                                      REANNOUNCE_KIND, at, detail)

    def escalate_stranded(self, incident_id: int, gone_holder: str, *, reason: str, by: str,
                          at: datetime | None = None, detail: dict | None = None) -> bool:
        """acting under the gone `gone_holder` → escalated: a person owns it now. False if it moved on meanwhile."""
        return self._release_stranded(incident_id, gone_holder, IncidentStatus.ESCALATED, gone_holder, reason, by,
                                      STRANDED_KIND, at, detail)

    def _release_stranded(self, incident_id: int, gone_holder: str, status: IncidentStatus, holder: str,
                          reason: str, by: str, kind: str, at: datetime | None, detail: dict | None) -> bool:
        require_text(gone_holder, "gone_holder")
        i = schema.incidents.c
        with self._write() as conn:
            now = self._lease_now(conn, at)
            lease = self._lease(conn, gone_holder)
            if lease is None or lease.live(now):
                return False
            if conn.execute(
                update(schema.incidents)
                .where(i.id == incident_id, i.status == IncidentStatus.ACTING.value, i.flow_run_id == gone_holder)
                .values(status=status.value, flow_run_id=holder, detail=reason[:2000])
            ).rowcount != 1:
                return False
            rec = self._incident(conn, incident_id)
            abandoned, reaped = self._settle_gone(conn, rec, gone_holder, reason, now)
            self._note(conn, rec, kind, by, now, (detail or {}) | {
                "from": gone_holder, "why": reason, "abandoned": list(abandoned), "reaped": list(reaped),
                "lease_expired_at": lease.expires_at.isoformat()})
            return True


class LeaseKeeper:
    """Keeps the leases of the runs this process works on alive: one daemon thread renews them every
    `renew_seconds`. `hold`/`release` nest (a run paused for an approval holds twice). A renewal that finds the
    lease expired or ended marks the run lost: `check` then raises LeaseLost, so it stops acting (another run may
    have its incident by now)."""

    def __init__(self, ledger, *, ttl_seconds: float, renew_seconds: float, process: str | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """`monotonic`: how this keeper measures the age of a renewal (a test's clock; the leases themselves are
        on the ledger's clock)."""
        self.ledger = ledger
        self._monotonic = monotonic
        self.ttl_seconds, self.renew_seconds = float(ttl_seconds), float(renew_seconds)
        self.process = process or process_label()
        self._held: dict[str, int] = {}
        self._good: dict[str, float] = {}  # run id → monotonic time just before its last successful renewal
        self._lost: dict[str, str] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, run_id: str) -> None:
        with self._lock:
            n = self._held.get(run_id, 0)
            self._held[run_id] = n + 1
        if n:
            return
        t0 = self._monotonic()
        try:
            self.ledger.start_lease(run_id, ttl_seconds=self.ttl_seconds, process=self.process)
        except BaseException:
            with self._lock:
                self._held.pop(run_id, None)
            raise
        with self._lock:
            self._good[run_id] = t0
            self._lost.pop(run_id, None)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="lease-keeper", daemon=True)
                self._thread.start()

    def release(self, run_id: str, *, reason: str = "finished") -> None:
        """One hold less; at the last, stop renewing and end the lease: the run holds nothing from now on (an
        incident it leaves `acting` is taken over at once), and it is not mistaken for a dead process."""
        with self._lock:
            n = self._held.get(run_id, 0) - 1
            if n > 0:
                self._held[run_id] = n
                return
            self._held.pop(run_id, None)
            self._good.pop(run_id, None)
            lost = self._lost.pop(run_id, None)
        try:
            self.ledger.end_lease(run_id, reason=reason if lost is None else f"{reason} after losing its lease")
        except Exception as exc:  # it expires by itself within ttl_seconds
            log.warning("could not end the lease of run %s: %s", run_id, exc)

    def holds(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._held

    def check(self, run_id: str) -> None:
        """Raise LeaseLost if this run's lease is gone. Free while the background renewals succeed; if the last
        one is older than half the lease, renew now (the takeover of a gone run waits for the full lease)."""
        with self._lock:
            if run_id not in self._held:
                return
            lost, good = self._lost.get(run_id), self._good.get(run_id, 0.0)
        if lost is None and self._monotonic() - good > self.ttl_seconds / 2:
            self._renew(run_id)
            with self._lock:
                lost = self._lost.get(run_id)
        if lost is not None:
            raise LeaseLost(f"run {run_id} lost its lease: {lost}; it stops here")

    def renew_now(self) -> None:
        # Only runs whose lease has started (`_good`): a hold still writing its lease would fail its renewal
        # (no row yet, or the row of an earlier attempt that ended) and be marked lost under a live lease.
        with self._lock:
            runs = [r for r in self._held if r not in self._lost and r in self._good]
        for run_id in runs:
            self._renew(run_id)

    def _renew(self, run_id: str) -> None:
        t0 = self._monotonic()
        try:
            ok = self.ledger.renew_lease(run_id, ttl_seconds=self.ttl_seconds)
        except Exception as exc:  # ledger down: the lease may still be valid; the next round tries again
            log.warning("could not renew the lease of run %s: %s", run_id, exc)
            return
        lease = None if ok else self.ledger.get_lease(run_id)
        with self._lock:
            if run_id not in self._held:
                return
            if ok:
                self._good[run_id] = t0
            elif run_id not in self._lost:
                why = gone_since(lease) if lease else "its lease row is missing"
                self._lost[run_id] = why
                log.error("run %s lost its lease (%s): it stops acting; another run may hold its incident now",
                          run_id, why)

    def _loop(self) -> None:
        while True:
            with self._lock:
                if not self._held:
                    self._thread = None
                    return
            self.renew_now()
            self._wake.wait(self.renew_seconds)
            self._wake.clear()
