"""The breaker board: per-scope breaker states, failure windows and remediations in flight.

State only — the decision that reads and changes it is `remedy.safety.breaker.decide`. The board serialises to a
dict (the flow keeps it in the ledger) and can be rebuilt from the ledger's decisions, transitions and outcomes;
approvals, manual opens, probe outcomes and cool-downs are the board's own methods.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from remedy.config import CapacityBudget
from remedy.domain.durations import human_duration
from remedy.errors import RemedyError
from remedy.safety.scopes import (
    AUTOMATION,
    NOT_A_NEW_FAILURE,
    BreakerState,
    BreakerTransition,
    Decision,
    require_aware,
    scope_key,
    scopes_of,
    split_key,
)
from remedy.settings.safety import BreakerSettings

CLUSTER = scope_key("cluster", "cluster")


class BreakerError(RemedyError):
    """An operator request the breaker board cannot carry out (unknown scope, nothing in flight, …)."""


@dataclass
class ScopeStatus:
    """A scope whose breaker is not closed (closed scopes are not stored)."""

    state: BreakerState
    since: datetime
    reason: str
    manual: bool = False  # opened by a person: only a person closes it, no cool-down
    probe_node: str | None = None
    quiet_since: datetime | None = None  # latest failure seen in this state (the cool-down counts from it)

    def __post_init__(self) -> None:
        if self.quiet_since is None or self.quiet_since < self.since:
            self.quiet_since = self.since


Entry = tuple[datetime, str, tuple[str, ...]]  # (failure time, node, every scope key of that node)


@dataclass
class InFlight:
    """A remediation automation started and has not heard the end of."""

    at: datetime
    needs_spare: bool
    out_of_service: bool = True


def human_window(seconds: float) -> str:
    return human_duration(seconds)


def scope_label(key: str) -> str:
    kind, name = split_key(key)
    return "the cluster" if kind == "cluster" else f"{kind} {name}"


class BreakerBoard:
    """State of every scope's breaker, the failure windows and the remediations in flight."""

    def __init__(self, settings: BreakerSettings | None = None, budget: CapacityBudget | None = None) -> None:
        self.settings = settings or BreakerSettings()
        self.budget = budget or CapacityBudget()
        self.status: dict[str, ScopeStatus] = {}
        self.windows: dict[str, list[Entry]] = {}
        self.active: dict[str, InFlight] = {}
        # Closing a breaker (approval or successful probe) forgets the failures of its nodes seen up to then, in
        # every scope: they are explained, so the old storm must not re-trip the rack — or its switch or PDU —
        # on the next single failure.
        self.forget_before: dict[str, datetime] = {}

    # ---- reading -------------------------------------------------------------------------------------------
    def state_of(self, scope: str) -> BreakerState:
        key = self.resolve(scope) if ":" not in scope else scope
        st = self.status.get(key)
        return st.state if st else BreakerState.CLOSED

    def not_closed(self) -> list[str]:
        return sorted(self.status)

    def is_active(self, node: str) -> bool:
        return node in self.active

    def failures_in_window(self, scope: str) -> int:
        return len({e[1] for e in self.windows.get(scope, [])})

    def allowed(self, key: str, size: int) -> tuple[int, str]:
        """Most distinct failed nodes the scope tolerates in its window, and why (count vs percent)."""
        kind, _ = split_key(key)
        limit = self.settings.limit(kind)
        by_pct = max(1, math.floor(limit.max_percent * size / 100.0 + 1e-9))
        allowed = min(limit.max_failures, by_pct)
        return allowed, f"min of {limit.max_failures} nodes and {limit.max_percent:g}% of {size}"

    def resolve(self, scope: str) -> str:
        """'rack:rack-3', or a bare name that matches exactly one scope the board knows."""
        if ":" in scope:
            split_key(scope)
            return scope
        known = set(self.status) | set(self.windows) | set(self.forget_before) | {CLUSTER}
        matches = sorted(k for k in known if split_key(k)[1] == scope)
        if len(matches) != 1:
            hint = "no scope has that name" if not matches else f"ambiguous: {', '.join(matches)}"
            raise BreakerError(f"unknown breaker scope {scope!r} ({hint}); use kind:name, e.g. rack:rack-3")
        return matches[0]

    # ---- state changes -------------------------------------------------------------------------------------
    def _move(
        self, key: str, to: BreakerState, reason: str, now: datetime, *, by: str = AUTOMATION, node: str | None = None
    ) -> BreakerTransition:
        kind, name = split_key(key)
        t = BreakerTransition(kind, name, self.state_of(key), to, reason, now, by, node)
        self._apply(t)
        return t

    def _apply(self, t: BreakerTransition) -> None:
        if t.to_state is BreakerState.CLOSED:
            self.status.pop(t.key, None)
            self.forget_before[t.key] = max(t.at, self.forget_before.get(t.key, t.at))
            for key, window in self.windows.items():
                self.windows[key] = [e for e in window if e[0] > t.at or t.key not in e[2]]
        else:
            manual = t.to_state is BreakerState.OPEN and t.by != AUTOMATION
            self.status[t.key] = ScopeStatus(t.to_state, t.at, t.reason, manual)

    def _record(self, key: str, at: datetime, node: str, scopes: tuple[str, ...]) -> None:
        """Add a failure to a scope's window, newest-relative pruning so a replay prunes identically."""
        if any(at <= self.forget_before[k] for k in scopes if k in self.forget_before):
            return  # seen before a breaker covering this node was re-closed: already explained
        kind, _ = split_key(key)
        window = self.windows.setdefault(key, [])
        window.append((at, node, scopes))
        window.sort()
        horizon = window[-1][0] - timedelta(seconds=self.settings.limit(kind).window_seconds)
        self.windows[key] = [e for e in window if e[0] > horizon]
        st = self.status.get(key)
        if st is not None and st.quiet_since is not None and at > st.quiet_since:
            st.quiet_since = at

    def _cool_down(self, key: str, now: datetime) -> BreakerTransition | None:
        st = self.status.get(key)
        if st is None or st.state is not BreakerState.OPEN or st.manual:
            return None
        cooldown = self.settings.limit(split_key(key)[0]).cooldown_seconds
        if cooldown is None:
            return None
        if now - (st.quiet_since or st.since) < timedelta(seconds=cooldown):
            return None
        return self._move(
            key,
            BreakerState.HALF_OPEN,
            f"no new failure in {scope_label(key)} for {human_window(cooldown)} (cool-down): letting one remediation "
            "through as a probe",
            now,
        )

    def cool_downs(self, now: datetime) -> list[BreakerTransition]:
        """Move every quiet open scope to half-open now (a periodic flow calls this so the UI is current)."""
        require_aware(now, "cool-down check time")
        return [t for key in sorted(self.status) if (t := self._cool_down(key, now)) is not None]

    def describe(self) -> list[dict]:
        """One row per scope that is not closed, for a table artifact: scope, state, since, probe, reason."""
        return [
            {
                "scope": key,
                "state": st.state.value,
                "since": st.since.isoformat(),
                "probe": st.probe_node or "",
                "opened_by_person": st.manual,
                "reason": st.reason,
            }
            for key, st in sorted(self.status.items())
        ]

    def approve_close(self, scope: str, by: str, now: datetime) -> list[BreakerTransition]:
        """A person re-closes a scope's breaker (open or half-open); closed stays closed (no transition)."""
        if not by or not by.strip():
            raise BreakerError("approving a breaker close needs the approver's name")
        require_aware(now, "approval time")
        key = self.resolve(scope)
        if self.state_of(key) is BreakerState.CLOSED:
            return []
        return [self._move(key, BreakerState.CLOSED, f"closed by {by} after review", now, by=by)]

    def open(self, scope: str, by: str, reason: str, now: datetime) -> list[BreakerTransition]:
        """A person pauses automation in a scope; only `approve_close` re-closes it (no cool-down)."""
        if not by or not by.strip():
            raise BreakerError("opening a breaker by hand needs the operator's name")
        require_aware(now, "open time")
        key = self.resolve(scope)
        st = self.status.get(key)
        if st is not None and st.state is BreakerState.OPEN and st.manual:
            return []
        return [self._move(key, BreakerState.OPEN, f"opened by {by}: {reason or 'no reason given'}", now, by=by)]

    def record_outcome(self, node: str, succeeded: bool, now: datetime) -> list[BreakerTransition]:
        """The remediation of `node` ended; if it was a half-open probe, close (success) or re-open (failure)."""
        require_aware(now, "outcome time")
        if node not in self.active:
            raise BreakerError(f"no remediation of {node} is in flight on the breaker board")
        del self.active[node]
        out: list[BreakerTransition] = []
        for key in sorted(self.status):
            st = self.status[key]
            if st.state is not BreakerState.HALF_OPEN or st.probe_node != node:
                continue
            if succeeded:
                out.append(self._move(key, BreakerState.CLOSED, f"probe remediation of {node} succeeded", now, node=node))
            else:
                out.append(
                    self._move(
                        key, BreakerState.OPEN, f"probe remediation of {node} failed: the cause persists", now, node=node
                    )
                )
        return out

    # ---- persistence ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "version": 1,
            "status": {
                k: {
                    "state": s.state.value,
                    "since": s.since.isoformat(),
                    "reason": s.reason,
                    "manual": s.manual,
                    "probe_node": s.probe_node,
                    "quiet_since": (s.quiet_since or s.since).isoformat(),
                }
                for k, s in sorted(self.status.items())
            },
            "windows": {k: [[a.isoformat(), n, list(sc)] for a, n, sc in w] for k, w in sorted(self.windows.items()) if w},
            "forget_before": {k: v.isoformat() for k, v in sorted(self.forget_before.items())},
            "active": {
                n: {"at": f.at.isoformat(), "needs_spare": f.needs_spare, "out_of_service": f.out_of_service}
                for n, f in sorted(self.active.items())
            },
        }

    @classmethod
    def from_dict(
        cls, data: Mapping, settings: BreakerSettings | None = None, budget: CapacityBudget | None = None
    ) -> BreakerBoard:
        if data.get("version") != 1:
            raise BreakerError(f"breaker board: unsupported format version {data.get('version')!r} (expected 1)")
        board = cls(settings, budget)
        try:
            for k, s in data.get("status", {}).items():
                split_key(k)
                board.status[k] = ScopeStatus(
                    BreakerState(s["state"]),
                    datetime.fromisoformat(s["since"]),
                    s["reason"],
                    bool(s.get("manual", False)),
                    s.get("probe_node"),
                    datetime.fromisoformat(s["quiet_since"]) if s.get("quiet_since") else None,
                )
            for k, w in data.get("windows", {}).items():
                split_key(k)
                board.windows[k] = sorted((datetime.fromisoformat(a), n, tuple(sc)) for a, n, sc in w)
            board.forget_before = {k: datetime.fromisoformat(v) for k, v in data.get("forget_before", {}).items()}
            board.active = {
                n: InFlight(datetime.fromisoformat(f["at"]), bool(f["needs_spare"]), bool(f.get("out_of_service", True)))
                for n, f in data.get("active", {}).items()
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise BreakerError(f"breaker board: malformed saved state ({exc})") from None
        return board

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BreakerBoard) and self.to_dict() == other.to_dict()

    @classmethod
    def rebuild(
        cls,
        decisions: Iterable[Decision],
        transitions: Iterable[BreakerTransition],
        outcomes: Iterable[tuple[str, datetime]] = (),
        settings: BreakerSettings | None = None,
        budget: CapacityBudget | None = None,
        *,
        in_flight: Iterable[Decision] | None = None,
    ) -> BreakerBoard:
        """Rebuild from the ledger: every recorded decision and every transition (in recorded order), plus the
        (node, finished_at) of each remediation outcome. Equals the live board that produced them.

        `in_flight`: the acted decisions whose remediation has not ended, when the caller read them directly
        (remedy.safety.history reads only a window of decisions): they make the in-flight set and may be a
        half-open scope's probe, but count in no failure window."""
        board = cls(settings, budget)
        decisions = list(decisions)
        known = None if in_flight is None else list(in_flight)
        for t in transitions:  # states first: closes decide which failures are already forgotten
            board._apply(t)
        acted: dict[str, Decision] = {}
        for d in decisions:
            if d.skip is not None and d.skip.reason in NOT_A_NEW_FAILURE:
                continue  # the live board records nothing for a duplicate
            scopes = tuple(scopes_of(d.failure.topology))
            for key in scopes:
                if key != CLUSTER or d.counted_in_cluster:
                    # a failure from before the scope's current state has at <= since: it cannot move quiet_since
                    board._record(key, d.failure.at, d.node, scopes)
            if d.acted:
                acted[d.node] = d
        finished: dict[str, datetime] = {}
        for node, at in outcomes:
            finished[node] = max(at, finished.get(node, at))
        if known is not None:
            acted = {d.node: d for d in known if d.acted}
            finished = {}
            decisions = sorted({(d.node, d.at): d for d in (*decisions, *known)}.values(), key=lambda d: d.at)
        for node, d in acted.items():
            if node not in finished or finished[node] < d.at:
                board.active[node] = InFlight(d.at, d.failure.needs_spare, d.failure.takes_node_out)
        for key, st in board.status.items():
            if st.state is BreakerState.HALF_OPEN:
                probes = [d for d in decisions if d.acted and key in d.probe_for and d.at >= st.since]
                st.probe_node = probes[0].node if probes else None
        return board
