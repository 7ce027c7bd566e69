"""Keep the warm spare pool worth having (seed 000): fresh, big enough, and not all in one place.

    survey → stale spares re-validated with the quick suite, one rack at a time → a spare that fails leaves
           the pool (quarantine → repair) → the job's hot pool filled (spares.hot_spares) → target pool size
           (Poisson) and shortfall → topological diversity → pool-health artifact, and an event
           `remedy.spares.below-target` when short

Scheduled every 6 h (deployments). Rack by rack, because spares under test are out of the pool: a cycle never
takes every spare of the fleet out at once. A rack where every spare fails stops the cycle: that smells of a bad
check image or a shared cause (power, switch), not of several bad nodes, and a person should look first.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import jinja2
from prefect import flow, get_run_logger, unmapped
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.task_runners import ThreadPoolTaskRunner

from remedy import runtime
from remedy.adapters.kubernetes import TEMPLATES
from remedy.spares.cycle import below_target, check_domain, spares, stop_after_domain
from remedy.spares.cycle import pool_health as spare_pool_health
from tasks.burn_in import by_failure_domain, conclude_burn_in, hold_spares_for_check, stale_spares, survey_pool
from tasks.elastic import fill_hot_spares
from tasks.health import validate_node
from tasks.ledger import sync_fleet
from tasks.notify import post_notice

CYCLE_LEVEL = "quick"  # minutes per spare (issue 5): the cycle must not keep spares out of the pool for long
BELOW_TARGET_EVENT = "remedy.spares.below-target"
POOL_RESOURCE = "remedy.spares.pool"


# Prefect 3.9 types `task_runner` as TaskRunner[PrefectFuture] (invariant): its own thread-pool runner does not fit
@flow(name="spare-cycle", flow_run_name="spare-cycle",
      task_runner=ThreadPoolTaskRunner(max_workers=32))  # type: ignore[arg-type]
def spare_cycle(dry_run: bool | None = None, domain: str = "rack") -> dict[str, Any]:
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    domain = check_domain(domain)
    now = datetime.now(UTC)

    # 1. Survey: which spares are older than the freshness window.
    sync_fleet()
    fleet = [m.row() for m in survey_pool()]
    stale = stale_spares(spares(fleet), now, settings.spares.validation_freshness_hours)
    outcome: dict[str, Any] = {"dry_run": dry_run, "stale": sorted(n["name"] for n in stale), "checked": {},
                               "left_pool": [], "stopped": None}

    # 2. Re-validate one failure domain at a time; a failing spare leaves the pool for repair.
    _revalidate_by_domain(stale, domain, dry_run, outcome)

    # 3. Hot spares (spares.hot_spares > 0): the job's hot pool is filled now, not only after a swap used one (not
    #    after a stopped cycle: a shared cause may be at work, and a person looks first).
    if settings.spares.hot_spares and not outcome["stopped"]:
        outcome["hot_spares"] = vars(fill_hot_spares(dry_run))

    # 4. Pool health: target size from fleet size, MTBF and lead time; spread across failure domains.
    fleet = [m.row() for m in survey_pool()]
    health = pool_health(fleet, now)
    outcome |= health
    _report(outcome)
    if below_target(health):
        outcome["event"] = _emit_below_target(health)
    log.info("spare cycle: %d stale, %d left the pool; %s", len(stale), len(outcome["left_pool"]),
             health["sizing"]["explain"])
    return outcome


def _revalidate_by_domain(stale: list[Mapping[str, Any]], domain: str, dry_run: bool, outcome: dict[str, Any]) -> None:
    """Step 2: each failure domain's stale spares held and checked together; a failing spare leaves the pool; a
    domain where too many fail stops the cycle (stop_after_domain: a shared cause, a person looks first)."""
    for name, members in by_failure_domain(stale, domain):
        held = hold_spares_for_check(members, name, dry_run=dry_run)
        checks = [f.result() for f in validate_node.map(held, level=unmapped(CYCLE_LEVEL), dry_run=unmapped(dry_run))]
        finals = conclude_burn_in.map(held, level=unmapped(CYCLE_LEVEL), checks=[[dict(r) for r in c.checks] for c in checks],
                                      dry_run=unmapped(dry_run), purpose=unmapped("spare cycle"),
                                      record=unmapped(False))  # validate_node recorded the validation
        results = [f.result() for f in finals]
        for r in results:
            outcome["checked"][r.node] = {"status": r.status, "why": r.why, "domain": name}
        failed = [r.node for r in results if not r.passed]
        outcome["left_pool"] += failed
        if stop := stop_after_domain(domain, name, len(held), failed):
            outcome["stopped"] = stop
            get_run_logger().error(stop)
            post_notice(f":warning: gpu-remedy spare cycle stopped: {stop}", dry_run=dry_run)
            return


def pool_health(fleet: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """Ready spares (spare, Ready, validated within the window) against the Poisson target; diversity warnings."""
    settings = runtime.settings()
    stale = stale_spares(spares(fleet, ready_only=False), now, settings.spares.validation_freshness_hours)
    return spare_pool_health(fleet, {n["name"] for n in stale}, settings.spares)


def _emit_below_target(health: dict[str, Any]) -> str | None:
    from prefect.events import emit_event

    s = health["sizing"]
    event = emit_event(
        event=BELOW_TARGET_EVENT,
        resource={"prefect.resource.id": POOL_RESOURCE, "prefect.resource.name": "warm spare pool"},
        payload={"ready": s["ready"], "target": s["target"], "shortfall": s["shortfall"],
                 "active_nodes": s["active_nodes"], "explain": s["explain"]},
    )
    return str(event.id) if event else None


def _report(outcome: dict[str, Any]) -> None:
    s = outcome["sizing"]
    rows = [
        {"measure": "active nodes", "value": s["active_nodes"]},
        {"measure": "ready spares (fresh)", "value": s["ready"]},
        {"measure": "target pool size", "value": s["target"]},
        {"measure": "shortfall", "value": s["shortfall"]},
        {"measure": "expected failures per lead time (λ)", "value": s["lam"]},
        {"measure": "accepted risk of running dry", "value": s["risk"]},
        {"measure": "risk of running dry now", "value": round(s["risk_at_ready"], 6)},
        {"measure": "stale spares re-validated", "value": len(outcome["checked"])},
        {"measure": "spares that left the pool", "value": len(outcome["left_pool"])},
        {"measure": "diversity warnings", "value": len(outcome["diversity"])},
    ]
    create_table_artifact(key="spare-pool-health", table=rows, description=s["explain"])
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES / "reports"), autoescape=False,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    md = env.get_template("pool-health.md.j2").render(o=outcome, s=s)
    create_markdown_artifact(key="spare-pool-story", markdown=md, description="spare cycle: what happened")
