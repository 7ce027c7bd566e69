"""Tool output in, text out: the one place parsers turn what they were handed into `str`.

Parsers are fed whatever a Job log, a file or an HTTP body held. Bytes are decoded as UTF-8 with bad sequences
replaced (a log with one broken byte is still a log); anything else is the caller's mistake and a one-line error.
"""

from __future__ import annotations


def as_text(data: object, what: str, error: type[Exception] = ValueError) -> str:
    """`data` as str; bytes/bytearray decoded leniently. `error` (a ValueError subclass) for anything else."""
    if isinstance(data, str):
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data).decode("utf-8", errors="replace")
    raise error(f"{what}: expected text or bytes, got {type(data).__name__}")
