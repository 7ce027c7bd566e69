"""Flows read as runbooks (issue 29): no function in flows/ above cyclomatic complexity 15, counted by radon (which
counts comprehensions and boolean operators that ruff's C901 does not). scripts/lint.sh runs it; exit 1 names each
function over the limit, with its file and line."""

from __future__ import annotations

import sys
from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Class, Function

LIMIT = 15


def blocks(items):
    for item in items:
        yield item
        if isinstance(item, Class):
            yield from blocks(item.methods + item.inner_classes)
        else:
            yield from blocks(item.closures)


def main(root: Path) -> int:
    if not root.is_dir() or not any(root.glob("*.py")):
        print(f"flow_complexity: no Python files in {root} (give the flows/ folder)", file=sys.stderr)
        return 2
    over = [(path, b) for path in sorted(root.glob("*.py")) for b in blocks(cc_visit(path.read_text()))
            if isinstance(b, Function) and b.complexity > LIMIT]
    for path, b in over:
        print(f"{path}:{b.lineno}: {b.fullname} has cyclomatic complexity {b.complexity} (over {LIMIT}): move a "
              "decision into a domain function")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "flows")))
