"""The embedded platform stays apart from the product: flows, tasks and the domain never import `remedy.platform`
(they run the same on a Kubernetes work pool, where none of it runs). Imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Command-line front ends that find the stack `remedy up` started; each says why.
ALLOWED = {
    "remedy/cli.py": "dispatches `remedy up/down/receiver/demo` to the platform",
    "remedy/approvals/decide.py": "`remedy breaker close` resumes waiting runs through the server `remedy up` started",
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _platform_importers() -> dict[str, list[str]]:
    out = {}
    for top in ("remedy", "flows", "tasks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("remedy/platform/") or rel in ALLOWED:
                continue
            hits = sorted(m for m in _imports(path) if m == "remedy.platform" or m.startswith("remedy.platform."))
            if hits:
                out[rel] = hits
    return out


def test_no_flow_task_or_domain_module_imports_the_platform():
    assert _platform_importers() == {}


def test_the_scan_sees_an_import_inside_a_function(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from remedy.platform.dispatcher import Dispatcher\n    import remedy.platform\n")
    assert _imports(sample) >= {"remedy.platform.dispatcher", "remedy.platform"}


def test_the_allowed_front_ends_exist():
    assert all((ROOT / rel).is_file() for rel in ALLOWED)


def test_the_safety_procedure_imports_no_task_flow_or_prefect():
    """remedy/safety sequences the gate over ports; tasks.gate wires them for a run (docs/architecture.md)."""
    bad = {}
    for path in sorted((ROOT / "remedy" / "safety").rglob("*.py")):
        hits = sorted(m for m in _imports(path) if m.split(".")[0] in ("tasks", "flows", "prefect"))
        if hits:
            bad[path.relative_to(ROOT).as_posix()] = hits
    assert bad == {}
