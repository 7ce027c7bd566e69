"""Daily lemon review: score every node from the ledger, show the candidates with their evidence, retire what the
budget allows (each through `retire_node`, which asks a person), defer the rest with the reason.

    sync → node histories from the ledger → score_fleet (remedy.lemon) → table + evidence artifacts
         → select_for_retirement (budget) → retire_node subflow per selected candidate │ deferred: why
         → every candidate recorded in the ledger (remedy.spares.lemons): spare selection never hands one out
           until a later review no longer flags it or a person declines its retirement

Scoring is `remedy.lemon.scoring`, Prefect-free; this flow only reads the ledger and wires the steps.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from remedy import runtime
from remedy.lemon.review import evidence_markdown, failed_burn_in_rows, flagged, plan_review, retired_nodes
from tasks.ledger import sync_fleet
from tasks.lemon import budget_text, retirement_budget, score_lemons, verdict_row


@flow(name="lemon-review", flow_run_name="lemon review")
def lemon_review(dry_run: bool | None = None, as_of: str | None = None, retire: bool = True) -> dict[str, Any]:
    """`as_of` replays the review at another time (ISO-8601 with zone); `retire=False` only lists candidates."""
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run

    # 1. Score: every node the ledger knows, against the rest of the fleet.
    sync_fleet()
    scored = score_lemons(as_of)
    verdicts = scored.verdicts
    now = scored.now
    candidates = [v for v in verdicts if v.candidate]

    # 2. Budget: never more retirements per window than configured.
    budget = retirement_budget(now.isoformat())
    plan = plan_review(candidates, budget.times, now, settings.lemon, retire=retire,
                       budget_words=budget_text(settings.lemon, budget.used))
    decisions = plan.decisions

    # 3. Show the candidates and their evidence.
    rows = [verdict_row(v, decisions.get(v.node, "")) for v in candidates]
    create_table_artifact(key="lemon-candidates", table=rows or [{"node": "-", "reason": "no lemon candidates"}],
                          description=f"Lemon candidates as of {now:%Y-%m-%d %H:%M} UTC ({len(verdicts)} nodes scored)")
    create_markdown_artifact(key="lemon-evidence",
                             markdown=evidence_markdown(len(verdicts), candidates, decisions, plan.why_deferred,
                                                        scored.explain),
                             description="Why each candidate is one")
    log.info("lemon review: %d node(s) scored, %d candidate(s), %d to retire, %d deferred", len(verdicts),
             len(candidates), len(plan.chosen), len(plan.deferred))
    # Nodes that failed burn-in again and again (flows/burn_in) are listed for a person: they never served load,
    # so the lemon score has no evidence on them.
    failed_burn_ins = failed_burn_in_rows(runtime.ledger().actions(kind="mark_retirement_candidate"),
                                          set(scored.retired))
    if failed_burn_ins:
        create_table_artifact(key="burn-in-retirement-candidates", table=failed_burn_ins,
                              description="Failed burn-in repeatedly: retire with `retire-node` after a look")

    # 4. Record the candidates before anything waits on a person: deferred or awaiting approval, none of them may
    #    be promoted from the spare pool meanwhile (the simulator's gpu-remedy policy makes the same choice).
    from remedy.spares.lemons import record_review
    from tasks.ledger import requester

    ledger_view = record_review(runtime.ledger(), flagged(candidates, decisions), reviewed_at=now,
                                requested_by=requester(), dry_run=dry_run)
    if ledger_view["cleared"]:
        log.info("no longer lemon candidates (spares again if in the pool): %s", ", ".join(ledger_view["cleared"]))

    # 5. Retire what the budget allows; each retirement asks a person.
    from flows.retire_node import retire_node

    #    A person's no clears the candidate (retire-node does, however it was started): spare selection may use it.
    retirements = [retire_node(node=v.node, reason=v.reason, evidence=scored.explain[v.node], dry_run=dry_run)
                   for v in plan.chosen]
    return {
        "as_of": now.isoformat(),
        "scored": len(verdicts),
        "candidates": [verdict_row(v, decisions[v.node]) for v in candidates],
        "retire": [v.node for v in plan.chosen],
        "deferred": [{"node": v.node, "why": plan.why_deferred} for v in plan.deferred],
        "retirements": retirements,
        "retired": retired_nodes(retirements),
        "already_retired": list(scored.retired),
        "budget": budget.text,
        "failed_burn_in_candidates": failed_burn_ins,
        "lemon_candidates_cleared": ledger_view["cleared"],
        "dry_run": dry_run,
    }
