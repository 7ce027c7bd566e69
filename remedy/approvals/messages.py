"""Slack Block Kit messages for approvals and escalations, rendered from jinja2 templates in templates/slack/.

Fit for a real channel: a header of at most 150 characters (Slack's limit for header blocks) cut at a word, text
in Slack's mrkdwn (`*bold*`, never Markdown's `**bold**`), the reason said once (in the body, not again in the header), a link to the Prefect
run, and the approvers mentioned by Slack user id (`<@U…>`). `remedy slack preview` prints each kind.

Every character that is not gpu-remedy's own markup goes through the one escaper, `remedy.domain.escape.mrkdwn`:
alert labels, node names, reasons and who answered cannot ping a channel (`<!channel>`), forge a link
(`<https://…|Click to approve>`) or open bold, italics, strike or code (issue 32)."""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from remedy.approvals.model import ApprovalAction, ButtonValue
from remedy.domain import escape as outside
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


HEADER_MAX = 150  # Slack Block Kit: a header block's plain_text is at most 150 characters
SECTION_MAX = 3000  # a section's text is at most 3,000 characters


# gpu-remedy's own markup in the Markdown it writes for the Prefect UI: a backslash-escaped character (what
# remedy.domain.escape.markdown makes of outside text), **bold**, `code`. Nothing else is markup.
_OWN_MARKUP = re.compile(r"\\([!-/:-@\[-`{-~])|\*\*(.+?)\*\*|`([^`\n]+)`", re.DOTALL)
_ENTITY = re.compile(r"&(lt|gt|amp);")
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&"}


def escape(text: object) -> str:
    """Outside text (a node name, a reason, who answered) as inert Slack mrkdwn: remedy.domain.escape.mrkdwn."""
    return outside.mrkdwn(text)


def fallback_text(text: object) -> str:
    """chat.postMessage's `text` (the notification and the fallback), which Slack also reads as mrkdwn: one line
    of inert text, at most 300 characters."""
    return cut(outside.mrkdwn(text), 300)


def mrkdwn(markdown: str) -> str:
    """gpu-remedy's Markdown (written for the Prefect UI) as Slack mrkdwn: its **bold** becomes Slack's *bold*, its
    `code` stays code, a backslash-escaped character is that character; everything else is text, made inert by the
    one escaper (no `<!channel>`, no `<url|label>` link, no stray `*`, `_`, `~` or backtick opening anything)."""
    out, pos = [], 0
    for m in _OWN_MARKUP.finditer(markdown):
        out.append(_text(markdown[pos:m.start()]))
        literal, bold, code = m.groups()
        if literal is not None:
            out.append(outside.mrkdwn(literal))
        elif bold is not None:
            out.append(f"*{mrkdwn(bold)}*")
        else:
            out.append(f"`{_text(code)}`")
        pos = m.end()
    out.append(_text(markdown[pos:]))
    return "".join(out)


def _text(markdown_text: str) -> str:
    # Markdown's entities (&lt; from remedy.domain.escape.markdown) are the characters they stand for
    return outside.mrkdwn(_ENTITY.sub(lambda m: _ENTITIES[m.group(1)], markdown_text))


def cut(text: str, limit: int, *, one_line: bool = True) -> str:
    """At most `limit` characters, cut at a word (never mid-word), with an ellipsis when cut; one_line for a
    header (plain text on one line), else the lines are kept."""
    if one_line:
        text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(" ,;:·—-") + "…"


def header_and_body(title: str, summary: str, node: str | None = None) -> tuple[str, str]:
    """The reason once: a title 'gpu-remedy paused automation: <reason>' whose reason the body already says keeps
    only its head (and the node); the header is cut at a word to Slack's 150 characters."""
    head, sep, reason = title.partition(": ")
    if sep and reason and reason.strip() in summary:
        title = f"{head}: {node}" if node else head
    return cut(title, HEADER_MAX), mrkdwn(summary or title)


def run_link(flow_run_id: str) -> str | None:
    """The Prefect UI page of a flow run (PREFECT_UI_URL, else PREFECT_API_URL without /api), or None."""
    base = os.environ.get("PREFECT_UI_URL") or os.environ.get("PREFECT_API_URL", "").removesuffix("/").removesuffix("/api")
    if not base or not flow_run_id:
        return None
    return f"{base.rstrip('/')}/runs/flow-run/{flow_run_id}"


def mentions(user_ids: list[str] | None = None) -> str:
    """`<@U…>` for each Slack approver (slack.approvers): they get a notification, the channel does not."""
    if user_ids is None:
        from remedy import runtime

        user_ids = runtime.settings().slack.approvers
    return " ".join(f"<@{u.strip()}>" for u in user_ids if re.fullmatch(r"[UW][A-Z0-9]{2,}", u.strip()))


def request_blocks(*, approval_id: int, flow_run_id: str, title: str, summary: str, timeout_seconds: float,
                   default_on_timeout: str, node: str | None, incident_id: int | None,
                   approvers: list[str] | None = None) -> list[dict]:
    where = " · ".join(x for x in (f"node `{escape(node)}`" if node else "", f"incident {incident_id}"
                                   if incident_id is not None else "", f"approval {approval_id}") if x)
    context = f"{where} · no answer within {_human(timeout_seconds)} → *{default_on_timeout}* (safe default)"
    header, body = header_and_body(title, summary, node)
    link = run_link(flow_run_id)
    asking = mentions(approvers)
    extra = [x for x in (f"<{link}|Open the run in Prefect>" if link else "", f"asking {asking}" if asking else "") if x]
    return render("approval_request", title=header, summary=cut(body, SECTION_MAX, one_line=False), context=context, extra=extra,
                  approval_id=approval_id, value=ButtonValue(approval_id, flow_run_id).encode(),
                  approve_action=ApprovalAction.APPROVE.value, deny_action=ApprovalAction.DENY.value)


_MENTION = re.compile(r"<@[UW][A-Z0-9]{2,}>")


def verdict_text(decision: str, by: str, reason: str = "") -> str:
    """"Approved by @alice: reason"; `by` and the reason are outside text (a Slack name, a form entry), escaped; a
    mention gpu-remedy wrote (`<@U…>`) stays a mention."""
    who = by if _MENTION.fullmatch(by) else escape(by if by.startswith(("@", "timeout")) else f"@{by}")
    line = f"{VERDICT.get(decision, decision)} by {who}" if decision != "timeout" else VERDICT["timeout"]
    return line + (f": {escape(reason)}" if reason else "")


def decided_blocks(*, title: str, summary: str, decision: str, by: str, reason: str = "") -> list[dict]:
    header, body = header_and_body(title, summary)
    return render("approval_decided", title=header, summary=cut(body, SECTION_MAX, one_line=False),
                  verdict=verdict_text(decision, by, reason))


def reminder_blocks(*, title: str, timeout_seconds: float, default_on_timeout: str, approval_id: int,
                    consequence: str) -> list[dict]:
    title = escape(title)  # the question names the node and may quote the alert
    text = (f":alarm_clock: *Reminder:* nobody answered _{title}_ within {_human(timeout_seconds)}. "
            f"gpu-remedy took the safe default (*{default_on_timeout}*): {consequence}")
    return render("approval_reminder", text=text, context=f"approval {approval_id} · a person should still look")


def nudge_blocks(*, title: str, waited_seconds: float, left_seconds: float, default_on_timeout: str,
                 approval_id: int) -> list[dict]:
    title = escape(title)
    text = (f":hourglass_flowing_sand: *Still waiting* for an answer to _{title}_ ({_human(waited_seconds)} so far). "
            f"In {_human(left_seconds)} gpu-remedy takes the safe default (*{default_on_timeout}*).")
    return render("approval_reminder", text=text, context=f"approval {approval_id} · answer on the message above")


def escalation_blocks(*, node: str, reason: str, incident_id: int | None, quarantined: bool) -> list[dict]:
    state = "kept quarantined (cordoned + tainted)" if quarantined else "left in service"
    ctx = f"node `{escape(node)}` {state}" + (f" · incident {incident_id}" if incident_id is not None else "")
    return render("escalation", title=cut(f"Needs a human: {node}", HEADER_MAX), summary=cut(mrkdwn(reason), SECTION_MAX, one_line=False),
                  context=ctx)


_human = human_duration


# ---------------------------------------------------------------------------------------- remedy slack preview
SAMPLE_RUN = "0195f0c2-4b1e-7d7a-9a51-2f0c6f3e8a11"
_STORM = ("rack rack-2 has had 2 failures within 10 min (limit 2): a switch, PDU or config push is more likely than "
          "bad nodes, so the breaker holds automation for every node in it until a person answers")


def preview_messages(kind: str | None = None, approvers: list[str] | None = None) -> dict[str, list[dict]]:
    """Every message kind gpu-remedy posts, filled with a rack-storm example (the words the flows use)."""
    approvers = ["U024BE7LH"] if approvers is None else approvers
    title = f"gpu-remedy paused automation: {_STORM}"
    summary = (f"**gpu011**: {_STORM}\n\n- breaker rack rack-2: closed → open — 2 failures in 10 min\n"
               "- waiting on this answer: gpu011, gpu012, gpu013\n- other scopes not closed: none\n\n"
               "Approve answers this question only: the held failures then go through the rest of the gate "
               "(other scopes, capacity budget, spare reserve) and may ask again. Deny or no answer leaves the "
               "nodes as they are for a person to investigate.")
    kinds = {
        "request": lambda: request_blocks(approval_id=7, flow_run_id=SAMPLE_RUN, title=title, summary=summary,
                                          timeout_seconds=3600, default_on_timeout="deny", node="gpu011",
                                          incident_id=12, approvers=approvers),
        "decided": lambda: decided_blocks(title=title, summary=summary, decision="approve", by="alice",
                                          reason="rack-2's PDU was swapped; go on"),
        "nudge": lambda: nudge_blocks(title=cut(title, 80), waited_seconds=900, left_seconds=2700,
                                      default_on_timeout="deny", approval_id=7),
        "reminder": lambda: reminder_blocks(title=cut(title, 80), timeout_seconds=3600, default_on_timeout="deny",
                                            approval_id=7, consequence="gpu011, gpu012 and gpu013 stay cordoned; "
                                            "nothing else was changed"),
        "escalation": lambda: escalation_blocks(node="gpu012", reason="XID 58 (**contact support**): the GPU "
                                                "reported an error the driver cannot recover; a person must open a "
                                                "case with the vendor", incident_id=13, quarantined=True),
    }
    if kind is not None and kind not in kinds:
        from remedy.errors import RemedyError

        raise RemedyError(f"unknown message kind {kind!r}; kinds: {', '.join(kinds)}")
    os.environ.setdefault("PREFECT_UI_URL", "http://127.0.0.1:4200")  # the link as `remedy up` would give it
    return {k: make() for k, make in kinds.items() if kind in (None, k)}


def _html_mrkdwn(text: str) -> str:
    """Slack mrkdwn → HTML, enough to show the preview as Slack draws it (bold, italic, code, links, mentions)."""
    out = text  # already escaped for Slack: &amp; &lt; &gt; are valid HTML entities as they are
    out = re.sub(r"&lt;(https?://[^|&]+)\|([^&]+)&gt;", r'<a href="\1">\2</a>', out)
    out = re.sub(r"<(https?://[^|>]+)\|([^>]+)>", r'<a href="\1">\2</a>', out)
    out = re.sub(r"<@([A-Z0-9]+)>", r'<span class="mention">@\1</span>', out)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"(?<![\w*])\*([^*\n]+)\*", r"<b>\1</b>", out)
    out = re.sub(r"(?<![\w_])_([^_\n]+)_", r"<i>\1</i>", out)
    out = out.replace(":alarm_clock:", "⏰").replace(":hourglass_flowing_sand:", "⏳")
    return out.replace("\n", "<br>")


def preview_html(messages: dict[str, list[dict]]) -> str:
    """A page that shows each message roughly as Slack lays it out (for screenshots in docs/img)."""
    import html

    parts = []
    for kind, blocks in messages.items():
        rows = []
        for b in blocks:
            if b["type"] == "header":
                rows.append(f'<div class="header">{html.escape(b["text"]["text"])}</div>')
            elif b["type"] == "section":
                rows.append(f'<div class="section">{_html_mrkdwn(b["text"]["text"])}</div>')
            elif b["type"] == "context":
                rows.append('<div class="context">' + " ".join(f"<span>{_html_mrkdwn(e['text'])}</span>"
                                                              for e in b["elements"]) + "</div>")
            elif b["type"] == "actions":
                rows.append('<div class="actions">' + "".join(
                    f'<button class="{e.get("style", "")}">{html.escape(e["text"]["text"])}</button>'
                    for e in b["elements"]) + "</div>")
        parts.append(f'<div class="msg" id="{kind}"><div class="kind">{kind}</div><img class="avatar" alt="">'
                     f'<div class="body"><div class="who">gpu-remedy <span class="app">APP</span></div>'
                     f'{"".join(rows)}</div></div>')
    style = ("body{font-family:Lato,'Helvetica Neue',Arial,sans-serif;font-size:15px;color:#1d1c1d;margin:0;"
             "background:#fff;width:760px}.msg{position:relative;display:flex;padding:14px 20px 12px}"
             ".kind{position:absolute;right:12px;top:8px;font-size:11px;color:#999}.avatar{width:36px;height:36px;"
             "border-radius:4px;background:#4a154b;margin-right:10px;flex:none}.who{font-weight:900}"
             ".app{font-size:10px;background:#ddd;border-radius:2px;padding:1px 3px;font-weight:700;color:#555}"
             ".header{font-size:18px;font-weight:900;margin:6px 0}.section{line-height:1.45;margin:4px 0}"
             ".context{font-size:12px;color:#616061;margin:6px 0}.context span{margin-right:10px}"
             "code{font-size:12px;color:#e01e5a;background:#f6f6f6;border:1px solid #ddd;padding:0 3px}"
             "a{color:#1264a3;text-decoration:none}.mention{color:#1264a3;background:#e8f5fa;padding:0 2px}"
             ".actions button{font-weight:700;font-size:14px;border-radius:4px;padding:6px 14px;margin-right:8px;"
             "border:1px solid #bbb;background:#fff}.actions .primary{background:#007a5a;color:#fff;border:0}"
             ".actions .danger{background:#fff;color:#e01e5a;border:1px solid #e01e5a}")
    return f"<!doctype html><meta charset='utf-8'><style>{style}</style>" + "".join(parts)


def register(sub) -> None:
    from remedy.cli_args import writable_file

    p = sub.add_parser("slack", help="Slack messages: preview what gpu-remedy posts")
    ssub = p.add_subparsers(dest="slack_command", metavar="SUBCOMMAND")
    pv = ssub.add_parser("preview", help="print each message kind as Block Kit JSON (paste into Block Kit Builder)")
    pv.add_argument("--kind", help="one kind: request, decided, nudge, reminder, escalation (default: all)")
    pv.add_argument("--approver", action="append", default=None, metavar="USER_ID",
                    help="Slack user id to mention (default: an example id)")
    pv.add_argument("--html", type=writable_file, help="also write an HTML page showing them as Slack lays them out")
    pv.set_defaults(func=_preview)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _preview(args) -> int:
    found = preview_messages(args.kind, args.approver)
    if args.html:
        from pathlib import Path

        Path(args.html).write_text(preview_html(found))
    print(json.dumps({k: {"blocks": v} for k, v in found.items()}, indent=2, ensure_ascii=False))
    return 0
