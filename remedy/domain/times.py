"""The one way a time written as text is read: ISO 8601 / RFC 3339 ("2026-11-22T01:00:00Z", "…+02:00", fractions).

Kubernetes stamps (metav1.Time), Alertmanager, our own `isoformat()` output and operator arguments all come
through here. Python 3.11's `fromisoformat` reads "Z" itself. A time without a zone is read as UTC where the
writer is known to mean UTC (the Kubernetes API, our own stamps: `naive="utc"`); an operator's or a caller's
time must say its zone (`naive="refuse"`), since a local time read as UTC would move an incident by hours.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal


def parse_iso(text: str, *, what: str = "time", naive: Literal["utc", "refuse"] = "utc") -> datetime:
    """An aware datetime; ValueError naming `what` and the text when it is not ISO 8601 (or has no zone and
    `naive="refuse"`)."""
    try:
        at = datetime.fromisoformat(str(text).strip())
    except ValueError:
        raise ValueError(f"{what} must be an ISO-8601 time, got {text!r}") from None
    if at.tzinfo is None:
        if naive == "refuse":
            raise ValueError(f"{what} must carry a time zone, got {text!r}")
        at = at.replace(tzinfo=UTC)
    return at


def parse_iso_or_none(value: object) -> datetime | None:
    """Lenient form for fields others write (object annotations, pod status): None for anything that is not an
    ISO-8601 string, naive read as UTC."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return parse_iso(value)
    except ValueError:
        return None
