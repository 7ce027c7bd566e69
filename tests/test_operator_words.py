"""Operator output speaks the operator's words: no "seed 002 Table 3" or "(seed 004)" from the design documents.

Every string literal in remedy/, flows/ and tasks/ that can reach an operator (CLI help and output, run names and
messages, artifacts, Kubernetes Events) is checked; docstrings and config field descriptions (developer docs,
where the sources are cited) are not. Cite the source in a comment instead."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JARGON = re.compile(r"\b[Ss]eeds? 0\d\d\b|\bTable \d+\b|§\s?\d|\(seed\b")


def _not_operator_facing(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "description":  # settings' field docs (they cite their sources)
                    skip.update(id(sub) for sub in ast.walk(kw.value))
    return skip


def test_no_design_document_jargon_in_operator_strings():
    found = []
    for package in ("remedy", "flows", "tasks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            skip = _not_operator_facing(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                        and JARGON.search(node.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:100]!r}")
    assert found == [], "\n".join(found)


def test_the_scan_sees_an_f_string_and_skips_a_docstring(tmp_path):
    tree = ast.parse('"""seed 002 Table 3 is cited here"""\nx = f"after {n} min back-off (seed 002)"\n')
    skip = _not_operator_facing(tree)
    hits = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in skip and JARGON.search(n.value)]
    assert hits == [" min back-off (seed 002)"]


# Durations read one way everywhere (remedy/domain/durations.py: "45 s", "10 min", "1 h", "3 d"). An f-string that
# puts a unit of time right after a formatted number is a duration formatted by hand.
UNIT_AFTER = re.compile(r"^\s?(s|secs?|seconds?|min|minutes?|h|hours?|d|days?)\b")
# Not the formatter's to change: the simulator mimics kubectl's own columns and messages; the goodput simulator and
# the remediation choice (remedy/remediate/choice.py) print cost tables whose rows are compared in one unit (every
# option's downtime in minutes), which mixed units ("45 s" beside "1.2 h") would make harder to compare.
DURATION_EXEMPT = ("remedy/sim/", "remedy/goodput/", "remedy/remediate/choice.py", "remedy/domain/durations.py")


def _hand_formatted_durations(tree: ast.AST, skip: set[int]) -> list[tuple[int, str]]:
    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr) or id(node) in skip:
            continue
        for value, after in zip(node.values, node.values[1:]):
            # "{n} s" / "{x:.1f}s" are durations; "{kind}s" (a plural) and "{step}s" (a pandas frequency) are not
            if isinstance(value, ast.FormattedValue) and isinstance(after, ast.Constant) \
                    and isinstance(after.value, str) and UNIT_AFTER.match(after.value) \
                    and (after.value[0].isspace() or value.format_spec is not None):
                hits.append((node.lineno, ast.unparse(node)[:100]))
    return hits


def test_every_duration_in_operator_text_goes_through_one_formatter():
    found = []
    for package in ("remedy", "flows", "tasks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel.startswith(DURATION_EXEMPT):
                continue
            tree = ast.parse(path.read_text())
            found += [f"{rel}:{line}: {text}" for line, text in _hand_formatted_durations(tree, _not_operator_facing(tree))]
    assert found == [], "format these with remedy.domain.durations.human_duration:\n" + "\n".join(found)


def test_the_duration_scan_sees_a_hand_formatted_duration():
    tree = ast.parse('a = f"after {d / 60:g} min back-off"\nb = f"after {human_duration(d)} back-off"\n'
                     'c = f"{n} spares"\nd = f"ran {t:.1f}s"\ne = f"({kind}s: {names})"\n')
    assert [line for line, _ in _hand_formatted_durations(tree, set())] == [1, 4]


def test_the_one_formatter():
    from remedy.domain.durations import days, hours, human_duration, minutes

    assert [human_duration(s) for s in (45, 2.29, 0.2, 60, 90, 600, 3600, 5400, 86400, 3 * 86400)] == \
        ["45 s", "2.3 s", "0.2 s", "1 min", "1.5 min", "10 min", "1 h", "1.5 h", "24 h", "3 d"]
    assert (minutes(10), hours(72), days(7), human_duration(None)) == ("10 min", "3 d", "7 d", "unknown")
