"""How every duration reads in operator output: one formatter, so "10 min" never shows up as "600 s" in one place and
"0.166667 h" in another.

    human_duration(45)      → "45 s"        human_duration(2.29)   → "2.3 s"
    human_duration(600)     → "10 min"      human_duration(90)     → "1.5 min"
    human_duration(3600)    → "1 h"         human_duration(5400)   → "1.5 h"
    human_duration(86400*3) → "3 d"

The unit is the largest that keeps the number at 1 or more (days from 48 h on: "36 h" reads better than "1.5 d");
one decimal at most, none when it is .0. tests/test_operator_words.py scans remedy/, flows/ and tasks/ for
durations formatted any other way.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

from remedy.errors import RemedyError

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0


def _number(value: float) -> str:
    text = f"{round(value, 1):.1f}"
    return text[:-2] if text.endswith(".0") else text


def human_duration(seconds: float | timedelta | None) -> str:
    """A duration as an operator reads it: "45 s", "10 min", "1 h", "3 d" (see the module doc)."""
    if seconds is None:
        return "unknown"
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    seconds = float(seconds)
    if math.isnan(seconds):
        return "unknown"
    if math.isinf(seconds):
        return "forever" if seconds > 0 else "-forever"
    if seconds < 0:
        return "-" + human_duration(-seconds)
    if seconds < MINUTE:
        return f"{_number(seconds)} s"
    if seconds < HOUR:
        return f"{_number(seconds / MINUTE)} min"
    if seconds < 2 * DAY:
        return f"{_number(seconds / HOUR)} h"
    return f"{_number(seconds / DAY)} d"


def minutes(value: float) -> str:
    """A duration given in minutes (as settings and cost models keep them)."""
    return human_duration(value * MINUTE)


def hours(value: float) -> str:
    """A duration given in hours."""
    return human_duration(value * HOUR)


def days(value: float) -> str:
    """A duration given in days."""
    return human_duration(value * DAY)


class DurationError(RemedyError, ValueError):
    """A text that does not read as a duration; the message names the argument and the text."""


UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": HOUR, "hr": HOUR, "d": DAY}
_DURATION_TEXT = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_duration(text: str, *, what: str = "duration", default_unit: str | None = None,
                   positive: bool = False) -> float:
    """The one way an operator's duration is read: "250ms", "45s", "30m", "1.5h", ".5h", "2d" → seconds.

    A bare number takes `default_unit` ("m": the goodput model's minutes); without one a unit is required (a
    PromQL window, a checkpoint save). `positive` refuses zero (a window or a save cannot last 0 s)."""
    m = _DURATION_TEXT.match(str(text))
    unit = (m.group(2) or default_unit or "").lower() if m else ""
    if m is None or unit not in UNIT_SECONDS:
        raise DurationError(f"{what}: cannot read {text!r} as a duration (write a number and a unit, e.g. 250ms, 45s, "
                            f"30m, 1.5h, 2d{'; a bare number is ' + default_unit if default_unit else ''})")
    seconds = float(m.group(1)) * UNIT_SECONDS[unit]
    if positive and seconds <= 0:
        raise DurationError(f"{what}: a duration must be more than zero, got {text!r}")
    return seconds
