"""Unattended answers for demos: `remedy demo --approve/--deny` answers approvals the way a person would.

    with AutoApprover(decision=True):
        replace_node(...)   # any approval it asks for is answered "approve" by demo-operator

While open, a background thread watches the ledger for pending approvals whose flow run has paused, and answers
each through the real path: a Slack interaction signed with the signing secret and POSTed to the receiver when
one is running (an open-loop go-ahead goes to POST /v1/remediations/{incident}/execute), else the ledger plus
`resume_flow_run` directly — the same two steps the receiver takes.
"""

from __future__ import annotations

import logging
import threading

import httpx

from remedy import runtime
from remedy.approvals.decide import decide_and_resume, is_paused
from remedy.approvals.open_loop import OPEN_LOOP_KIND
from remedy.approvals.signing import click_payload, form_body, signed_headers

log = logging.getLogger(__name__)


class AutoApprover:
    def __init__(self, decision: bool, by: str = "demo-operator", *, receiver_url: str | None = None,
                 poll_seconds: float = 0.2) -> None:
        self.decision, self.by, self.poll_seconds = decision, by, poll_seconds
        self.receiver_url = receiver_url.rstrip("/") if receiver_url else None
        self.answered: list[dict] = []  # what it did, for the demo's report
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="auto-approver", daemon=True)

    def __enter__(self) -> AutoApprover:
        if self.receiver_url is None:
            self.receiver_url = _running_receiver()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        done: set[int] = set()
        while not self._stop.wait(self.poll_seconds):
            try:
                for a in runtime.ledger().approvals(pending=True):
                    if a.id in done or not is_paused(a.flow_run_id):
                        continue  # a person would answer once the question is up, i.e. once the run waits
                    done.add(a.id)
                    self.answered.append(self._answer(a))
            except Exception as exc:  # keep answering: one bad poll must not leave a demo hanging
                log.warning("auto-approver: %s: %s", type(exc).__name__, exc)

    def _answer(self, approval) -> dict:
        decision = "approve" if self.decision else "deny"
        # an open-loop go-ahead needs the execute token; without one the receiver refuses it, so answer directly
        no_token = (approval.kind == OPEN_LOOP_KIND
                    and not runtime.settings().receiver.execute_token.get_secret_value())
        if self.receiver_url and not no_token:
            try:
                return {"approval_id": approval.id, "decision": decision, "via": "receiver",
                        **self._through_receiver(approval)}
            except httpx.HTTPError as exc:
                log.warning("auto-approver: receiver at %s failed (%s); answering directly", self.receiver_url, exc)
        res = decide_and_resume(runtime.ledger(), approval.id, decision=decision, by=self.by,
                                reason="answered by AutoApprover (demo)")
        return {"approval_id": approval.id, "decision": res.decision, "via": "direct", "resumed": res.resumed}

    def _through_receiver(self, approval) -> dict:
        settings = runtime.settings()
        if approval.kind == OPEN_LOOP_KIND:
            token = settings.receiver.execute_token.get_secret_value()
            r = httpx.post(f"{self.receiver_url}/v1/remediations/{approval.incident_id}/execute",
                           json={"approve": self.decision, "by": self.by, "reason": "AutoApprover (demo)"},
                           headers={"Authorization": f"Bearer {token}"}, timeout=15)
            return {"status": r.status_code}
        body = form_body(click_payload(approval_id=approval.id, flow_run_id=approval.flow_run_id,
                                       approve=self.decision, user_id=self.by, user_name=self.by,
                                       message_ts=approval.slack_ts or ""))
        r = httpx.post(f"{self.receiver_url}/v1/slack/interactions", content=body,
                       headers=signed_headers(settings.slack.signing_secret.get_secret_value(), body), timeout=15)
        return {"status": r.status_code}


def _running_receiver() -> str | None:
    """The configured receiver's URL if it is up and serves the Slack route (GET on a POST route → 405)."""
    s = runtime.settings()
    if not s.slack.signing_secret.get_secret_value() or not s.receiver.port:
        return None
    url = f"http://{s.receiver.host}:{s.receiver.port}"
    try:
        if httpx.get(f"{url}/v1/slack/interactions", timeout=0.5).status_code == 405:
            return url
    except httpx.HTTPError:
        pass
    return None
