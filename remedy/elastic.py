"""An elastic job need not wait for a node: swap a hot spare, continue one node short, or stop and replace.

When a node of the training job fails, three ways on, by expected cost in node-minutes of training lost
(`choose_continuation`):

- **hot swap**: a hot spare is already in the job's pool (labelled `remedy.io/spare-role=hot`: untainted, image
  pulled, nothing else scheduled on it), so the job's pod lands on it as soon as the failed node is drained; the
  job restarts once, at full size. Then a warm spare is made hot again (`remedy.spares.hot`).
- **shrink and continue**: an elastic job (PyTorchJob `elasticPolicy` minReplicas < maxReplicas; an Indexed Job
  with completions = parallelism that declares `remedy.io/elastic-nodes: "MIN:MAX"`, as torchrun's
  `--nnodes=MIN:MAX`) restarts at once on the survivors, runs one node short while the spare joins, and restarts
  again at full size when it has (two elastic restarts, one node missing during the join).
- **stop and replace**: the gang waits for the spare with every node idle, then reloads once.

    stop    = N × (join + reload)
    shrink  = N × restart + max(0, join − restart) × 1 + N × restart
    hot     = N × (swap + restart)

`restart` is what one elastic restart costs the job: torchrun's re-rendezvous and the reload of its checkpoint. A
job that reloads from memory or from peers says so with `remedy.io/elastic-restart-seconds`; one that says nothing
is taken to reload like a cold restart (`workload.reload_minutes`), and then shrinking pays only while the spare
is slow to come (no warm spare: the repair lead time).

Checkpoint on failure: a job that declares `remedy.io/checkpoint-on-failure: "annotation"` is asked, before the
failed node is drained, to save from its surviving replicas: gpu-remedy writes `remedy.io/checkpoint-requested`
(the handshake of remedy.domain.checkpoints) and waits at most `remedy.io/checkpoint-on-failure-seconds`
(default 120 s, never more than 600 s) for `remedy.io/last-checkpoint` to pass the request. Whatever the answer,
the drain goes on: a failed node is never kept waiting for a job that does not answer.

Prefect-free; the tasks are in tasks/elastic.py, the flow steps in flows/replace_node.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# -- the contract with the job and the nodes (docs/operations.md, "Elastic jobs, hot spares, checkpoint on failure")
ELASTIC_NODES = "remedy.io/elastic-nodes"  # on a batch/v1 Indexed Job: "MIN:MAX" nodes, torchrun's --nnodes
ELASTIC_RESTART = "remedy.io/elastic-restart-seconds"  # on the workload: one elastic restart's cost
FULL_SIZE = "remedy.io/full-size"  # written on a shrunk workload: the size it grows back to (survives a crash)
CHECKPOINT_ON_FAILURE = "remedy.io/checkpoint-on-failure"  # "annotation": ask through remedy.io/checkpoint-requested
CHECKPOINT_ON_FAILURE_WAIT = "remedy.io/checkpoint-on-failure-seconds"
SPARE_ROLE = "remedy.io/spare-role"  # node label; "hot": a spare already in the job's pool
HOT = "hot"

CHECKPOINT_MODES = frozenset({"annotation"})
DEFAULT_CHECKPOINT_WAIT_SECONDS = 120.0
MAX_CHECKPOINT_WAIT_SECONDS = 600.0  # a failed node is not held longer than this for a save
HOT_SWAP_MINUTES = 0.5  # the pod lands on a node already in the pool: a scheduling decision and a container start


class Continuation(StrEnum):
    HOT_SWAP = "hot-swap"
    SHRINK = "shrink"
    STOP_AND_REPLACE = "stop-and-replace"


def parse_elastic_nodes(text: object) -> tuple[int, int] | None:
    """`"MIN:MAX"` (torchrun's --nnodes) → (MIN, MAX); None when absent or not a range 1 ≤ MIN ≤ MAX."""
    if not isinstance(text, str) or ":" not in text:
        return None
    low, _, high = text.partition(":")
    try:
        lo, hi = int(low), int(high)
    except ValueError:
        return None
    return (lo, hi) if 1 <= lo <= hi else None


def _positive_seconds(value: object) -> float | None:
    try:
        s = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return s if s > 0 and s == s and s != float("inf") else None


def restart_minutes(annotations: dict[str, str] | None, reload_minutes: float) -> float:
    """One elastic restart, as the job declares it; a cold reload when it declares nothing usable."""
    s = _positive_seconds((annotations or {}).get(ELASTIC_RESTART))
    return s / 60.0 if s is not None else reload_minutes


@dataclass(frozen=True)
class CheckpointOnFailure:
    """What the job asks for when one of its nodes fails; `asked` False: it declared nothing (or nothing usable)."""

    asked: bool
    mode: str = ""
    wait_seconds: float = 0.0
    why: str = ""


def checkpoint_on_failure(annotations: dict[str, str] | None) -> CheckpointOnFailure:
    a = annotations or {}
    mode = (a.get(CHECKPOINT_ON_FAILURE) or "").strip()
    if not mode:
        return CheckpointOnFailure(False, why=f"the job declares no {CHECKPOINT_ON_FAILURE}")
    if mode not in CHECKPOINT_MODES:
        return CheckpointOnFailure(False, mode=mode, why=f"{CHECKPOINT_ON_FAILURE}: {mode!r} is not one gpu-remedy "
                                   f"knows ({', '.join(sorted(CHECKPOINT_MODES))}); not asked")
    wait = _positive_seconds(a.get(CHECKPOINT_ON_FAILURE_WAIT)) or DEFAULT_CHECKPOINT_WAIT_SECONDS
    return CheckpointOnFailure(True, mode=mode, wait_seconds=min(wait, MAX_CHECKPOINT_WAIT_SECONDS),
                               why=f"the job asks to save from its surviving replicas ({mode})")


@dataclass(frozen=True)
class Elasticity:
    """What the failure meets: the job's size and range, the hot spares in its pool, whether a warm spare is
    ready, and what each step costs (minutes)."""

    desired: int  # pods the job runs now (= nodes, one pod per node)
    elastic: tuple[int, int] | None  # (fewest, most) nodes its controller may run it with; None: fixed size
    hot_spares: tuple[str, ...] = ()
    spare_ready: bool = True
    join_minutes: float = 4.0  # a warm spare joins (seed 000: 4 min)
    lead_minutes: float = 48 * 60.0  # no warm spare: a repaired or new node (spares.replacement_lead_time_hours)
    reload_minutes: float = 31.0  # a cold restart reloads its checkpoint (seed 002: median 31 min)
    restart_minutes: float = 31.0  # one elastic restart (the job's remedy.io/elastic-restart-seconds)


@dataclass(frozen=True)
class ContinuationChoice:
    choice: Continuation
    costs: dict[Continuation, float]  # node-minutes of training lost, per option considered
    why: str
    shrink_to: int | None = None  # SHRINK: the job's size while the spare joins
    grow_to: int | None = None  # SHRINK: the size it grows back to
    hot_spare: str | None = None  # HOT_SWAP: the node the job moves to
    arithmetic: tuple[str, ...] = field(default=())

    @property
    def shrinks(self) -> bool:
        return self.choice is Continuation.SHRINK

    def as_dict(self) -> dict[str, Any]:
        return {"choice": self.choice.value, "why": self.why, "shrink_to": self.shrink_to, "grow_to": self.grow_to,
                "hot_spare": self.hot_spare, "costs": {k.value: round(v, 1) for k, v in self.costs.items()},
                "arithmetic": list(self.arithmetic)}


def choose_continuation(e: Elasticity) -> ContinuationChoice:
    """Hot swap, shrink and continue, or stop and replace: the least expected node-minutes lost. A hot spare, when
    there is one, always beats waiting for a warm one; shrinking needs an elastic job with room above its minimum."""
    n = e.desired
    join = e.join_minutes if e.spare_ready else e.lead_minutes
    costs = {Continuation.STOP_AND_REPLACE: n * (join + e.reload_minutes)}
    lines = [f"stop and replace: {n} nodes × (spare joins {join:g} + reload {e.reload_minutes:g}) "
             f"= {costs[Continuation.STOP_AND_REPLACE]:.0f} node-min"]
    if e.hot_spares:
        costs[Continuation.HOT_SWAP] = n * (HOT_SWAP_MINUTES + e.restart_minutes)
        lines.append(f"hot swap to {e.hot_spares[0]}: {n} × (swap {HOT_SWAP_MINUTES:g} + restart "
                     f"{e.restart_minutes:g}) = {costs[Continuation.HOT_SWAP]:.0f} node-min")
    why_not_shrink = _why_not_shrink(e)
    if why_not_shrink is None:
        r = e.restart_minutes
        costs[Continuation.SHRINK] = n * r + max(0.0, join - r) + n * r
        lines.append(f"shrink to {n - 1} and grow back: {n} × restart {r:g} + 1 node × {max(0.0, join - r):g} "
                     f"short + {n} × restart {r:g} = {costs[Continuation.SHRINK]:.0f} node-min")
    else:
        lines.append(f"shrink: not possible ({why_not_shrink})")
    best = min(costs, key=lambda c: (costs[c], _ORDER.index(c)))
    why = f"{best.value}: least expected training lost ({costs[best]:.0f} node-min)"
    if len(costs) == 1:
        why = f"stop and replace: {why_not_shrink or 'the only option'}"
    return ContinuationChoice(best, costs, why,
                              shrink_to=n - 1 if best is Continuation.SHRINK else None,
                              grow_to=n if best is Continuation.SHRINK else None,
                              hot_spare=e.hot_spares[0] if best is Continuation.HOT_SWAP else None,
                              arithmetic=tuple(lines))


_ORDER = (Continuation.HOT_SWAP, Continuation.STOP_AND_REPLACE, Continuation.SHRINK)  # ties: fewer restarts first


def _why_not_shrink(e: Elasticity) -> str | None:
    if e.elastic is None:
        return "the job has a fixed size (no elasticPolicy, no remedy.io/elastic-nodes)"
    low, _ = e.elastic
    if e.desired - 1 < low:
        return f"{e.desired - 1} nodes is under the job's minimum {low}"
    return None


def noted_full_size(annotations: dict[str, str] | None) -> int | None:
    try:
        return int((annotations or {}).get(FULL_SIZE, ""))
    except ValueError:
        return None


def full_size_to_note(annotations: dict[str, str] | None, full: int) -> int:
    """A job shrunk again before it grew back (a second failure) keeps the first full size."""
    return max(full, noted_full_size(annotations) or 0)


def grow_back_to(annotations: dict[str, str] | None, desired: int, elastic: tuple[int, int] | None) -> int | None:
    """The size a shrunk job returns to when one spare has joined: one node more, up to its `remedy.io/full-size`
    and its range (two failures, two spares: each grow-back adds the node its spare brought); None: nothing to
    grow."""
    full = noted_full_size(annotations)
    if full is None:
        return None
    if elastic is not None:
        full = min(full, elastic[1])
    return min(full, desired + 1) if full > desired else None


__all__ = ["CHECKPOINT_ON_FAILURE", "CHECKPOINT_ON_FAILURE_WAIT", "ELASTIC_NODES", "ELASTIC_RESTART", "FULL_SIZE",
           "HOT", "SPARE_ROLE", "CheckpointOnFailure", "Continuation", "ContinuationChoice", "Elasticity",
           "checkpoint_on_failure", "choose_continuation", "full_size_to_note", "grow_back_to", "parse_elastic_nodes",
           "restart_minutes"]
