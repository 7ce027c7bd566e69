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


def printable(text: str, limit: int = 200) -> str:
    """A line quoted from input, safe to print on a terminal: control characters escaped, long lines cut."""
    out = "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii") for ch in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def looks_binary(data: bytes) -> bool:
    """NUL bytes, or mostly control/undecodable bytes at the start: not a log, a tool's output or an exporter's page."""
    head = data[:8192]
    if not head:
        return False
    if b"\0" in head:
        return True
    text = head.decode("utf-8", errors="replace")
    odd = sum(1 for ch in text if ch == "\ufffd" or (ord(ch) < 32 and ch not in "\t\n\r\f\v"))
    return odd > len(text) * 0.1


def read_input_file(path: str, kind: str) -> str:
    """A file an operator named on the command line ('-' = stdin) as text; RemedyError (one line) for a missing
    file, a directory, or binary data, so nothing unreadable is parsed or echoed to the terminal."""
    import sys
    from pathlib import Path

    from remedy.errors import RemedyError

    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        p = Path(path)
        if p.is_dir():
            raise RemedyError(f"{path}: is a directory, not a {kind} file")
        if not p.is_file():
            raise RemedyError(f"file not found: {path}")
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise RemedyError(f"{path}: cannot read: {exc.strerror}") from None
    if looks_binary(data):
        raise RemedyError(f"{path}: binary data, not {kind} text (is this the right file?)")
    return data.decode("utf-8", errors="replace")


def one_line_yaml_error(exc: Exception) -> str:
    """A PyYAML error as one line: where (line, column) and what."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"
