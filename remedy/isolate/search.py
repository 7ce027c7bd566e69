"""Bisection fault isolation as adaptive group testing, run in rounds (seed 004).

A training job diverged (`loss: nan` / `loss: 0.0000`) and the pool is tainted. Each round proposes disjoint batches;
the flow runs one smoke-test Job per batch (in parallel), reports each batch's outcome, and the search updates:

- a batch that trains normally is healthy: its nodes are released at once (a `Release` event), not at the end;
- a diverging batch holds at least one bad node: it is split in two and both halves are tested next round, until a
  single node remains or a half would be smaller than `min_nodes` (then the whole batch is reported: a smaller run can
  OOM and look like a hardware fault);
- round 1 splits the pool into several batches. Every batch diverging is **code** (user code or data, not hardware)
  only when batch size cannot explain it: more disjoint batches diverge than `max_bad_nodes` bad nodes could fill,
  and none trained normally. Until then every diverging batch is pursued as above: with 4 bad nodes scattered over
  the pool, round 1's 4 batches all diverge in ~8% of placements, and calling that code would release them;
- the bad nodes found are the **infrastructure** verdict. More diverging batches than `max_bad_nodes` while others
  train normally is **inconclusive — these batches failed**: the search stops and those batches stay held;
- a timed-out batch (the pattern never matched before the time limit) is inconclusive: it is retested unchanged up to
  `max_retests` times, then reported as inconclusive and its nodes stay held for a person to look at.

One bad node among N is found in 1 + ⌈log2(N / first_round_batches)⌉ rounds (≤ ⌈log2 N⌉ + 1); several bad nodes are
found because every diverging group is split independently. The result reports rounds and tests beside
⌈log2 C(N, k)⌉, the fewest tests any search needs to single out k bad nodes among N. Pure: no I/O, no Prefect, the
test is a callback.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from remedy.settings.lemon import IsolationSettings


class Verdict(StrEnum):
    CODE = "code"  # more disjoint batches diverged than bad nodes could explain, none trained: user code/data
    INFRASTRUCTURE = "infrastructure"  # divergence follows specific nodes
    NOT_REPRODUCED = "not-reproduced"  # nothing diverged: intermittent, or needs the whole job's scale
    INCONCLUSIVE = "inconclusive"  # failed batches that cannot be narrowed, timeouts, unresolved groups: held


@dataclass(frozen=True)
class Batch:
    """Nodes tested together in one smoke-test Job. `id` is safe as a Kubernetes label value (divergence-job-id)."""

    id: str
    nodes: tuple[str, ...]
    round: int
    retest: int = 0  # 0 = first test of these nodes


@dataclass(frozen=True)
class BatchOutcome:
    diverged: bool
    timed_out: bool = False
    detail: str = ""  # e.g. the matched log line, or "no loss line in 900 s"

    def __post_init__(self) -> None:
        if self.diverged and self.timed_out:
            raise ValueError("BatchOutcome: a batch cannot both diverge and time out")


@dataclass(frozen=True)
class Release:
    """Healthy nodes going back to the pool now (untaint, unlabel)."""

    round: int
    nodes: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class RoundRecord:
    number: int
    tested: tuple[tuple[Batch, BatchOutcome], ...]


@dataclass(frozen=True)
class IsolationResult:
    verdict: Verdict
    bad_nodes: tuple[str, ...]  # narrowed to a single node
    narrowed_batches: tuple[tuple[str, ...], ...]  # diverged but cannot be split below min_nodes
    inconclusive_batches: tuple[tuple[str, ...], ...]  # timed out on every try
    unresolved_groups: tuple[tuple[str, ...], ...]  # diverged together, neither half alone
    released: tuple[str, ...]
    held: tuple[str, ...]  # still tainted for a person: suspects + inconclusive
    rounds_used: int
    tests_run: int
    rounds: tuple[RoundRecord, ...]
    reason: str
    failed_batches: tuple[tuple[str, ...], ...] = ()  # inconclusive: the disjoint batches that diverged, all held
    pool_size: int = 0

    @property
    def suspects(self) -> tuple[str, ...]:
        """Every node the infrastructure verdict points at (single nodes and unsplittable batches)."""
        return self.bad_nodes + tuple(n for b in self.narrowed_batches for n in b)

    @property
    def faults(self) -> int:
        """Bad nodes the verdict locates (an unsplittable batch holds at least one)."""
        return len(self.bad_nodes) + len(self.narrowed_batches) if self.verdict is Verdict.INFRASTRUCTURE else 0

    @property
    def tests_bound(self) -> int:
        """⌈log2 C(N, k)⌉: the fewest tests any search needs to single out `faults` bad nodes among N."""
        return math.ceil(math.log2(math.comb(self.pool_size, self.faults))) if self.pool_size else 0

    @property
    def effort(self) -> str:
        """Rounds and tests used, beside the bound, in an operator's words."""
        text = f"{self.rounds_used} round(s), {self.tests_run} smoke test(s)"
        if self.faults:
            text += (f"; any search needs at least ⌈log2 C({self.pool_size},{self.faults})⌉ = {self.tests_bound} "
                     f"test(s) to single out {self.faults} of {self.pool_size}")
        return text


class FaultIsolation:
    """Step-wise search: `plan_round()` → run the batches → `record(outcomes)` → … until `done`; then `result`."""

    def __init__(
        self,
        suspects: Sequence[str],
        min_nodes: int | None = None,
        settings: IsolationSettings | None = None,
    ) -> None:
        s = settings or IsolationSettings()
        pool = list(suspects)
        if not pool:
            raise ValueError("fault isolation: the suspect list is empty")
        bad = [n for n in pool if not isinstance(n, str) or not n]
        if bad:
            raise ValueError(f"fault isolation: node names must be non-empty strings, got {bad[0]!r}")
        dupes = sorted(n for n, c in Counter(pool).items() if c > 1)
        if dupes:
            raise ValueError(f"fault isolation: duplicate node names in the suspect list: {', '.join(dupes)}")
        self.min_nodes = s.min_nodes if min_nodes is None else min_nodes
        if isinstance(self.min_nodes, bool) or not isinstance(self.min_nodes, int) or self.min_nodes < 1:
            raise ValueError(f"fault isolation: min_nodes must be an integer ≥ 1, got {self.min_nodes!r}")
        if self.min_nodes > len(pool):
            raise ValueError(
                f"fault isolation: min_nodes={self.min_nodes} is more than the {len(pool)} suspect node(s); "
                "the smoke test cannot run at all"
            )
        self.pool = tuple(pool)
        self.max_retests = s.max_retests
        self.max_bad_nodes = s.max_bad_nodes
        self._round = 0
        self._pending: list[Batch] = []  # planned for the next round
        self._planned: dict[str, Batch] = {}  # handed out, awaiting outcomes
        self._rounds: list[RoundRecord] = []
        self._released: list[str] = []
        self._bad: list[tuple[str, ...]] = []
        self._narrowed: list[tuple[str, ...]] = []
        self._inconclusive: list[tuple[str, ...]] = []
        self._unresolved: list[tuple[str, ...]] = []
        self._splits: dict[tuple[str, ...], tuple[str, ...]] = {}  # half → parent group
        self._half_results: dict[tuple[str, ...], dict[tuple[str, ...], bool]] = {}
        self._diverged: list[tuple[str, ...]] = []  # every batch that diverged, in order
        self._superseded: set[tuple[str, ...]] = set()  # diverged groups with a half that diverged too
        self._trained = False  # some batch trained normally (code would have diverged there too)
        self._failed: list[tuple[str, ...]] = []
        self._verdict: Verdict | None = None
        self._reason = ""
        self.tests_run = 0

        parts = max(1, min(s.first_round_batches, len(pool) // self.min_nodes))
        for nodes in _split(self.pool, parts):
            self._pending.append(Batch("", nodes, 1))

    # -- driving -------------------------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._verdict is not None

    @property
    def round(self) -> int:
        return self._round

    def plan_round(self) -> list[Batch]:
        """The disjoint batches to test this round (call once per round, then `record`)."""
        if self.done:
            raise RuntimeError("fault isolation is finished; read .result")
        if self._planned:
            raise RuntimeError(f"round {self._round} is still waiting for outcomes of {', '.join(self._planned)}")
        self._round += 1
        batches = [Batch(f"r{self._round}-b{i + 1}", b.nodes, self._round, b.retest) for i, b in enumerate(self._pending)]
        self._pending = []
        self._planned = {b.id: b for b in batches}
        return batches

    def record(self, outcomes: Mapping[str, BatchOutcome]) -> list[Release]:
        """Take every planned batch's outcome (keyed by batch id); return the nodes to release now."""
        if not self._planned:
            raise RuntimeError("record() called without a planned round; call plan_round() first")
        missing = sorted(set(self._planned) - set(outcomes))
        extra = sorted(set(outcomes) - set(self._planned))
        if missing or extra:
            raise ValueError(
                f"round {self._round}: outcomes must cover exactly the planned batches"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(extra)}" if extra else "")
            )
        for bid, out in outcomes.items():
            if not isinstance(out, BatchOutcome):
                raise ValueError(f"round {self._round}: outcome for {bid} must be a BatchOutcome, got {type(out).__name__}")
        tested = tuple((b, outcomes[b.id]) for b in self._planned.values())
        self._planned = {}
        self._rounds.append(RoundRecord(self._round, tested))
        self.tests_run += len(tested)

        releases: list[Release] = []
        for batch, out in tested:
            releases += self._update(batch, out)
        self._check_too_many(releases)
        if not self.done and not self._pending:
            self._finish()
        return releases

    # -- search logic --------------------------------------------------------------------------------------------

    def _release(self, nodes: Iterable[str], reason: str) -> list[Release]:
        nodes = tuple(n for n in nodes if n not in self._released)
        if not nodes:
            return []
        self._released.extend(nodes)
        return [Release(self._round, nodes, reason)]

    def _update(self, batch: Batch, out: BatchOutcome) -> list[Release]:
        nodes = batch.nodes
        if out.timed_out:
            if batch.retest < self.max_retests:
                self._pending.append(Batch("", nodes, self._round + 1, batch.retest + 1))
            else:
                self._inconclusive.append(nodes)  # held: neither blamed nor released
                self._resolve_half(nodes, None)
            return []
        if not out.diverged:
            self._trained = True
            self._resolve_half(nodes, False)
            return self._release(nodes, f"batch {batch.id} trained normally")
        self._diverged.append(nodes)
        if nodes in self._splits:
            self._superseded.add(self._splits[nodes])
        self._resolve_half(nodes, True)
        self._narrow(nodes)
        return []

    def _narrow(self, nodes: tuple[str, ...]) -> None:
        if len(nodes) == 1:
            self._bad.append(nodes)
        elif len(nodes) < 2 * self.min_nodes:
            self._narrowed.append(nodes)  # a half would be below min_nodes: OOM could pass for a fault
        else:
            left, right = _split(nodes, 2)
            for half in (left, right):
                self._splits[half] = nodes
                self._pending.append(Batch("", half, self._round + 1))
            self._half_results[nodes] = {}

    def _resolve_half(self, half: tuple[str, ...], diverged: bool | None) -> None:
        parent = self._splits.get(half)
        if parent is None:
            return
        results = self._half_results[parent]
        results[half] = bool(diverged) if diverged is not None else None  # type: ignore[assignment]
        if len(results) == 2 and all(v is False for v in results.values()):
            # The group diverged but neither half does alone: the fault needs both halves (or is intermittent).
            self._unresolved.append(parent)

    def frontier(self) -> list[tuple[str, ...]]:
        """The disjoint diverging batches known now: each holds at least one bad node if hardware is the cause, so
        their number is the fewest bad nodes that could explain what was seen."""
        return [g for g in self._diverged if g not in self._superseded]

    def _check_too_many(self, releases: list[Release]) -> None:
        failed = self.frontier()
        if len(failed) <= self.max_bad_nodes:
            return  # bad nodes could explain every diverging batch: keep narrowing them
        self._pending = []
        if not self._trained:
            # More disjoint batches diverged than the bad nodes one isolation believes in, and none trained
            # normally: batch size cannot explain it.
            self._verdict = Verdict.CODE
            self._reason = (f"every batch diverges: {len(failed)} disjoint batches of ≥ {min(map(len, failed))} "
                            f"node(s) all diverged and none trained normally, more than {self.max_bad_nodes} bad "
                            "nodes could explain: user code/data, not hardware")
            self._bad, self._narrowed, self._unresolved = [], [], []
            releases += self._release(self.pool, "verdict code: hardware is not the cause")
            return
        self._verdict = Verdict.INCONCLUSIVE
        self._failed = failed
        self._reason = (f"these batches failed: {_batches_text(failed)}; {len(failed)} disjoint batches diverge while "
                        f"others train normally, more than the {self.max_bad_nodes} bad nodes one isolation pursues "
                        "(max_bad_nodes): they stay held for a person")

    def _finish(self) -> None:
        failed = self.frontier()
        if failed and not self._trained:
            # Every batch that answered diverged, but the pool could not be cut into more disjoint batches than
            # max_bad_nodes: code and that many bad nodes look the same. Held, never released as "code".
            self._verdict = Verdict.INCONCLUSIVE
            self._failed = failed
            self._narrowed, self._bad = [], []
            smallest = min(map(len, failed))
            why = (f"the whole pool of {len(self.pool)} diverges and cannot be split into batches of ≥ "
                   f"{self.min_nodes} nodes" if failed == [self.pool] else
                   f"every batch diverged, down to {len(failed)} disjoint batches of {smallest} node(s), "
                   f"no more than the {self.max_bad_nodes} bad nodes one isolation pursues (max_bad_nodes)")
            self._reason = (f"these batches failed: {_batches_text(failed)}; {why}: cannot tell code from hardware; "
                            "they stay held for a person")
            return
        if self._bad or self._narrowed:
            self._verdict = Verdict.INFRASTRUCTURE
            named = [n for b in self._bad for n in b]
            parts = []
            if named:
                parts.append(f"bad node(s): {', '.join(named)}")
            for b in self._narrowed:
                parts.append(
                    f"batch {', '.join(b)}: cannot narrow below {self.min_nodes} nodes without risking OOM-as-fault"
                )
            self._reason = "divergence follows specific nodes; " + "; ".join(parts)
        elif self._unresolved:
            self._verdict = Verdict.INCONCLUSIVE
            self._reason = "a group diverged but neither half did alone: intermittent or needs both halves"
        elif self._inconclusive:
            self._verdict = Verdict.INCONCLUSIVE
            self._reason = f"{len(self._inconclusive)} batch(es) timed out on every try: no loss line matched in time"
        else:
            self._verdict = Verdict.NOT_REPRODUCED
            self._reason = "no batch diverged: cannot reproduce on smaller batches (intermittent, or needs full scale)"
        if self._unresolved and self._verdict is Verdict.INFRASTRUCTURE:
            self._reason += f"; {len(self._unresolved)} group(s) diverged only together"
        if self._inconclusive and self._verdict is Verdict.INFRASTRUCTURE:
            self._reason += f"; {len(self._inconclusive)} batch(es) inconclusive (timed out)"

    @property
    def result(self) -> IsolationResult:
        if not self.done:
            raise RuntimeError("fault isolation is not finished; keep calling plan_round()/record()")
        held = tuple(n for n in self.pool if n not in self._released)
        return IsolationResult(
            verdict=self._verdict,  # type: ignore[arg-type]
            bad_nodes=tuple(n for b in self._bad for n in b),
            narrowed_batches=tuple(self._narrowed),
            inconclusive_batches=tuple(self._inconclusive),
            unresolved_groups=tuple(self._unresolved),
            released=tuple(self._released),
            held=held,
            rounds_used=self._round,
            tests_run=self.tests_run,
            rounds=tuple(self._rounds),
            reason=self._reason,
            failed_batches=tuple(self._failed),
            pool_size=len(self.pool),
        )


def _batches_text(batches: Sequence[tuple[str, ...]], limit: int = 12) -> str:
    def one(b: tuple[str, ...]) -> str:
        return b[0] if len(b) == 1 else f"[{', '.join(b)}]" if len(b) <= 4 else f"[{b[0]} … {b[-1]} ({len(b)})]"

    text = ", ".join(one(b) for b in batches[:limit])
    return text + (f" and {len(batches) - limit} more" if len(batches) > limit else "")


def _split(nodes: Sequence[str], parts: int) -> list[tuple[str, ...]]:
    """Split into `parts` contiguous chunks whose sizes differ by at most one (larger ones first)."""
    n = len(nodes)
    size, extra = divmod(n, parts)
    out, i = [], 0
    for p in range(parts):
        k = size + (1 if p < extra else 0)
        out.append(tuple(nodes[i : i + k]))
        i += k
    return out


def run_isolation(
    suspects: Sequence[str],
    test: Callable[[list[str]], BatchOutcome],
    min_nodes: int | None = None,
    *,
    settings: IsolationSettings | None = None,
    release: Callable[[Release], None] | None = None,
) -> IsolationResult:
    """Drive the search to the end, calling `test(batch_nodes)` for each batch and `release(event)` as soon as
    healthy nodes are known (before the search ends)."""
    search = FaultIsolation(suspects, min_nodes, settings)
    while not search.done:
        batches = search.plan_round()
        outcomes = {b.id: test(list(b.nodes)) for b in batches}
        for event in search.record(outcomes):
            if release is not None:
                release(event)
    return search.result
