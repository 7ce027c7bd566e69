"""Fix a GPU node in place, chosen by XID — the ladder (remedy.safety.ladder) walked as a runbook.

    XID → NVIDIA resolution → ladder:  restart app → reset GPU → reboot → replace (→ escalate when nothing is left)

    restart app : delete the job's pods on the node (no cordon; the job controller recreates them); record the
                  back-off (10 → 20 → 40 min) and return "restarted" — the same XID on the same GPU again climbs
    reset GPU   : cordon + quarantine taint → drain → `nvidia-smi -r -i N` Job → NVML probe → uncordon
    reboot      : cordon + quarantine taint → drain → EC2 reboot or reboot Job → wait Ready → NVML probe → uncordon
    replace     : flows.replace_node as a subflow

The breaker gate (tasks.gate) is asked once per incident before the first step; a restart takes no capacity.
Every attempt is a `fix_<step>` action in the ledger; the ladder's history is rebuilt from those rows, so a
recurrence in a later incident escalates. A failed or timed-out step falls to the next rung within the same run.
The live node is re-read before each step: an operator's manual uncordon wins and is recorded.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from remedy import runtime
from remedy.domain import names
from remedy.domain.durations import human_duration
from remedy.domain.outcome import Outcome, outcome_of
from remedy.approvals.open_loop import is_open_loop, node_pool
from remedy.domain.model import Action, ActionOutcome, IncidentStatus
from remedy.domain.timeline import Timeline
from remedy.domain.xid import RemediationPath, Resolution, lookup
from remedy.ledger.errors import LeaseLost, LedgerConflict
from remedy.ledger.leases import ABANDONED
from remedy.remediate.choice import Option, after_failed_rung, tried_depth
from remedy.safety.ladder import (
    LADDERS, Attempt, AttemptOutcome, LadderExhausted, Step, backoff_schedule, next_step, step_timeout,
)
from tasks.approvals import propose_open_loop
from tasks.cluster import check_drift
from tasks.gate import record_remediation_outcome
from tasks.fixes import (
    drain_for_fix, quarantine_node, reboot_node, release_node, reset_gpu, restart_app, verify_gpus, wait_job_back,
    wait_node_ready,
)
from tasks.health import reconfirm_fault
from tasks.states import final_state, run_subflow
from tasks.tags import tag_this_run
from tasks.triage import choose_remediation
from tasks.ledger import claim_remediation, open_incident, requester, sync_fleet
from tasks.leases import fence, keeps_lease

P = RemediationPath
ATTEMPT_PREFIX = "fix_"
IN_PLACE = (P.RESTART_APP, P.RESET_GPU, P.REBOOT)
MAX_STEPS = 6  # more rungs than any ladder has: a loop that would not end is a bug, not a plan
STEP_WORDS = {P.RESTART_APP: "restart app", P.RESET_GPU: "reset GPU", P.REBOOT: "reboot", P.REPLACE: "replace",
              P.IGNORE: "ignore", P.ESCALATE: "escalate"}


def _run_name() -> str:
    from prefect.runtime import flow_run

    p = flow_run.parameters
    return names.run_name(f"fix {p['node']} XID {p['xid']} ({first_step_words(int(p['xid']))})")


def first_step_words(xid: int) -> str:
    entry = lookup(xid)
    if entry.resolution is Resolution.IGNORE:
        return "ignore"
    ladder = LADDERS.get(entry.resolution, ())
    return STEP_WORDS[ladder[0]] if ladder else "escalate"


def attempts_from_actions(actions: list) -> list[Attempt]:
    """The ladder's history from the ledger's `fix_<step>` actions (dry-run and skipped rows do not count, nor an
    attempt whose run died before it ended: it says nothing about the fix, so the rung is tried again)."""
    out = []
    for a in actions:
        if not a.kind.startswith(ATTEMPT_PREFIX) or a.dry_run:
            continue
        if a.outcome is ActionOutcome.FAILED and a.error.startswith(ABANDONED):
            continue
        if a.outcome in (ActionOutcome.SKIPPED, ActionOutcome.PLANNED):
            continue
        outcome = {ActionOutcome.SUCCEEDED: AttemptOutcome.SUCCEEDED, ActionOutcome.RUNNING: AttemptOutcome.RUNNING}.get(
            a.outcome, AttemptOutcome.TIMED_OUT if a.detail.get("timed_out") else AttemptOutcome.FAILED)
        timeout = a.detail.get("timeout_s")
        out.append(Attempt(kind=P(a.kind[len(ATTEMPT_PREFIX):]), started_at=a.started_at, outcome=outcome,
                           xid=a.detail.get("xid"), gpu=a.detail.get("gpu"), finished_at=a.finished_at,
                           timeout=timedelta(seconds=timeout) if timeout else None))
    return out


class StepFailed(Exception):
    def __init__(self, why: str, *, timed_out: bool = False) -> None:
        super().__init__(why)
        self.timed_out = timed_out


class OperatorWins(Exception):
    """The live node was changed by hand (manual uncordon): stop, record, never undo it."""


@flow(name="fix-in-place", flow_run_name=_run_name, log_prints=False)
@keeps_lease  # alive while it runs; a killed run's incident is taken over (tasks.leases)
def fix_in_place(node: str, xid: int, gpu: int | None = None, incident_id: int | None = None,
                 dry_run: bool | None = None, detected_at: str | None = None,
                 ask_replace_on_escalation: bool = False):
    """Completed when the fault is fixed (or nothing was needed); Failed/Cancelled, named for what happened,
    otherwise (remedy.domain.outcome). The result dict is the state's data."""
    return final_state(_fix(node, xid, gpu, incident_id, dry_run, detected_at, ask_replace_on_escalation), node=node)


def _fix(node: str, xid: int, gpu: int | None, incident_id: int | None, dry_run: bool | None,
         detected_at: str | None, ask_replace_on_escalation: bool) -> dict[str, Any]:
    log = get_run_logger()
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    tag_this_run(node, stage="fix-in-place", xid=xid, dry_run=dry_run)
    entry = lookup(xid)
    timeline = Timeline.starting(detected_at)
    out: dict[str, Any] = {"node": node, "xid": xid, "gpu": gpu, "dry_run": dry_run, "resolution": entry.resolution.value,
                           "steps": [], "_timeline": timeline}

    # 1. Incident: attach to the receiver's, or open one (CLI / demo runs).
    sync_fleet()
    by_person = incident_id is None  # automation always passes the incident; a run without one was started by hand
    if by_person:
        incident_id = open_incident(node, "xid", gpu=gpu, xid=xid, detail=f"XID {xid} {entry.name}")["id"]
    out["incident_id"] = incident_id
    led = runtime.ledger()
    # One incident, one remediation: a duplicate trigger stands down, and so does a late one after the end.
    claim = claim_remediation(incident_id, by_person=by_person) if not dry_run else {"claimed": True}
    if not claim["claimed"]:
        why = (f"incident {incident_id} is already {claim['settled']}" if claim.get("settled")
               else f"run {claim['holder']} is handling incident {incident_id}")
        return _finish(out | {"status": "duplicate", "why": why})
    _abandon_orphans(led, node)
    asked_open_loop, gate, recover_after = False, None, False
    detected = detected_at or datetime.now(timezone.utc).isoformat()

    for _ in range(MAX_STEPS):
        # 2. Decide from the ledger's history of this fault on this node (recurrences climb the ladder).
        history = attempts_from_actions(led.actions(node=node))
        step = next_step(history, xid, gpu, entry.resolution, datetime.now(timezone.utc), settings.ladder)
        if isinstance(step, LadderExhausted):
            log.warning("%s: %s", node, step.reason)
            if gate is not None:  # an in-place attempt held capacity: it ended without a fix
                record_remediation_outcome(node, succeeded=False, incident_id=incident_id, dry_run=dry_run)
            return _finish(out | {"status": "escalated", "escalated": True, "reason": step.reason, "why": step.reason},
                           _escalate(node, step.reason, incident_id, dry_run, history, entry, ask_replace_on_escalation))
        # 2b. After a rung of this fault failed or did not hold, expected cost decides replace vs climb (the same
        #     choose() as triage and the simulator): a ready spare often costs the job less than the next rung.
        if step.kind in IN_PLACE and settings.ladder.replace_first and not dry_run:
            step, chose = _after_failed_rung(step, history, node, xid, gpu, incident_id, entry.resolution, settings)
            if chose is not None:
                out["choice"] = {k: chose[k] for k in ("option", "reason", "options", "spares_ready", "tried_depth")}
                create_markdown_artifact(key=names.artifact_key("fix", node, "options"), markdown=chose["markdown"],
                                         description="After a failed rung: the options by expected job downtime")
                recover_after = step.kind is P.REPLACE
        out["steps"].append({"step": step.kind.value, "rung": step.rung, "attempt": step.attempt, "reason": step.reason})
        log.info("%s: %s (%s)", node, step.kind.value, step.reason)
        if step.kind is P.IGNORE:
            _record_skip(led, node, incident_id, "fix_ignored", step.reason, dry_run)
            return _finish(out | {"status": "ignored", "why": step.reason})

        # 3. Open loop: propose, then wait for the external system's go-ahead before touching anything.
        live = runtime.cluster().get_node(node)
        if not asked_open_loop and is_open_loop(live, settings.ladder.open_loop_pools):
            asked_open_loop = True
            go = propose_open_loop(node=node, incident_id=incident_id, action=f"{STEP_WORDS[step.kind]} (XID {xid})",
                                   reason=step.reason, pool=node_pool(live),
                                   timeout_seconds=step.timeout.total_seconds(),
                                   details={"xid": xid, "gpu": gpu, "step": step.kind.value})
            out["open_loop"] = {"decision": go.decision, "by": go.by}
            if not go.approved:
                return _finish(out | {"status": "proposed-not-executed",
                                      "why": f"open-loop pool {node_pool(live)}: {go.decision} by {go.by or 'nobody'}"})

        # 4. Gate (once per incident): circuit breakers and capacity budget; a restart takes no capacity.
        if gate is None:
            from tasks.gate import pass_gate  # one gate, asked the same way for every remediation

            gate = pass_gate(node, incident_id, f"XID {xid}", detected, dry_run, needs_spare=step.kind is P.REPLACE,
                             takes_node_out=step.kind is not P.RESTART_APP)
            out |= gate.outcome_fields()
            if gate.status is not None:
                return _finish(out | {"status": gate.status.value, "why": gate.gate})

        # 5. A reset or reboot stops the job: first make sure the fault still holds and is not a failed monitor
        #    (once per run; a later rung follows a failed attempt, which is evidence enough).
        if step.kind in (P.RESET_GPU, P.REBOOT) and not out.get("recheck") and settings.reconfirm.enabled:
            out["recheck"] = check = reconfirm_fault(node, incident_id, "xid", dry_run)
            if not check["act"]:
                log.warning("%s: %s — not acting", node, check["why"])
                status = Outcome.CLEARED if check["verdict"] == "cleared" else Outcome.MONITOR_FAILURE
                record_remediation_outcome(node, succeeded=True, incident_id=incident_id, dry_run=dry_run)
                if not dry_run:
                    led.set_incident_status(incident_id, status.incident_status,
                                            detail=f"{status.label.lower()}: {check['why']}", fence=fence(incident_id))
                timeline.mark(status.label.lower())
                return _finish(out | {"status": status.value, "why": check["why"]})

        # 6. The step itself, recorded as one ladder attempt.
        attempt = _start_attempt(led, node, incident_id, step, xid, gpu, dry_run)
        try:
            result = _do_step(step, node, gpu, attempt.id, incident_id, dry_run, xid)
        except OperatorWins as exc:
            _finish_attempt(led, attempt.id, ActionOutcome.SKIPPED, error=str(exc))
            _record_skip(led, node, incident_id, "respect_drift", str(exc), dry_run)
            record_remediation_outcome(node, succeeded=False, incident_id=incident_id, dry_run=dry_run)
            return _finish(out | {"status": "stopped-by-operator", "why": str(exc)})
        except StepFailed as exc:
            log.warning("%s: %s failed: %s — falling back", node, step.kind.value, exc)
            _finish_attempt(led, attempt.id, ActionOutcome.FAILED, error=str(exc), detail={"timed_out": exc.timed_out})
            timeline.mark(f"{step.kind.value} {'timed out' if exc.timed_out else 'failed'}")
            out["steps"][-1]["result"] = {"failed": str(exc), "timed_out": exc.timed_out}
            if dry_run:
                return _finish(out | {"status": "planned"})
            continue
        except LeaseLost:  # another run has this incident now: stop, do not climb the ladder next to it
            raise
        except Exception as exc:  # a task that gave up after its retries: this rung failed, try the next
            log.warning("%s: %s raised %s: %s — falling back", node, step.kind.value, type(exc).__name__, exc)
            _finish_attempt(led, attempt.id, ActionOutcome.FAILED, error=f"{type(exc).__name__}: {exc}"[:500])
            timeline.mark(f"{step.kind.value} failed")
            out["steps"][-1]["result"] = {"failed": f"{type(exc).__name__}: {exc}"}
            if dry_run:
                return _finish(out | {"status": "planned"})
            continue
        _finish_attempt(led, attempt.id, ActionOutcome.PLANNED if dry_run else ActionOutcome.SUCCEEDED, detail=result)
        out["steps"][-1]["result"] = result
        status = "planned" if dry_run else result.pop("status")
        timeline.mark(f"{step.kind.value} {status}")
        if status in (Outcome.FIXED, Outcome.RESTARTED, Outcome.PLANNED) and step.kind is not P.REPLACE:
            record_remediation_outcome(node, succeeded=True, incident_id=incident_id, dry_run=dry_run)
        if not dry_run and status in (Outcome.FIXED, Outcome.RESTARTED):
            led.set_incident_status(incident_id, IncidentStatus.RESOLVED, detail=f"{step.kind.value}: {status}",
                                    fence=fence(incident_id))
        if recover_after and step.kind is P.REPLACE and status in (Outcome.REPLACED, Outcome.REPLACED_JOB_NOT_FULL):
            # the job runs on the spare: fix the failed node off the critical path, burn-in, back to the spares
            from flows.recover_node import recover_node

            out["recovery"] = run_subflow(recover_node, node, xid=xid, gpu=gpu, incident_id=incident_id,
                                          dry_run=dry_run)
        return _finish(out | result | {"status": status})
    raise RuntimeError(f"{node}: ladder did not settle within {MAX_STEPS} steps: {out['steps']}")


# ---------------------------------------------------------------------------------------------- steps
def _do_step(step: Step, node: str, gpu: int | None, attempt_id: int, incident_id: int, dry_run: bool,
             xid: int) -> dict[str, Any]:
    settings = runtime.settings()
    why = f"XID {xid}: {step.kind.value}"
    if step.kind is P.RESTART_APP:
        work = settings.workload
        done = restart_app(node, work.namespace, attempt_id, dry_run, incident_id)
        size = wait_job_back(node, work.namespace, work.job, work.resume_timeout_seconds, dry_run)
        if not size["back_on_node"] and (size.get("gpus_short") or size["ready"] >= size["desired"] - 1):
            # the job's pod cannot run here again while the rest of the job runs (or the node lacks the GPUs for
            # it): the fault outlived the restart, so this rung failed (reporting "restarted" would close the
            # incident and leave the gang job short until a person noticed). A gang still coming back as a whole is
            # no evidence against the node.
            why = ("its GPUs are not allocatable (the device plugin took the faulty GPU out)" if size.get("gpus_short")
                   else f"not within {human_duration(work.resume_timeout_seconds)} of the restart")
            raise StepFailed(f"the job did not come back on {node}: {why} ({size['ready']}/{size['desired']} pods "
                             "ready); the fault holds")
        schedule = backoff_schedule(settings.ladder)
        nxt = (datetime.now(timezone.utc) + schedule[step.attempt]).isoformat() if step.attempt < len(schedule) else None
        return {"status": "restarted", "restarted": done["restarted"], "workload": size,
                "backoff_minutes": [d.total_seconds() / 60 for d in schedule], "restart_attempt": step.attempt,
                "next_restart_not_before": nxt,
                "note": (f"next restart not before {nxt}" if nxt else "no restart left: a recurrence climbs a rung")}
    if step.kind is P.REPLACE:
        from flows.replace_node import replace_node

        res = run_subflow(replace_node, node=node, cause=f"XID {xid}: {step.reason}", signal="xid", xid=xid, gpu=gpu,
                          incident_id=incident_id, dry_run=dry_run)
        done = outcome_of(res)
        if done is None or not done.fixed or done is Outcome.DUPLICATE:
            raise StepFailed(f"replace_node ended {res.get('status')}: {res.get('why', '')}")
        return {"status": done.value, "replacement": res.get("replacement")}

    # reset GPU / reboot: take the node out, act, verify, bring it back
    quarantine_node(node, why, attempt_id, dry_run, incident_id)
    _respect_operator(node, dry_run)
    drain_for_fix(node, attempt_id, dry_run, incident_id)
    _respect_operator(node, dry_run)
    if step.kind is P.RESET_GPU:
        job = reset_gpu(node, gpu, attempt_id, dry_run, incident_id)
        if not job.get("succeeded"):
            raise StepFailed(f"gpu-reset Job {job.get('phase')}: {_tail(job.get('logs', ''))}",
                             timed_out=job.get("phase") == "Timeout")
    elif step.kind is P.REBOOT:
        rb = reboot_node(node, attempt_id, dry_run, incident_id)
        if rb.get("via") == "job" and not rb.get("succeeded"):
            raise StepFailed(f"reboot Job {rb.get('phase')}: {_tail(rb.get('logs', ''))}",
                             timed_out=rb.get("phase") == "Timeout")
        up = wait_node_ready(node, step.timeout.total_seconds(), dry_run, boot_id_before=rb.get("boot_id_before", ""))
        if not up["ready"]:
            raise StepFailed(f"node not Ready {human_duration(up['seconds'])} after the reboot", timed_out=True)
    else:
        raise StepFailed(f"{step.kind.value} is not an in-place step")
    _respect_operator(node, dry_run)
    probe = verify_gpus(node, attempt_id, dry_run, incident_id)
    if not probe["passed"]:
        raise StepFailed(f"NVML probe after {step.kind.value}: {probe['verdict']}: {'; '.join(probe['reasons'][:3])}")
    release_node(node, f"{why} fixed and verified", attempt_id, dry_run, incident_id)
    return {"status": "fixed", "verify": probe}


def _after_failed_rung(step: Step, history: list[Attempt], node: str, xid: int, gpu: int | None, incident_id: int,
                       resolution: Resolution, settings) -> tuple[Step, dict[str, Any] | None]:
    """The ladder's next step, or the expected-cost choice when it is deeper (remedy.remediate.choice
    .after_failed_rung), given the in-place fixes of this fault that already failed or did not hold."""
    now = datetime.now(timezone.utc)
    since = now - timedelta(hours=settings.ladder.recurrence_window_hours)
    node_level = xid in settings.ladder.stop_retrying_xids
    kinds = [a.kind for a in history if a.xid == xid and (node_level or a.gpu == gpu) and a.started_at >= since
             and a.outcome is not AttemptOutcome.RUNNING]
    depth = tried_depth(kinds)
    if depth < 0:
        return step, None
    chose = choose_remediation(node, xid, incident_id, tried_depth=depth)
    ladder = LADDERS[resolution]
    kind = after_failed_rung(ladder, step.kind, Option(chose["option"]))
    if kind is step.kind:
        return step, chose
    reason = f"{step.reason}; expected cost instead: {kind.value} ({chose['reason']})"
    return Step(kind, ladder.index(kind), 1, step_timeout(kind, settings.ladder), now, reason), chose


def _respect_operator(node: str, dry_run: bool) -> None:
    drift = check_drift(node)
    if drift and not dry_run:
        raise OperatorWins(f"{node}: {drift['what']} ({drift.get('detail', '')}) — the operator's change stands")


def _tail(text: str, n: int = 2) -> str:
    return " / ".join(line for line in text.strip().splitlines()[-n:]) or "no output"


def _escalate(node: str, reason: str, incident_id: int, dry_run: bool, history: list[Attempt], entry,
              ask_replace: bool) -> dict[str, Any]:
    from flows.escalate import escalate

    took_out = any(a.kind in (P.RESET_GPU, P.REBOOT, P.REPLACE) for a in history) or \
        entry.resolution is not Resolution.CHECK_MECHANICALS
    return run_subflow(escalate, node=node, reason=reason, incident_id=incident_id, dry_run=dry_run,
                       quarantine=took_out, ask_replace=ask_replace)


# ---------------------------------------------------------------------------------------------- ledger
def _start_attempt(led, node: str, incident_id: int, step: Step, xid: int, gpu: int | None, dry_run: bool):
    rec, _ = led.start_action(Action(
        kind=f"{ATTEMPT_PREFIX}{step.kind.value}", node=node, requested_by=requester(), dry_run=dry_run,
        incident_id=incident_id,
        detail={"xid": xid, "gpu": gpu, "rung": step.rung, "attempt": step.attempt, "reason": step.reason,
                "timeout_s": step.timeout.total_seconds(), "not_before": step.not_before.isoformat()}),
        fence=fence(incident_id))  # a run taken over while it stalled starts no rung
    return rec


def _finish_attempt(led, action_id: int, outcome: ActionOutcome, *, error: str = "", detail: dict | None = None):
    try:
        led.finish_action(action_id, outcome, error=error, detail=_jsonable(detail or {}))
    except LedgerConflict as exc:  # someone marked it abandoned meanwhile; the ledger keeps the first word
        get_run_logger().warning("attempt %s: %s", action_id, exc)


def _jsonable(d: dict) -> dict:
    import json

    return json.loads(json.dumps(d, default=str))


def _record_skip(led, node: str, incident_id: int, kind: str, why: str, dry_run: bool) -> None:
    led.start_action(Action(kind=kind, node=node, requested_by=requester(), dry_run=dry_run, incident_id=incident_id,
                            outcome=ActionOutcome.SKIPPED, error=why[:500]), fence=fence(incident_id))


def _abandon_orphans(led, node: str) -> None:
    """A fix attempt left RUNNING by a run that crashed (and not settled by a takeover) is closed as abandoned, so
    the ladder can go on: it tries that rung again."""
    me = requester()
    for a in led.actions(node=node):
        if a.kind.startswith(ATTEMPT_PREFIX) and a.outcome is ActionOutcome.RUNNING and a.requested_by != me:
            _finish_attempt(led, a.id, ActionOutcome.FAILED, error=f"{ABANDONED}{a.requested_by} ended without an outcome")


def _finish(out: dict[str, Any], escalation: dict[str, Any] | None = None) -> dict[str, Any]:
    timeline: Timeline = out.pop("_timeline")
    if out["status"] not in [m[0].split(" ", 1)[-1] for m in timeline.marks[-1:]]:
        timeline.mark(out["status"])
    out["timeline"] = timeline.rows()
    if escalation is not None:
        out["escalation"] = {k: escalation.get(k) for k in ("status", "replacement", "approval")}
    lines = [f"### {out['node']}: XID {out['xid']} → {out['status']}", "",
             f"- NVIDIA resolution: {out['resolution']}"]
    lines += [f"- {s['step']} (rung {s['rung']}, attempt {s['attempt']}): {s['reason']}" for s in out["steps"]]
    if out.get("why"):
        lines.append(f"- why: {out['why']}")
    if out.get("note"):
        lines.append(f"- {out['note']}")
    if out.get("dry_run"):
        lines.append("- dry-run: the step was planned and recorded, nothing changed")
    create_markdown_artifact(key=names.artifact_key("fix", out["node"]), markdown="\n".join(lines), description="In-place fix")
    out["finished_at"] = datetime.now(timezone.utc).isoformat()
    return out
