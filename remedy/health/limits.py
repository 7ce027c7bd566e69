"""Input limits every tool-output parser shares (health checks and detect parsers).

Parsers run inside the receiver and the flows' worker threads; one pathological log must not stall them
(issue 32: a burn-in Job log of 200k blank lines froze the dcgm-diag parser for over a minute). So every parser
reads its input through `bounded_lines`: the whole input is capped (a clear one-line error above the cap, never a
partial verdict), and each line is cut to `MAX_LINE_CHARS` before any pattern sees it, so even a pattern with a
per-line quadratic corner does bounded work per line. The patterns themselves are written to be linear
(no `\\s*` across lines, no lazy `.*?` followed by a trailing `\\s*$`); bench/parsers.py measures it.
"""

from __future__ import annotations

from collections.abc import Iterator

# A `dcgmi diag -r 4` log with -v is ~200 KB, an 8-GPU `nvidia-smi -q` ~60 KB, a day of kernel log on a busy node
# a few MB. 64 MiB is far above any real tool output and far below what would hurt the process.
MAX_INPUT_CHARS = 64 * 1024 * 1024
# The kernel's printk caps a record at 1024 bytes (journal lines add a prefix); table rows are < 200 characters.
MAX_LINE_CHARS = 8192


def check_size(text: str, what: str, error: type[Exception] = ValueError, limit: int = MAX_INPUT_CHARS) -> None:
    """`error` (one line) when `text` is over the input cap."""
    if len(text) > limit:
        raise error(f"{what} is {len(text) / 1024 / 1024:.0f} MiB, over the {limit // 1024 // 1024} MiB limit "
                    "for one parse (split it, or pass only the tool's output)")


def bounded_lines(text: str, what: str, error: type[Exception] = ValueError, *,
                  limit: int = MAX_INPUT_CHARS, line_chars: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of `text` (as str.splitlines), each cut to `line_chars`; `error` if `text` is over `limit`."""
    check_size(text, what, error, limit)
    for line in text.splitlines():
        yield line if len(line) <= line_chars else line[:line_chars]
