"""Lemon scoring: which nodes keep failing for reasons of their own, with the evidence that says so.

A lemon passes health checks when idle and fails again under real load (seed 000: removing them cut Meta's large-job
failure rate from 14% to 4%). Four independent signals are scored per node over the lookback window:

- recurrence: fail → passing validation → fail again within `recurrence_gap_days` (the lemon signature);
- excess rate: incidents vs the rest of the fleet's rate × the node's own exposure, one-sided Poisson test, so a
  node that simply ran more jobs is not a lemon;
- repeat XID: the same XID on the same GPU again and again;
- exclusion share: the node holds a large share of all session exclusions (seed 002: top 3 of 63 held > 50%).

Only node-attributable failures are scored (`remedy.lemon.attribution`: node-level XIDs, hardware signals, failed
health checks; not application errors, job symptoms, re-sent alerts, incidents closed as ignored or duplicate, or
those whose cause was the job), and a GPU's failures follow it to the node it is in now (`remedy.lemon.follow`).
Incidents that hit several nodes at once (rack power, a switch) are then set aside as shared events.
A node is a lemon candidate when at least `min_signals` signals fire: any single one also fits a busy or an
operator-isolated healthy node. No I/O, no Prefect: `now` is passed in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from remedy.domain.durations import days, human_duration
from remedy.lemon.attribution import NODE_ATTRIBUTABLE, RESENT, CountingRule, failed_checks
from remedy.lemon.follow import follow_gpus
from remedy.lemon.poisson import poisson_sf
from remedy.lemon.records import ExclusionRecord, IncidentRecord, NodeHistory, ValidationRecord, _aware
from remedy.settings.lemon import LemonSettings

RECURRENCE, EXCESS_RATE, REPEAT_XID, EXCLUSION_SHARE = "recurrence", "excess-rate", "repeat-xid", "exclusion-share"


@dataclass(frozen=True)
class Evidence:
    """One dated fact behind a signal, in words an operator can check against the ledger."""

    time: datetime
    kind: str  # incident | validation | exclusion
    detail: str
    ref: str = ""


@dataclass(frozen=True)
class Signal:
    name: str
    fired: bool
    value: float
    threshold: float
    summary: str
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
class LemonVerdict:
    node: str
    candidate: bool
    signals: tuple[Signal, ...]
    incidents_counted: int
    exposure_days: float
    expected_incidents: float
    p_value: float
    set_aside: tuple[IncidentRecord, ...]  # incidents that were part of a shared (correlated) event
    reason: str
    excluded: tuple[tuple[IncidentRecord, str], ...] = ()  # not node-attributable, with the reason

    @property
    def fired(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.signals if s.fired)

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        """Evidence of the signals that fired, oldest first; one line per fact (the first signal's wording wins)."""
        seen: dict[tuple, Evidence] = {}
        for e in (e for s in self.signals if s.fired for e in s.evidence):
            seen.setdefault((e.time, e.kind, e.ref, e.detail if not e.ref else ""), e)
        return tuple(sorted(seen.values(), key=lambda e: e.time))

    def signal(self, name: str) -> Signal:
        return next(s for s in self.signals if s.name == name)


def _gpu_text(i: IncidentRecord) -> str:
    if i.gpu_id:
        kind = "serial" if i.gpu_serial else "UUID"
        return f"GPU {i.gpu} ({kind} {i.gpu_id})" if i.gpu is not None else f"GPU {kind} {i.gpu_id}"
    return f"GPU {i.gpu}" if i.gpu is not None else ""


def _incident_text(i: IncidentRecord) -> str:
    parts = [i.signal]
    if i.xid is not None:
        parts.append(f"XID {i.xid}")
    if _gpu_text(i):
        parts.append(_gpu_text(i))
    if i.seen_on:
        parts.append(f"(on {i.seen_on}, before the GPU moved here)")
    return " ".join(parts)


def _incident_evidence(i: IncidentRecord) -> Evidence:
    return Evidence(i.time, "incident", _incident_text(i), i.ref)


def _counted_exclusions(h: NodeHistory, s: LemonSettings) -> tuple[ExclusionRecord, ...]:
    # Deliberate isolation is a decision already taken, not fresh evidence (seed 002 §4.3.1: gpu074's exclusions were
    # 100% operator isolation); counting it would make the scorer echo the operator.
    return h.exclusions if s.exclusion_count_deliberate else tuple(e for e in h.exclusions if not e.deliberate)


def correlated_incidents(histories: Sequence[NodeHistory], settings: LemonSettings) -> set[tuple[str, IncidentRecord]]:
    """(node, incident) pairs that fall inside a shared event: ≥ correlated_min_nodes distinct nodes within ± window."""
    window = timedelta(minutes=settings.correlated_window_minutes)
    events = sorted(((i.time, h.node, i) for h in histories for i in h.incidents), key=lambda e: e[0])
    out: set[tuple[str, IncidentRecord]] = set()
    lo = hi = 0
    for t, node, inc in events:
        while events[lo][0] < t - window:
            lo += 1
        while hi < len(events) and events[hi][0] <= t + window:
            hi += 1
        if len({n for _, n, _ in events[lo:hi]}) >= settings.correlated_min_nodes:
            out.add((node, inc))
    return out


def recurrence_cycles(
    incidents: Sequence[IncidentRecord], validations: Sequence[ValidationRecord], gap: timedelta
) -> list[tuple[IncidentRecord, ValidationRecord, IncidentRecord]]:
    """Fail → passing validation → fail-again-within-gap cycles, in time order.

    The gap runs from the last pass before the failure again: that is the check that sent the node back under
    load. A spare is re-validated while it waits (spare cycling), and a spare fixed in place is used last for
    `spares.recently_fixed_days` (as long as this gap by default): timed from the first pass, a lemon that failed
    two days after going back to work would never count."""
    timeline = sorted(
        [(i.time, 1, i) for i in incidents] + [(v.time, 0, v) for v in validations if v.passed],
        key=lambda e: (e[0], e[1]),
    )
    cycles: list[tuple[IncidentRecord, ValidationRecord, IncidentRecord]] = []
    last_fail: IncidentRecord | None = None
    passed: ValidationRecord | None = None
    for _, _order, rec in timeline:
        if isinstance(rec, IncidentRecord):
            if last_fail is not None and passed is not None and rec.time - passed.time <= gap:
                cycles.append((last_fail, passed, rec))
            last_fail, passed = rec, None
        elif last_fail is not None:
            passed = rec  # the latest pass since the failure is the one that let it back in
    return cycles


def retirements_allowed(recent_retirements: Iterable[datetime], now: datetime, settings: LemonSettings) -> int:
    """How many more nodes may be retired now without exceeding retirement_budget per retirement_window_days."""
    _aware("now", now)
    since = now - timedelta(days=settings.retirement_window_days)
    used = 0
    for t in recent_retirements:
        _aware("retirement", t)
        if since < t <= now:
            used += 1
    return max(0, settings.retirement_budget - used)


def count_failures(
    histories: Sequence[NodeHistory], rule: CountingRule, settings: LemonSettings, inventory=None
) -> tuple[list[NodeHistory], dict[str, list[tuple[IncidentRecord, str]]]]:
    """Histories holding only the failures `rule` counts (GPUs' records moved to where the GPUs are now), and per
    node the incidents left out with the reason."""
    if rule.follow_gpus:
        histories = follow_gpus(histories, inventory)
    else:
        histories = [h for h in histories if h.in_fleet]
    seen: set[str] = set()
    out, excluded = [], {}
    for h in histories:
        counted, left_out = [], []
        for i in sorted(h.incidents, key=lambda i: i.time):
            why = rule.attribute(i)
            if why is None and rule.dedupe_occurrences and i.occurrence:
                why = RESENT if i.occurrence in seen else None
                seen.add(i.occurrence)
            (left_out.append((i, why)) if why else counted.append(i))
        if rule.count_failed_checks:
            counted += failed_checks(h.validations, counted, timedelta(hours=settings.check_confirms_hours))
        out.append(NodeHistory(h.node, h.exposure_days, tuple(sorted(counted, key=lambda i: i.time)), h.validations,
                               h.exclusions))
        excluded[h.node] = left_out
    return out, excluded


def score_fleet(
    histories: Sequence[NodeHistory],
    now: datetime,
    settings: LemonSettings | None = None,
    *,
    inventory: Mapping[str, str] | None = None,
    rule: CountingRule = NODE_ATTRIBUTABLE,
) -> list[LemonVerdict]:
    """Score every node in the fleet against the rest; strongest candidates first.

    `inventory`: GPU serial or UUID → the node it is in now (NVML or exporter labels), where the caller knows it;
    without it a GPU is where its newest incident saw it. `rule`: which failures count (see `remedy.lemon.attribution`).
    """
    settings = settings or LemonSettings()
    _aware("now", now)
    names = [h.node for h in histories]
    dupes = sorted(n for n, c in Counter(names).items() if c > 1)
    if dupes:
        raise ValueError(f"score_fleet: duplicate node histories: {', '.join(dupes)}")
    if not any(h.in_fleet for h in histories):
        raise ValueError("score_fleet: no node histories given")
    since = now - timedelta(days=settings.lookback_days)
    windowed = [
        NodeHistory(
            h.node,
            h.exposure_days,
            tuple(i for i in h.incidents if since <= i.time <= now),
            tuple(v for v in h.validations if since <= v.time <= now),
            tuple(e for e in h.exclusions if since <= e.time <= now),
            h.in_fleet,
        )
        for h in histories
    ]
    windowed, excluded = count_failures(windowed, rule, settings, inventory)
    # Shared events are found among counted failures only: a lemon's fault crashes its whole job, and the job
    # symptoms on its neighbours (already left out) must not make the lemon's own failure look like a rack event.
    shared = correlated_incidents(windowed, settings)
    counted = {h.node: [i for i in h.incidents if (h.node, i) not in shared] for h in windowed}
    total_k = sum(len(v) for v in counted.values())
    total_exposure = sum(h.exposure_days for h in windowed)
    total_exclusions = sum(len(_counted_exclusions(h, settings)) for h in windowed)

    verdicts = []
    for h in windowed:
        k = len(counted[h.node])
        # Leave-one-out fleet rate: a lemon must not inflate the baseline it is tested against.
        rest_exposure = total_exposure - h.exposure_days
        rate = (total_k - k) / rest_exposure if rest_exposure > 0 else 0.0
        v = _score_node(h, counted[h.node], rate, total_exclusions, [i for i in h.incidents if (h.node, i) in shared],
                        settings)
        verdicts.append(replace(v, excluded=tuple(excluded[h.node])))
    verdicts.sort(key=lambda v: (not v.candidate, -len(v.fired), v.p_value, v.node))
    return verdicts


def _score_node(
    h: NodeHistory,
    incidents: list[IncidentRecord],
    fleet_rate: float,
    total_exclusions: int,
    set_aside: list[IncidentRecord],
    s: LemonSettings,
) -> LemonVerdict:
    incidents = sorted(incidents, key=lambda i: i.time)
    k = len(incidents)

    cycles = recurrence_cycles(incidents, h.validations, timedelta(days=s.recurrence_gap_days))
    cyc_ev: list[Evidence] = []
    for fail, ok, again in cycles:
        cyc_ev += [
            _incident_evidence(fail),
            Evidence(ok.time, "validation", f"passed {ok.check or 'validation'}", ok.ref),
            Evidence(again.time, "incident", f"failed again {human_duration(again.time - ok.time)} later: "
                     f"{_incident_text(again)}", again.ref),
        ]
    recurrence = Signal(
        RECURRENCE,
        len(cycles) >= s.recurrence_min_cycles,
        len(cycles),
        s.recurrence_min_cycles,
        f"{len(cycles)} fail → pass → fail cycle(s) within {days(s.recurrence_gap_days)}",
        tuple(dict.fromkeys(cyc_ev)),
    )

    mu = fleet_rate * h.exposure_days
    p = poisson_sf(k, mu)
    excess = Signal(
        EXCESS_RATE,
        k >= s.rate_min_incidents and p < s.rate_alpha,
        p,
        s.rate_alpha,
        f"{k} incident(s) in {h.exposure_days:g} node-days vs {mu:.2f} expected at the fleet rate "
        f"{fleet_rate:.4f}/node-day: P(X ≥ {k}) = {p:.2g}",
        tuple(_incident_evidence(i) for i in incidents),
    )

    # The same GPU is its serial/UUID where known (it may have sat at another index on another node), else its index.
    def gpu_key(i: IncidentRecord) -> str | None:
        return i.gpu_id or (f"index {i.gpu}" if i.gpu is not None else None)

    by_gpu_xid = Counter((gpu_key(i), i.xid) for i in incidents if gpu_key(i) is not None and i.xid is not None)
    (top, n_top) = by_gpu_xid.most_common(1)[0] if by_gpu_xid else ((None, None), 0)
    top_recs = [i for i in incidents if (gpu_key(i), i.xid) == top]
    repeat = Signal(
        REPEAT_XID,
        n_top >= s.repeat_xid_min,
        n_top,
        s.repeat_xid_min,
        f"XID {top[1]} on {_gpu_text(top_recs[-1])} {n_top} time(s)" if n_top else "no XID with a GPU recorded",
        tuple(_incident_evidence(i) for i in top_recs),
    )

    n_excl = len(_counted_exclusions(h, s))
    share = n_excl / total_exclusions if total_exclusions else 0.0
    deliberate = sum(e.deliberate for e in h.exclusions)
    which = "exclusions" if s.exclusion_count_deliberate else "non-deliberate exclusions"
    exclusion = Signal(
        EXCLUSION_SHARE,
        total_exclusions >= s.exclusion_min_total and share >= s.exclusion_share_min,
        share,
        s.exclusion_share_min,
        f"{n_excl} of {total_exclusions} {which} ({share:.0%}); {deliberate} deliberate isolation(s) seen",
        tuple(
            Evidence(e.time, "exclusion", f"excluded from {e.session or 'session'}" + (" (operator)" if e.deliberate else ""))
            for e in sorted(h.exclusions, key=lambda e: e.time)
        ),
    )

    signals = (recurrence, excess, repeat, exclusion)
    fired = [x.name for x in signals if x.fired]
    candidate = len(fired) >= s.min_signals
    if candidate:
        reason = f"lemon candidate: {len(fired)} of 4 signals ({', '.join(fired)})"
    elif fired:
        reason = f"not a lemon: only {', '.join(fired)} (needs {s.min_signals} signals)"
    else:
        reason = "not a lemon: no signal fired"
    return LemonVerdict(h.node, candidate, signals, k, h.exposure_days, mu, p, tuple(set_aside), reason)


def select_for_retirement(
    verdicts: Sequence[LemonVerdict], recent_retirements: Iterable[datetime], now: datetime, settings: LemonSettings
) -> tuple[list[LemonVerdict], list[LemonVerdict]]:
    """(retire now, deferred by the budget): candidates in score order, never more than retirements_allowed."""
    allowed = retirements_allowed(recent_retirements, now, settings)
    candidates = [v for v in verdicts if v.candidate]
    candidates.sort(key=lambda v: (-len(v.fired), v.p_value, v.node))
    return candidates[:allowed], candidates[allowed:]


def explain(v: LemonVerdict) -> str:
    """Plain-text account of a verdict for a Slack message, an artifact or `remedy lemon show`."""
    lines = [f"{v.node}: {v.reason}"]
    for sig in v.signals:
        lines.append(f"  [{'x' if sig.fired else ' '}] {sig.name}: {sig.summary}")
    if v.set_aside:
        lines.append(f"  set aside as shared events: {len(v.set_aside)} incident(s)")
    if v.excluded:
        why = Counter(reason for _, reason in v.excluded)
        lines.append(f"  not counted against the node: {len(v.excluded)} incident(s): "
                     + "; ".join(f"{n} {reason}" for reason, n in sorted(why.items(), key=lambda x: (-x[1], x[0]))))
    for e in v.evidence:
        lines.append(f"  {e.time:%Y-%m-%d %H:%M} {e.kind}: {e.detail}" + (f" ({e.ref})" if e.ref else ""))
    return "\n".join(lines)
