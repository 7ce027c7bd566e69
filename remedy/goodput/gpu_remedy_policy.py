"""gpu-remedy's own policy, made of the same domain decisions the flows make.

Per incident, in the flow's order:
1. XID catalog (`remedy.domain.xid.lookup`) → NVIDIA resolution; faults without an XID use the
   resolution the detectors give them (NotReady → RESTART_BM, fail-slow → RESTART_APP).
2. Expected cost (`remedy.remediate.choice.choose`): restart in place, reset, reboot, replace or a person,
   by expected job downtime with the fault class's fix odds (catalog priors, updated by this run's own
   outcomes, as the flows update them from the ledger). Replace first: with a spare ready, a node-level
   fault gets the spare at once and the failed node is reset/rebooted off the critical path, then burn-in,
   then back to the spare pool; to repair only when that fails.
3. Circuit breaker (`remedy.safety.breaker.decide`) on a `BreakerBoard`: a correlated burst
   (a rack going down) pauses automation there and pages a person; a hold for the spare reserve or the capacity
   budget asks a person for a yes (page + triage) and then acts, as the flows' approvals do.
4. Spare selection (`remedy.spares.selection.select_spare`): matching, freshly validated,
   not a lemon, in another rack when the failure may be correlated.
5. Lemon scoring (`remedy.lemon.scoring.score_fleet` + `select_for_retirement`), run like the flow's
   schedule: candidates are retired instead of fixed again.
6. Early warning (`remedy.remediate.choice.choose_on_warning`): when a detector warns and a spare is
   ready, swap the node at a checkpoint boundary (the next one, or one taken now) instead of losing the
   work since the last checkpoint when it fails.
Everything a domain module decides is taken as decided; this module only plays the clock.
Durations of the in-place fixes are simulation assumptions (below), not settings.
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from remedy.config import RemedySettings
from remedy.domain.model import Node, NodeState
from remedy.domain.xid import Resolution, lookup
from remedy.goodput.events import Process, Signal
from remedy.goodput.policies import (
    AUTO_DETECT_MINUTES,
    AUTO_GRACE_MINUTES,
    MANUAL_STEPS,
    MANUAL_STEPS_MEAN,
    NOT_READY_POLL_MINUTES,
    escalate,
    manual_steps,
    until_ready,
)
from remedy.goodput.scenarios import REBOOT, RESET, RESTART, UPSTREAM
from remedy.lemon.records import IncidentRecord, NodeHistory, ValidationRecord
from remedy.lemon.scoring import score_fleet, select_for_retirement
from remedy.remediate.choice import (
    DEPTHS,
    PRIORS,
    SIGNAL_RESOLUTION,
    Durations,
    FixOdds,
    Option,
    Situation,
    WarningAction,
    choose,
    choose_on_warning,
    estimate_odds,
)
from remedy.safety.breaker import BreakerBoard, approval_token, decide
from remedy.safety.held_swap import may_swap_while_held
from remedy.safety.scopes import FailureEvent, FleetView, SkipReason, Verdict
from remedy.spares.pool import size_pool
from remedy.spares.warned import spare_for_warning
from remedy.warn.record import CHECK_EVERY, DetectorRecord, PastWarning, detector_record, keep_checking

try:  # wired in as it lands; until then the policy says what it lacks instead of re-implementing it
    from remedy.spares.selection import SpareCandidate, SpareChoice, select_spare
except ImportError:  # pragma: no cover - depends on the other engineer's progress
    select_spare = None  # type: ignore[assignment]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # simulated minute 0 as a UTC time for the domain code
GPU_MODEL = "NVIDIA-B200"

# Assumed wall-clock durations of in-place fixes (the ladder's settings hold only their timeouts).
RESET_MINUTES = 5.0  # drain, nvidia-smi -r, verify (timeout 10)
REBOOT_MINUTES = 15.0  # drain, reboot, wait Ready, verify (timeout 30)
LEMON_REVIEW_MINUTES = 24 * 60.0  # lemon review daily, as deployed (deployments/prefect.yaml: interval 86400 s)
SPARE_CYCLE_MINUTES = 24 * 60.0  # idle spares are re-validated daily (within the 72-h freshness window)

# Faults without an XID: NotReady goes through triage's rule (remedy.detect.signals.classify); a fail-slow
# node has no XID and no detector verdict in this model, so it gets the RESTART_APP ladder (assumption).
_NO_XID_RESOLUTION = SIGNAL_RESOLUTION  # the flows' triage uses the same (remedy.remediate.choice)
_BREAKER_HOLDS = (SkipReason.BREAKER_TRIPPED, SkipReason.BREAKER_OPEN, SkipReason.PROBE_IN_FLIGHT)
# holds a person answers with a yes the flow then acts on (remedy.safety.breaker.approval_token)
_APPROVABLE = (SkipReason.SPARE_RESERVE, SkipReason.CAPACITY_BUDGET)
_LEVEL = {Option.RESET: RESET, Option.REBOOT: REBOOT}
_FIX_MINUTES = {Option.RESET: RESET_MINUTES, Option.REBOOT: REBOOT_MINUTES}
_ACT, _AGAIN, _ESCALATED = "act", "again", "escalated"  # what the gate told the incident


_MINUTE = timedelta(minutes=1)


APPROVAL_AHEAD_MINUTES = 24 * 60.0  # a yes given ahead for the spare reserve holds for a day (assumption)
SIM_DETECTOR = "early-warning"  # the scenario's detectors, one record (the scenario gives them one precision)


def _code(fault) -> str:
    """The error code a fault shows the detectors: its XID, or the signal of a fault without one."""
    return f"xid-{fault.xid}" if fault.xid is not None else fault.kind.signal


def at(minutes: float) -> datetime:
    return EPOCH + timedelta(minutes=minutes)


def _time(record: IncidentRecord) -> datetime:
    return record.time


def _alone(times: list[datetime], t: datetime, window: timedelta) -> bool:
    """No other incident (of any node) within ± window of t; `times` sorted, t among them."""
    i = bisect_left(times, t)
    return (i == 0 or times[i - 1] < t - window) and (i + 1 >= len(times) or times[i + 1] > t + window)


@dataclass
class GpuRemedy:
    """gpu-remedy: XID-driven ladder, breaker, spare selection and lemon retirement."""

    settings: RemedySettings = field(default_factory=RemedySettings)
    name: str = "gpu-remedy"
    repair_in_background: bool = True  # False: a replaced node goes straight to repair (the old policy)
    act_on_warnings: bool = True
    # True: a warning's precision is learned from the warnings this run has seen, as triage learns it from the
    # ledger (remedy.warn.record). False: the scenario's true precision, which no deployed policy can know.
    learn_warning_precision: bool = True
    check_detectors: bool = True  # False: no warning is left to run to check its detector (what keep_checking buys)
    # One warning in this many is left to run while the detector's own record cannot show (keep_checking's confidence)
    # that acting pays. 1: none is acted on until the record shows it, so a detector that has not proved itself never
    # stops the job (nor spends a spare in an outage) on the assumed precision alone
    check_every: int = CHECK_EVERY
    # True: fix odds are learned per error code (the XID, or the signal of a fault without one) on top of its
    # resolution class, as the flows could from the ledger's per-XID outcomes; False: per resolution class only
    learn_per_code: bool = True
    # True: the spare is claimed and starts joining when acting on a warning is decided, so at the checkpoint the swap
    # costs the drain only; False: the spare is taken at the checkpoint and joins while the job waits
    early_promotion: bool = True
    # True: a warned node still in the job is swapped while the job is down for something else (the swap hides in
    # that outage), and a warning that arrives during an outage is acted on then or once the job runs again
    swap_in_outages: bool = True
    # True: when the ready pool falls to the breaker's reserve, a person is asked then whether the next failure may
    # take the reserve, so that failure does not wait for the answer; False: asked when the failure needs it
    ask_ahead: bool = True
    # True: a warning may take a spare only while the pool keeps its sizing target after it (remedy.spares.warned);
    # False: only one spare above the breaker's reserve
    warning_pool_floor: bool = True
    # True: a failed node the lemon review flagged but the retirement budget deferred is replaced, not fixed in place
    replace_suspects: bool = False
    missing_domain: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.missing_domain = [] if select_spare is not None else ["remedy.spares.selection"]
        self._started: set[int] = set()

    # ---- per-run state (one policy object per simulation run) ----------------------------------
    def _setup(self, sim) -> None:
        if id(sim) in self._started:
            return
        self._started.add(id(sim))
        self.board = BreakerBoard(self.settings.breaker, self.settings.budget)
        self.outcomes: dict[Resolution, list[tuple[Option, bool]]] = {}
        self.code_outcomes: dict[tuple[Resolution, str], list[tuple[Option, bool]]] = {}
        self.promoted: dict[int, tuple[int, float]] = {}  # warned node → (its spare, when the spare began joining)
        self.watched: dict[int, float] = {}  # warned node left in the job → when its warning runs out
        self.approved_ahead: float | None = None  # when a person said yes to the next spend of the reserve
        self._asking_ahead = False
        self.last_fix: dict[int, tuple[Option, float]] = {}  # node → (fix that cleared it, when)
        self.returned: dict[int, float] = {}  # node → when an off-path fix last sent it back to the pool
        self.claimed: set[str] = set()  # nodes on the board whose spare is already out of the pool
        self.lemons: set[int] = set()  # picked for retirement (within the budget)
        self.suspects: set[int] = set()  # every lemon candidate of the last review: never handed out as a spare
        self.retired_at: list[datetime] = []
        self._incidents: dict[int, list[IncidentRecord]] = {}
        self._reviews: dict[str, Signal] = {}
        self._seen_incidents = 0
        self._validation_records: dict[int, list[ValidationRecord]] = {}
        self._starts: dict[int, list[float]] = {}  # node → its incidents' start minutes, in order
        self._counted = 0  # sim.incidents already in _starts
        self._warnings_dropped = 0  # warnings older than the lookback, no longer in `warnings`
        self.warnings: list[PastWarning] = []  # what the ledger would hold of each warning, for its detector record
        self.failure_times: dict[str, list[datetime]] = {}  # node → when its failures were seen
        # the pool's sizing target, as the spare cycle computes it, from this job's size and failure rate
        sc = sim.sc
        self._pool_target = size_pool(sc.training_nodes, sc.spares, self.settings.spares,
                                      node_mtbf_hours=sc.job_mtbf_hours * sc.training_nodes).target
        sim.clock.spawn(self._lemon_review(sim))
        sim.clock.spawn(self._spare_cycling(sim))

    def _node(self, sim, n: int) -> Node:
        return Node(
            name=f"node-{n:05d}",
            gpu_model=GPU_MODEL,
            gpu_count=sim.sc.gpus_per_node,
            topology=sim.topology(n),
            state=sim.state[n],
            ready=sim.unready_until.get(n, 0.0) <= sim.clock.now,
        )

    def _fleet(self, sim, node: int) -> FleetView:
        """The fleet as the breaker sees it for a decision about `node`: the scopes it belongs to."""
        rack = sim.rack_of[node]
        counts = {"cluster:cluster": sim.managed_total, f"rack:rack-{rack:04d}": sim.managed_by_rack[rack]}
        quarantined = frozenset(f"node-{n:05d}" for n in sim.quarantined)
        # spares already promoted for incidents still on the board are not promised twice
        return FleetView(counts, ready_spares=len(self._spares(sim)), in_remediation=quarantined,
                         spare_claims=frozenset(self.claimed))

    # ---- the incident ----------------------------------------------------------------------------
    def handle(self, sim, inc) -> Process:
        self._setup(sim)
        sim.hold(inc)
        yield AUTO_DETECT_MINUTES
        name = f"node-{inc.node:05d}"
        self.failure_times.setdefault(name, []).append(at(inc.start))
        fault = inc.fault
        resolution = lookup(fault.xid).resolution if fault.xid is not None else _NO_XID_RESOLUTION.get(fault.kind.signal, Resolution.UNKNOWN)
        code = _code(fault)
        if self.swap_in_outages:
            self._swap_watched(sim, inc.node)
        if inc.node in self.promoted:  # its warning came true before the checkpoint: the spare is already joining
            spare, since = self.promoted.pop(inc.node)
            yield from self._replace(sim, inc, resolution, spare=spare, joining_since=since, code=code)
            self._finish(sim, name, True)
            return
        if inc.node in self.lemons:
            yield from self._replace(sim, inc, resolution, retire=True, code=code)
            return
        tried = self._already_tried(sim, inc)
        unreachable = fault.kind.not_ready
        while True:
            ready, approval = self._spare_state(sim)
            # a lemon candidate the retirement budget deferred: a fix in place would leave the lemon in the job, so
            # with a spare free it is replaced (it waits in the pool, never handed out, for its retirement)
            depth = max(tried, len(DEPTHS) - 1) if (
                self.replace_suspects and inc.node in self.suspects and ready and not approval) else tried
            choice = choose(Situation(resolution, self._odds(resolution, code), spare_ready=ready,
                                      durations=self._durations(sim), tried_depth=depth, unreachable=unreachable,
                                      spare_needs_approval=approval))
            inc.actions.append(f"chose:{choice.option.value}")
            if choice.option is Option.ESCALATE:
                if inc.automatic_retries and inc.chain_success is None:
                    inc.chain_success = False
                yield from escalate(sim, inc)
                sim.close(inc, "escalated")
                return
            if choice.option is not Option.RESTART:
                if inc.automatic_retries and inc.chain_success is None:
                    inc.chain_success = False  # the restart gave up; a deeper fix takes over
                held = yield from self._gate(sim, inc, name, needs_spare=choice.option is Option.REPLACE)
                if held is _ESCALATED:
                    return
                if held is _AGAIN:
                    continue
            started = sim.clock.now
            if choice.option is Option.REPLACE:
                yield from self._replace(sim, inc, resolution, tried=tried, code=code)
                self._finish(sim, name, True)
                return
            if choice.option is Option.RESTART and unreachable:
                # triage's NotReady rule: give the node the grace to come back by itself, then decide again
                grace = self.settings.signals.node_not_ready_seconds / 60.0
                yield max(0.0, inc.start + grace - sim.clock.now)
                back = sim.unready_until.get(inc.node, 0.0) <= sim.clock.now and sim.cleared(inc.node, "restart")
                self._record(sim, inc, resolution, Option.RESTART, back, started, code)
                if back:
                    sim.release(inc)
                    sim.close(inc, "node-came-back")
                    return
                tried, unreachable = 0, False
                continue
            if choice.option is Option.RESTART:
                inc.automatic_retries += 1
                sim.release(inc)
                ok = yield sim.next_attempt()
                self._record(sim, inc, resolution, Option.RESTART, ok, started, code)
                if ok:
                    inc.chain_success = True
                    sim.close(inc, "restart-recovered")
                    return
                inc.failed_retries += 1
                tried = 0
                sim.hold(inc)
                yield AUTO_DETECT_MINUTES  # the restarted job died again: seen like any failure
                continue
            # RESET / REBOOT in place: no spare worth spending, so the job waits on this node; it is drained first, as a
            # replacement is (choose counts the drain too)
            slot = sim.pull(inc)
            yield self._drain(sim) + _FIX_MINUTES[choice.option]
            ok = sim.fix_in_place(inc.node, _LEVEL[choice.option])
            self._record(sim, inc, resolution, choice.option, ok, started, code)
            self._finish(sim, name, ok)
            if slot is not None:  # fixed: back in its slot; not fixed: back where the next step finds it
                sim.install(slot, inc.node)
            if ok:
                sim.record_validation(inc.node)
                sim.release(inc)
                sim.close(inc, f"fixed-in-place:{choice.option.value}")
                return
            tried = DEPTHS.index(choice.option)

    def _spares(self, sim) -> list[int]:
        """Ready spares select_spare may hand out: a lemon candidate the retirement budget deferred waits in the pool
        for its retirement but is not given to the job (select_spare rejects it)."""
        return [n for n in sim.ready_spares() if n not in self.suspects]

    def _spare_state(self, sim) -> tuple[bool, bool]:
        """(a spare is ready, taking it needs a person's approval): the breaker's reserve rule, seen ahead."""
        ready = len(self._spares(sim))
        ahead = self.approved_ahead is not None and sim.clock.now - self.approved_ahead <= APPROVAL_AHEAD_MINUTES
        return ready > 0, ready - 1 < self.settings.breaker.spare_reserve and not ahead

    def _take_approval_ahead(self, sim) -> bool:
        """Use the yes a person gave ahead for the reserve (one spend, within a day of the answer)."""
        if self.approved_ahead is None or sim.clock.now - self.approved_ahead > APPROVAL_AHEAD_MINUTES:
            return False
        self.approved_ahead = None
        return True

    def _ask_ahead(self, sim) -> None:
        """A spare was taken: if the next failure would need a person's yes for the reserve, ask now."""
        if not self.ask_ahead or self._asking_ahead or self.approved_ahead is not None:
            return
        if len(self._spares(sim)) - 1 >= self.settings.breaker.spare_reserve:
            return
        self._asking_ahead = True
        sim.clock.spawn(self._asking(sim))

    def _asking(self, sim) -> Process:
        sim.acc.approvals += 1
        yield from self._ask_a_person(sim)
        self.approved_ahead = sim.clock.now
        self._asking_ahead = False

    def _gate(self, sim, inc, name: str, *, needs_spare: bool):
        """The breaker gate before an action that takes the node out: act, wait for a review or an approval, or
        escalate."""
        event = FailureEvent(name, at(inc.start), sim.topology(inc.node), needs_spare, inc.fault.kind.name)
        approved: frozenset[str] = frozenset()
        while True:
            decision = decide(event, self.board, self._fleet(sim, inc.node), at(sim.clock.now), approved)
            if decision.verdict is not Verdict.HOLD or decision.skip is None:
                return _ACT
            reason = decision.skip.reason
            token = approval_token(decision.skip)
            if reason not in _APPROVABLE or token in approved:
                break
            if reason is SkipReason.SPARE_RESERVE and self._take_approval_ahead(sim):
                inc.actions.append("approval-ahead:spare-reserve")
                approved |= {token}
                continue
            # The flow asks a person (Slack / the Prefect form) and acts on their yes; the job waits for the answer
            # (page + triage), not for the whole manual runbook.
            sim.acc.approvals += 1
            inc.actions.append(f"approval:{reason.value}")
            yield from self._ask_a_person(sim)
            approved |= {token}
        if reason is SkipReason.ALREADY_IN_REMEDIATION:
            return _ACT  # our own earlier step of this incident is still on the board: carry on
        if reason in _BREAKER_HOLDS and decision.skip.scope:
            # Automation pauses in that scope; one person reviews it and re-closes the breaker
            # (BreakerBoard.approve_close), then the held incidents are decided again. Meanwhile the job may move
            # to a spare outside the scope (remedy.safety.held_swap); the node waits for the review untouched.
            sim.acc.breaker_holds += 1
            inc.actions.append(f"breaker-hold:{reason.value}")
            review = self._review(sim, decision.skip.scope)
            outside = self._spares_outside(sim, inc.node)
            swap = may_swap_while_held(decision.skip, ready_spares_outside=len(outside),
                                       spare_reserve=self.settings.breaker.spare_reserve)
            if swap.allowed and inc.slot is not None and inc.node in sim.slot_of:
                yield from self._swap_while_held(sim, inc, review, outside)
                return _ESCALATED  # the incident is closed: the node is a person's now
            yield review
            return _AGAIN
        inc.actions.append(f"hold:{reason.value}")  # capacity budget, spare reserve, detector suspect: a person
        yield from escalate(sim, inc)
        sim.close(inc, f"escalated:{reason.value}")
        return _ESCALATED

    # ---- early warning ---------------------------------------------------------------------------
    def on_warning(self, sim, node: int, lead: float) -> Process:
        """A detector says `node` will fail within `lead` minutes: swap it at a checkpoint boundary when that costs
        less than waiting for the failure (remedy.remediate.choice.choose_on_warning). With `early_promotion` the
        spare is claimed and starts joining as soon as that is decided, so the swap at the boundary costs the drain.
        A warning that arrives while the job is down for something else is not dropped (`swap_in_outages`): the node
        is swapped in that outage's shadow, or the warning waits for the job to run again."""
        self._setup(sim)
        if not self.act_on_warnings or node not in sim.slot_of or node in sim.open_by_node or node in self.promoted:
            return
        if sim.phase != "running" and not self.swap_in_outages:
            return  # dropped, as before issue 34 (the variant gpu-remedy/no-outage-swaps)
        sc = sim.sc
        expires = sim.clock.now + lead
        record = self.detector_record(sim) if self.learn_warning_precision else None
        name = f"node-{node:05d}"
        seen = self._warnings_dropped + len(self.warnings)
        self.warnings.append(PastWarning(name, at(sim.clock.now), SIM_DETECTOR, swapped=False))
        if sim.phase != "running":
            while sim.phase != "running":
                if sim.phase == "down" and sim.holds:  # an outage being worked: swap in its shadow
                    self.watched[node] = expires
                    self._swap_watched(sim, None)
                    return
                if sim.clock.now >= expires or node not in sim.slot_of or node in sim.open_by_node:
                    return
                yield 1.0  # loading a checkpoint (a swap now would throw the reload away): look again shortly
            lead = expires - sim.clock.now
        precision, job_mtbf = self._warning_odds(sc, record)
        to_boundary = sim.minutes_to_next_checkpoint()
        join = sc.spare_join_minutes
        if self.early_promotion:  # the spare joins while the job trains on to the boundary
            hidden = to_boundary if to_boundary < lead else min(join, lead / 2)
            join = max(0.0, join - hidden)
        choice = choose_on_warning(
            precision=precision, lead_minutes=lead,
            minutes_to_next_checkpoint=to_boundary,
            checkpoint_interval_minutes=sc.checkpoint_interval_minutes,
            checkpoint_cost_minutes=sc.checkpoint_cost_minutes,
            spare_ready=self._spare_for_warning(sim), durations=self._durations(sim, join),
            job_mtbf_minutes=job_mtbf)
        if choice.action is WarningAction.WAIT:
            self.watched[node] = expires  # not worth a stop of its own; maybe worth one the job makes anyway
            return
        if record is not None and self.check_detectors and keep_checking(
                record, act_minutes=choice.act_cost_minutes, wait_minutes=choice.wait_cost_minutes,
                every=self.check_every):
            if self.check_every == 1:
                self.watched[node] = expires  # judged if it runs out; swapped in an outage once the record shows
            return  # left to run, so the detector's record learns whether its warnings come true
        spare: int | None = None
        since = 0.0
        if self.early_promotion:
            spare = self._claim_for_warning(sim, node)
            if spare is None:
                return
            since = sim.clock.now
            self.promoted[node] = (spare, since)
            self._mark_swapped(seen)
        epoch = sim.epoch
        if choice.action is WarningAction.AT_NEXT_CHECKPOINT:
            yield to_boundary
            extra = 0.0
        else:
            yield (min(sc.spare_join_minutes, lead / 2) if self.early_promotion else 0.0)
            yield sc.checkpoint_cost_minutes
            extra = sc.checkpoint_cost_minutes
        if spare is not None:
            yield from self._swap_promoted(sim, node, epoch, extra, choice.action.value)
            return
        if sim.epoch != epoch or node not in sim.slot_of or node in sim.open_by_node:
            return  # the job stopped, or the node failed, before the boundary
        spare = self._claim_for_warning(sim, node)
        if spare is None:
            return
        self._mark_swapped(seen)
        if extra:
            sim.charge_checkpoint(extra)
        yield from self._swap(sim, node, spare, None, f"warning:{choice.action.value}")

    def _spare_for_warning(self, sim) -> bool:
        """A node that has not failed yet may take a spare only if the pool keeps, after it, its sizing target (the
        spare cycle's Poisson target for this job) and one spare above the breaker's reserve for the next failure
        (remedy.spares.warned). `warning_pool_floor` False: only the reserve rule, as before."""
        target = self._pool_target if self.warning_pool_floor else 0
        return spare_for_warning(len(self._spares(sim)), target, self.settings.breaker.spare_reserve).allowed

    def _claim_for_warning(self, sim, node: int) -> int | None:
        """Choose and take the spare for a warned node, through the breaker; None: no spare, or the breaker, the
        budget or the reserve says no (the warning stays a warning)."""
        name = f"node-{node:05d}"
        spare = self._pick_spare(sim, node, False, self._spares(sim))
        if spare is None or not self._spare_for_warning(sim):
            return None
        event = FailureEvent(name, at(sim.clock.now), sim.topology(node), True, "early-warning")
        if decide(event, self.board, self._fleet(sim, node), at(sim.clock.now)).verdict is Verdict.HOLD:
            return None
        taken = sim.try_take_spare(lambda ready: spare)
        self.claimed.add(name)
        self._ask_ahead(sim)
        return int(taken) if taken is not None else None

    def _swap_promoted(self, sim, node: int, epoch: int, extra: float, why: str) -> Process:
        """The boundary came (or the job stopped first): swap the warned node for its already-joining spare at the
        boundary, or in the outage if the job went down; if the node failed first, its incident took the spare."""
        while node in self.promoted:
            if node not in sim.slot_of or node in sim.open_by_node:
                if node in self.promoted and node not in sim.open_by_node:  # left the job some other way
                    spare, _ = self.promoted.pop(node)
                    sim.return_spare(spare)
                    self._finish(sim, f"node-{node:05d}", True)
                return
            if sim.phase == "running" and sim.epoch == epoch:
                if extra:
                    sim.charge_checkpoint(extra)
                break
            if sim.phase == "down":
                why = "outage"
                break
            if sim.phase == "running":  # it stopped and runs again: the next boundary
                epoch, extra = sim.epoch, 0.0
                yield sim.minutes_to_next_checkpoint()
                continue
            yield 1.0  # loading
        else:
            return
        spare, since = self.promoted.pop(node)
        yield from self._swap(sim, node, spare, since, f"warning:{why}")

    def _swap(self, sim, node: int, spare: int, since: float | None, why: str) -> Process:
        inc = sim.swap_incident(node)
        inc.actions.append(why)
        resolution = (lookup(inc.fault.xid).resolution if inc.fault.xid is not None
                      else _NO_XID_RESOLUTION.get(inc.fault.kind.signal, Resolution.UNKNOWN))
        yield from self._replace(sim, inc, resolution, tried=0, spare=spare, joining_since=since, code=_code(inc.fault),
                                 warned=True)
        self._finish(sim, f"node-{node:05d}", True)

    def _swap_watched(self, sim, failed: int | None) -> None:
        """The job is down for an incident (`failed`'s, or one already being worked): every warned node still in
        the job whose warning has not run out is swapped now, when that pays (the swap costs the job at most its
        own length; nothing is rolled back, the job is down already)."""
        now = sim.clock.now
        for node, expires in list(self.watched.items()):
            if expires <= now or node == failed or node not in sim.slot_of or node in sim.open_by_node \
                    or node in self.promoted:
                if expires <= now or node not in sim.slot_of:
                    del self.watched[node]
                continue
            record = self.detector_record(sim) if self.learn_warning_precision else None
            precision, job_mtbf = self._warning_odds(sim.sc, record)
            choice = choose_on_warning(
                precision=precision, lead_minutes=expires - now, minutes_to_next_checkpoint=0.0,
                checkpoint_interval_minutes=sim.sc.checkpoint_interval_minutes, checkpoint_cost_minutes=0.0,
                spare_ready=self._spare_for_warning(sim),
                durations=self._durations(sim), job_mtbf_minutes=job_mtbf)
            if choice.action is WarningAction.WAIT:
                continue
            if record is not None and self.check_detectors and self.check_every == 1 and keep_checking(
                    record, act_minutes=choice.act_cost_minutes, wait_minutes=choice.wait_cost_minutes, every=1):
                continue  # not proved yet: left to run and judged, like the warnings the job does not stop for
            spare = self._claim_for_warning(sim, node)
            if spare is None:
                return
            del self.watched[node]
            self._mark_swapped_node(node)
            sim.clock.spawn(self._swap(sim, node, spare, None, "warning:outage"))

    def _warning_odds(self, sc, record: DetectorRecord | None) -> tuple[float, float]:
        """(how often a warning is right, minutes between job failures): what the detector's record (None: the
        scenario's true share, told) and the job's own failure history tell the policy."""
        if record is None:
            return 1.0 / (1.0 + sc.false_warnings_per_true), sc.job_mtbf_hours * 60.0
        return record.precision, sc.job_mtbf_hours * 60.0

    def detector_record(self, sim) -> DetectorRecord:
        """The simulated detector's record as triage reads it (tasks.triage._detector_record): the warnings and
        failures of the lemon lookback window, judged by remedy.warn.record with the same prior and window."""
        warn = self.settings.lemon.early_warning
        now = at(sim.clock.now)
        since = now - timedelta(days=self.settings.lemon.lookback_days)
        old = bisect_left([w.at for w in self.warnings], since)
        if old:  # older than the lookback: the ledger query would not return them either
            del self.warnings[:old]
            self._warnings_dropped += old
        return detector_record(SIM_DETECTOR, self.warnings, self.failure_times, now,
                               timedelta(hours=warn.precision_window_hours), warn.act_precision)

    def _mark_swapped_node(self, node: int) -> None:
        """The node's latest warning took it out: it cannot be judged."""
        name = f"node-{node:05d}"
        for i in range(len(self.warnings) - 1, -1, -1):
            if self.warnings[i].node == name:
                self.warnings[i] = dataclasses.replace(self.warnings[i], swapped=True)
                return

    def _mark_swapped(self, seen: int) -> None:
        """The warning numbered `seen` (counted from the run's first) took its node out: it cannot be judged."""
        i = seen - self._warnings_dropped
        if 0 <= i < len(self.warnings):
            self.warnings[i] = dataclasses.replace(self.warnings[i], swapped=True)

    def _spares_outside(self, sim, node: int) -> list[int]:
        rack = sim.rack_of[node]
        return [n for n in self._spares(sim) if sim.rack_of[n] != rack and n not in self.lemons]

    def _swap_while_held(self, sim, inc, review, outside: list[int]) -> Process:
        spare = sim.try_take_spare(lambda ready: next((n for n in ready if n in outside), None))
        slot = sim.pull(inc)
        yield AUTO_GRACE_MINUTES + sim.sc.spare_join_minutes
        sim.fill(slot, spare)
        sim.release(inc)
        sim.close(inc, "swapped-while-held")
        sim.clock.spawn(self._after_review(sim, inc, review))

    def _after_review(self, sim, inc, review) -> Process:
        """The person who re-closes the breaker finds the node: an upstream cause is fixed upstream (the node
        rejoins the pool through burn-in when it is back), anything else gets the off-path repair."""
        yield review
        fault = sim.faults.get(inc.node)
        if fault is not None and fault.needs == UPSTREAM:
            yield max(0.0, fault.clears_at - sim.clock.now)
            sim.fix_in_place(inc.node, REBOOT)
            sim.burn_in(inc.node)
            return
        resolution = lookup(inc.fault.xid).resolution if inc.fault.xid is not None else _NO_XID_RESOLUTION.get(
            inc.fault.kind.signal, Resolution.UNKNOWN)
        yield from self._repair_off_path(sim, inc.node, resolution, -1, _code(inc.fault))

    def _already_tried(self, sim, inc) -> int:
        """A fix that cleared this node less than the recurrence window ago did not hold: start below it."""
        window = self.settings.ladder.recurrence_window_hours * 60.0
        last = self.last_fix.get(inc.node)
        if last is None or sim.clock.now - last[1] > window:
            return -1
        return DEPTHS.index(last[0]) if last[0] in DEPTHS else -1

    def _odds(self, resolution: Resolution, code: str = "") -> FixOdds:
        """The class's odds (catalog prior + this run's outcomes of the class); with `learn_per_code`, those are the
        prior for the outcomes of this error code alone (an XID 48 and an XID 64 share RESET_GPU's prior but not
        their history)."""
        odds = estimate_odds(PRIORS.get(resolution, PRIORS[Resolution.UNKNOWN]), self.outcomes.get(resolution, ()))
        if self.learn_per_code and code:
            odds = estimate_odds(odds, self.code_outcomes.get((resolution, code), ()))
        return odds

    def _durations(self, sim, join: float | None = None) -> Durations:
        sc = sim.sc
        reload = sc.restart_loading_median_minutes * math.exp(sc.restart_loading_sigma ** 2 / 2)  # log-normal mean
        if sc.elastic_short_nodes or sc.hot_spares:
            reload += sc.elastic_resize_minutes  # every restart of an elastic job re-forms its rendezvous
        if join is None and sim.hot:
            join = 0.0  # a hot spare is already in the rendezvous
        return Durations(detect=AUTO_DETECT_MINUTES, grace=self._drain(sim),
                         join=sc.spare_join_minutes if join is None else join,
                         reset=RESET_MINUTES, reboot=REBOOT_MINUTES, reload=reload,
                         escalate=sc.manual_mean_minutes or MANUAL_STEPS_MEAN, approval=self._approval_minutes(sim),
                         not_ready_grace=self.settings.signals.node_not_ready_seconds / 60.0)

    def _record(self, sim, inc, resolution: Resolution, option: Option, ok: bool, started: float,
                code: str = "") -> None:
        """The ledger's role in the simulation: every fix outcome updates the odds of its fault class and its code."""
        self.outcomes.setdefault(resolution, []).append((option, ok))
        if code:
            self.code_outcomes.setdefault((resolution, code), []).append((option, ok))
        if inc is not None and ok:
            self.last_fix[inc.node] = (option, sim.clock.now)
        sim.acc.fix_attempts[option.value] = sim.acc.fix_attempts.get(option.value, 0) + 1

    @staticmethod
    def _approval_minutes(sim) -> float:
        """How long a person takes to answer a hold here (page + triage of this cluster's runbook, as `_ask_a_person`
        spends it): what the flows read from their own approval history."""
        scale = (sim.sc.manual_mean_minutes / MANUAL_STEPS_MEAN) if sim.sc.manual_mean_minutes else 1.0
        return sum((lo + hi) / 2 for step, lo, hi in MANUAL_STEPS if step in ("page", "triage")) * scale

    def _ask_a_person(self, sim) -> Process:
        """One on-call engineer reads the request and answers it (page + triage of the manual runbook)."""
        yield sim.on_call.acquire()
        steps = manual_steps(sim)
        yield steps["page"] + steps["triage"]
        sim.on_call.release()

    def _review(self, sim, scope: str) -> Signal:
        """One on-call review per paused scope; every incident held there waits for the same one."""
        if scope not in self._reviews:
            sig = Signal(sim.clock)
            self._reviews[scope] = sig
            sim.clock.spawn(self._run_review(sim, scope, sig))
        return self._reviews[scope]

    def _run_review(self, sim, scope: str, sig: Signal) -> Process:
        yield sim.on_call.acquire()
        steps = manual_steps(sim)
        yield steps["page"] + steps["triage"]
        self.board.approve_close(scope, "on-call", at(sim.clock.now))
        sim.on_call.release()
        del self._reviews[scope]
        sig.fire(True)

    def _finish(self, sim, name: str, ok: bool) -> None:
        self.claimed.discard(name)
        if self.board.is_active(name):
            self.board.record_outcome(name, ok, at(sim.clock.now))

    def _replace(self, sim, inc, resolution: Resolution, *, retire: bool = False, tried: int = -1,
                 spare: int | None = None, joining_since: float | None = None, code: str = "",
                 warned: bool = False) -> Process:
        """The job gets a warm spare now; the failed node is fixed off the critical path (or retired, a lemon). A spare
        promoted earlier (`joining_since`) has had that long to join already. A hot spare (already in the job's
        rendezvous) takes the node's rank at once; an elastic job with none shrinks to the survivors when that costs
        less than waiting for the spare to join, and grows back when it has."""
        if spare is None and not retire and sim.hot:
            yield from self._hot_swap(sim, inc, resolution, tried, code)
            return
        if spare is None and not retire and self._shrinks(sim):
            yield from self._shrink(sim, inc, resolution, tried, code)
            return
        if spare is None:
            spare = sim.try_take_spare(lambda ready: self._pick_spare(sim, inc.node, inc.fault.kind.not_ready, ready))
            if spare is not None:
                self.claimed.add(f"node-{inc.node:05d}")
                self._ask_ahead(sim)
        if spare is None:
            inc.actions.append("no-spare")
            yield from escalate(sim, inc)
            sim.close(inc, "escalated-no-spare")
            return
        slot = sim.pull(inc)
        joined = 0.0 if joining_since is None else sim.clock.now - joining_since
        yield self._drain(sim) + max(0.0, sim.sc.spare_join_minutes - joined)
        sim.fill(slot, spare)
        if retire:
            sim.retire(inc.node)
        elif self.repair_in_background:
            sim.clock.spawn(self._repair_off_path(sim, inc.node, resolution, tried, code, warned=warned))
        else:
            sim.send_to_repair(inc.node, "replaced")
        sim.release(inc)
        sim.close(inc, "retired-lemon" if retire else "replaced")

    @staticmethod
    def _drain(sim) -> float:
        """What the job waits for the node it loses: a gang-scheduled job's pods must terminate first (the 30-s
        grace); an elastic job's agent re-forms the rendezvous without it, and the drain runs off the critical path."""
        return 0.0 if sim.sc.elastic_short_nodes or sim.sc.hot_spares else AUTO_GRACE_MINUTES

    def _shrinks(self, sim) -> bool:
        """Shrink-and-continue beats stop-and-replace: the job may still run a node shorter, a spare is ready, and a
        restart now on the survivors plus one re-forming later costs less than the drain and join it would wait."""
        sc = sim.sc
        if sum(s is None for s in sim.slots) >= sc.elastic_short_nodes or not self._spares(sim):
            return False
        reform = self._durations(sim).reload  # reload + re-rendezvous, paid again when it grows back
        wait = AUTO_GRACE_MINUTES + sc.spare_join_minutes
        return bool(reform + wait / sc.training_nodes < wait)

    def _hot_swap(self, sim, inc, resolution: Resolution, tried: int, code: str) -> Process:
        hot = sim.take_hot_spare()
        slot = sim.pull(inc)
        yield self._drain(sim)  # the hot spare takes the rank in the restart's re-rendezvous
        sim.fill(slot, hot)
        inc.actions.append("hot-spare")
        self._after_pull(sim, inc.node, resolution, tried, code)
        sim.clock.spawn(self._refill_hot(sim, inc.node))
        sim.release(inc)
        sim.close(inc, "replaced")

    def _shrink(self, sim, inc, resolution: Resolution, tried: int, code: str) -> Process:
        slot = sim.pull(inc)
        spare = sim.try_take_spare(lambda ready: self._pick_spare(sim, inc.node, inc.fault.kind.not_ready, ready))
        inc.actions.append("shrink")
        self._after_pull(sim, inc.node, resolution, tried, code)
        sim.release(inc)  # the job restarts on the survivors now
        sim.close(inc, "shrunk")
        yield AUTO_GRACE_MINUTES + sim.sc.spare_join_minutes
        if spare is not None:
            sim.fill(slot, spare)  # joined: the job grows back at its next checkpoint
        self._finish(sim, f"node-{inc.node:05d}", True)

    def _after_pull(self, sim, node: int, resolution: Resolution, tried: int, code: str) -> None:
        if self.repair_in_background:
            sim.clock.spawn(self._repair_off_path(sim, node, resolution, tried, code))
        else:
            sim.send_to_repair(node, "replaced")

    def _refill_hot(self, sim, failed: int) -> Process:
        """A warm spare joins the job's rendezvous to be the next hot spare (off the critical path)."""
        while True:
            spare = sim.try_take_spare(lambda ready: self._pick_spare(sim, failed, False, ready))
            if spare is not None:
                break
            yield NOT_READY_POLL_MINUTES
        yield sim.sc.spare_join_minutes
        sim.add_hot_spare(spare)

    def _repair_off_path(self, sim, node: int, resolution: Resolution, tried: int, code: str = "", *,
                         warned: bool = False) -> Process:
        """Reset, then reboot, while the job already runs on the spare; a node that passes goes through burn-in
        back to the spare pool, one that does not goes to repair. A node that already came back this way within
        the lemon recurrence gap failed again under load: the fix did not hold, so it goes to repair (the lemon
        signature: passes checks idle, fails again under load)."""
        if sim.unready_until.get(node, 0.0) > sim.clock.now:
            yield from self._burn_in_when_ready(sim, node)  # down with its rack: not a fix that failed to hold
            return
        if warned and sim.cleared(node, RESTART):
            sim.burn_in(node)  # PLACEHOLDER
            return
        gap = self.settings.lemon.recurrence_gap_days * 24 * 60.0
        last = self.returned.get(node)
        if last is not None and sim.clock.now - last <= gap:
            sim.send_to_repair(node, "failed again after an off-path fix")
            return
        # a restart cannot be tried on a node that carries no job; a node whose ladder ran out on the critical path
        # (perhaps while its rack was down) gets one more reboot here, where it costs the job nothing
        for option in DEPTHS[max(tried + 1, 1):] or (Option.REBOOT,):
            started = sim.clock.now
            yield _FIX_MINUTES[option]
            ok = sim.fix_in_place(node, _LEVEL[option])
            self._record(sim, None, resolution, option, ok, started, code)
            if ok:
                self.returned[node] = sim.clock.now
                sim.burn_in(node)
                return
        sim.send_to_repair(node, "reset and reboot did not clear it")

    def _burn_in_when_ready(self, sim, node: int) -> Process:
        """A NotReady node cannot be reset or rebooted from here: its rack's power or switch may be down with it. It
        waits in burn-in (not in remediation: the job already runs on its spare) and is validated once it reports
        Ready again; one still NotReady after a day, or failing the validation, goes to repair."""
        sim.await_burn_in(node)
        if not (yield from until_ready(sim, node)):
            sim.send_to_repair(node, "still NotReady after a day")
            return
        if not sim.cleared(node, REBOOT):
            sim.send_to_repair(node, "failed validation once Ready again")
            return
        sim.burn_in(node)  # nothing was fixed on the node itself: no recurrence clock starts

    def _pick_spare(self, sim, failed: int, correlated: bool, ready: list[int]) -> int | None:
        """select_spare's choice, as the flows make it: the spare with the fewest incidents in the lemon lookback
        window first; a node just back from an off-path fix is the freshest validated, and select_spare puts it after
        the spares with a clean record (`spares.recently_fixed_days`), or it would go straight back into the job,
        where a lemon fails again."""
        if not ready:
            return None
        if select_spare is None:
            return ready[0]
        fixed = {n: self.returned[n] for n in ready if n in self.returned}
        history = self._incident_counts(sim, ready)
        cands = [SpareCandidate(self._node(sim, n), at(sim.validated_at.get(n, 0.0)),
                                at(fixed[n]) if n in fixed else None, history.get(n, 0)) for n in ready]
        choice = select_spare(self._node(sim, failed), cands, at(sim.clock.now), self.settings.spares,
                              correlated=correlated, lemons=[f"node-{n:05d}" for n in self.lemons | self.suspects])
        return int(choice.name.split("-")[1]) if isinstance(choice, SpareChoice) else None

    def _incident_counts(self, sim, nodes: list[int]) -> dict[int, int]:
        """Each node's incidents in the lemon lookback window, as the flows count them from the ledger for
        select_spare (the cleanest record first). Kept per node as incidents open, so a pick reads only the spares."""
        for inc in sim.incidents[self._counted:]:
            self._starts.setdefault(inc.node, []).append(inc.start)
        self._counted = len(sim.incidents)
        since = sim.clock.now - self.settings.lemon.lookback_days * 24 * 60
        return {n: len(t) - bisect_left(t, since) for n in nodes if (t := self._starts.get(n))}

    def _validations(self, sim, n: int, since: float) -> list[ValidationRecord]:
        """The node's passed checks in the window, each converted once."""
        times = sim.validations.get(n, [])
        done = self._validation_records.setdefault(n, [])
        done += [ValidationRecord(at(t), True, "sim") for t in times[len(done) :]]
        return done[bisect_left(times, since) :]

    # ---- the scheduled flows -------------------------------------------------------------------
    def _spare_cycling(self, sim) -> Process:
        while True:
            yield SPARE_CYCLE_MINUTES
            for n in sim.ready_spares():
                if n in self.lemons:  # flagged while it was away (off-path fix, burn-in): it leaves the pool now
                    sim.spare_pool.remove(n)
                    sim.retire(n)
                else:
                    sim.record_validation(n)

    def _lemon_review(self, sim) -> Process:
        while True:
            yield LEMON_REVIEW_MINUTES
            self._score_lemons(sim)

    def _score_lemons(self, sim) -> None:
        now = at(sim.clock.now)
        lemon = self.settings.lemon
        since = sim.clock.now - lemon.lookback_days * 24 * 60
        for inc in sim.incidents[self._seen_incidents :]:  # convert each record once, in time order
            self._incidents.setdefault(inc.node, []).append(
                IncidentRecord(at(inc.start), inc.fault.kind.signal, inc.fault.xid, inc.fault.gpu, str(inc.id))
            )
        self._seen_incidents = len(sim.incidents)
        recent: dict[int, list[IncidentRecord]] = {}
        for n, recs in self._incidents.items():
            window = recs[bisect_left(recs, now - (sim.clock.now - since) * _MINUTE, key=_time) :]
            if window:
                recent[n] = window
        if not recent:
            return
        # A node with fewer incidents in the window than any signal needs fires none (the simulation records no
        # exclusions), and one whose incidents no other node's share a correlated window is in no shared event: such
        # nodes are scored pooled, like the incident-free ones, with the same fleet totals (the daily review over
        # 2,000 histories was most of a run).
        fewest = min(lemon.recurrence_min_cycles + 1, lemon.rate_min_incidents, lemon.repeat_xid_min)
        pair = timedelta(minutes=lemon.correlated_window_minutes)
        times = sorted(i.time for recs in recent.values() for i in recs)
        histories: list[NodeHistory] = []
        pooled: list[IncidentRecord] = []
        rest_exposure = 0.0
        for n in range(len(sim.state)):
            exposure = sim.exposure_minutes(n) / (24 * 60)
            node_recs = recent.get(n)
            # a node retired (or picked for it) is not scored again (the flows' lemon_verdicts: in_fleet=False), or
            # it would take another place in the retirement budget
            in_fleet = sim.state[n] is not NodeState.RETIRED and n not in self.lemons
            if node_recs is None or (
                    in_fleet and len(node_recs) < fewest and all(_alone(times, i.time, pair) for i in node_recs)):
                rest_exposure += exposure
                pooled += node_recs or ()
                continue
            histories.append(NodeHistory(f"node-{n:05d}", exposure, tuple(node_recs),
                                         tuple(self._validations(sim, n, since)), in_fleet=in_fleet))
        histories.append(NodeHistory("pooled-nodes", rest_exposure, tuple(pooled)))
        verdicts = [v for v in score_fleet(histories, now, lemon) if v.node != "pooled-nodes"]
        retire, deferred = select_for_retirement(verdicts, self.retired_at, now, lemon)
        self.suspects = {int(v.node.split("-")[1]) for v in deferred}
        for v in retire:
            n = int(v.node.split("-")[1])
            if n in self.lemons:
                continue
            self.lemons.add(n)
            self.retired_at.append(now)  # the decision uses the retirement budget now
            if sim.state[n] is NodeState.SPARE and n in sim.spare_pool:
                sim.spare_pool.remove(n)
                sim.retire(n)
            elif n in sim.slot_of:
                sim.clock.spawn(self._retire_from_job(sim, n))

    def _retire_from_job(self, sim, node: int) -> Process:
        """retire-node drains a lemon in the job after letting it checkpoint: here at the next checkpoint boundary
        (nothing rolled back; the job pays one swap), with a spare chosen first. No spare or a breaker hold: it is
        retired at its next failure instead (see handle)."""
        while True:
            if node not in sim.slot_of or node in sim.open_by_node:
                return  # failed first: handle retires it
            if sim.phase == "running":
                epoch = sim.epoch
                yield sim.minutes_to_next_checkpoint()
                if sim.epoch == epoch and node in sim.slot_of and node not in sim.open_by_node:
                    break
            else:
                yield NOT_READY_POLL_MINUTES  # the job is down or loading: drain it once it runs again
        name = f"node-{node:05d}"
        spare = self._pick_spare(sim, node, False, self._spares(sim))
        if spare is None:
            return
        event = FailureEvent(name, at(sim.clock.now), sim.topology(node), True, "lemon")
        if decide(event, self.board, self._fleet(sim, node), at(sim.clock.now)).verdict is Verdict.HOLD:
            return
        spare = sim.try_take_spare(lambda ready: spare)
        self.claimed.add(name)
        inc = sim.swap_incident(node, warned=False)
        inc.actions.append("retire-lemon")
        yield from self._replace(sim, inc, Resolution.UNKNOWN, retire=True, spare=spare)
        self._finish(sim, name, True)
