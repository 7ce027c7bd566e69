"""Reading request bodies within limits, shared by every route of the receiver (alerts, Slack, open loop).

`read_body` refuses a body over the cap before reading it (Content-Length) and while reading it (chunked or lying
senders). `loads_bounded` parses JSON and refuses what the ledger or the parser cannot take safely: nesting deeper
than the limit (the C parser recurses: 100k levels is a RecursionError), NaN/Infinity literals and numbers that
overflow to infinity, integers past Python's 4300-digit conversion limit, and strings with NUL or unpaired
surrogates (PostgreSQL rejects NUL in text and JSON; UTF-8 cannot encode a lone surrogate, so SQLite rejects it).
"""

from __future__ import annotations

import json
import math
from typing import Any


class BodyTooLarge(Exception):
    """The request body is over `max_body_bytes` (answer 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body over {limit} bytes (receiver.limits.max_body_bytes)")


class BadJson(ValueError):
    """A body that is not JSON the receiver accepts (answer 400); the message says why, naming no internals."""


async def read_body(request, max_bytes: int) -> bytes:
    """The whole body, or BodyTooLarge without reading more than `max_bytes` (+ one chunk)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge(max_bytes)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge(max_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


def _reject_constant(name: str) -> Any:
    raise BadJson(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadJson(f"number {text[:40]} is out of range")
    return value


def loads_bounded(raw: bytes | str, max_depth: int, what: str = "body") -> Any:
    """Parse JSON text; BadJson (one line, starting with `what`) for anything `check_value` refuses."""
    try:
        value = json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float)
    except BadJson as exc:
        raise BadJson(f"{what}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BadJson(f"{what}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise BadJson(f"{what}: JSON nested deeper than {max_depth} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:  # bytes not UTF-8, an integer past the digit limit
        raise BadJson(f"{what}: not valid JSON: {str(exc).split(':')[0][:80]}") from None
    problem = check_value(value, max_depth)
    if problem:
        raise BadJson(f"{what}: {problem}")
    return value


def _bad_string(s: str) -> str:
    if "\x00" in s:
        return "a string contains a NUL character"
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return "a string contains an unpaired surrogate (not valid Unicode)"
    return ""


def check_value(value: Any, max_depth: int) -> str:
    """"" if a decoded JSON value is within `max_depth` and every string (key or value) can be stored; else why not.

    Iterative, so it is safe on any depth the parser let through."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            problem = _bad_string(node)
            if problem:
                return problem
        elif isinstance(node, (dict, list)):
            if depth > max_depth:
                return f"JSON nested deeper than {max_depth} levels"
            if isinstance(node, dict):
                for k, v in node.items():
                    problem = _bad_string(k)
                    if problem:
                        return problem
                    stack.append((v, depth + 1))
            else:
                stack.extend((v, depth + 1) for v in node)
    return ""
