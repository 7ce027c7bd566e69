"""Tasks return small typed results, not dicts (issue 29, item 2; issue 28, item 5).

Reads every Prefect task's declared return type (the `@task` functions under tasks/, from their source): a result that is
a dict, or holds dicts (`list[dict]`, `dict | None`, `tuple[list[dict], …]`), counts as a dict. The acceptance is
at most 3 such tasks, each named below with its reason: a new dict-returning task fails here.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

TASKS = Path(__file__).resolve().parents[1] / "tasks"

# At most 3, by name, with the reason a dict is the right result.
ALLOWED: dict[str, str] = {
    "tasks.preemption.plan_preemption": "the plan is the ledger's recorded action detail (JSON), replayed verbatim "
                                        "on a re-run and handed back to `preempt` unchanged: its shape is the "
                                        "ledger's record",
    "tasks.dashboard.count_pools": "its rows are the fleet dashboard's pools table artifact, published as they are "
                                   "(Prefect's create_table_artifact takes a list of dicts)",
}

DICTISH = re.compile(r"\b(dict|Dict|Mapping|MutableMapping)\b")


@functools.cache
def _task_returns() -> dict[str, str]:
    """Every task defined under tasks/ (a function decorated `@task`) → its declared return type, as written. Read
    from the source, not by importing: the task modules import Prefect and their integrations (seconds each)."""
    found: dict[str, str] = {}
    for path in sorted(TASKS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    _is_task(d) for d in node.decorator_list):
                found[f"tasks.{path.stem}.{node.name}"] = ast.unparse(node.returns) if node.returns else "<none>"
    return found


def _is_task(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Name) and target.id == "task" or (
        isinstance(target, ast.Attribute) and target.attr == "task")


def _dict_returning() -> set[str]:
    return {name for name, ret in _task_returns().items() if DICTISH.search(ret)}


def test_the_checker_sees_every_task_and_reads_dicts_in_results() -> None:
    returns = _task_returns()
    assert len(returns) >= 60, sorted(returns)  # all task modules were read, not a handful
    assert returns["tasks.triage.weigh_warning"] == "WarningWeighed"
    assert DICTISH.search("tuple[list[dict], list[str]]") and DICTISH.search("dict[str, Any] | None")
    assert not DICTISH.search("RemediationClaim") and not DICTISH.search("tuple[BudgetBlock, ...]")


def test_every_task_declares_its_result() -> None:
    assert [n for n, ret in _task_returns().items() if ret == "<none>"] == []


def test_no_new_task_returns_a_dict() -> None:
    """A dict-returning task is an allowed exception, with its reason, or a failure here."""
    assert sorted(_dict_returning() - ALLOWED.keys()) == []


def test_an_exception_that_no_longer_needs_it_leaves_the_list() -> None:
    assert sorted(ALLOWED.keys() - _dict_returning()) == []


def test_at_most_three_tasks_return_dicts() -> None:
    assert len(ALLOWED) <= 3 and len(_dict_returning()) <= 3, sorted(_dict_returning())


# ---------------------------------------------------------------------- the typed results' own small logic
def test_a_node_move_reads_its_recorded_detail_and_a_replay() -> None:
    from remedy.ledger.results import NodeMoved

    moved = NodeMoved.from_record({"node": "gpu007", "from": "active", "to": "quarantined", "replaces": None})
    assert (moved.from_state, moved.to, moved.replaces, moved.dry_run, moved.replayed) == (
        "active", "quarantined", None, False, False)
    again = NodeMoved.from_record({"node": "gpu013", "from": None, "to": "active", "replaces": "gpu007",
                                   "dry_run": True, "replayed": True})
    assert (again.from_state, again.replaces, again.dry_run, again.replayed) == (None, "gpu007", True, True)


def test_a_warning_held_for_its_detectors_record_is_not_swapped_and_says_why() -> None:
    from remedy.remediate.choice import WarningAction
    from remedy.remediate.results import WarningWeighed

    acts = WarningWeighed("gpu007", WarningAction.AT_NEXT_CHECKPOINT, acts=True, why="swap pays", act_cost_minutes=3.0,
                          wait_cost_minutes=9.0, markdown="| options |")
    held = acts.held_for_record("Checking the detector first: 2 of 3 warnings judged")
    assert (held.action, held.acts, held.checking) == (WarningAction.WAIT, False, True)
    assert held.why == "not swapped: checking the detector first: 2 of 3 warnings judged"
    assert held.markdown.endswith("**Checking the detector first: 2 of 3 warnings judged**")
    shown = held.summary()  # what the triage run's result carries: no markdown, nothing unweighed
    assert shown["action"] == "wait-for-failure" and "markdown" not in shown and "detector" not in shown


def test_a_slack_notice_shows_only_what_it_says() -> None:
    from remedy.audit.results import SlackNotice

    assert SlackNotice(posted=True, ts="1700000000.000100").to_dict() == {"posted": True, "ts": "1700000000.000100"}
    assert SlackNotice(posted=False, skip="notify off").to_dict() == {"posted": False, "skip": "notify off"}


def test_a_cluster_step_reads_back_from_its_ledger_record() -> None:
    """A re-run replays a step from its recorded detail (tasks.ledger.act): the typed result reads it back the same,
    extra keys of an older record ignored, the replay said."""
    from remedy.remediate.results import NodeChange, Resized

    cordon = NodeChange.from_record({"node": "gpu007", "action": "cordon", "changed": True, "detail": "XID 79",
                                     "cordoned_before": "gpu-remedy", "replayed": True, "extra": 1})
    assert (cordon.changed, cordon.cordoned_before, cordon.replayed) == (True, "gpu-remedy", True)
    refused = Resized.from_record({"job": "training/llm", "nodes": 7, "changed": False, "refused": "below min 8",
                                   "kind": "Job", "pods": []})
    assert refused.refused == "below min 8" and not refused.changed
    not_shrunk = Resized.from_record({"job": "training/llm", "nodes": 8, "changed": False, "why": "not shrunk"})
    assert (not_shrunk.refused, not_shrunk.detail) == ("", "not shrunk")
    assert not_shrunk.to_dict() == {"job": "training/llm", "nodes": 8, "changed": False, "dry_run": False,
                                    "detail": "not shrunk", "replayed": False}


def test_a_spare_claim_round_trips_through_its_record() -> None:
    from remedy.spares.results import SpareChoice

    chosen = SpareChoice("gpu013", True, "gpu013: same rack\nrejected: gpu014")
    again = SpareChoice.from_record(chosen.record() | {"replayed": True})
    assert (again.spare, again.needs_validation, again.replayed) == ("gpu013", True, True)
    assert chosen.validated().needs_validation is False and SpareChoice.from_record({"spare": None}).spare is None


def test_a_burn_in_verdict_keeps_the_rows_the_flows_return() -> None:
    from remedy.health.results import BurnInVerdict

    check = {"id": "dcgm-r3", "check": "dcgm", "verdict": "fail", "reasons": ["xid 79"]}
    failed = BurnInVerdict("gpu007", "repair", False, why="dcgm-r3: xid 79", level="quick", checks=(check,),
                           dry_run=False, failed_validations=3, retirement_candidate=True).to_dict()
    assert failed == {"node": "gpu007", "status": "repair", "passed": False, "checks": [check], "level": "quick",
                      "why": "dcgm-r3: xid 79", "dry_run": False, "failed_validations": 3,
                      "retirement_candidate": True}
    checked = BurnInVerdict("gpu008", "checked", True, level="quick").to_dict()
    assert "why" not in checked and "retirement_candidate" not in checked
