"""Daily lemon review: score every node from the ledger, show the candidates with their evidence, retire what the
budget allows (each through `retire_node`, which asks a person), defer the rest with the reason.

    sync → node histories from the ledger → score_fleet (remedy.lemon) → table + evidence artifacts
         → select_for_retirement (budget) → retire_node subflow per selected candidate │ deferred: why
         → every candidate recorded in the ledger (remedy.spares.lemons): spare selection never hands one out
           until a later review no longer flags it or a person declines its retirement

Scoring is `remedy.lemon.scoring`, Prefect-free; this flow only reads the ledger and wires the steps.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from remedy import runtime
from remedy.lemon.scoring import select_for_retirement
from tasks.lemon import budget_text, retirement_budget, score_lemons, verdict_row
from tasks.ledger import sync_fleet


@flow(name="lemon-review", flow_run_name="lemon review")
def lemon_review(dry_run: bool | None = None, as_of: str | None = None, retire: bool = True) -> dict[str, Any]:
    """`as_of` replays the review at another time (ISO-8601 with zone); `retire=False` only lists candidates."""
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run

    # 1. Score: every node the ledger knows, against the rest of the fleet.
    sync_fleet()
    scored = score_lemons(as_of)
    verdicts = scored["verdicts"]
    now = datetime.fromisoformat(scored["now"])
    candidates = [v for v in verdicts if v.candidate]

    # 2. Budget: never more retirements per window than configured.
    budget = retirement_budget(scored["now"])
    chosen, deferred = select_for_retirement(candidates, budget["times"], now, settings.lemon)
    if not retire:
        chosen, deferred = [], candidates
    why_deferred = (f"{budget_text(settings.lemon, budget['used'])}: no retirement left in this window"
                    if retire else "review only (retire=False)")

    # 3. Show the candidates and their evidence.
    decisions = {v.node: "retire (asks approval)" for v in chosen} | {v.node: "deferred" for v in deferred}
    rows = [verdict_row(v, decisions.get(v.node, "")) for v in candidates]
    create_table_artifact(key="lemon-candidates", table=rows or [{"node": "-", "reason": "no lemon candidates"}],
                          description=f"Lemon candidates as of {now:%Y-%m-%d %H:%M} UTC ({len(verdicts)} nodes scored)")
    create_markdown_artifact(key="lemon-evidence", markdown=_evidence_markdown(scored, candidates, decisions,
                                                                             why_deferred),
                             description="Why each candidate is one")
    log.info("lemon review: %d node(s) scored, %d candidate(s), %d to retire, %d deferred", len(verdicts),
             len(candidates), len(chosen), len(deferred))
    # Nodes that failed burn-in again and again (flows/burn_in) are listed for a person: they never served load,
    # so the lemon score has no evidence on them.
    failed_burn_ins = _failed_burn_in_candidates(set(scored["retired"]))
    if failed_burn_ins:
        create_table_artifact(key="burn-in-retirement-candidates", table=failed_burn_ins,
                              description="Failed burn-in repeatedly: retire with `retire-node` after a look")

    # 4. Record the candidates before anything waits on a person: deferred or awaiting approval, none of them may
    #    be promoted from the spare pool meanwhile (the simulator's gpu-remedy policy makes the same choice).
    from remedy.spares.lemons import record_review
    from tasks.ledger import requester

    led = runtime.ledger()
    flagged = {v.node: {"p_value": float(f"{v.p_value:.3g}"), "signals": list(v.fired), "decision": decisions[v.node],
                        "reason": v.reason[:300]} for v in candidates}
    ledger_view = record_review(led, flagged, reviewed_at=now, requested_by=requester(), dry_run=dry_run)
    if ledger_view["cleared"]:
        log.info("no longer lemon candidates (spares again if in the pool): %s", ", ".join(ledger_view["cleared"]))

    # 5. Retire what the budget allows; each retirement asks a person.
    from flows.retire_node import retire_node

    #    A person's no clears the candidate (retire-node does, however it was started): spare selection may use it.
    retirements = [
        retire_node(node=v.node, reason=v.reason, evidence=scored["explain"][v.node], dry_run=dry_run) for v in chosen
    ]
    return {
        "as_of": scored["now"],
        "scored": len(verdicts),
        "candidates": [verdict_row(v, decisions[v.node]) for v in candidates],
        "retire": [v.node for v in chosen],
        "deferred": [{"node": v.node, "why": why_deferred} for v in deferred],
        "retirements": retirements,
        "retired": [r["node"] for r in retirements if r.get("retired")],
        "already_retired": scored["retired"],
        "budget": budget["text"],
        "failed_burn_in_candidates": failed_burn_ins,
        "lemon_candidates_cleared": ledger_view["cleared"],
        "dry_run": dry_run,
    }


def _failed_burn_in_candidates(retired: set[str]) -> list[dict[str, Any]]:
    from remedy.domain.model import ActionOutcome

    seen: dict[str, dict[str, Any]] = {}
    for a in runtime.ledger().actions(kind="mark_retirement_candidate"):
        if a.outcome is ActionOutcome.SUCCEEDED and a.node not in retired:
            seen[a.node] = {"node": a.node, "since": a.finished_at.isoformat() if a.finished_at else "",
                            "detail": str(a.detail.get("why") or a.detail)[:200]}
    return sorted(seen.values(), key=lambda r: r["node"])


def _evidence_markdown(scored: dict[str, Any], candidates: list, decisions: dict[str, str], why_deferred: str) -> str:
    if not candidates:
        return (f"### No lemon candidates\n\n{len(scored['verdicts'])} node(s) scored; "
                "none shows enough independent signals.")
    parts = [f"### {len(candidates)} lemon candidate(s)", ""]
    for v in candidates:
        parts += [f"#### {v.node}: {decisions.get(v.node, '')}", ""]
        if decisions.get(v.node) == "deferred":
            parts += [f"_{why_deferred}_", ""]
        parts += ["```", scored["explain"][v.node], "```", ""]
    return "\n".join(parts)
