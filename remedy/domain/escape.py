"""Text that came from outside (alert labels and annotations, node names and annotations, a job's log) made inert
before a person reads it: in Slack mrkdwn, in Markdown (Prefect artifacts, reports) and in jinja2 templates.

Why: an alert label is anyone's text. `<!channel>` in a label pinged the whole channel; `<https://evil|Click to
approve>` rendered as a link that looked like gpu-remedy's own button (issue 32). One function per target, used
wherever such text reaches a person; gpu-remedy's own formatting around it stays as it is.

- `mrkdwn(text)` — Slack: `&`, `<`, `>` become `&amp;`, `&lt;`, `&gt;` (Slack's own escaping: no `<!channel>`,
  `<@U…>`, `<#C…>` or `<url|label>` survives); the formatting characters `*`, `_`, `~` and the backtick get a zero
  width space after them, so they print as themselves and cannot open bold, italics, strike or code; `@channel`,
  `@here` and `@everyone` get one after the `@`. A bare URL stays visible text (Slack may link it, but it cannot
  be disguised behind other words).
- `markdown(text)` — CommonMark: every ASCII punctuation character that means something (`\\`, `` ` ``, `*`, `_`,
  `[`, `]`, `(`, `)`, `#`, `+`, `-`, `!`, `|`, `~`, `>`) is backslash-escaped, and `<`, `>`, `&` become entities,
  so no link, image, heading, table cell or raw HTML comes from the text. Line breaks become spaces (a label cannot
  start a new block).
- `code(text)` — Markdown inline code: a span fenced with more backticks than the text holds.

`JINJA_FILTERS` registers them as `|mrkdwn`, `|md` and `|mdcode` in a template environment.
"""

from __future__ import annotations

import re
from typing import Any

ZWSP = "\u200b"
_SLACK_ENTITIES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))
_SLACK_FORMAT = re.compile(r"([*_~`])")
_SLACK_BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)
_MD_PUNCT = re.compile(r"([\\`*_\[\]()#+\-!|~])")
_NEWLINES = re.compile(r"[\r\n\u2028\u2029]+")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def mrkdwn(value: Any) -> str:
    """Outside text, inert inside a Slack mrkdwn field."""
    text = _text(value)
    for raw, entity in _SLACK_ENTITIES:
        text = text.replace(raw, entity)
    text = _SLACK_FORMAT.sub(lambda m: m.group(1) + ZWSP, text)
    return _SLACK_BROADCAST.sub(lambda m: "@" + ZWSP + m.group(1), text)


def markdown(value: Any) -> str:
    """Outside text, inert inside Markdown (one line)."""
    text = _NEWLINES.sub(" ", _text(value))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_PUNCT.sub(r"\\\1", text)


def code(value: Any) -> str:
    """Outside text as one Markdown code span (backticks in it cannot close the span)."""
    text = _NEWLINES.sub(" ", _text(value))
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


JINJA_FILTERS = {"mrkdwn": mrkdwn, "md": markdown, "mdcode": code}

__all__ = ["JINJA_FILTERS", "ZWSP", "code", "markdown", "mrkdwn"]
