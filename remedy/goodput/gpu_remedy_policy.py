"""gpu-remedy's own policy, made of the same domain decisions the flows make.

Per incident, in the flow's order:
1. XID catalog (`remedy.domain.xid.lookup`) → NVIDIA resolution; faults without an XID use the
   resolution the detectors give them (NotReady → RESTART_BM, fail-slow → RESTART_APP).
2. In-place fix ladder (`remedy.safety.ladder.next_step`) over this node's recorded attempts:
   restart with 10/20/40-min back-off, reset, reboot, replace; "nothing left" → a person.
3. Circuit breaker (`remedy.safety.breaker.decide`) on a `BreakerBoard`: a correlated burst
   (a rack going down) pauses automation there and pages a person; the spare reserve too.
4. Spare selection (`remedy.spares.selection.select_spare`): matching, freshly validated,
   not a lemon, in another rack when the failure may be correlated.
5. Lemon scoring (`remedy.lemon.scoring.score_fleet` + `select_for_retirement`), run once a
   simulated day like the flow's schedule: candidates are retired instead of fixed again.
Everything a domain module decides is taken as decided; this module only plays the clock.
Durations of the in-place fixes are simulation assumptions (below), not settings.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from remedy.config import RemedySettings
from remedy.domain.model import Node, NodeState
from remedy.domain.xid import RemediationPath, Resolution, lookup
from remedy.detect.signals import Signal as SignalRecord
from remedy.detect.signals import SignalKind, classify
from remedy.goodput.events import Process, Signal
from remedy.goodput.policies import AUTO_DETECT_MINUTES, AUTO_GRACE_MINUTES, AUTO_JOIN_MINUTES, escalate, manual_steps
from remedy.goodput.scenarios import REBOOT, RESET
from remedy.lemon.records import IncidentRecord, NodeHistory, ValidationRecord
from remedy.lemon.scoring import score_fleet, select_for_retirement
from remedy.safety.breaker import BreakerBoard, decide
from remedy.safety.ladder import Attempt, AttemptOutcome, LadderExhausted, Step, next_step
from remedy.safety.scopes import FailureEvent, FleetView, SkipReason, Verdict

try:  # wired in as it lands; until then the policy says what it lacks instead of re-implementing it
    from remedy.spares.selection import SpareCandidate, SpareChoice, select_spare
except ImportError:  # pragma: no cover - depends on the other engineer's progress
    select_spare = None  # type: ignore[assignment]

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)  # simulated minute 0 as a UTC time for the domain code
GPU_MODEL = "NVIDIA-B200"

# Assumed wall-clock durations of in-place fixes (the ladder's settings hold only their timeouts).
RESET_MINUTES = 5.0  # drain, nvidia-smi -r, verify (timeout 10)
REBOOT_MINUTES = 15.0  # drain, reboot, wait Ready, verify (timeout 30)
LEMON_REVIEW_MINUTES = 7 * 24 * 60.0  # lemon review weekly, the retirement budget's window
SPARE_CYCLE_MINUTES = 24 * 60.0  # idle spares are re-validated daily (within the 72-h freshness window)

# Faults without an XID: NotReady goes through triage's rule (remedy.detect.signals.classify); a fail-slow
# node has no XID and no detector verdict in this model, so it gets the RESTART_APP ladder (assumption).
_NO_XID_RESOLUTION = {"node-not-ready": Resolution.RESTART_BM, "fail-slow": Resolution.RESTART_APP}
_BREAKER_HOLDS = (SkipReason.BREAKER_TRIPPED, SkipReason.BREAKER_OPEN, SkipReason.PROBE_IN_FLIGHT)
_TIMED_PATHS = (RemediationPath.REPLACE, RemediationPath.REBOOT, RemediationPath.RESET_GPU)
_LEVEL = {RemediationPath.RESET_GPU: RESET, RemediationPath.REBOOT: REBOOT}
_FIX_MINUTES = {RemediationPath.RESET_GPU: RESET_MINUTES, RemediationPath.REBOOT: REBOOT_MINUTES}


_MINUTE = timedelta(minutes=1)


def at(minutes: float) -> datetime:
    return EPOCH + timedelta(minutes=minutes)


def _time(record: IncidentRecord) -> datetime:
    return record.time


@dataclass
class GpuRemedy:
    """gpu-remedy: XID-driven ladder, breaker, spare selection and lemon retirement."""

    settings: RemedySettings = field(default_factory=RemedySettings)
    name: str = "gpu-remedy"
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
        self.attempts: dict[tuple[int, str], list[Attempt]] = {}
        self.lemons: set[int] = set()
        self.retired_at: list[datetime] = []
        self._incidents: dict[int, list[IncidentRecord]] = {}
        self._reviews: dict[str, Signal] = {}
        self._seen_incidents = 0
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
        return FleetView(counts, ready_spares=len(sim.ready_spares()), in_remediation=quarantined)

    # ---- the incident ----------------------------------------------------------------------------
    def handle(self, sim, inc) -> Process:
        self._setup(sim)
        sim.hold(inc)
        yield AUTO_DETECT_MINUTES
        name = f"node-{inc.node:05d}"
        fault = inc.fault
        resolution = lookup(fault.xid).resolution if fault.xid is not None else _NO_XID_RESOLUTION[fault.kind.signal]
        if inc.node in self.lemons:
            yield from self._replace(sim, inc, retire=True)
            return
        # Faults without an XID all look alike to the ladder (xid None); keep their histories per signal.
        history = self.attempts.setdefault((inc.node, "xid" if fault.xid is not None else fault.kind.signal), [])
        while True:
            now = sim.clock.now
            step = self._next_step(sim, inc, history, resolution)
            if isinstance(step, LadderExhausted) or step.kind in (RemediationPath.ESCALATE, RemediationPath.IGNORE):
                inc.actions.append("ladder-exhausted" if isinstance(step, LadderExhausted) else step.kind.value)
                if inc.automatic_retries and inc.chain_success is None:
                    inc.chain_success = False
                yield from escalate(sim, inc)
                sim.close(inc, "escalated")
                return
            if step.kind is not RemediationPath.RESTART_APP and inc.automatic_retries and inc.chain_success is None:
                inc.chain_success = False  # the restart chain gave up; a deeper fix takes over
            needs_spare = step.kind is RemediationPath.REPLACE
            event = FailureEvent(name, at(inc.start), sim.topology(inc.node), needs_spare, fault.kind.name)
            decision = decide(event, self.board, self._fleet(sim, inc.node), at(now))
            if decision.verdict is Verdict.HOLD and decision.skip is not None:
                reason = decision.skip.reason
                if reason is SkipReason.ALREADY_IN_REMEDIATION:
                    pass  # our own earlier rung of this incident is still on the board: carry on
                elif reason in _BREAKER_HOLDS and decision.skip.scope:
                    # Automation pauses in that scope; one person reviews it and re-closes the breaker
                    # (BreakerBoard.approve_close), then the held incidents are decided again.
                    sim.acc.breaker_holds += 1
                    inc.actions.append(f"breaker-hold:{reason.value}")
                    yield self._review(sim, decision.skip.scope)
                    continue
                else:  # capacity budget, spare reserve, detector suspect: a person takes this one
                    inc.actions.append(f"hold:{reason.value}")
                    yield from escalate(sim, inc)
                    sim.close(inc, f"escalated:{reason.value}")
                    return
            wait = (step.not_before - at(now)).total_seconds() / 60.0
            if wait > 0:
                yield wait  # the ladder's restart back-off
            started = sim.clock.now
            if step.kind is RemediationPath.REPLACE:
                yield from self._replace(sim, inc)
                self._finish(sim, name, True)
                return
            if step.kind is RemediationPath.RESTART_APP:
                inc.automatic_retries += 1
                sim.release(inc)
                ok = yield sim.next_attempt()
                history.append(Attempt(step.kind, at(started), _outcome(ok), fault.xid, fault.gpu, at(sim.clock.now)))
                self._finish(sim, name, ok)
                if ok:
                    inc.chain_success = True
                    sim.close(inc, "restart-recovered")
                    return
                inc.failed_retries += 1
                sim.hold(inc)
                continue
            # RESET_GPU / REBOOT: drained in place on the job's critical path, then verified
            slot = sim.pull(inc)
            yield _FIX_MINUTES[step.kind]
            ok = sim.fix_in_place(inc.node, _LEVEL[step.kind])
            history.append(Attempt(step.kind, at(started), _outcome(ok), fault.xid, fault.gpu, at(sim.clock.now)))
            self._finish(sim, name, ok)
            if ok:
                sim.record_validation(inc.node)
                if slot is not None:
                    sim.install(slot, inc.node)
                sim.release(inc)
                sim.close(inc, f"fixed-in-place:{step.kind.value}")
                return
            if slot is not None:  # put it back so the next rung (or a person) finds it where it was
                sim.install(slot, inc.node)

    def _next_step(self, sim, inc, history: list[Attempt], resolution: Resolution) -> Step | LadderExhausted:
        """The ladder for XID and fail-slow faults; triage's NotReady rule (replace after the grace) otherwise."""
        fault = inc.fault
        if fault.kind.signal != SignalKind.NODE_NOT_READY.value:
            return next_step(history, fault.xid, fault.gpu, resolution, at(sim.clock.now), self.settings.ladder)
        grace = self.settings.signals.node_not_ready_seconds
        when = max(sim.clock.now, inc.start + grace / 60.0)
        verdict = classify(
            SignalRecord(f"node-{inc.node:05d}", SignalKind.NODE_NOT_READY, value=(when - inc.start) * 60.0,
                         at=at(when)),
            self.settings.signals,
        )
        kind = verdict.path if verdict.path in _TIMED_PATHS else RemediationPath.ESCALATE
        return Step(kind, 0, 1, timedelta(minutes=15), at(when), verdict.explanation)

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
        if self.board.is_active(name):
            self.board.record_outcome(name, ok, at(sim.clock.now))

    def _replace(self, sim, inc, *, retire: bool = False) -> Process:
        spare = sim.try_take_spare(lambda ready: self._pick_spare(sim, inc, ready))
        if spare is None:
            inc.actions.append("no-spare")
            yield from escalate(sim, inc)
            sim.close(inc, "escalated-no-spare")
            return
        slot = sim.pull(inc)
        yield AUTO_GRACE_MINUTES + AUTO_JOIN_MINUTES
        if slot is not None:
            sim.install(slot, spare)
        else:
            sim.make_spare(spare)
        if retire:
            sim.retire(inc.node)
        else:
            sim.send_to_repair(inc.node)
        sim.release(inc)
        sim.close(inc, "retired-lemon" if retire else "replaced")

    def _pick_spare(self, sim, inc, ready: list[int]) -> int | None:
        if select_spare is None:
            return ready[0]
        cands = [SpareCandidate(self._node(sim, n), at(sim.validated_at.get(n, 0.0))) for n in ready]
        choice = select_spare(
            self._node(sim, inc.node),
            cands,
            at(sim.clock.now),
            self.settings.spares,
            correlated=inc.fault.kind.not_ready,
            lemons=[f"node-{n:05d}" for n in self.lemons],
        )
        return int(choice.name.split("-")[1]) if isinstance(choice, SpareChoice) else None

    # ---- the scheduled flows -------------------------------------------------------------------
    def _spare_cycling(self, sim) -> Process:
        while True:
            yield SPARE_CYCLE_MINUTES
            for n in sim.ready_spares():
                if n not in self.lemons:
                    sim.record_validation(n)

    def _lemon_review(self, sim) -> Process:
        while True:
            yield LEMON_REVIEW_MINUTES
            self._score_lemons(sim)

    def _score_lemons(self, sim) -> None:
        now = at(sim.clock.now)
        since = sim.clock.now - self.settings.lemon.lookback_days * 24 * 60
        for inc in sim.incidents[self._seen_incidents :]:  # convert each record once, in time order
            self._incidents.setdefault(inc.node, []).append(
                IncidentRecord(at(inc.start), inc.fault.kind.signal, inc.fault.xid, inc.fault.gpu, str(inc.id))
            )
        self._seen_incidents = len(sim.incidents)
        histories, rest_exposure = [], 0.0
        for n in range(len(sim.state)):
            exposure = sim.exposure_minutes(n) / (24 * 60)
            recs = self._incidents.get(n, [])
            recent = recs[bisect_left(recs, now - (sim.clock.now - since) * _MINUTE, key=_time) :]
            if not recent:
                rest_exposure += exposure  # incident-free nodes only add exposure: pooled, same totals
                continue
            times = sim.validations.get(n, [])
            vals = [ValidationRecord(at(t), True, "sim") for t in times[bisect_left(times, since) :]]
            histories.append(NodeHistory(f"node-{n:05d}", exposure, recent, vals))
        if not histories:
            return
        histories.append(NodeHistory("incident-free-nodes", rest_exposure))
        verdicts = [v for v in score_fleet(histories, now, self.settings.lemon) if v.node != "incident-free-nodes"]
        retire, _ = select_for_retirement(verdicts, self.retired_at, now, self.settings.lemon)
        for v in retire:
            n = int(v.node.split("-")[1])
            if n in self.lemons:
                continue
            self.lemons.add(n)
            self.retired_at.append(now)  # the decision uses the retirement budget now
            if sim.state[n] is NodeState.SPARE and n in sim.spare_pool:
                sim.spare_pool.remove(n)
                sim.retire(n)
            # a lemon in the job is retired at its next failure (see handle), not drained mid-run


def _outcome(ok: bool) -> AttemptOutcome:
    return AttemptOutcome.SUCCEEDED if ok else AttemptOutcome.FAILED
