"""argparse types for numeric arguments: a value out of range is a usage error (one line, exit 2) at parse time,
not a traceback or a silently absurd result later."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

N = TypeVar("N", int, float)


def _number(text: str, kind: Callable[[str], N], what: str) -> N:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_int(text: str) -> int:
    value = _number(text, int, "a whole number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = _number(text, int, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    value = _number(text, float, "a number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value:g}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(text, float, "a number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value:g}")
    return value


def fraction(text: str) -> float:
    """0 < x ≤ 1 (an efficiency, a share)."""
    value = _number(text, float, "a number")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 1, got {value:g}")
    return value


def port_number(text: str) -> int:
    value = _number(text, int, "a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535 (0 = any free port), got {value}")
    return value


def http_url(text: str) -> str:
    """An http(s) URL with a host: a typo here otherwise surfaces as a library's error much later."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 — raises ValueError for a port that is not a number or out of range
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL (e.g. http://127.0.0.1:8001)")
    return text.strip()


def writable_file(text: str) -> str:
    """An output file that can be written: checked before the work, not after it ('-' is standard output)."""
    import os
    from pathlib import Path

    if text == "-":
        return text
    path = Path(text)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: cannot write here: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"{text}: cannot write here: permission denied")
    return text


def writable_dir(text: str) -> str:
    """An output directory: created if missing, so its nearest existing ancestor must be a writable directory."""
    import os
    from pathlib import Path

    path = Path(text)
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: cannot create a directory here: {probe} is a file")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: cannot write here: permission denied on {probe}")
    return text
