"""When no spare is ready: which lower-priority work to preempt so a gang-scheduled job gets all its nodes.

Seed 002 §4.3.5 (Lablup): a 60-node job is gang-scheduled (all nodes or none); with only 3 spares, single-node
sessions on the free nodes kept automatic retries from starting for hours. The fix proposed there: give multi-node
training higher priority and preempt lower-priority single-node sessions. This module only chooses and explains;
a person approves by default (`spares.preemption_requires_approval`), and the flow does the evicting.

Choice: only work below `spares.preempt_below_priority` and below the job's own priority, on healthy nodes; a node
is freed only when every workload on it is preempted; cheapest first — lowest priority, then fewest nodes, then
the most recently started (least work lost), then name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from remedy.settings.safety import SpareSettings


@dataclass(frozen=True)
class Workload:
    name: str
    nodes: tuple[str, ...]
    priority: int
    started_at: datetime | None = None


@dataclass(frozen=True)
class Passed:
    name: str
    reason: str


@dataclass(frozen=True)
class PreemptionPlan:
    job: str
    victims: tuple[Workload, ...]
    freed_nodes: tuple[str, ...]
    approval_required: bool
    passed_over: tuple[Passed, ...]

    def explain(self) -> str:
        who = ", ".join(f"{w.name} (priority {w.priority}, {len(w.nodes)} node{'s' * (len(w.nodes) != 1)})" for w in self.victims)
        gate = "needs a person's approval" if self.approval_required else "may proceed without approval"
        lines = [f"to start {self.job}: preempt {who}, freeing {', '.join(self.freed_nodes)}; {gate}"]
        return "\n".join(lines + [f"kept {p.name}: {p.reason}" for p in self.passed_over])


@dataclass(frozen=True)
class NoPreemption:
    job: str
    reason: str
    passed_over: tuple[Passed, ...]

    def explain(self) -> str:
        return "\n".join([f"cannot free nodes for {self.job}: {self.reason}"] + [f"kept {p.name}: {p.reason}" for p in self.passed_over])


def choose_preemption(
    job: str,
    job_priority: int,
    nodes_needed: int,
    workloads: Sequence[Workload],
    settings: SpareSettings | None = None,
    unhealthy_nodes: Iterable[str] = (),
) -> PreemptionPlan | NoPreemption:
    """Smallest-cost set of workloads whose preemption frees `nodes_needed` healthy nodes for `job`."""
    settings = settings or SpareSettings()
    if nodes_needed < 1:
        raise ValueError(f"nodes_needed must be >= 1, got {nodes_needed}")
    names = [w.name for w in workloads]
    if len(set(names)) != len(names):
        raise ValueError(f"workloads listed twice: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
    bad = frozenset(unhealthy_nodes)
    limit = min(settings.preempt_below_priority, job_priority)

    passed: list[Passed] = []
    eligible: list[Workload] = []
    for w in workloads:
        if w.name == job:
            continue
        if not w.nodes:
            raise ValueError(f"workload {w.name} lists no nodes")
        if w.priority >= limit:
            why = (
                f"priority {w.priority} is not below the preemption threshold {settings.preempt_below_priority}"
                if w.priority >= settings.preempt_below_priority
                else f"priority {w.priority} is not below {job}'s {job_priority}"
            )
            passed.append(Passed(w.name, why))
        elif bad.intersection(w.nodes):
            passed.append(Passed(w.name, f"runs on unhealthy node(s) {', '.join(sorted(bad.intersection(w.nodes)))}"))
        else:
            eligible.append(w)

    tenants: dict[str, set[str]] = {}
    for w in workloads:
        if w.name != job:
            for n in w.nodes:
                tenants.setdefault(n, set()).add(w.name)
    blocked = {p.name for p in passed}

    def cost(w: Workload) -> tuple:
        started = -w.started_at.timestamp() if w.started_at else 0.0
        return (w.priority, len(w.nodes), started, w.name)

    chosen: list[Workload] = []
    chosen_names: set[str] = set()
    freed: set[str] = set()
    for w in sorted(eligible, key=cost):
        if len(freed) >= nodes_needed:
            break
        stuck = sorted(n for n in w.nodes if tenants[n] & blocked)
        if len(stuck) == len(w.nodes):
            passed.append(Passed(w.name, f"its nodes also carry work that may not be preempted ({', '.join(stuck)})"))
            continue
        chosen.append(w)
        chosen_names.add(w.name)
        freed = {n for n, ws in tenants.items() if n not in bad and ws <= chosen_names}

    if len(freed) < nodes_needed:
        return NoPreemption(
            job,
            f"preempting every eligible workload frees {len(freed)} node(s), {job} needs {nodes_needed}",
            tuple(passed),
        )
    # drop victims whose preemption frees nothing that is needed (e.g. a co-tenant of a node never freed)
    useful = [w for w in chosen if any(n in freed for n in w.nodes)]
    return PreemptionPlan(
        job, tuple(useful), tuple(sorted(freed)), settings.preemption_requires_approval, tuple(passed)
    )
