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
from remedy.domain.model import ActionOutcome, IncidentStatus
from remedy.domain.outcome import Outcome
from remedy.domain.xid import lookup
from remedy.ledger.leases import ABANDONED
from remedy.remediate.choice import Option, odds_for
from remedy.remediate.results import GpuProbe
from remedy.remediate.runbook import BACKGROUND_REPAIR_KIND, probe_cleared, repair_closing, repair_steps
from tasks.burn_in import burn_in_node
from tasks.fixes import reboot_node, reset_gpu, verify_gpus, wait_node_ready
from tasks.leases import fence
from tasks.ledger import act, begin_action, end_action
from tasks.states import final_state
from tasks.tags import tag_this_run
from tasks.triage import recorded_fix_attempts


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
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    tag_this_run(node, stage="recover", xid=xid, dry_run=dry_run)
    out: dict[str, Any] = {"node": node, "xid": xid, "dry_run": dry_run, "steps": []}
    # 0. Hold the incident while the node is out: a run killed from here on is taken over like any run (the
    #    watchdog re-announces it; triage sees the marker and carries the repair on).
    _hold(node, incident_id, xid, gpu, dry_run)

    # 1. The in-place fixes, shallow first; each verified by the NVML probe. A re-run for the same incident (a
    #    takeover, a retried parent) replays a step an earlier run finished instead of resetting or rebooting again.
    #    The fleet's recorded fix odds for this fault class (the catalog's prior until there are enough) decide
    #    whether a reset is worth trying.
    odds = odds_for(lookup(xid).resolution, recorded_fix_attempts(runtime.ledger())) if xid is not None else None
    fixed = False
    for option in repair_steps(None if odds is None else odds.clears(Option.RESET)):
        step = _replayed(node, incident_id, Option(option), dry_run) or _fix(node, Option(option), incident_id, xid,
                                                                             gpu, dry_run)
        out["steps"].append(step)
        fixed = step["verdict"] == "pass" if step.get("replayed") else probe_cleared(step["verdict"], dry_run)
        if fixed:
            break

    # 2. Burn-in decides whether the node may be a spare again (the burn-in's own verdict moves it).
    result = out | (_burn_in(node, out, dry_run) if fixed else _to_repair(node, out))
    _settle(incident_id, result, dry_run)
    return result


def _hold(node: str, incident_id: int | None, xid: int | None, gpu: int | None, dry_run: bool) -> None:
    """The incident is `acting` again (fenced: a run that lost it stops here) with the repair's marker."""
    if incident_id is None or dry_run:
        return
    runtime.ledger().set_incident_status(incident_id, IncidentStatus.ACTING,
                                         detail=f"replaced; repairing {node} off the critical path",
                                         fence=fence(incident_id))
    act(BACKGROUND_REPAIR_KIND, node, lambda: {"node": node, "xid": xid, "gpu": gpu}, incident_id=incident_id,
        dry_run=dry_run, key=f"incident-{incident_id}:{BACKGROUND_REPAIR_KIND}:{node}")


def _settle(incident_id: int | None, result: dict[str, Any], dry_run: bool) -> None:
    """The repair ended: the incident is resolved (the job runs on the spare), saying how the repair ended."""
    if incident_id is None or dry_run:
        return
    close = repair_closing(result.get("status"), result.get("why", ""))
    runtime.ledger().set_incident_status(incident_id, close.status, detail=close.detail, fence=fence(incident_id))


def _replayed(node: str, incident_id: int | None, option: Option, dry_run: bool) -> dict[str, Any] | None:
    earlier = _earlier(node, incident_id, option, dry_run)
    if earlier is None:
        return None
    if incident_id is not None:  # a run that lost the incident stops here
        runtime.ledger().check_fence(incident_id, fence(incident_id))
    fixed = earlier.outcome is ActionOutcome.SUCCEEDED
    get_run_logger().info("%s: %s replayed from an earlier run of incident %s (%s)", node, option.value, incident_id,
                          "it cleared the fault" if fixed else "it did not clear the fault")
    return {"step": option.value, "verdict": "pass" if fixed else "fail", "replayed": True,
            "reasons": [] if fixed else [f"an earlier run's {option.value} did not clear it"]}


def _fix(node: str, option: Option, incident_id: int | None, xid: int | None, gpu: int | None,
         dry_run: bool) -> dict[str, Any]:
    """One fix off the critical path, verified by the NVML probe; a step that gave up after its retries failed."""
    attempt = _attempt(node, incident_id, option, xid, gpu, dry_run)
    try:
        if option is Option.RESET:
            reset_gpu(node, gpu, attempt, dry_run, incident_id)
        else:
            rb = reboot_node(node, attempt, dry_run, incident_id)
            wait_node_ready(node, runtime.settings().ladder.reboot_timeout_minutes * 60, dry_run,
                            boot_id_before=rb.boot_id_before)
        probe = verify_gpus(node, attempt, dry_run, incident_id)
    except Exception as exc:  # noqa: BLE001 - try the next, or repair
        get_run_logger().warning("%s: %s off the critical path failed: %s", node, option.value, exc)
        probe = GpuProbe("fail", False, (f"{type(exc).__name__}: {exc}"[:200],))
    _finish(attempt, probe_cleared(probe.verdict, dry_run))
    return {"step": option.value, "verdict": probe.verdict, "reasons": list(probe.reasons)}


def _to_repair(node: str, out: dict[str, Any]) -> dict[str, Any]:
    why = "; ".join(f"{s['step']}: {', '.join(s['reasons'][:2]) or s['verdict']}" for s in out["steps"])
    get_run_logger().warning("%s: not fixed off the critical path (%s) — to repair", node, why)
    return {"status": Outcome.SENT_TO_REPAIR.value, "why": f"in-place fixes did not clear it: {why}"}


def _burn_in(node: str, out: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    verdict = burn_in_node(node, "quick", dry_run)
    seen = {"burn_in": {"status": verdict.status, "why": verdict.why, "passed": verdict.passed}}
    if verdict.passed or verdict.status == "planned-spare":
        return seen | {"status": Outcome.RETURNED_TO_SPARES.value,
                       "why": f"{out['steps'][-1]['step']} cleared it and the node passed burn-in"}
    return seen | {"status": Outcome.SENT_TO_REPAIR.value, "why": f"failed burn-in after the fix: {verdict.why}"}


def _attempt(node: str, incident_id: int | None, option: Option, xid: int | None, gpu: int | None,
             dry_run: bool) -> int:
    """Recorded like fix-in-place's rungs (`fix_<step>`), so the fleet's fix odds learn from background repairs;
    fenced: a run that lost its incident (taken over) starts no fix."""
    return begin_action(f"fix_{option.value}", node, incident_id=incident_id, dry_run=dry_run,
                        detail={"xid": xid, "gpu": gpu, "off_critical_path": True})


def _earlier(node: str, incident_id: int | None, option: Option, dry_run: bool):
    """The last finished off-path attempt of `option` on `node` for this incident (dry-run rows only replay a dry
    run), or None: a step that started and never finished (the process died, its attempt abandoned) is done
    again."""
    if incident_id is None:
        return None
    done = [a for a in runtime.ledger().actions(incident_id=incident_id, kind=f"fix_{option.value}")
            if a.node == node and a.dry_run == dry_run and (a.detail or {}).get("off_critical_path")
            and a.outcome in (ActionOutcome.SUCCEEDED, ActionOutcome.FAILED)
            and not a.error.startswith(ABANDONED)]  # a run killed mid-step says nothing about the fix: done again
    return done[-1] if done else None


def _finish(action_id: int, ok: bool) -> None:
    end_action(action_id, ActionOutcome.SUCCEEDED if ok else ActionOutcome.FAILED)
