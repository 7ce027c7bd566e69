"""Slack Block Kit messages for approvals and escalations, rendered from jinja2 templates in templates/slack/."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from remedy.approvals.model import ApprovalAction, ButtonValue
from remedy.domain.durations import human_duration

if TYPE_CHECKING:
    from remedy.adapters.slack import Notifier
    from remedy.config import RemedySettings

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "slack"
# Slack is a courtesy channel: a flow waits at most this long per call (the Prefect UI path needs nothing).
VERDICT = {"approve": "Approved", "deny": "Denied", "timeout": "No answer in time"}


def notifier(settings: RemedySettings, channel: str | None = None) -> Notifier | None:
    """The configured SlackNotifier, or None when Slack is not configured (no bot token)."""
    from remedy.adapters.slack import SlackNotifier

    s = settings.slack
    token = s.bot_token.get_secret_value()
    if not token:
        return None
    return SlackNotifier(token, channel or s.channel, base_url=s.base_url, timeout=s.timeout_seconds)


@lru_cache(maxsize=1)
def _env():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                              autoescape=False)


def render(name: str, **context) -> list[dict]:
    """Render templates/slack/<name>.json.j2 into Block Kit blocks (a template error names the template)."""
    text = _env().get_template(f"{name}.json.j2").render(**context)
    try:
        blocks = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"templates/slack/{name}.json.j2 rendered invalid JSON: {exc}") from None
    if not isinstance(blocks, list):
        raise ValueError(f"templates/slack/{name}.json.j2 must render a JSON list of blocks")
    return blocks


def request_blocks(*, approval_id: int, flow_run_id: str, title: str, summary: str, timeout_seconds: float,
                   default_on_timeout: str, node: str | None, incident_id: int | None) -> list[dict]:
    where = " · ".join(x for x in (f"node `{node}`" if node else "", f"incident {incident_id}"
                                   if incident_id is not None else "", f"approval {approval_id}") if x)
    context = f"{where} · no answer within {_human(timeout_seconds)} → *{default_on_timeout}* (safe default)"
    return render("approval_request", title=title, summary=summary or title, context=context,
                  approval_id=approval_id, value=ButtonValue(approval_id, flow_run_id).encode(),
                  approve_action=ApprovalAction.APPROVE.value, deny_action=ApprovalAction.DENY.value)


def verdict_text(decision: str, by: str, reason: str = "") -> str:
    who = by if by.startswith(("@", "timeout", "<")) else f"@{by}"
    line = f"{VERDICT.get(decision, decision)} by {who}" if decision != "timeout" else VERDICT["timeout"]
    return line + (f": {reason}" if reason else "")


def decided_blocks(*, title: str, summary: str, decision: str, by: str, reason: str = "") -> list[dict]:
    return render("approval_decided", title=title, summary=summary or title, verdict=verdict_text(decision, by, reason))


def reminder_blocks(*, title: str, timeout_seconds: float, default_on_timeout: str, approval_id: int,
                    consequence: str) -> list[dict]:
    text = (f":alarm_clock: *Reminder:* nobody answered _{title}_ within {_human(timeout_seconds)}. "
            f"gpu-remedy took the safe default (*{default_on_timeout}*): {consequence}")
    return render("approval_reminder", text=text, context=f"approval {approval_id} · a person should still look")


def nudge_blocks(*, title: str, waited_seconds: float, left_seconds: float, default_on_timeout: str,
                 approval_id: int) -> list[dict]:
    text = (f":hourglass_flowing_sand: *Still waiting* for an answer to _{title}_ ({_human(waited_seconds)} so far). "
            f"In {_human(left_seconds)} gpu-remedy takes the safe default (*{default_on_timeout}*).")
    return render("approval_reminder", text=text, context=f"approval {approval_id} · answer on the message above")


def escalation_blocks(*, node: str, reason: str, incident_id: int | None, quarantined: bool) -> list[dict]:
    state = "kept quarantined (cordoned + tainted)" if quarantined else "left in service"
    ctx = f"node `{node}` {state}" + (f" · incident {incident_id}" if incident_id is not None else "")
    return render("escalation", title=f"Needs a human: {node}", summary=reason, context=ctx)


_human = human_duration
