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
from datetime import timedelta

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
