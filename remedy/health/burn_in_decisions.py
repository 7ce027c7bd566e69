"""The burn-in flow's decisions, Prefect-free: which nodes go on to the multi-node NCCL sweep, what a group's verdict
means for each member, how a failed group is re-paired with known-good nodes to find the slow member, and how a
batch is summarised.

Results keep the shapes the burn-in tasks return (tasks/burn_in.py): a node result has `status`, `passed`, `checks`
and `why`; a group result has `id`, `check`, `group`, `verdict` and `reasons`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

NodeResult = dict[str, Any]
GroupResult = dict[str, Any]

GOOD_GROUP = ("pass", "warn", "planned")  # a group with one of these verdicts lends its members as known-good peers


class MultiNodeStart(StrEnum):
    """What the multi-node stage does with a batch."""

    LONE = "lone"  # one node passed alone: nobody to pair with, a warning instead of a sweep
    SWEEP = "sweep"  # groups of the nodes that passed alone


@dataclass(frozen=True)
class MultiNodePlan:
    checked: tuple[str, ...]  # passed every single-node check: they go on to NCCL
    skipped: tuple[str, ...]  # failed alone: the multi-node check is not run on them

    @property
    def start(self) -> MultiNodeStart:
        return MultiNodeStart.LONE if len(self.checked) == 1 else MultiNodeStart.SWEEP


def check_batch(nodes: Any) -> list[str]:
    """The node list a burn-in was given, or a one-line ValueError saying what is wrong with it."""
    if not isinstance(nodes, (list, tuple)) or not nodes:
        raise ValueError(f"burn_in needs a non-empty list of node names, got {nodes!r}")
    bad = [n for n in nodes if not isinstance(n, str) or not n.strip()]
    if bad:
        raise ValueError(f"burn_in: node names must be non-empty strings, got {bad[:3]!r}")
    seen, dupes = set(), []
    for n in nodes:
        (dupes.append(n) if n in seen else seen.add(n))
    if dupes:
        raise ValueError(f"burn_in: nodes listed twice: {', '.join(sorted(set(dupes)))}")
    return list(nodes)


def plan_multi_node(results: Mapping[str, NodeResult]) -> MultiNodePlan:
    checked = tuple(n for n, r in results.items() if r["status"] == "checked" and r["passed"])
    skipped = tuple(n for n, r in results.items() if r["status"] == "checked" and not r["passed"])
    return MultiNodePlan(checked, skipped)


def lone_node_check(check_id: str, check: str) -> GroupResult:
    """The multi-node check's entry for a batch with one idle node: a warning, not a fail."""
    return {"id": check_id, "check": check, "verdict": "warn", "job": None,
            "reasons": ["warning: no other idle node in the batch to pair with"]}


def group_error(error: object) -> GroupResult:
    """A group task that failed for good (API down, …): our error, never a node's fail."""
    return {"id": "nccl-multi-node", "check": "nccl", "group": [], "verdict": "error",
            "reasons": [f"could not run the multi-node sweep: {type(error).__name__}: {error}"[:500]]}


def first_verdicts(groups: Sequence[Sequence[str]], runs: Sequence[GroupResult]) -> dict[str, GroupResult]:
    """Each member's verdict is its group's."""
    return {n: r for g, r in zip(groups, runs) for n in g}


def known_good(groups: Sequence[Sequence[str]], runs: Sequence[GroupResult]) -> list[str]:
    return [n for g, r in zip(groups, runs) if r["verdict"] in GOOD_GROUP for n in g]


def failed_members(groups: Sequence[Sequence[str]], runs: Sequence[GroupResult]) -> list[str]:
    return [n for g, r in zip(groups, runs) if r["verdict"] == "fail" for n in g]


@dataclass(frozen=True)
class PairingRound:
    """One round of re-pairing: each suspect beside a different known-good node (a node's group label holds one
    value, so a known-good node is in one pair at a time). `first` numbers the round's first pair in the batch."""

    first: int
    pairs: tuple[tuple[str, str], ...]


def pairing_rounds(suspects: Sequence[str], good: Sequence[str]) -> list[PairingRound]:
    """Every suspect beside a known-good peer, in as many rounds as there are too few peers for."""
    if not good:
        return []
    return [PairingRound(start, tuple(zip(suspects[start:start + len(good)], good)))
            for start in range(0, len(suspects), len(good))]


def judge_repair(suspect: str, peer: str, first: GroupResult, again: GroupResult) -> GroupResult:
    """The suspect's verdict after it ran beside a known-good peer: failing again blames it; passing there means its
    first group's failure was someone else's (a warning); an error of ours leaves the re-run's error as it is."""
    if again["verdict"] == "error":
        return again
    if again["verdict"] == "fail":
        return again | {"reasons": again["reasons"] + [f"also failed beside known-good {peer} (first group: "
                                                       f"{', '.join(first['group'])})"]}
    return again | {"reasons": [f"warning: group {', '.join(first['group'])} failed, but {suspect} passed beside "
                                f"known-good {peer}"], "verdict": "warn"}


def no_peer_to_isolate(first: GroupResult) -> GroupResult:
    """A failed group with no known-good node in the batch: the fail stands, with why it was not narrowed."""
    return first | {"reasons": first["reasons"] + ["no known-good node in the batch to isolate the slow member"]}


@dataclass(frozen=True)
class BoardMark:
    check_id: str
    state: str


def settle_multi_node(result: NodeResult, verdict: GroupResult, multi_id: str) -> BoardMark:
    """Attach the multi-node verdict to a node's result (in place) and say what the check board shows. An error is
    ours, not the node's: it stays in burn-in for a re-run instead of failing."""
    if verdict["verdict"] == "error":
        result |= {"status": "error", "passed": False, "why": verdict["reasons"][0]}
        return BoardMark(multi_id, "error")
    result["checks"].append(verdict)
    result["passed"] = verdict["verdict"] != "fail"
    return BoardMark(verdict["id"], verdict["verdict"])


def node_error(node: str, error: object) -> NodeResult:
    """A node task that failed for good: the node stays where it was (in burn-in); an error of ours never sends a
    node to repair."""
    return {"node": node, "status": "error", "passed": False, "checks": [],
            "why": f"could not check: {type(error).__name__}: {error}"[:500]}


def summarise(results: Mapping[str, NodeResult], level: str, dry_run: bool) -> dict[str, Any]:
    """The batch in numbers and lists: spares, failed (to repair), skipped, errors, retirement candidates."""
    counts: dict[str, int] = {}
    for r in results.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1

    def having(*statuses: str) -> list[str]:
        return sorted(n for n, r in results.items() if r["status"] in statuses)

    return {
        "level": level, "dry_run": dry_run, "counts": counts, "nodes": results,
        "spares": having("spare", "planned-spare"),
        "failed": having("repair", "planned-repair"),
        "skipped": having("skipped"),
        "errors": having("error"),
        "retirement_candidates": sorted(n for n, r in results.items() if r.get("retirement_candidate")),
    }
