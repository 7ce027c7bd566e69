"""Best-effort operator notices in Slack: a remediation never fails because Slack does."""

from __future__ import annotations

import logging

from remedy import runtime

log = logging.getLogger(__name__)


def post_notice(text: str, *, dry_run: bool = False) -> str | None:
    """Post `text` to the configured channel; return the message ts, or None (no token, dry-run, or Slack failed)."""
    settings = runtime.settings()
    token = settings.slack.bot_token.get_secret_value()
    if not token:
        return None
    try:
        from remedy.adapters.slack import SlackNotifier

        return SlackNotifier(token, settings.slack.channel, base_url=settings.slack.base_url,
                             timeout=settings.slack.timeout_seconds, dry_run=dry_run).post(text)
    except Exception as exc:  # noqa: BLE001 — logged, never raised
        try:
            from prefect import get_run_logger

            get_run_logger().warning("Slack notice failed: %s", exc)
        except Exception:  # outside a run
            log.warning("Slack notice failed: %s", exc)
        return None
