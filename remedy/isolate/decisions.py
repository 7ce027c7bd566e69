"""The isolate-fault flow's decisions, Prefect-free: is the request sane, what a smoke test's answer means, which
nodes go back to the pool when the search ends, what stays quarantined, and the verdict in an operator's words.

The flow (flows/isolate_fault.py) only runs the steps on the cluster and calls these.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from remedy.domain.durations import human_duration
from remedy.isolate.search import BatchOutcome, IsolationResult, Verdict


class BatchVerdict(StrEnum):
    """What one smoke test on one batch showed."""

    DIVERGED = "diverged"
    TIMED_OUT = "timed out"
    HEALTHY = "healthy"


def check_request(suspects: object, time_limit_seconds: object) -> None:
    """Refuse a bad request before any node is touched (ValueError, one line)."""
    if not isinstance(suspects, (list, tuple)) or not suspects:
        raise ValueError("isolate_fault: the suspect list is empty; name the nodes the diverging job ran on")
    if not isinstance(time_limit_seconds, (int, float)) or not time_limit_seconds > 0:
        raise ValueError(f"isolate_fault: time_limit_seconds must be > 0, got {time_limit_seconds!r}")


def dry_run_text(suspects: Sequence[str], first_round_batches: int) -> str:
    return (f"dry-run: would quarantine {len(suspects)} node(s) and test {first_round_batches} batches in round 1")


@dataclass(frozen=True)
class SmokeAnswer:
    """One smoke test's answer, typed: what the search records and what the round table shows."""

    outcome: BatchOutcome
    verdict: BatchVerdict
    seconds: float

    @property
    def healthy(self) -> bool:
        """A batch that trained normally goes back to the pool at once, before the round ends."""
        return self.verdict is BatchVerdict.HEALTHY


@dataclass(frozen=True)
class Quarantined:
    """The suspect pool tainted NoSchedule; `already_out`: nodes someone else had taken out (left as found)."""

    quarantined: tuple[str, ...]
    already_out: tuple[str, ...]


@dataclass(frozen=True)
class Released:
    """Nodes given back to the pool (label and our taint removed), and those that could not be (node → why): a
    person untaints them."""

    released: tuple[str, ...]
    failed: dict[str, str]
    why: str
    at: float  # epoch seconds


def read_smoke_answer(res: Mapping[str, Any]) -> SmokeAnswer:
    """The run_smoke_test task's result as a typed answer (diverged wins over timed out)."""
    diverged, timed_out = bool(res["diverged"]), bool(res["timed_out"])
    verdict = (BatchVerdict.DIVERGED if diverged else BatchVerdict.TIMED_OUT if timed_out else BatchVerdict.HEALTHY)
    return SmokeAnswer(BatchOutcome(diverged, timed_out, str(res["detail"])), verdict, res["seconds"])


def timed_out_only(result: IsolationResult) -> bool:
    """No test reached a verdict at all: the pattern or the time limit is wrong, not the nodes."""
    return (result.verdict is Verdict.INCONCLUSIVE and bool(result.inconclusive_batches)
            and not (result.bad_nodes or result.narrowed_batches or result.unresolved_groups))


def held_nodes(result: IsolationResult | None) -> tuple[str, ...]:
    """Nodes that stay quarantined: what the verdict blames, and batches no test could clear (unless that is all)."""
    if result is None or timed_out_only(result):
        return ()
    return tuple(result.held)


@dataclass(frozen=True)
class FinalRelease:
    """What the flow's `finally` does: release the leftovers (with why), keep the held nodes tainted."""

    leftover: tuple[str, ...]
    why: str
    keep: tuple[str, ...]


def final_release(suspects: Sequence[str], released: Collection[str], result: IsolationResult | None) -> FinalRelease:
    """Nothing stays quarantined by accident: on an error (result None) or a search without blame, release all the
    nodes not already back, except the ones the verdict holds for a person."""
    keep = set(held_nodes(result))
    leftover = tuple(n for n in suspects if n not in released and n not in keep)
    why = "isolation ended without blaming these nodes" if result else "isolation failed"
    return FinalRelease(leftover, why, tuple(sorted(keep)))


def quarantine_in_ledger(result: IsolationResult) -> tuple[str, ...]:
    """Only an infrastructure verdict marks nodes quarantined in the ledger (for a person / the replace flow)."""
    return tuple(result.suspects) if result.verdict is Verdict.INFRASTRUCTURE else ()


def plain_verdict(r: IsolationResult) -> str:
    """The verdict in an operator's words, with the effort beside the bound."""
    if r.verdict is Verdict.CODE:
        return (f"Code: every batch diverges, more of them than bad nodes could explain, so the cause is the training "
                f"code or its data, not the hardware. All {len(r.released)} nodes went back to the pool ({r.effort}).")
    if r.verdict is Verdict.INFRASTRUCTURE:
        named = ", ".join(r.suspects)
        return (f"Infrastructure: the divergence follows {named}. They stay quarantined; the other "
                f"{len(r.released)} node(s) went back to the pool ({r.effort}).")
    if r.verdict is Verdict.NOT_REPRODUCED:
        return (f"Not reproduced: no batch diverged, so no node can be blamed (intermittent, or it needs the whole "
                f"job's scale). All {len(r.released)} nodes went back to the pool ({r.effort}).")
    return f"Inconclusive — {r.reason} ({r.effort})."


def timed_out_message(pattern: str, time_limit_seconds: float, tests_run: int, suspects: int) -> str:
    return (f"isolate_fault: no smoke test reached a verdict: pattern {pattern!r} never matched and the test did not "
            f"finish within {human_duration(time_limit_seconds)} ({tests_run} test(s)); all {suspects} node(s) "
            "released — check the pattern and the time limit")


def nodes_cell(nodes: Sequence[str]) -> str:
    """A batch's nodes in one report cell: all of them when few, else first … last (count)."""
    return ", ".join(nodes) if len(nodes) <= 6 else f"{nodes[0]} … {nodes[-1]} ({len(nodes)})"
