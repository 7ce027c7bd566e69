"""Repair in the background: a node whose job already moved to a spare is fixed off the job's critical path.

    replaced (job on the spare) → reset GPU (if its fault class may clear with one) → verify
                                → reboot when the reset did not clear it → verify
                                → burn-in (quick suite): pass → back to the spare pool │ fail → repair

The node is already cordoned, quarantined and drained by replace-node, so nothing here waits on the job. A fix
that does not verify goes to repair (a person), never back to work; burn-in decides whether it may be a spare.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from remedy import runtime
from remedy.domain import names
from remedy.domain.model import Action, ActionOutcome
from remedy.domain.outcome import Outcome
from remedy.domain.xid import lookup
from remedy.remediate.choice import Option, odds_for
from tasks.burn_in import burn_in_node
from tasks.fixes import reboot_node, reset_gpu, verify_gpus, wait_node_ready
from tasks.leases import fence
from tasks.ledger import requester
from tasks.states import final_state
from tasks.tags import tag_this_run
from tasks.triage import recorded_fix_attempts

# Below this chance of clearing the fault a reset is skipped and the node is rebooted at once.
MIN_RESET_ODDS = 0.25


def _run_name() -> str:
    from prefect.runtime import flow_run

    return names.run_name(f"recover {flow_run.parameters['node']} off the critical path")


@flow(name="recover-node", flow_run_name=_run_name, log_prints=False)
def recover_node(node: str, xid: int | None = None, gpu: int | None = None, incident_id: int | None = None,
                 dry_run: bool | None = None):
    """Completed "returned to spares" when the node passed burn-in after its fix; Failed "sent to repair"
    otherwise (a person must look at the hardware)."""
    return final_state(_recover(node, xid, gpu, incident_id, dry_run), node=node)


def _recover(node: str, xid: int | None, gpu: int | None, incident_id: int | None,
             dry_run: bool | None) -> dict[str, Any]:
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    tag_this_run(node, stage="recover", xid=xid, dry_run=dry_run)
    out: dict[str, Any] = {"node": node, "xid": xid, "dry_run": dry_run, "steps": []}
    # the fleet's recorded fix odds for this fault class (the catalog's prior until there are enough)
    odds = odds_for(lookup(xid).resolution, recorded_fix_attempts(runtime.ledger())) if xid is not None else None
    steps = [Option.RESET, Option.REBOOT] if odds is None or odds.clears(Option.RESET) >= MIN_RESET_ODDS \
        else [Option.REBOOT]

    # 1. The in-place fixes, shallow first; each verified by the NVML probe. A re-run for the same incident (a
    #    takeover, a retried parent) replays a step an earlier run finished instead of resetting or rebooting again.
    fixed = False
    for option in steps:
        earlier = _earlier(node, incident_id, option, dry_run)
        if earlier is not None:
            runtime.ledger().check_fence(incident_id, fence(incident_id))  # a run that lost the incident stops here
            fixed = earlier.outcome is ActionOutcome.SUCCEEDED
            log.info("%s: %s replayed from an earlier run of incident %s (%s)", node, option.value, incident_id,
                     "it cleared the fault" if fixed else "it did not clear the fault")
            out["steps"].append({"step": option.value, "verdict": "pass" if fixed else "fail", "replayed": True,
                                 "reasons": [] if fixed else [f"an earlier run's {option.value} did not clear it"]})
            if fixed:
                break
            continue
        attempt = _attempt(node, incident_id, option, xid, gpu, dry_run)
        try:
            if option is Option.RESET:
                reset_gpu(node, gpu, attempt, dry_run, incident_id)
            else:
                rb = reboot_node(node, attempt, dry_run, incident_id)
                wait_node_ready(node, settings.ladder.reboot_timeout_minutes * 60, dry_run,
                                boot_id_before=rb.get("boot_id_before", ""))
            probe = verify_gpus(node, attempt, dry_run, incident_id)
            fixed = dry_run or probe.get("verdict") in ("pass", "warn")
        except Exception as exc:  # a step that gave up after its retries: try the next, or repair
            log.warning("%s: %s off the critical path failed: %s", node, option.value, exc)
            probe = {"verdict": "fail", "reasons": [f"{type(exc).__name__}: {exc}"[:200]]}
        out["steps"].append({"step": option.value, "verdict": probe.get("verdict"), "reasons": probe.get("reasons", [])})
        _finish(attempt, fixed)
        if fixed:
            break

    # 2. Burn-in decides whether the node may be a spare again (the burn-in's own verdict moves it).
    if not fixed:
        why = "; ".join(f"{s['step']}: {', '.join(s['reasons'][:2]) or s['verdict']}" for s in out["steps"])
        log.warning("%s: not fixed off the critical path (%s) — to repair", node, why)
        return out | {"status": Outcome.SENT_TO_REPAIR.value, "why": f"in-place fixes did not clear it: {why}"}
    verdict = burn_in_node(node, "quick", dry_run)
    out["burn_in"] = {k: verdict.get(k) for k in ("status", "why", "passed")}
    if verdict.get("passed") or verdict.get("status") == "planned-spare":
        return out | {"status": Outcome.RETURNED_TO_SPARES.value,
                      "why": f"{out['steps'][-1]['step']} cleared it and the node passed burn-in"}
    return out | {"status": Outcome.SENT_TO_REPAIR.value, "why": f"failed burn-in after the fix: {verdict.get('why')}"}


def _attempt(node: str, incident_id: int | None, option: Option, xid: int | None, gpu: int | None,
             dry_run: bool) -> int:
    """Recorded like fix-in-place's rungs (`fix_<step>`), so the fleet's fix odds learn from background repairs."""
    rec, _ = runtime.ledger().start_action(Action(
        kind=f"fix_{option.value}", node=node, requested_by=requester(), dry_run=dry_run, incident_id=incident_id,
        detail={"xid": xid, "gpu": gpu, "off_critical_path": True}),
        fence=fence(incident_id))  # a run that lost its incident (taken over) starts no fix
    return rec.id


def _earlier(node: str, incident_id: int | None, option: Option, dry_run: bool):
    """The last finished off-path attempt of `option` on `node` for this incident (dry-run rows only replay a dry
    run), or None: a step that started and never finished (the process died) is done again."""
    if incident_id is None:
        return None
    done = [a for a in runtime.ledger().actions(incident_id=incident_id, kind=f"fix_{option.value}")
            if a.node == node and a.dry_run == dry_run and (a.detail or {}).get("off_critical_path")
            and a.outcome in (ActionOutcome.SUCCEEDED, ActionOutcome.FAILED)]
    return done[-1] if done else None


def _finish(action_id: int, ok: bool) -> None:
    runtime.ledger().finish_action(action_id, ActionOutcome.SUCCEEDED if ok else ActionOutcome.FAILED)
