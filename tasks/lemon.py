"""Lemon review and retirement, ledger side: node histories for scoring, the retirement budget, the RMA report.

Plain functions first (ledger rows → `remedy.lemon` records, the report's text; no Prefect, testable alone), then
the Prefect tasks the flows call. What the ledger knows maps onto scoring's records like this:

- incidents   → IncidentRecord (first seen, signal, XID, GPU, status, and from the evidence: GPU serial/UUID, the
                alert's identity, the driver's text, a recorded cause); which of them count is scoring's call
                (`remedy.lemon.attribution`), so ignored ones travel with their status and show as "not counted";
- validations → ValidationRecord (burn-in / spare / post-fix checks, pass or fail);
- exclusions  → every time the node left the training pool (`active` → anything but retired): it was left out of
                the job from then on; deliberate when an operator asked for it (requested_by `operator:…`);
- exposure    → node-days in `active` inside the lookback window, from the state transitions;
- a node the ledger no longer lists, or a retired one, is not scored, but its incidents still follow their GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jinja2
from prefect import task
from prefect.cache_policies import NO_CACHE

from remedy import runtime
from remedy.domain.durations import days
from remedy.domain.model import NodeState, is_fault
from remedy.lemon.records import ExclusionRecord, IncidentRecord, NodeHistory, ValidationRecord
from remedy.lemon.results import LemonScores, RetirementBudget, RmaReport
from remedy.lemon.scoring import LemonVerdict, explain, retirements_allowed, score_fleet
from remedy.settings.lemon import LemonSettings
from tasks.retry import transient_only

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
RMA_TEMPLATE = "reports/rma.md.j2"


# ---------------------------------------------------------------------------------------------- plain helpers
def active_days(transitions: list, since: datetime, now: datetime, current: NodeState | None = None) -> float:
    """Node-days spent in `active` between `since` and `now`, from the node's transitions (oldest first).
    A node with no transition at all has been in its `current` state the whole window."""
    if not transitions:
        return (now - since).total_seconds() / 86400 if current is NodeState.ACTIVE else 0.0
    total, state, entered = 0.0, None, since
    for t in transitions:
        if t.at > now:
            break
        at = max(t.at, since)
        if state is NodeState.ACTIVE:
            total += (at - entered).total_seconds()
        state, entered = t.to_state, at
    if state is NodeState.ACTIVE:
        total += (now - entered).total_seconds()
    return max(0.0, total) / 86400


def incident_record(i) -> IncidentRecord:
    """A ledger incident as scoring reads it. The evidence keys are the receiver's (`Signal.evidence`)."""
    ev = i.evidence or {}
    occurrence = f"{ev['alert_fingerprint']}@{ev['starts_at']}" if ev.get("alert_fingerprint") and ev.get("starts_at") else ""
    return IncidentRecord(
        i.first_seen, i.signal, i.xid, i.gpu, f"incident {i.id}", status=i.status.value,
        cause="job" if str(ev.get("cause") or "").lower() == "job" else "",
        gpu_serial=str(ev.get("gpu_serial") or ""), gpu_uuid=str(ev.get("gpu_uuid") or ""), occurrence=occurrence,
        raw=str(ev.get("raw") or "")[:1000],
    )


def node_histories(led, now: datetime, settings: LemonSettings, retired: AbstractSet[str] = frozenset()) -> list[NodeHistory]:
    """One NodeHistory per node the ledger knows, over the lookback window ending at `now`; `retired` nodes and
    nodes the ledger no longer lists come out of the fleet (in_fleet=False) but keep their GPUs' records."""
    since = now - timedelta(days=settings.lookback_days)
    by_node: dict[str, list[IncidentRecord]] = {}
    for i in led.incidents(since=since):
        if i.first_seen > now or not is_fault(i):
            continue
        by_node.setdefault(i.node, []).append(incident_record(i))
    out = []
    known = set()
    for n in led.nodes():
        known.add(n.name)
        transitions = led.transitions(n.name)
        exclusions = tuple(
            ExclusionRecord(t.at, f"left the pool: {t.reason}"[:80], t.requested_by.startswith("operator"))
            for prev, t in zip(transitions, transitions[1:])
            if prev.to_state is NodeState.ACTIVE and t.to_state not in (NodeState.ACTIVE, NodeState.RETIRED)
            and since <= t.at <= now
        )
        validations = tuple(
            ValidationRecord(v.at, v.passed, v.level, f"validation {v.id}")
            for v in led.validations(n.name) if since <= v.at <= now
        )
        out.append(NodeHistory(n.name, round(active_days(transitions, since, now, n.state), 3),
                               tuple(sorted(by_node.get(n.name, ()), key=lambda r: r.time)), validations, exclusions,
                               in_fleet=n.name not in retired))
    for name in sorted(set(by_node) - known):  # gone from the ledger (deleted, re-created under a new name)
        out.append(NodeHistory(name, 0.0, tuple(sorted(by_node[name], key=lambda r: r.time)), in_fleet=False))
    return out


def lemon_verdicts(led, now: datetime, settings: LemonSettings) -> tuple[list[LemonVerdict], set[str]]:
    """Scores of every node not yet retired (lemon review and the fleet dashboard read the same), and the retired."""
    retired = {n.name for n in led.nodes(state=NodeState.RETIRED)}
    histories = node_histories(led, now, settings, retired)
    return (score_fleet(histories, now, settings) if any(h.in_fleet for h in histories) else []), retired


def retirement_times(led) -> list[datetime]:
    """When nodes were retired (ledger transitions into `retired`), for the retirement budget."""
    times = []
    for n in led.nodes(state=NodeState.RETIRED):
        times += [t.at for t in led.transitions(n.name) if t.to_state is NodeState.RETIRED]
    # A node retired and later brought back by an operator still used up budget in its window.
    retired_now = {n.name for n in led.nodes(state=NodeState.RETIRED)}
    times += [a.started_at for a in led.actions(kind=f"set_state_{NodeState.RETIRED.value}")
              if a.node not in retired_now and not a.dry_run and a.outcome.value == "succeeded"]
    return times


def budget_text(settings: LemonSettings, used: int) -> str:
    return (f"retirement budget: {settings.retirement_budget} per {days(settings.retirement_window_days)}, "
            f"{used} used in the current window")


def verdict_row(v: LemonVerdict, decision: str = "") -> dict[str, Any]:
    return {"node": v.node, "candidate": v.candidate, "signals": ", ".join(v.fired) or "-",
            "incidents": v.incidents_counted, "not_counted": len(v.excluded), "exposure_days": round(v.exposure_days, 1),
            "expected": round(v.expected_incidents, 2), "p_value": float(f"{v.p_value:.3g}"),
            "decision": decision, "reason": v.reason}


def render_rma(*, node: str, reason: str, evidence: str, facts: dict[str, Any], history: list, incidents: list,
               validations: list, approval: dict[str, Any] | None, generated_at: datetime) -> str:
    """The RMA report (markdown) from ledger records; jinja2 with StrictUndefined so a missing field fails loudly."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             autoescape=False, trim_blocks=True, lstrip_blocks=True)
    return env.get_template(RMA_TEMPLATE).render(
        node=node, reason=reason, evidence=evidence, facts=facts, history=history, incidents=incidents,
        validations=validations, approval=dict(approval) if approval is not None else None, generated_at=generated_at,
    )


def rma_key(node: str, at: datetime) -> str:
    return f"rma/{node}/{at:%Y%m%dT%H%M%SZ}.md"


# ---------------------------------------------------------------------------------------------- tasks
@task(name="score_lemons", task_run_name="score-lemons", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=2,
      retry_condition_fn=transient_only)
def score_lemons(as_of: str | None = None) -> LemonScores:
    """Score every node the ledger knows (retired ones are out of the running); evidence as plain text."""
    now = _as_of(as_of)
    verdicts, retired = lemon_verdicts(runtime.ledger(), now, runtime.settings().lemon)
    return LemonScores(now, verdicts, tuple(sorted(retired)), {v.node: explain(v) for v in verdicts if v.candidate})


@task(name="retirement_budget", task_run_name="retirement-budget", cache_policy=NO_CACHE, retries=2,
      retry_delay_seconds=1, retry_condition_fn=transient_only)
def retirement_budget(as_of: str | None = None) -> RetirementBudget:
    """How many retirements the budget still allows now, and the retirement times it counted."""
    settings = runtime.settings().lemon
    now = _as_of(as_of)
    times = retirement_times(runtime.ledger())
    left = retirements_allowed(times, now, settings)
    used = settings.retirement_budget - left
    return RetirementBudget(allowed=left, used=used, times=times, text=budget_text(settings, used))


@task(name="archive_rma_report", task_run_name="rma-report-{node}", cache_policy=NO_CACHE, retries=3,
      retry_delay_seconds=[1, 2, 4])
def archive_rma_report(node: str, reason: str, evidence: str, approval: Mapping[str, Any] | None,
                       dry_run: bool) -> RmaReport:
    """Render the node's RMA report from the ledger and archive it to S3; returns the key, URL and text."""
    from remedy.adapters.archive import open_archive

    settings = runtime.settings()
    led = runtime.ledger()
    now = datetime.now(UTC)
    rec = led.get_node(node)
    facts = {"gpu_model": rec.gpu_model or "unknown", "gpu_count": rec.gpu_count, "zone": rec.zone or "-",
             "rack": rec.rack or "-", "switch": rec.switch or "-", "pdu": rec.pdu or "-",
             "instance_type": rec.instance_type or "-", "provider_id": rec.provider_id or "-",
             "state": rec.state.value if rec.state else "unmanaged"}
    text = render_rma(node=node, reason=reason, evidence=evidence, facts=facts, history=led.history(node),
                      incidents=[i for i in led.incidents(node=node) if is_fault(i)], validations=led.validations(node),
                      approval=dict(approval) if approval is not None else None, generated_at=now)
    archive = open_archive(settings.aws, dry_run=dry_run)
    key = rma_key(node, now)
    url = archive.put_text(key, text, "text/markdown; charset=utf-8")
    return RmaReport(key=key, url=url, bytes=len(text.encode()), markdown=text, dry_run=dry_run)


def _as_of(as_of: str | None) -> datetime:
    if as_of is None:
        return datetime.now(UTC)
    try:
        t = datetime.fromisoformat(as_of)
    except (TypeError, ValueError):
        raise ValueError(f"as_of must be an ISO-8601 time such as 2026-11-22T00:00:00+00:00, got {as_of!r}") from None
    if t.tzinfo is None:
        raise ValueError(f"as_of must carry a time zone (e.g. +00:00), got {as_of!r}")
    return t


def verdict_dict(v: LemonVerdict) -> dict[str, Any]:
    """A verdict as JSON-friendly data (for flow results and the CLI)."""
    d = asdict(v)
    d["fired"] = list(v.fired)
    return d
