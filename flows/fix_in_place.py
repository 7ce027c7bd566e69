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

from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from remedy import runtime
from remedy.approvals.open_loop import is_open_loop, node_pool
from remedy.domain import names
from remedy.domain.durations import human_duration
from remedy.domain.model import ActionOutcome, IncidentStatus
from remedy.domain.outcome import Outcome, outcome_of
from remedy.domain.timeline import Timeline
from remedy.domain.xid import RemediationPath, Resolution, lookup
from remedy.ledger.errors import LeaseLost
from remedy.ledger.leases import ABANDONED
from remedy.ledger.operator import RESPECT_DRIFT_KIND
from remedy.remediate.choice import Option, after_failed_rung, tried_depth
from remedy.remediate.results import RebootVia, RemediationChoice, RemediationClaim
from remedy.remediate.runbook import after_step, needs_recheck, own_incident_closing, recheck_outcome, took_node_out
from remedy.safety.ladder import (
    LADDERS,
    Attempt,
    AttemptOutcome,
    LadderExhausted,
    Step,
    backoff_schedule,
    next_step,
    step_timeout,
)
from tasks.approvals import propose_open_loop
from tasks.cluster import check_drift
from tasks.fixes import (
    drain_for_fix,
    quarantine_node,
    reboot_node,
    release_node,
    reset_gpu,
    restart_app,
    verify_gpus,
    wait_job_back,
    wait_node_ready,
)
from tasks.gate import GatePass, pass_gate, record_remediation_outcome
from tasks.health import reconfirm_fault
from tasks.leases import fence, keeps_lease
from tasks.ledger import (
    begin_action,
    claim_remediation,
    end_action,
    note_action,
    open_incident,
    requester,
    sync_fleet,
)
from tasks.states import final_state, run_subflow
from tasks.tags import tag_this_run
from tasks.triage import choose_remediation

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
    out = _fix(node, xid, gpu, incident_id, dry_run, detected_at, ask_replace_on_escalation)
    if incident_id is None:  # started by a person: no triage above closes the incident this run opened
        _close_own_incident(out)
    return final_state(out, node=node)


def _close_own_incident(out: dict[str, Any]) -> None:
    """The incident a run started by hand opened is closed as its outcome says (stood down by the operator:
    ignored, with why), unless a step already closed it: left `acting`, the watchdog would re-announce it once the
    run's lease ran out and triage would re-cordon the node the operator just uncordoned."""
    from tasks.triage import close_incident

    closing = own_incident_closing(out.get("status"), out.get("dry_run", False), out.get("why", ""))
    if closing is not None and out.get("incident_id") is not None:
        close_incident(out["incident_id"], closing.status.value, closing.detail, only_if_acting=True)


@dataclass
class _Run:
    """What one fix-in-place run carries from rung to rung."""

    node: str
    xid: int
    gpu: int | None
    incident_id: int
    dry_run: bool
    entry: Any  # the XID's catalog entry (remedy.domain.xid)
    out: dict[str, Any]
    detected: str
    ask_replace: bool
    asked_open_loop: bool = False
    gate: GatePass | None = None
    recover_after: bool = False

    @property
    def timeline(self) -> Timeline:
        timeline: Timeline = self.out["_timeline"]
        return timeline


def _fix(node: str, xid: int, gpu: int | None, incident_id: int | None, dry_run: bool | None,
         detected_at: str | None, ask_replace_on_escalation: bool) -> dict[str, Any]:
    settings = runtime.settings()
    dry_run = settings.dry_run if dry_run is None else dry_run
    tag_this_run(node, stage="fix-in-place", xid=xid, dry_run=dry_run)
    entry = lookup(xid)
    out: dict[str, Any] = {"node": node, "xid": xid, "gpu": gpu, "dry_run": dry_run, "resolution": entry.resolution.value,
                           "steps": [], "_timeline": Timeline.starting(detected_at)}

    # 1. Incident: attach to the receiver's, or open one (CLI / demo runs); one incident, one remediation: a
    #    duplicate trigger stands down, and so does a late one after the end.
    incident_id, refused = _claim(node, xid, gpu, incident_id, dry_run, entry)
    out["incident_id"] = incident_id
    if refused:
        return _finish(out | {"status": "duplicate", "why": refused})
    led = runtime.ledger()
    _abandon_orphans(led, node)
    run = _Run(node, xid, gpu, incident_id, dry_run, entry, out,
               detected_at or datetime.now(UTC).isoformat(), ask_replace_on_escalation)
    for _ in range(MAX_STEPS):
        # 2. Decide from the ledger's history of this fault on this node (recurrences climb the ladder).
        history = attempts_from_actions(led.actions(node=node))
        step = next_step(history, xid, gpu, entry.resolution, datetime.now(UTC), settings.ladder)
        if isinstance(step, LadderExhausted):
            return _exhausted(run, step, history)
        step = _weigh_rung(run, step, history, settings)
        # 3.–5. Before touching anything: the external go-ahead (open loop), the gate, the re-check.
        done = _ignore(run, step) or _open_loop(run, step, settings) or _pass_gate(run, step) or \
            _recheck(run, step, settings)
        if done is not None:
            return done
        # 6. The step itself, recorded as one ladder attempt; a failed rung falls to the next.
        done = _rung(run, step)
        if done is not None:
            return done
    raise RuntimeError(f"{node}: ladder did not settle within {MAX_STEPS} steps: {out['steps']}")


def _claim(node: str, xid: int, gpu: int | None, incident_id: int | None, dry_run: bool, entry
           ) -> tuple[int, str]:
    """The incident this run acts on, and why it stands down ("" when it holds it)."""
    sync_fleet()
    by_person = incident_id is None  # automation always passes the incident; a run without one was started by hand
    if incident_id is None:  # by_person
        incident_id = open_incident(node, "xid", gpu=gpu, xid=xid, detail=f"XID {xid} {entry.name}").id
    claim = claim_remediation(incident_id, by_person=by_person) if not dry_run else RemediationClaim(True)
    if claim.claimed:
        return incident_id, ""
    return incident_id, (f"incident {incident_id} is already {claim.settled.value}" if claim.settled
                         else f"run {claim.holder} is handling incident {incident_id}")


def _exhausted(run: _Run, step: LadderExhausted, history: list[Attempt]) -> dict[str, Any]:
    get_run_logger().warning("%s: %s", run.node, step.reason)
    if run.gate is not None:  # an in-place attempt held capacity: it ended without a fix
        record_remediation_outcome(run.node, succeeded=False, incident_id=run.incident_id, dry_run=run.dry_run)
    return _finish(run.out | {"status": "escalated", "escalated": True, "reason": step.reason, "why": step.reason},
                   _escalate(run.node, step.reason, run.incident_id, run.dry_run, history, run.entry, run.ask_replace))


def _weigh_rung(run: _Run, step: Step, history: list[Attempt], settings) -> Step:
    """After a rung of this fault failed or did not hold, expected cost decides replace vs climb (the same choose()
    as triage and the simulator): a ready spare often costs the job less than the next rung."""
    if step.kind in IN_PLACE and settings.ladder.replace_first and not run.dry_run:
        step, chose = _after_failed_rung(step, history, run.node, run.xid, run.gpu, run.incident_id,
                                         run.entry.resolution, settings)
        if chose is not None:
            run.out["choice"] = chose.summary("tried_depth")
            create_markdown_artifact(key=names.artifact_key("fix", run.node, "options"), markdown=chose.markdown,
                                     description="After a failed rung: the options by expected job downtime")
            run.recover_after = step.kind is P.REPLACE
    run.out["steps"].append({"step": step.kind.value, "rung": step.rung, "attempt": step.attempt,
                             "reason": step.reason})
    get_run_logger().info("%s: %s (%s)", run.node, step.kind.value, step.reason)
    return step


def _ignore(run: _Run, step: Step) -> dict[str, Any] | None:
    if step.kind is not P.IGNORE:
        return None
    note_action("fix_ignored", run.node, step.reason, incident_id=run.incident_id, dry_run=run.dry_run)
    return _finish(run.out | {"status": "ignored", "why": step.reason})


def _open_loop(run: _Run, step: Step, settings) -> dict[str, Any] | None:
    """Open loop: propose, then wait for the external system's go-ahead before touching anything (asked once)."""
    if run.asked_open_loop:
        return None
    live = runtime.cluster().get_node(run.node)
    if not is_open_loop(live, settings.ladder.open_loop_pools):
        return None
    run.asked_open_loop = True
    go = propose_open_loop(node=run.node, incident_id=run.incident_id,
                           action=f"{STEP_WORDS[step.kind]} (XID {run.xid})", reason=step.reason, pool=node_pool(live),
                           timeout_seconds=step.timeout.total_seconds(),
                           details={"xid": run.xid, "gpu": run.gpu, "step": step.kind.value})
    run.out["open_loop"] = {"decision": go.decision, "by": go.by}
    if go.approved:
        return None
    return _finish(run.out | {"status": "proposed-not-executed",
                              "why": f"open-loop pool {node_pool(live)}: {go.decision} by {go.by or 'nobody'}"})


def _pass_gate(run: _Run, step: Step) -> dict[str, Any] | None:
    """Gate (once per incident): circuit breakers and capacity budget; a restart takes no capacity."""
    if run.gate is not None:
        return None
    # one gate, asked the same way for every remediation
    run.gate = gate = pass_gate(run.node, run.incident_id, f"XID {run.xid}", run.detected, run.dry_run,
                                needs_spare=step.kind is P.REPLACE, takes_node_out=step.kind is not P.RESTART_APP)
    run.out |= gate.outcome_fields()
    if gate.status is None:
        return None
    return _finish(run.out | {"status": gate.status.value, "why": gate.gate})


def _recheck(run: _Run, step: Step, settings) -> dict[str, Any] | None:
    """A reset or reboot stops the job: the fault must still hold, and not be a failed monitor (once per run)."""
    if not needs_recheck(step.kind.value, bool(run.out.get("recheck")), settings.reconfirm.enabled):
        return None
    check = reconfirm_fault(run.node, run.incident_id, "xid", run.dry_run)
    run.out["recheck"] = check.to_dict()
    if check.act:
        return None
    get_run_logger().warning("%s: %s — not acting", run.node, check.why)
    status = recheck_outcome(check.verdict.value)
    record_remediation_outcome(run.node, succeeded=True, incident_id=run.incident_id, dry_run=run.dry_run)
    if not run.dry_run:
        runtime.ledger().set_incident_status(run.incident_id, status.incident_status,
                                             detail=f"{status.label.lower()}: {check.why}",
                                             fence=fence(run.incident_id))
    run.timeline.mark(status.label.lower())
    return _finish(run.out | {"status": status.value, "why": check.why})


def _rung(run: _Run, step: Step) -> dict[str, Any] | None:
    """One ladder attempt. Returns the run's end, or None when the rung failed and the next one is tried."""
    attempt = _start_attempt(run.node, run.incident_id, step, run.xid, run.gpu, run.dry_run)
    try:
        result = _do_step(step, run.node, run.gpu, attempt, run.incident_id, run.dry_run, run.xid)
    except OperatorWins as exc:
        end_action(attempt, ActionOutcome.SKIPPED, error=str(exc))
        note_action(RESPECT_DRIFT_KIND, run.node, str(exc), incident_id=run.incident_id, dry_run=run.dry_run)
        record_remediation_outcome(run.node, succeeded=False, incident_id=run.incident_id, dry_run=run.dry_run)
        return _finish(run.out | {"status": "stopped-by-operator", "why": str(exc)})
    except StepFailed as exc:
        why, detail, words = str(exc), {"timed_out": exc.timed_out}, "timed out" if exc.timed_out else "failed"
        return _rung_failed(run, step, attempt, why, detail, words, {"failed": why, "timed_out": exc.timed_out})
    except LeaseLost:  # another run has this incident now: stop, do not climb the ladder next to it
        raise
    except Exception as exc:  # noqa: BLE001 - a task that gave up after its retries: this rung failed, try the next
        why = f"{type(exc).__name__}: {exc}"
        return _rung_failed(run, step, attempt, why[:500], None, "failed", {"failed": why})
    return _rung_done(run, step, attempt, result)


def _rung_failed(run: _Run, step: Step, attempt_id: int, why: str, detail: dict | None, words: str,
                 shown: dict[str, Any]) -> dict[str, Any] | None:
    get_run_logger().warning("%s: %s failed: %s — falling back", run.node, step.kind.value, why)
    end_action(attempt_id, ActionOutcome.FAILED, error=why, detail=detail)
    run.timeline.mark(f"{step.kind.value} {words}")
    run.out["steps"][-1]["result"] = shown
    return _finish(run.out | {"status": "planned"}) if run.dry_run else None


def _rung_done(run: _Run, step: Step, attempt_id: int, result: dict[str, Any]) -> dict[str, Any]:
    led = runtime.ledger()
    end_action(attempt_id, ActionOutcome.PLANNED if run.dry_run else ActionOutcome.SUCCEEDED, detail=result)
    run.out["steps"][-1]["result"] = result
    status = "planned" if run.dry_run else result.pop("status")
    run.timeline.mark(f"{step.kind.value} {status}")
    then = after_step(status, step.kind.value, run.dry_run, run.recover_after)
    if then.breaker_success:
        record_remediation_outcome(run.node, succeeded=True, incident_id=run.incident_id, dry_run=run.dry_run)
    if then.resolves:
        led.set_incident_status(run.incident_id, IncidentStatus.RESOLVED, detail=f"{step.kind.value}: {status}",
                                fence=fence(run.incident_id))
    if then.recover:
        # the job runs on the spare: fix the failed node off the critical path, burn-in, back to the spares
        from flows.recover_node import recover_node

        run.out["recovery"] = run_subflow(recover_node, run.node, xid=run.xid, gpu=run.gpu,
                                          incident_id=run.incident_id, dry_run=run.dry_run)
    return _finish(run.out | result | {"status": status})


# ---------------------------------------------------------------------------------------------- steps
def _do_step(step: Step, node: str, gpu: int | None, attempt_id: int, incident_id: int, dry_run: bool,
             xid: int) -> dict[str, Any]:
    if step.kind is P.RESTART_APP:
        return _restart(step, node, attempt_id, incident_id, dry_run)
    if step.kind is P.REPLACE:
        return _replace(step, node, gpu, incident_id, dry_run, xid)
    if step.kind not in (P.RESET_GPU, P.REBOOT):
        raise StepFailed(f"{step.kind.value} is not an in-place step")
    # reset GPU / reboot: take the node out, act, verify, bring it back
    why = f"XID {xid}: {step.kind.value}"
    quarantine_node(node, why, attempt_id, dry_run, incident_id)
    _respect_operator(node, dry_run)
    drain_for_fix(node, attempt_id, dry_run, incident_id)
    _respect_operator(node, dry_run)
    if step.kind is P.RESET_GPU:
        _reset(node, gpu, attempt_id, dry_run, incident_id)
    else:
        _reboot(step, node, attempt_id, dry_run, incident_id)
    _respect_operator(node, dry_run)
    probe = verify_gpus(node, attempt_id, dry_run, incident_id)
    if not probe.passed:
        raise StepFailed(f"NVML probe after {step.kind.value}: {probe.verdict}: {'; '.join(probe.reasons[:3])}")
    release_node(node, f"{why} fixed and verified", attempt_id, dry_run, incident_id)
    return {"status": "fixed", "verify": asdict(probe) | {"reasons": list(probe.reasons)}}


def _restart(step: Step, node: str, attempt_id: int, incident_id: int, dry_run: bool) -> dict[str, Any]:
    settings = runtime.settings()
    work = settings.workload
    done = restart_app(node, work.namespace, attempt_id, dry_run, incident_id)
    size = wait_job_back(node, work.namespace, work.job, work.resume_timeout_seconds, dry_run)
    if not size.back_on_node and (size.gpus_short or size.ready >= size.desired - 1):
        # the job's pod cannot run here again while the rest of the job runs (or the node lacks the GPUs for
        # it): the fault outlived the restart, so this rung failed (reporting "restarted" would close the
        # incident and leave the gang job short until a person noticed). A gang still coming back as a whole is
        # no evidence against the node.
        why = ("its GPUs are not allocatable (the device plugin took the faulty GPU out)" if size.gpus_short
               else f"not within {human_duration(work.resume_timeout_seconds)} of the restart")
        raise StepFailed(f"the job did not come back on {node}: {why} ({size.ready}/{size.desired} pods "
                         "ready); the fault holds")
    schedule = backoff_schedule(settings.ladder)
    nxt = (datetime.now(UTC) + schedule[step.attempt]).isoformat() if step.attempt < len(schedule) else None
    return {"status": "restarted", "restarted": list(done.restarted), "workload": size.to_dict(),
            "backoff_minutes": [d.total_seconds() / 60 for d in schedule], "restart_attempt": step.attempt,
            "next_restart_not_before": nxt,
            "note": (f"next restart not before {nxt}" if nxt else "no restart left: a recurrence climbs a rung")}


def _replace(step: Step, node: str, gpu: int | None, incident_id: int, dry_run: bool, xid: int) -> dict[str, Any]:
    from flows.replace_node import replace_node

    res = run_subflow(replace_node, node=node, cause=f"XID {xid}: {step.reason}", signal="xid", xid=xid, gpu=gpu,
                      incident_id=incident_id, dry_run=dry_run)
    done = outcome_of(res)
    if done is None or not done.fixed or done is Outcome.DUPLICATE:
        raise StepFailed(f"replace_node ended {res.get('status')}: {res.get('why', '')}")
    return {"status": done.value, "replacement": res.get("replacement")}


def _reset(node: str, gpu: int | None, attempt_id: int, dry_run: bool, incident_id: int) -> None:
    job = reset_gpu(node, gpu, attempt_id, dry_run, incident_id)
    if not job.succeeded:
        raise StepFailed(f"gpu-reset Job {job.phase}: {_tail(job.logs)}", timed_out=job.phase == "Timeout")


def _reboot(step: Step, node: str, attempt_id: int, dry_run: bool, incident_id: int) -> None:
    rb = reboot_node(node, attempt_id, dry_run, incident_id)
    if rb.via is RebootVia.JOB and not rb.succeeded:
        raise StepFailed(f"reboot Job {rb.phase}: {_tail(rb.logs)}", timed_out=rb.phase == "Timeout")
    up = wait_node_ready(node, step.timeout.total_seconds(), dry_run, boot_id_before=rb.boot_id_before)
    if not up.ready:
        raise StepFailed(f"node not Ready {human_duration(up.seconds)} after the reboot", timed_out=True)


def _after_failed_rung(step: Step, history: list[Attempt], node: str, xid: int, gpu: int | None, incident_id: int,
                       resolution: Resolution, settings) -> tuple[Step, RemediationChoice | None]:
    """The ladder's next step, or the expected-cost choice when it is deeper (remedy.remediate.choice
    .after_failed_rung), given the in-place fixes of this fault that already failed or did not hold."""
    now = datetime.now(UTC)
    since = now - timedelta(hours=settings.ladder.recurrence_window_hours)
    node_level = xid in settings.ladder.stop_retrying_xids
    kinds = [a.kind for a in history if a.xid == xid and (node_level or a.gpu == gpu) and a.started_at >= since
             and a.outcome is not AttemptOutcome.RUNNING]
    depth = tried_depth(kinds)
    if depth < 0:
        return step, None
    chose = choose_remediation(node, xid, incident_id, tried_depth=depth)
    ladder = LADDERS[resolution]
    kind = after_failed_rung(ladder, step.kind, Option(chose.option))
    if kind is step.kind:
        return step, chose
    reason = f"{step.reason}; expected cost instead: {kind.value} ({chose.reason})"
    return Step(kind, ladder.index(kind), 1, step_timeout(kind, settings.ladder), now, reason), chose


def _respect_operator(node: str, dry_run: bool) -> None:
    drift = check_drift(node)
    if drift and not dry_run:
        raise OperatorWins(f"{node}: {drift.what} ({drift.detail}) — the operator's change stands")


def _tail(text: str, n: int = 2) -> str:
    return " / ".join(line for line in text.strip().splitlines()[-n:]) or "no output"


def _escalate(node: str, reason: str, incident_id: int, dry_run: bool, history: list[Attempt], entry,
              ask_replace: bool) -> dict[str, Any]:
    from flows.escalate import escalate

    took_out = took_node_out([a.kind.value for a in history], entry.resolution is Resolution.CHECK_MECHANICALS)
    return run_subflow(escalate, node=node, reason=reason, incident_id=incident_id, dry_run=dry_run,
                       quarantine=took_out, ask_replace=ask_replace)


# ---------------------------------------------------------------------------------------------- ledger
def _start_attempt(node: str, incident_id: int, step: Step, xid: int, gpu: int | None, dry_run: bool) -> int:
    return begin_action(f"{ATTEMPT_PREFIX}{step.kind.value}", node, incident_id=incident_id, dry_run=dry_run, detail={
        "xid": xid, "gpu": gpu, "rung": step.rung, "attempt": step.attempt, "reason": step.reason,
        "timeout_s": step.timeout.total_seconds(), "not_before": step.not_before.isoformat()})


def _abandon_orphans(led, node: str) -> None:
    """A fix attempt left RUNNING by a run that crashed (and not settled by a takeover) is closed as abandoned, so
    the ladder can go on: it tries that rung again."""
    me = requester()
    for a in led.actions(node=node):
        if a.kind.startswith(ATTEMPT_PREFIX) and a.outcome is ActionOutcome.RUNNING and a.requested_by != me:
            end_action(a.id, ActionOutcome.FAILED, error=f"{ABANDONED}{a.requested_by} ended without an outcome")


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
    out["finished_at"] = datetime.now(UTC).isoformat()
    return out
