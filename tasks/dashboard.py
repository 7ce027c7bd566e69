"""The fleet dashboard's reads and the page it publishes.

Plain functions first (ledger rows in, rows and markdown out: tested by calling them), then one task per read,
named for what the operator sees. Reads only: the dashboard never changes the cluster or the ledger.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.domain.durations import human_duration
from remedy.domain.model import IncidentStatus, Node, NodeState

OPEN_STATUSES = (IncidentStatus.OPEN, IncidentStatus.ACTING, IncidentStatus.ESCALATED)
UNMANAGED = "unmanaged"  # a GPU node the ledger (or its label) does not place in any lifecycle state


# ---------------------------------------------------------------------- plain functions
def pool_counts(ledger_states: dict[str, str | None], live_labels: dict[str, str | None] | None) -> list[dict]:
    """One row per lifecycle state: nodes per the ledger, per the live `remedy.io/pool` label, and how many of
    them disagree (drift). `live_labels` None = the cluster could not be read."""
    led = Counter(s or UNMANAGED for s in ledger_states.values())
    live = Counter((live_labels or {}).get(n) or UNMANAGED for n in (live_labels or {}))
    drift: Counter[str] = Counter()
    if live_labels is not None:
        for name in set(ledger_states) | set(live_labels):
            a, b = ledger_states.get(name) or UNMANAGED, live_labels.get(name) or UNMANAGED
            if a != b:
                drift[a] += 1
    order = [s.value for s in NodeState] + [UNMANAGED]
    rows = []
    for state in order:
        if not (led[state] or live[state] or drift[state]):
            continue
        rows.append({"state": state, "ledger": led[state], "live labels": live[state] if live_labels is not None else None,
                     "drift": drift[state] if live_labels is not None else None})
    return rows


@dataclass(frozen=True)
class OpenBreaker:
    scope: str  # kind/scope, e.g. rack/rack-2
    state: str  # not closed: open or half-open


@dataclass(frozen=True)
class OpenIncident:
    id: int
    node: str
    signal: str  # with its XID, if any
    status: str
    since: str  # first seen, to the minute


@dataclass(frozen=True)
class LemonCandidate:
    node: str
    reason: str
    p_value: float


@dataclass(frozen=True)
class SparePool:
    """Enough ready spares for the replacement lead time (remedy.spares.pool.size_pool), and their spread."""

    ready: int
    target: int
    shortfall: int
    sizing: str  # the sizing in words
    warnings: list[str]  # too many in one rack, switch or PDU
    risk_at_ready: float | None = None
    held_as_lemons: list[str] = field(default_factory=list)  # in the pool, never handed out


@dataclass(frozen=True)
class JobFailures:
    """The training Job's failures against the limit that fails it whole (a Job's backoffLimit, a JobSet's
    failurePolicy.maxRestarts)."""

    name: str
    failed: int
    limit: int | None
    ignores_disruptions: bool
    warning: str | None
    counted: str = "failed pods"
    limit_name: str = "backoffLimit"


@dataclass(frozen=True)
class WaitingQuestion:
    """A run paused on a question nobody has answered yet: its kind, the node its incident is about ("–" when
    none), how long it has waited (operator words), the run to open in the UI."""

    run: str
    question: str
    node: str
    waiting: str


@dataclass(frozen=True)
class Dashboard:
    at: datetime
    pools: list[dict]  # pool_counts' rows: the pools table artifact as published
    breakers: list[OpenBreaker]
    incidents: list[OpenIncident]
    lemons: list[LemonCandidate]
    spares: SparePool
    notes: list[str]
    job: JobFailures | None = None  # the training Job's failure count against its backoffLimit
    waiting: list[WaitingQuestion] = field(default_factory=list)  # runs paused for a person's answer


def waiting_rows(approvals: list[Any], node_of: dict[int, str], now: datetime) -> list[WaitingQuestion]:
    """Runs paused on a question nobody has answered yet, oldest first: what the on-call person owes an answer to
    (the question's kind, the node its incident is about, how long it has waited, the run to open in the UI)."""
    rows = []
    for a in sorted((a for a in approvals if a.decision is None), key=lambda a: a.requested_at):
        rows.append(WaitingQuestion(a.flow_run_id, a.kind,
                                    node_of.get(a.incident_id, "–") if a.incident_id is not None else "–",
                                    human_duration((now - a.requested_at).total_seconds())))
    return rows


def backoff_warning(failed: int, limit: int, margin: int = 2) -> str | None:
    """The Job controller fails the whole Job when its failed pods exceed backoffLimit (default 6), and without a
    podFailurePolicy that ignores DisruptionTarget every drain, preemption and restart counts: warn before that."""
    left = limit - failed
    if left > margin:
        return None
    if left < 0:
        return f"{failed} failed pods, over its backoffLimit of {limit}: the Job has failed"
    return (f"{failed} failed pods of a backoffLimit of {limit}: {left} more drain(s) or restart(s) fail the whole "
            "Job — add a podFailurePolicy that ignores DisruptionTarget (docs/operations.md) or raise backoffLimit")


def dashboard_markdown(d: Dashboard) -> str:
    """The page the UI shows under the `fleet-dashboard` key, newest first in its history."""
    out = [f"# Fleet at {d.at:%Y-%m-%d %H:%M} UTC", ""]
    out += [f"> {n}" for n in d.notes] + ([""] if d.notes else [])
    out += ["## Pools", "", "| state | ledger | live labels | drift |", "|---|---:|---:|---:|"]
    out += [f"| {r['state']} | {r['ledger']} | {_or_dash(r['live labels'])} | {_or_dash(r['drift'])} |" for r in d.pools]
    out += ["", f"## Open breakers ({len(d.breakers)})", ""]
    out += [f"- **{b.scope}** {b.state}" for b in d.breakers] or ["All closed: automation may act."]
    out += ["", f"## Waiting for a person ({len(d.waiting)})", ""]
    if d.waiting:
        out += ["| question | node | waiting | run |", "|---|---|---|---|"]
        out += [f"| {w.question} | {w.node} | {w.waiting} | `{w.run}` |" for w in d.waiting]
        out.append("Answer in the run's Resume form or in Slack; `remedy breaker close SCOPE` answers the "
                   "questions waiting on that breaker.")
    else:
        out.append("Nobody: no run is paused for an answer.")
    out += ["", f"## Open incidents ({len(d.incidents)})", ""]
    if d.incidents:
        out += ["| id | node | signal | status | since |", "|---:|---|---|---|---|"]
        out += [f"| {i.id} | {i.node} | {i.signal} | {i.status} | {i.since} |" for i in d.incidents]
    else:
        out.append("None.")
    out += ["", f"## Lemon candidates ({len(d.lemons)})", ""]
    out += [f"- **{c.node}**: {c.reason}" for c in d.lemons] or ["None."]
    s = d.spares
    out += ["", "## Spare pool", "", f"{s.ready} ready, target {s.target}"
            + (f", **short by {s.shortfall}**" if s.shortfall else "") + f". {s.sizing}"]
    if s.held_as_lemons:
        out.append(f"- held back as lemon candidates (not handed out): {', '.join(s.held_as_lemons)} — "
                   "`remedy lemon clear NODE` when a person finds one sound")
    out += [f"- warning: {w}" for w in s.warnings]
    if d.job:
        j = d.job
        out += ["", "## Training job", "", f"{j.name}: {j.failed} {j.counted}, {j.limit_name} {j.limit}"
                + (" (failed pods from disruptions are ignored by its podFailurePolicy)" if j.ignores_disruptions
                   else "")]
        if j.warning:
            out.append(f"- **warning:** {j.warning}")
    return "\n".join(out) + "\n"


def _or_dash(v: Any) -> str:
    return "–" if v is None else str(v)


# ---------------------------------------------------------------------- tasks (reads)
@task(name="count_pools", cache_policy=NO_CACHE)
def count_pools() -> tuple[list[dict], list[str]]:
    """Pool counts from the ledger and the live node labels; an unreachable cluster is a note, not a failure."""
    led = runtime.ledger()
    ledger_states = {n.name: (n.state.value if n.state else None) for n in led.nodes()}
    notes: list[str] = []
    try:
        live = {n.name: (n.labels.get(runtime.settings().labels.pool) or None) for n in runtime.cluster().list_gpu_nodes()}
    except Exception as exc:  # the dashboard still shows the ledger's view
        live = None
        notes.append(f"live node labels unavailable: {exc}")
    return pool_counts(ledger_states, live), notes


@task(name="read_breakers", cache_policy=NO_CACHE)
def read_breakers() -> list[OpenBreaker]:
    """Breakers whose last recorded state is not closed (what a restarted gate resumes from)."""
    states = runtime.ledger().latest_breaker_states()
    return [OpenBreaker(f"{kind}/{scope}", state) for (kind, scope), state in sorted(states.items())
            if state != "closed"]


@task(name="list_waiting_for_a_person", cache_policy=NO_CACHE)
def list_waiting_for_a_person(now: datetime) -> list[WaitingQuestion]:
    """Approvals still pending in the ledger, with the node each incident is about."""
    led = runtime.ledger()
    pending = led.approvals(pending=True)
    node_of = {i.id: i.node for i in led.incidents(status=OPEN_STATUSES)}
    for a in pending:  # a question may outlive its incident's open status (a late re-check): still name the node
        if a.incident_id is not None and a.incident_id not in node_of:
            node_of[a.incident_id] = led.get_incident(a.incident_id).node
    return waiting_rows(pending, node_of, now)


@task(name="list_open_incidents", cache_policy=NO_CACHE)
def list_open_incidents() -> list[OpenIncident]:
    return [OpenIncident(i.id, i.node, i.signal + (f" (XID {i.xid})" if i.xid is not None else ""), i.status.value,
                         f"{i.first_seen:%Y-%m-%d %H:%M}")
            for i in runtime.ledger().incidents(status=OPEN_STATUSES)]


@task(name="score_lemons", cache_policy=NO_CACHE)
def score_lemons(now: datetime) -> list[LemonCandidate]:
    """Lemon candidates as lemon review scores them (same histories, same retired filter), for the page."""
    from tasks.lemon import lemon_verdicts

    verdicts, _ = lemon_verdicts(runtime.ledger(), now, runtime.settings().lemon)
    return [LemonCandidate(v.node, v.reason, v.p_value) for v in verdicts if v.candidate]


@task(name="check_spare_pool", cache_policy=NO_CACHE)
def check_spare_pool() -> SparePool:
    """Enough ready spares for the replacement lead time, spread over racks, switches and PDUs?"""
    from remedy.spares.lemons import lemon_candidates
    from remedy.spares.pool import check_diversity, size_pool

    led, settings = runtime.ledger(), runtime.settings().spares
    # a lemon candidate waits in the pool but is never handed out (remedy.spares.lemons): it is no ready spare
    held = lemon_candidates(led)
    spares = [s for s in led.nodes(NodeState.SPARE) if s.name not in held]
    sizing = size_pool(len(led.nodes(NodeState.ACTIVE)), len(spares), settings)
    warnings = check_diversity([Node(s.name, topology=s.topology) for s in spares], settings)
    return SparePool(ready=sizing.ready, target=sizing.target, shortfall=sizing.shortfall,
                     risk_at_ready=sizing.risk_at_ready, sizing=sizing.explain(),
                     warnings=[w.message for w in warnings],
                     held_as_lemons=sorted(n for n in held if led.get_node(n).state is NodeState.SPARE))


@task(name="read_job_failures", cache_policy=NO_CACHE)
def read_job_failures() -> JobFailures | None:
    """The training Job's failed pods against its backoffLimit (None when it cannot be read)."""
    work = runtime.settings().workload
    if work.kind == "JobSet":
        return _jobset_restarts(work.namespace, work.job)
    try:
        job = runtime.cluster().read_job(work.namespace, work.job)
    except Exception:  # noqa: BLE001 - the page says what it could not read elsewhere; the rest still publishes
        return None
    spec, status = job.get("spec") or {}, job.get("status") or {}
    limit = int(spec.get("backoffLimit", 6))  # the API server defaults it to 6
    failed = int(status.get("failed") or 0)
    rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
    ignores = any(r.get("action") == "Ignore" and any(c.get("type") == "DisruptionTarget"
                                                      for c in r.get("onPodConditions") or []) for r in rules)
    warning = None if ignores and failed <= limit - 3 else backoff_warning(failed, limit)
    return JobFailures(f"{work.namespace}/{work.job}", failed, limit, ignores, warning)


def _jobset_restarts(namespace: str, name: str) -> JobFailures | None:
    """A JobSet fails when a child Job fails with no restart left (failurePolicy.maxRestarts, default 0): without a
    podFailurePolicy in its Job template every drain, preemption and in-place restart is a gang restart."""
    try:
        st = runtime.cluster().workload(namespace, name).state()
    except Exception:  # noqa: BLE001 - as above
        return None
    left = (st.restart_limit or 0) - st.restarts
    warning = None if left > 2 else (
        f"{st.restarts} gang restart(s) of failurePolicy.maxRestarts {st.restart_limit}: {max(left, 0)} more drain(s) "
        "or restart(s) fail the whole JobSet — raise maxRestarts or give its Job template a podFailurePolicy that "
        "ignores DisruptionTarget (docs/operations.md)")
    return JobFailures(f"{namespace}/{name}", st.restarts, st.restart_limit, st.ignores_disruptions, warning,
                       counted="gang restarts", limit_name="failurePolicy.maxRestarts")
