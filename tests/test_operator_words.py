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
