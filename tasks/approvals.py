"""Human approval from inside a flow: ledger row → Slack message with buttons → pause for input → record, update.

    outcome = request_approval(kind="replace", title="Replace gpu042?", summary_markdown="…", incident_id=7,
                               node="gpu042", timeout_seconds=900)
    if outcome.approved: …

The run pauses with Prefect's `pause_flow_run(wait_for_input=ApprovalInput)`, so the same question shows in the
Prefect UI as a form; the Slack buttons resume it through the receiver (remedy.receiver.slack). The first
decision wins (ledger). No answer in time → the safe default, recorded as "timeout", and a reminder in Slack.
Slack down or slow never breaks the flow: the failure is logged and recorded, and the UI path still works.
Call it from the flow body (a pause cannot happen inside a task).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Literal

from prefect import get_run_logger
from prefect.input import RunInput
from pydantic import Field

from remedy import runtime
from remedy.approvals import messages
from remedy.approvals.model import DECISIONS, ApprovalOutcome, refusal_text, wait_phases
from remedy.domain.durations import human_duration
from remedy.domain.model import Action, ActionOutcome
from remedy.errors import RemedyError
from remedy.ledger.errors import LedgerConflict
from tasks.leases import fence, keep_alive


class ApprovalInput(RunInput):
    """What a person answers (Prefect UI form, or the Slack receiver on a button press).

    No defaults for the decision or the approver: submitting the form without choosing is refused by the form,
    never read as a silent deny."""

    decision: Literal["approve", "deny"] = Field(description="Approve or deny the proposed action.")
    approver: str = Field(min_length=1, description="Your name, as listed in approvals.approvers.")
    reason: str = Field("", description="Why, in a few words (kept in the ledger).")


def approval_form(approvers: list[str]) -> type[ApprovalInput]:
    """The form with the configured approvers as a list to pick from (the server refuses any other name); with
    none configured, the free-text field and a description that says how to configure one."""
    from pydantic import create_model

    from remedy.approvals.model import NO_APPROVERS, approver_choices

    choices = approver_choices(approvers)
    if not choices:
        return create_model("ApprovalInput", __base__=ApprovalInput,
                            approver=(str, Field(min_length=1, description=NO_APPROVERS)))
    one_of: Any = Literal[tuple(choices)]  # built at run time from the settings: no static type to name
    return create_model("ApprovalInput", __base__=ApprovalInput, approver=(
        one_of, Field(description="Who answers: one of approvals.approvers.")))


def _running_again(flow_run_id) -> None:
    """After an unanswered pause the server still shows the run Paused (with a live Resume button), and would turn
    whatever the run ends with into "never resumed": the safe default is taken, so the run is running again."""
    from prefect.client.orchestration import get_client
    from prefect.states import Running

    try:
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(flow_run_id, Running(message="no answer in time: safe default"), force=True)
    except Exception as exc:  # the ledger already has the timeout; the run's state is cosmetic here
        get_run_logger().warning("could not set the run back to Running after the approval timed out: %s", exc)


def request_approval(*, kind: str, title: str, summary_markdown: str, incident_id: int | None, node: str | None,
                     timeout_seconds: float, default_on_timeout: str = "deny", slack: bool = True,
                     consequence: str = "nothing was changed") -> ApprovalOutcome:
    """Ask a person; block this flow run (paused, not polling a task) until they answer or the timeout passes."""
    from prefect.runtime import flow_run

    log = get_run_logger()
    if default_on_timeout not in ("approve", "deny"):
        raise ValueError(f"default_on_timeout must be 'approve' or 'deny', got {default_on_timeout!r}")
    if not timeout_seconds or timeout_seconds <= 0:
        raise ValueError(f"approval timeout must be positive, got {timeout_seconds!r}")
    if not flow_run.id:
        raise RemedyError("request_approval must be called from inside a flow run (it pauses the run)")
    led = runtime.ledger()
    rec = led.request_approval(incident_id=incident_id, flow_run_id=str(flow_run.id), kind=kind,
                               fence=fence(incident_id))  # a run taken over asks nobody
    log.info("approval %s (%s) requested: %s — waiting up to %g s", rec.id, kind, title, timeout_seconds)

    notifier, ts = (messages.notifier(runtime.settings()) if slack else None), None
    if notifier is not None:
        blocks = messages.request_blocks(
            approval_id=rec.id, flow_run_id=str(flow_run.id), title=title, summary=summary_markdown,
            timeout_seconds=timeout_seconds, default_on_timeout=default_on_timeout, node=node, incident_id=incident_id)
        ts = _slack(lambda: notifier.post(messages.fallback_text(title), blocks), "post approval request", rec.id, node, incident_id)
        if ts:
            led.set_approval_slack_ts(rec.id, ts)

    decided = led.get_approval(rec.id)
    if decided.pending:  # a very fast answer may already be in the ledger: then there is nothing to wait for
        with keep_alive(str(flow_run.id)):  # a late answer can tell a waiting run from a gone one
            decided = _wait(led, rec.id, title, summary_markdown, timeout_seconds, default_on_timeout, notifier, node,
                            incident_id, flow_run.id)

    outcome = ApprovalOutcome(decision=decided.decision or "timeout", by=decided.decided_by or "",
                              reason=decided.reason, approval_id=rec.id, default_on_timeout=default_on_timeout)
    if decided.decision not in DECISIONS:
        raise RemedyError(f"approval {rec.id} has an unknown decision {decided.decision!r} in the ledger")
    log.info("approval %s: %s by %s%s", rec.id, outcome.decision, outcome.by,
             f" → safe default {default_on_timeout}" if outcome.decision == "timeout" else "")

    if notifier is not None and ts:
        blocks = messages.decided_blocks(title=title, summary=summary_markdown, decision=outcome.decision,
                                         by=outcome.by, reason=outcome.reason)
        _slack(lambda: notifier.update(ts, messages.verdict_text(outcome.decision, outcome.by), blocks),
               "update approval message", rec.id, node, incident_id)
    if notifier is not None and outcome.decision == "timeout":
        blocks = messages.reminder_blocks(title=title, timeout_seconds=timeout_seconds,
                                          default_on_timeout=default_on_timeout, approval_id=rec.id,
                                          consequence=consequence)
        _slack(lambda: notifier.post(messages.fallback_text(f"Reminder: no answer to '{title}'; took the safe default"), blocks),
               "post reminder", rec.id, node, incident_id)
    return outcome


def _wait(led, approval_id: int, title: str, summary_markdown: str, timeout_seconds: float, default_on_timeout: str,
          notifier, node: str | None, incident_id: int | None, flow_run_id):
    """Pause until a listed approver answers or the timeout passes; the approval as decided in the ledger."""
    from prefect.exceptions import FlowPauseTimeout
    from prefect.flow_runs import pause_flow_run

    description = (f"**{title}**\n\n{summary_markdown}\n\nNo answer within {human_duration(timeout_seconds)} → "
                   f"**{default_on_timeout}**. Only a listed approver's answer counts (approvals.approvers).")
    form_model = approval_form(runtime.settings().approvals.approvers)
    if not runtime.settings().approvals.approvers:
        from remedy.approvals.model import NO_APPROVERS

        description += f"\n\n**{NO_APPROVERS}**"
    form = form_model.with_initial_data(description=description, reason="")
    nudge = _nudge_later(notifier, led, approval_id, title, timeout_seconds, default_on_timeout, node, incident_id)
    deadline = time.monotonic() + timeout_seconds
    attempt, answer = 0, None
    try:
        while answer is None and (left := deadline - time.monotonic()) > 0:
            attempt += 1
            try:
                answer = pause_flow_run(wait_for_input=form, timeout=max(1, math.ceil(left)), poll_interval=1,
                                        key=f"approval-{approval_id}-{attempt}")
            except FlowPauseTimeout:
                _running_again(flow_run_id)
                break
            if led.get_approval(approval_id).pending and not _approver_ok(answer):
                # The Slack receiver and the open-loop endpoint write the ledger before resuming; a resume
                # with no ledger answer came through the Prefect form or its API, so the name must be listed.
                _refuse(led, approval_id, answer, node, incident_id)
                # the form shown next says why the answer did not count, and which setting lists approvers
                refused = refusal_text(answer.approver, answer.decision)
                form = form_model.with_initial_data(description=f"**{refused}**\n\n{description}", reason="")
                answer = None
    finally:
        if nudge is not None:
            nudge.cancel()
    if answer is not None:
        _record(led, approval_id, answer.decision, answer.approver.strip(), answer.reason)
    else:
        _record(led, approval_id, "timeout", "timeout", f"no answer within {human_duration(timeout_seconds)}")
    return led.get_approval(approval_id)


def _nudge_later(notifier, led, approval_id: int, title: str, timeout_seconds: float, default_on_timeout: str,
                 node: str | None, incident_id: int | None):
    """Post one "still waiting" nudge after approvals.reminder_after_seconds if nobody has answered by then.

    A timer thread, because a run that is paused cannot pause again after its pause times out."""
    import threading

    phases = wait_phases(timeout_seconds, runtime.settings().approvals.reminder_after_seconds)
    if notifier is None or len(phases) == 1:
        return None

    def nudge() -> None:
        if not led.get_approval(approval_id).pending:
            return
        blocks = messages.nudge_blocks(title=title, waited_seconds=phases[0], left_seconds=phases[1],
                                       default_on_timeout=default_on_timeout, approval_id=approval_id)
        try:
            notifier.post(messages.fallback_text(f"Still waiting: '{title}'"), blocks)
        except Exception as exc:  # noqa: BLE001 - a nudge is a courtesy; never fail the flow for it
            logging.getLogger(__name__).warning("Slack: nudge for approval %s not posted: %s", approval_id, exc)

    timer = threading.Timer(phases[0], nudge)
    timer.daemon = True
    timer.start()
    return timer


def _approver_ok(answer: ApprovalInput) -> bool:
    from remedy.approvals.model import may_answer

    return may_answer(answer.approver, runtime.settings().approvals.approvers)  # Slack ids only through Slack


def _refuse(led, approval_id: int, answer: ApprovalInput, node: str | None, incident_id: int | None) -> None:
    """An answer from someone not on the approver lists: logged, recorded, and the run waits again."""
    who = (answer.approver or "").strip()[:80] or "(no name)"
    get_run_logger().warning("approval %s: %s", approval_id, refusal_text(answer.approver, answer.decision))
    led.start_action(Action(kind="approval_refused", node=node or "fleet", outcome=ActionOutcome.FAILED,
                            incident_id=incident_id, error=f"{who} is not an approver",
                            detail={"approval_id": approval_id, "decision": answer.decision, "approver": who}))


def _record(led, approval_id: int, decision: str, by: str, reason: str) -> None:
    try:
        led.decide_approval(approval_id, decision=decision, decided_by=by, reason=reason)
    except LedgerConflict:
        pass  # the receiver recorded the first decision already; the ledger's answer is the one we use


def _slack(call, what: str, approval_id: int, node: str | None, incident_id: int | None):
    """Run one Slack call; on failure log it, record it in the ledger, and carry on without Slack."""
    from remedy.adapters.slack import SlackError

    try:
        return call()
    except SlackError as exc:
        get_run_logger().warning("Slack: could not %s for approval %s: %s — the Prefect UI path still works",
                                 what, approval_id, exc)
        try:
            runtime.ledger().start_action(Action(
                kind="notify_slack", node=node or "fleet", outcome=ActionOutcome.FAILED, incident_id=incident_id,
                error=f"{what}: {exc}"[:500], detail={"approval_id": approval_id}))
        except Exception as rec_exc:  # recording is best effort too
            get_run_logger().warning("could not record the Slack failure: %s", rec_exc)
        return None


def propose_open_loop(*, node: str, incident_id: int, action: str, reason: str, pool: str,
                      timeout_seconds: float, details: dict | None = None) -> ApprovalOutcome:
    """Open-loop pools (seed 000): emit the decision as an event, then pause until an external system calls
    `POST /v1/remediations/{incident_id}/execute`. One proposal per incident: a later flow of the same incident
    (e.g. replace_node as the ladder's fallback) reuses the answer already given."""
    from prefect.events import emit_event

    from remedy.approvals.open_loop import OPEN_LOOP_KIND, PROPOSED_EVENT

    led = runtime.ledger()
    answered = [a for a in led.approvals(incident_id=incident_id) if a.kind == OPEN_LOOP_KIND and a.decision]
    if answered:
        a = answered[-1]
        return ApprovalOutcome(decision=a.decision or "", by=a.decided_by or "", reason=a.reason, approval_id=a.id)
    emit_event(PROPOSED_EVENT, resource={"prefect.resource.id": f"remedy.incident.{incident_id}", "remedy.node": node},
               payload={"incident_id": incident_id, "node": node, "action": action, "reason": reason, "pool": pool,
                        "execute": f"POST /v1/remediations/{incident_id}/execute"} | (details or {}))
    return request_approval(
        kind=OPEN_LOOP_KIND, title=f"Proposed: {action} on {node}",
        summary_markdown=f"{reason}\n\nNode pool `{pool}` is open-loop: gpu-remedy acts only when "
                         f"`POST /v1/remediations/{incident_id}/execute` is called.",
        incident_id=incident_id, node=node, timeout_seconds=timeout_seconds, slack=False,
        consequence="the remediation was not executed")
