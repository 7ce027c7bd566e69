"""Record a person's answer (first decision wins) and resume the paused flow run with it.

Used by the Slack receiver, the open-loop endpoint and the demo's AutoApprover, so every way of answering goes
through the same two steps: the ledger first (the audit trail and the arbiter of races), then Prefect.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from remedy.ledger.errors import LedgerConflict

log = logging.getLogger(__name__)
RESUME_WAIT_SECONDS = 5.0  # a click can land between the ledger write and the flow's pause: retry that long
SCHEMA_NOT_SAVED = "Run input schema not found"  # the Prefect server's reject reason (server/api/flow_runs.py)


@dataclass
class Decided:
    approval_id: int
    decision: str
    by: str
    first: bool  # False: someone decided earlier; `decision`/`by` are theirs
    resumed: bool = False
    error: str = ""
    gone: str = ""  # the run that asked is gone (its process died): what became of its incident; nothing recorded


def gone_text(ledger, approval, lease) -> str:
    """What a late answer for a gone run is told: the run is gone, and who has the incident now."""
    from remedy.domain.model import IncidentStatus
    from remedy.ledger.leases import gone_since

    head = f"The run waiting for this answer is gone ({approval.flow_run_id} {gone_since(lease)}); nothing was done."
    if approval.incident_id is None:
        return head + " Ask again by starting the flow anew."
    inc = ledger.get_incident(approval.incident_id)
    holder_gone = inc.flow_run_id and ledger.run_gone(inc.flow_run_id) is not None
    if inc.status is IncidentStatus.ACTING and not holder_gone:
        return head + f" Incident {inc.id} was handed to run {inc.flow_run_id}: it asks again if it still needs to."
    if inc.status is IncidentStatus.ACTING or inc.status is IncidentStatus.OPEN:
        return head + (f" Incident {inc.id} on {inc.node} is re-announced: a new run takes it over and asks again "
                       "if it still needs to.")
    return head + f" Incident {inc.id} on {inc.node} is {inc.status.value}: {inc.detail}"


def decide_and_resume(ledger, approval_id: int, *, decision: str, by: str, reason: str = "",
                      resume_wait_seconds: float = RESUME_WAIT_SECONDS) -> Decided:
    """Write the decision; if it is the first, resume the flow run that waits for it with the answer as input.

    A pending question whose run is gone (its lease expired: the process was killed while it waited) is not
    answered: nobody waits for it, and its incident is (or is about to be) taken over by a run that asks again.
    The result's `gone` says so; the caller should wake the lease watchdog."""
    pending = ledger.get_approval(approval_id)
    lease = ledger.run_gone(pending.flow_run_id) if pending.pending else None
    if lease is not None:
        text = gone_text(ledger, pending, lease)
        log.warning("approval %s: %s by %s arrived after run %s was gone: %s", approval_id, decision, by,
                    pending.flow_run_id, text)
        _record_late(ledger, pending, decision, by, text)
        return Decided(approval_id, decision, by, first=False, gone=text)
    try:
        rec = ledger.decide_approval(approval_id, decision=decision, decided_by=by, reason=reason)
    except LedgerConflict:
        rec = ledger.get_approval(approval_id)
        return Decided(approval_id, rec.decision or "", rec.decided_by or "", first=False)
    out = Decided(approval_id, decision, by, first=True)
    if decision == "timeout":
        return out
    try:
        from remedy import runtime
        from remedy.approvals.model import form_approver

        # the form lists approvals.approvers and the server checks the answer against it; the ledger says who
        approver = form_approver(by, runtime.settings().approvals.approvers)
        resume(rec.flow_run_id, {"decision": decision, "reason": reason, "approver": approver},
               wait_seconds=resume_wait_seconds)
        out.resumed = True
    except Exception as exc:  # the decision stands in the ledger; the flow reads it when it next looks
        out.error = f"{type(exc).__name__}: {exc}"
        log.warning("approval %s decided (%s by %s) but flow run %s was not resumed: %s", approval_id, decision,
                    by, rec.flow_run_id, out.error)
    return out


def _record_late(ledger, approval, decision: str, by: str, text: str) -> None:
    """The audit trail keeps who answered too late (the approval itself stays for the takeover to close)."""
    from remedy.domain.model import Action, ActionOutcome

    node = ledger.get_incident(approval.incident_id).node if approval.incident_id is not None else "fleet"
    ledger.start_action(Action(kind="approval_too_late", node=node, requested_by=by, incident_id=approval.incident_id,
                               outcome=ActionOutcome.SKIPPED, error=text[:2000],
                               detail={"approval_id": approval.id, "decision": decision, "by": by,
                                       "flow_run_id": approval.flow_run_id}))


def resume(flow_run_id: str, run_input: dict, *, wait_seconds: float = RESUME_WAIT_SECONDS) -> None:
    """resume_flow_run, retrying while the run has not reached its pause yet (it is still posting to Slack)."""
    from uuid import UUID

    from prefect.exceptions import NotPausedError
    from prefect.flow_runs import resume_flow_run

    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            resume_flow_run(UUID(flow_run_id), run_input=run_input, _sync=True)  # type: ignore[call-arg]  # sync_compatible
            return
        except NotPausedError:
            if time.monotonic() >= deadline or _finished(flow_run_id):
                raise
        except RuntimeError as exc:
            # Prefect sets PAUSED first and saves the input schema after (prefect/flow_runs.py, pause with
            # wait_for_input); a resume between the two is rejected with this reason and works a moment later.
            if SCHEMA_NOT_SAVED not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.25)


def _finished(flow_run_id: str) -> bool:
    from uuid import UUID

    from prefect import get_client

    with get_client(sync_client=True) as client:
        state = client.read_flow_run(UUID(flow_run_id)).state
    return bool(state and state.is_final())


def is_paused(flow_run_id: str) -> bool:
    from uuid import UUID

    from prefect import get_client

    with get_client(sync_client=True) as client:
        state = client.read_flow_run(UUID(flow_run_id)).state
    return bool(state and state.is_paused())


def breaker_approval_kind(scope_key: str) -> str:
    """The approval kind a run held by the breaker of `scope_key` ('rack:rack-2') asks under."""
    return f"breaker:{scope_key}"


def answer_breaker_waiters(ledger, scope_key: str, *, by: str) -> list[Decided]:
    """`remedy breaker close SCOPE` answers the questions paused on that scope's breaker: closing it is the answer
    they wait for (approve: the held failures go on through the rest of the gate — other scopes, the budget, the
    spare reserve — and may ask again). Without this the runs stayed paused until their timeout denied them while
    `breaker status` said all closed. Decided in the ledger first, then each run is resumed."""
    kind = breaker_approval_kind(scope_key)
    reason = f"breaker {scope_key} closed by {by} (remedy breaker close)"
    return [decide_and_resume(ledger, a.id, decision="approve", by=by, reason=reason)
            for a in ledger.approvals(pending=True) if a.kind == kind]


def answer_after_close(key: str, by: str, *, say=print) -> list[Decided]:
    """The CLI side of closing a breaker: the approvals waiting on it are answered and their runs resumed, each said
    in one line. The runs are resumed through PREFECT_API_URL, else through the Prefect server `remedy up` /
    `remedy demo` started (recorded in their workdirs), never a temporary one of Prefect's own."""
    import os

    from remedy import runtime

    led = runtime.ledger()
    waiting = [a for a in led.approvals(pending=True) if a.kind == breaker_approval_kind(key)]
    if not waiting:
        return []
    from prefect.settings import PREFECT_API_URL

    if not (os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value()):  # never Prefect's temporary server
        api = _remedys_own_api()
        if api is None:
            say(f"{len(waiting)} approval(s) wait on {key}, but no Prefect API is known (set PREFECT_API_URL): "
                "answer them in the Prefect UI")
            return []
        from remedy.platform.prefect_server import point_clients_at

        point_clients_at(api)
    done = answer_breaker_waiters(led, key, by=by)
    for d in done:
        state = "run resumed" if d.resumed else (d.gone or d.error or "already answered")
        say(f"approval {d.approval_id} ({breaker_approval_kind(key)}): {d.decision} by {d.by} — {state}")
    return done


def _remedys_own_api() -> str | None:
    from remedy.platform import processes
    from remedy.platform.prefect_server import ROLE, healthy

    for workdir in processes.DEFAULT_WORKDIRS:
        record = processes.read_state(workdir).get(ROLE)
        if record and processes.alive(record) and healthy(record.get("api_url", "")):
            return str(record["api_url"])
    return None
