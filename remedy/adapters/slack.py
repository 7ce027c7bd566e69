"""Slack notices through slack-sdk's WebClient: post a message, update it as the flow moves on.

HTTP 429 is retried after the server's Retry-After (slack-sdk's RateLimitErrorRetryHandler); a Slack that
does not answer within `timeout` seconds raises SlackError instead of hanging a flow. Dry-run records the
messages and sends nothing.
"""

from __future__ import annotations

import socket
import urllib.error
from dataclasses import dataclass, field
from typing import Any, Protocol

from remedy.domain.durations import human_duration
from remedy.errors import RemedyError


class SlackError(RemedyError):
    """Slack refused the call, or did not answer in time."""


@dataclass
class DryRunMessage:
    ts: str
    text: str
    blocks: list | None = None
    updates: list[str] = field(default_factory=list)


class Notifier(Protocol):
    """Notices to people: post a message, update it as the flow moves on (SlackNotifier)."""

    def post(self, text: str, blocks: list | None = None) -> str: ...
    def update(self, ts: str, text: str, blocks: list | None = None) -> None: ...


class SlackNotifier:
    """Posts to one channel. `post` returns the message ts that `update` takes."""

    def __init__(
        self,
        token: str,
        channel: str,
        *,
        base_url: str = "https://slack.com/api/",
        timeout: float = 5,
        dry_run: bool = False,
        rate_limit_retries: int = 3,
    ) -> None:
        from slack_sdk import WebClient
        from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

        if not channel:
            raise SlackError("Slack channel is empty (set slack.channel)")
        if timeout <= 0:
            raise SlackError(f"Slack timeout must be positive, got {timeout}")
        self.channel, self.timeout, self.dry_run = channel, timeout, dry_run
        self.sent: list[DryRunMessage] = []  # dry-run only
        self._channel_of: dict[str, str] = {}  # ts → channel id: chat.update wants the id, not "#name"
        # Only 429 is retried here: a timeout must surface at once rather than be repeated.
        self._client = WebClient(
            token=token,
            base_url=base_url if base_url.endswith("/") else base_url + "/",
            timeout=int(timeout) if float(timeout).is_integer() else timeout,  # type: ignore[arg-type]  # float works
            retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=rate_limit_retries)],
        )

    def _call(self, method: str, **kwargs) -> dict:
        from slack_sdk.errors import SlackApiError

        try:
            resp = self._client.api_call(method, json=kwargs)
        except SlackApiError as exc:
            status = exc.response.status_code
            if status == 429:
                raise SlackError(f"Slack kept rate-limiting {method} (HTTP 429) after retries") from None
            raise SlackError(f"Slack refused {method}: {exc.response.get('error', status)}") from None
        except TimeoutError:
            raise SlackError(f"Slack did not answer within {human_duration(self.timeout)} ({method})") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                raise SlackError(f"Slack did not answer within {human_duration(self.timeout)} ({method})") from None
            raise SlackError(f"Slack unreachable ({method}): {exc.reason}") from None
        except OSError as exc:
            raise SlackError(f"Slack unreachable ({method}): {exc}") from None
        return resp.data if isinstance(resp.data, dict) else {}

    def post(self, text: str, blocks: list | None = None) -> str:
        """Post to the channel; returns the message ts."""
        if self.dry_run:
            msg = DryRunMessage(ts=f"dry-run.{len(self.sent) + 1:06d}", text=text, blocks=blocks)
            self.sent.append(msg)
            return msg.ts
        kwargs: dict[str, Any] = {"channel": self.channel, "text": text}
        if blocks is not None:
            kwargs["blocks"] = blocks
        data = self._call("chat.postMessage", **kwargs)
        if not data.get("ts"):
            raise SlackError("Slack accepted chat.postMessage but returned no ts")
        ts: str = data["ts"]
        self._channel_of[ts] = data.get("channel") or self.channel
        return ts

    def update(self, ts: str, text: str, blocks: list | None = None) -> None:
        """Replace the text (and blocks) of a message posted earlier."""
        if not ts:
            raise SlackError("cannot update a Slack message without its ts")
        if self.dry_run:
            for msg in self.sent:
                if msg.ts == ts:
                    msg.updates.append(text)
            return
        kwargs: dict[str, Any] = {"channel": self._channel_of.get(ts, self.channel), "ts": ts, "text": text}
        if blocks is not None:
            kwargs["blocks"] = blocks
        self._call("chat.update", **kwargs)
