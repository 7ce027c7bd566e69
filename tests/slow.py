"""Tests that take over 20 s on the 2-core CI machine, each with why (issue 28's budget). tests/conftest.py marks
them `slow(reason)`; `pytest -m "not slow"` leaves them out, and the end of every run lists a test over 20 s that
is not here (docs/testing.md keeps the durations table).

Keys are node-id prefixes: a module, a test, or one parametrized case."""

from __future__ import annotations

BUDGET_SECONDS = 20.0

SLOW: dict[str, str] = {
}


def slow_reason(nodeid: str) -> str | None:
    for prefix, reason in SLOW.items():
        if nodeid == prefix or nodeid.startswith(prefix + "::") or nodeid.startswith(prefix + "["):
            return reason
    return None
