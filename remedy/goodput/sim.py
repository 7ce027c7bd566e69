"""Discrete-event fleet simulator: one gang-scheduled job, its nodes, spares, failures and a policy.

What is modelled (and why):
- The job needs all `training_nodes`; it trains only while every slot holds a usable node and no
  remediation holds it. Checkpoints every interval; a failure loses the partial interval since the
  last checkpoint; every restart reloads the checkpoint (seed 002: median 31 min).
- Failures arrive per hour of *training* (Meta's MTBF is per job runtime hour; seed 000 too), as a
  Poisson process over the nodes in the job: lemons fail `lemon_rate_factor` times as often and
  pass every check, so they come back and fail again until something retires them.
- The fault mix is seed 002 Table 2, each fault with the XID the driver logs and the lowest fix
  that really clears it (the scenario's `fault_mix`; default `scenarios.FAULT_MIX`).
- Rack events (PDU, leaf switch) drop every node of a rack for a while, on the wall clock.
- Spares: a replaced node goes to repair, then burn-in, then back to the warm pool.
Node lifecycle changes go through `remedy.domain.model.check_transition`, the flows' state machine.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from functools import partial
from typing import TYPE_CHECKING, Protocol

import numpy as np

from remedy.domain.model import NodeState, Topology, check_transition
from remedy.goodput.events import TAKE_SPARE, Clock, Process, Resource, Signal
from remedy.goodput.incidents import RACK_FAULT, WARNING_ONLY, Fault, Incident
from remedy.goodput.invariants import check_fleet
from remedy.goodput.results import Accounts, SimResult, summarise
from remedy.goodput.scenarios import FIX_LEVELS, RESTART, UPSTREAM, Scenario

if TYPE_CHECKING:
    from remedy.goodput.trace import TraceEvent


class Policy(Protocol):
    """What FleetSim asks of a remediation policy (remedy.goodput.policies, gpu_remedy_policy)."""

    def handle(self, sim: FleetSim, inc: Incident) -> Process: ...

RUNNING, DOWN, LOADING = "running", "down", "loading"
_MANAGED = (NodeState.ACTIVE, NodeState.QUARANTINED)  # what the breaker counts per scope (not spares)
class FleetSim:
    """Run one policy on one scenario: `FleetSim(scenario, policy, seed=1).run()`."""

    def __init__(self, scenario: Scenario, policy: Policy, *, seed: int = 0, check_invariants: bool = False,
                 trace: list[TraceEvent] | None = None) -> None:
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative whole number, got {seed!r}")
        self.sc, self.policy, self.seed = scenario, policy, seed
        # A fixed failure trace (remedy.goodput.trace) instead of drawn failures: no other failures, no warnings.
        self.trace = trace
        self.check = check_invariants
        self.fail_rng = np.random.default_rng([seed, 0])  # failure process
        self.rng = np.random.default_rng([seed, 1])  # everything a policy or repair shop draws
        self.warn_rng = np.random.default_rng([seed, 2])  # which failures are announced, and false alarms
        self.clock = Clock()
        self.clock.spare_requests = self._request_spare
        self.acc = Accounts()
        n, size = scenario.total_nodes, scenario.rack_size
        self.state: list[NodeState] = [NodeState.ACTIVE] * scenario.training_nodes + [NodeState.SPARE] * scenario.spares
        n_lemons = int(round(scenario.lemon_fraction * n))
        self.lemon = np.zeros(n, dtype=bool)
        self.lemon[self.fail_rng.choice(n, size=n_lemons, replace=False)] = True
        self.rack_of: list[int] = [i // size for i in range(n)]
        # A lemon's faults keep landing on the same GPU (what lemon scoring's repeat-XID signal looks for).
        self.bad_gpu: list[int] = self.fail_rng.integers(0, scenario.gpus_per_node, n).tolist()
        self.validated_at: dict[int, float] = {i: 0.0 for i in range(scenario.training_nodes, n)}
        self.validations: dict[int, list[float]] = {}
        self.active_minutes: dict[int, float] = {}
        self.active_since: dict[int, float] = {i: 0.0 for i in range(scenario.training_nodes)}
        self.managed_by_rack: Counter[int] = Counter(self.rack_of[: scenario.training_nodes])
        self.managed_total = scenario.training_nodes
        self.quarantined: set[int] = set()
        self.slots: list[int | None] = list(range(scenario.training_nodes))
        self.slot_of: dict[int, int] = {i: i for i in range(scenario.training_nodes)}
        self.spare_pool: deque[int] = deque(range(scenario.training_nodes, n))
        # hot spares: joined to the job's rendezvous, idle, out of the warm pool (only a policy that knows uses them)
        self.hot: list[int] = [self.spare_pool.pop() for _ in range(scenario.hot_spares)]
        self.run_size = 1.0  # share of the job's nodes training in the current phase (elastic: may run short)
        self.spare_waiters: deque[Process] = deque()
        self.unready_until: dict[int, float] = {}
        self.faults: dict[int, Fault] = {}
        self.incidents: list[Incident] = []
        self.open_by_node: dict[int, Incident] = {}
        self.holds: set[int] = set()
        self.awaiting_resume: list[Incident] = []  # job incidents whose downtime ends at the next restart
        self.spares_granted: set[int] = set()  # handed to a process, not yet installed
        self.pending: dict[int, Fault] = {}  # node → the fault an early warning announced, not yet hit
        self.phase, self.epoch, self.run_start = DOWN, 0, 0.0
        self._attempt = Signal(self.clock)
        self.on_call = Resource(self.clock, scenario.on_call_engineers)
        # Calibrate the per-node rate so the job starts at the scenario's MTBF, lemons included.
        p, k = scenario.lemon_fraction, scenario.lemon_rate_factor
        self.node_rate = 1.0 / (scenario.job_mtbf_hours * 60.0 * scenario.training_nodes * (1 - p + p * k))
        self.lemon_slots = {s for s, node in enumerate(self.slots) if self.lemon[node]}
        self._kind_p = np.array([kd.share for kd in scenario.fault_mix]) / sum(kd.share for kd in scenario.fault_mix)

    # ---- running the simulation ---------------------------------------------------------------
    def run(self) -> SimResult:
        t0 = time.perf_counter()
        horizon = self.sc.days * 24 * 60
        if self.trace is not None:
            self._schedule_trace()
        else:
            self._schedule_rack_events(horizon)
        self._start_running()
        if self.sc.failure_clock == "wall" and self.trace is None:
            self._next_wall_failure()
            self._schedule_false_warning(None)
        self.clock.run_until(horizon, self.check_invariants if self.check else None)
        self._close_phase(failed=False)
        return summarise(self, time.perf_counter() - t0)

    def _schedule_trace(self) -> None:
        from remedy.goodput.trace import RACK

        kinds = {k.name: k for k in self.sc.fault_mix}
        for ev in self.trace or ():
            if ev.kind == RACK:
                assert ev.rack is not None, "a rack event names its rack (trace.draw_trace)"
                self.clock.at(ev.minute, partial(self._rack_event, ev.rack % (max(self.rack_of) + 1)))
            elif ev.kind not in kinds:
                raise ValueError(f"trace fault {ev.kind!r} is not in scenario {self.sc.name!r}'s fault mix")
            else:
                assert ev.slot is not None, "a fault event names its slot (trace.draw_trace)"
                fault = Fault(kinds[ev.kind], ev.xid, ev.needs, gpu=ev.gpu)
                self.clock.at(ev.minute, partial(self._trace_failure, ev.slot, fault))

    def _trace_failure(self, slot: int, fault: Fault) -> None:
        node = self.slots[slot % len(self.slots)]
        if node is None or node in self.faults:
            return  # that slot is empty or already broken: as the drawn wall-clock process, the failure is thinned
        self.acc.job_failures += 1
        self._stop()
        self._open_incident(node, fault)

    def _schedule_rack_events(self, horizon: float) -> None:
        racks = max(self.rack_of) + 1
        rate = self.sc.rack_events_per_rack_year * racks / (365 * 24 * 60)
        count = self.fail_rng.poisson(rate * horizon)
        times = np.sort(self.fail_rng.uniform(0, horizon, count))  # vectorised: all events drawn at once
        which = self.fail_rng.integers(0, racks, count)
        for t, r in zip(times.tolist(), which.tolist()):
            self.clock.at(t, partial(self._rack_event, r))

    # ---- the job ------------------------------------------------------------------------------
    def _job_rate(self) -> float:
        lemons = len(self.lemon_slots)
        return self.node_rate * (self.sc.training_nodes - lemons + lemons * self.sc.lemon_rate_factor)

    def _start_running(self) -> None:
        self.phase, self.run_start = RUNNING, self.clock.now
        self.epoch += 1
        self.run_size = sum(s is not None for s in self.slots) / len(self.slots)
        if self.sc.failure_clock == "training" and self.trace is None:
            epoch = self.epoch
            delay = self.fail_rng.exponential(1.0 / self._job_rate())
            if self._announced():
                # a detector sees this failure coming: the node and fault are drawn at the warning. A failure due
                # sooner than the lead after the (re)start is announced at the start, with the time that is left,
                # so the share of failures announced is the scenario's `warning_share`.
                lead = min(self.sc.warning_lead_minutes, delay)
                self.clock.after(delay - lead, lambda: self._true_warning(epoch, lead))
            else:
                self.clock.after(delay, lambda: self._node_failure(epoch))
            self._schedule_false_warning(epoch)

    def _announced(self) -> bool:
        """Does an early-warning detector see the next failure coming (`warning_share` of them)?"""
        return bool(self.sc.warning_share) and self.warn_rng.random() < self.sc.warning_share

    def _schedule_false_warning(self, epoch: int | None) -> None:
        if self.sc.warning_share and self.sc.false_warnings_per_true:
            rate = self._job_rate() * self.sc.warning_share * self.sc.false_warnings_per_true
            self.clock.after(self.warn_rng.exponential(1.0 / rate), lambda: self._false_warning(epoch))

    def _next_wall_failure(self) -> None:
        """Wall-clock failure process: job nodes fail whether or not the job is training."""
        delay = self.fail_rng.exponential(1.0 / self._job_rate())
        if self._announced():
            lead = min(self.sc.warning_lead_minutes, delay)
            self.clock.after(delay - lead, lambda: self._wall_warning(lead))
        else:
            self.clock.after(delay, lambda: self._node_failure(None))

    def _wall_warning(self, lead: float) -> None:
        self._next_wall_failure()
        node = self.slots[self._pick_failing_slot()]
        if node is None or node in self.faults or node in self.pending:
            return  # thinning, as for unannounced wall-clock failures
        self.pending[node] = self._draw_fault(node)
        self._warn(node, lead)
        self.clock.after(lead, lambda: self._warned_failure(None, node))

    def _close_phase(self, *, failed: bool) -> None:
        now, acc = self.clock.now, self.acc
        if self.phase == RUNNING:
            elapsed = now - self.run_start
            interval, cost = self.sc.checkpoint_interval_minutes, self.sc.checkpoint_cost_minutes
            done = math.floor(elapsed / interval)
            partial = elapsed - done * interval
            acc.checkpoint += done * cost
            if failed:  # the partial interval since the last completed checkpoint is rolled back
                acc.rollback += partial
                acc.useful += done * (interval - cost)
            else:  # still training at the horizon: the partial interval counts as done
                acc.checkpoint += max(0.0, partial - (interval - cost))
                acc.useful += done * (interval - cost) + min(partial, interval - cost)
            if self.run_size < 1.0:  # an elastic job one node short: that node's share of the work is not done
                worked = done * (interval - cost) + (0.0 if failed else min(partial, interval - cost))
                acc.short += worked * (1.0 - self.run_size)
                acc.useful -= worked * (1.0 - self.run_size)
        elif self.phase == DOWN:
            acc.down += now - self.run_start
        elif self.phase == LOADING:
            acc.loading += now - self.run_start  # cut short by the horizon or a new fault
        self.run_start = now
        self.epoch += 1

    def _stop(self) -> None:
        """A fault hit the job: whatever it was doing ends now."""
        if self.phase == DOWN:
            return
        self._close_phase(failed=self.phase == RUNNING)
        self.phase = DOWN

    def _pick_failing_slot(self) -> int:
        lemons = len(self.lemon_slots)
        k = self.sc.lemon_rate_factor
        n = self.sc.training_nodes
        if lemons and self.fail_rng.random() < lemons * k / (n - lemons + lemons * k):
            return sorted(self.lemon_slots)[int(self.fail_rng.integers(lemons))]
        while True:
            slot = int(self.fail_rng.integers(n))
            if slot not in self.lemon_slots:
                return slot

    # ---- early warnings: a failure announced `lead` minutes ahead, and false alarms --------------
    def _true_warning(self, epoch: int, lead: float) -> None:
        if epoch != self.epoch or self.phase != RUNNING:
            return  # the job stopped first; memoryless, the next start draws again
        node = self.slots[self._pick_failing_slot()]
        if node is None or node in self.faults:
            self.clock.after(lead, lambda: self._node_failure(epoch))
            return
        fault = self._draw_fault(node)
        self.pending[node] = fault
        self._warn(node, lead)
        self.clock.after(lead, lambda: self._warned_failure(epoch, node))

    def _warned_failure(self, epoch: int | None, node: int) -> None:
        fault = self.pending.pop(node, None)
        if fault is None:
            return  # the node was swapped out on the warning: its fault went with it
        if node not in self.slot_of or node in self.faults:
            return
        if epoch is not None and (epoch != self.epoch or self.phase != RUNNING):
            return  # the job stopped for another reason first (memoryless: it draws again when it restarts)
        self.acc.job_failures += 1
        self._stop()
        self._open_incident(node, fault)

    def _false_warning(self, epoch: int | None) -> None:
        if epoch is None:
            self._schedule_false_warning(None)  # wall clock: the detector keeps watching
        elif epoch != self.epoch:
            return
        else:
            self._schedule_false_warning(epoch)
        if self.phase != RUNNING and epoch is not None:
            return  # training clock: the detector's false alarms accrue per hour of load, as its true ones
        node = self.slots[int(self.warn_rng.integers(self.sc.training_nodes))]
        if node is not None and node not in self.faults and node not in self.pending:
            self._warn(node, self.sc.warning_lead_minutes)

    def _warn(self, node: int, lead: float) -> None:
        self.acc.warnings += 1
        on_warning = getattr(self.policy, "on_warning", None)
        if on_warning is not None:
            self.clock.spawn(on_warning(self, node, lead))

    def minutes_to_next_checkpoint(self) -> float:
        """While training: minutes until the running checkpoint interval completes."""
        interval = self.sc.checkpoint_interval_minutes
        return interval - (self.clock.now - self.run_start) % interval

    def swap_incident(self, node: int, *, warned: bool = True) -> Incident:
        """An incident for a node taken out on a warning (or a lemon retired from the job, `warned=False`): the job
        stops cleanly (nothing rolled back) at the checkpoint that was just taken, and the node's announced fault, if
        any, goes with it."""
        self._stop_cleanly()
        fault = self.pending.pop(node, None)
        if fault is not None:
            self._upstream_starts(node, fault)  # approximation: the announced upstream cause starts at the swap
            self.faults[node] = fault
            self.acc.failures_avoided += 1
        inc = Incident(len(self.incidents), node, fault or Fault(WARNING_ONLY, None, RESTART), self.clock.now,
                       self.slot_of.get(node), self.rack_of[node])
        self.incidents.append(inc)
        self.open_by_node[node] = inc
        if inc.slot is not None:
            self.awaiting_resume.append(inc)
        if warned:
            self.acc.warning_swaps += 1
        return inc

    def _stop_cleanly(self) -> None:
        if self.phase == RUNNING:
            self._close_phase(failed=False)
            self.phase = DOWN
        elif self.phase != DOWN:
            self._stop()

    def charge_checkpoint(self, minutes: float) -> None:
        """An extra checkpoint taken now: its minutes are checkpoint overhead, not training."""
        self.acc.checkpoint += minutes
        self.acc.useful -= minutes

    def _node_failure(self, epoch: int | None) -> None:
        if epoch is None:  # wall clock: keep the process going, whatever the job is doing
            self._next_wall_failure()
        elif epoch != self.epoch or self.phase != RUNNING:
            return  # the job stopped since this failure was drawn; memoryless, so redraw later
        slot = self._pick_failing_slot()
        node = self.slots[slot]
        if node is None and epoch is not None:  # an elastic job running short: the failure lands on a survivor
            self.clock.after(self.fail_rng.exponential(1.0 / self._job_rate()), lambda: self._node_failure(epoch))
            return
        if node is None or node in self.faults:
            return  # wall clock only: that slot is empty or already broken (thinning keeps it Poisson)
        self.acc.job_failures += 1
        self._stop()
        self._open_incident(node, self._draw_fault(node))

    def _draw_fault(self, node: int) -> Fault:
        kind = self.sc.fault_mix[int(self.fail_rng.choice(len(self.sc.fault_mix), p=self._kind_p))]
        xid = int(self.fail_rng.choice(kind.xids)) if kind.xids else None
        levels, probs = zip(*kind.needs)
        needs = levels[int(self.fail_rng.choice(len(levels), p=np.array(probs) / sum(probs)))]
        gpu = self.bad_gpu[node] if self.lemon[node] else int(self.fail_rng.integers(self.sc.gpus_per_node))
        return Fault(kind, xid, needs, gpu=gpu if kind.xids else None)

    def _rack_event(self, rack: int) -> None:
        clears = self.clock.now + self.sc.rack_event_hours * 60
        self.acc.rack_events += 1
        nodes = [i for i, r in enumerate(self.rack_of) if r == rack]
        hit_job = False
        for node in nodes:
            self.unready_until[node] = max(self.unready_until.get(node, 0.0), clears)
            if self.state[node] is NodeState.ACTIVE and node in self.slot_of and node not in self.faults:
                if not hit_job:
                    self._stop()
                    hit_job = True
                self._open_incident(node, Fault(RACK_FAULT, None, UPSTREAM, clears))
        self.clock.at(clears, self._grant_spares)

    def _upstream_starts(self, node: int, fault: Fault) -> None:
        """An upstream cause (switch, cable, host maintenance) hits now: it clears by itself after the fault kind's
        `upstream_minutes`, and a node it drops stays NotReady until then."""
        if fault.needs == UPSTREAM and fault.kind.upstream_minutes and math.isinf(fault.clears_at):
            fault.clears_at = self.clock.now + fault.kind.upstream_minutes
            if fault.kind.not_ready:
                self.unready_until[node] = max(self.unready_until.get(node, 0.0), fault.clears_at)
                self.clock.at(fault.clears_at, self._grant_spares)

    def _open_incident(self, node: int, fault: Fault) -> None:
        self._upstream_starts(node, fault)
        self.faults[node] = fault
        inc = Incident(len(self.incidents), node, fault, self.clock.now, self.slot_of.get(node), self.rack_of[node])
        self.incidents.append(inc)
        self.open_by_node[node] = inc
        if inc.slot is not None:
            self.awaiting_resume.append(inc)
        self.clock.spawn(self.policy.handle(self, inc))

    def _maybe_restart(self) -> None:
        short = sum(s is None for s in self.slots)
        if self.phase != DOWN or self.holds or short > self.sc.elastic_short_nodes:
            return
        self._close_phase(failed=False)
        self.phase = LOADING
        median = self.sc.restart_loading_median_minutes
        load = float(median * math.exp(self.sc.restart_loading_sigma * self.rng.standard_normal())) if median else 0.0
        if self.sc.elastic_short_nodes or self.sc.hot_spares:
            load += self.sc.elastic_resize_minutes  # the elastic agent's re-rendezvous
        epoch = self.epoch
        self.clock.after(load, lambda: self._loading_done(epoch))

    def _loading_done(self, epoch: int) -> None:
        if epoch != self.epoch or self.phase != LOADING:
            return
        now = self.clock.now
        broken = [n for n in self.slots if n in self.faults and not self._cleared_by(n, RESTART)]
        if broken:  # the job came up on a node that is still faulty and died again
            self.acc.failed_retry += now - self.run_start
            self.acc.failed_attempts += 1
            self.run_start, self.phase = now, DOWN
            self.epoch += 1
            self._attempt.fire(False)
            return
        for node in self.slots:  # a restart clears what a restart can clear
            if node in self.faults:
                self._clear(node)
        self._close_phase(failed=False)
        for inc in self.awaiting_resume:
            inc.resumed_at = now
        self.awaiting_resume.clear()
        self._start_running()
        self._attempt.fire(True)

    # ---- primitives the policies call ---------------------------------------------------------
    def hold(self, inc: Incident) -> None:
        """Keep the job from (re)starting while this incident is worked; stops it if it was up."""
        self.holds.add(inc.id)
        self._stop()

    def release(self, inc: Incident) -> None:
        self.holds.discard(inc.id)
        self._maybe_restart()

    def next_attempt(self) -> Signal:
        """Fires True when the job next trains again, False when a restart attempt dies."""
        return self._attempt

    def cleared(self, node: int, level: str) -> bool:
        """Would a fix at `level` clear this node's fault? (No fault = healthy.)"""
        return node not in self.faults or self._cleared_by(node, level)

    def _cleared_by(self, node: int, level: str) -> bool:
        fault = self.faults[node]
        if fault.needs == UPSTREAM:
            return self.clock.now >= fault.clears_at
        return FIX_LEVELS.index(level) >= FIX_LEVELS.index(fault.needs)

    def fix_in_place(self, node: int, level: str) -> bool:
        """Apply a reset / reboot; True if the node is healthy afterwards (lemons always pass)."""
        self.acc.in_place_fixes += 1
        if self.cleared(node, level):
            self._clear(node)
            return True
        return False

    def _clear(self, node: int) -> None:
        self.faults.pop(node, None)

    def pull(self, inc: Incident) -> int | None:
        """Cordon + drain the incident's node out of its slot (ACTIVE → QUARANTINED); returns the slot."""
        node = inc.node
        self.hold(inc)
        slot = self.slot_of.pop(node, None)
        self._move(node, NodeState.QUARANTINED)
        since = self.active_since.pop(node, None)
        if since is not None:
            self.active_minutes[node] = self.active_minutes.get(node, 0.0) + self.clock.now - since
        if slot is not None:
            self.slots[slot] = None
            self.lemon_slots.discard(slot)
        return slot

    def install(self, slot: int, node: int) -> None:
        """Put a node (a promoted spare or the fixed original) into a slot."""
        if self.slots[slot] is not None:
            raise RuntimeError(f"slot {slot} already holds node {self.slots[slot]}")
        if self.state[node] is NodeState.SPARE:
            self.acc.spares_consumed += 1
            self.spares_granted.discard(node)
        self._move(node, NodeState.ACTIVE)
        self.slots[slot], self.slot_of[node] = node, slot
        self.active_since[node] = self.clock.now
        if self.lemon[node]:
            self.lemon_slots.add(slot)
        if self.phase == RUNNING and self.run_size < 1.0:  # an elastic job running short grows back at its next
            self.clock.after(self.minutes_to_next_checkpoint(), partial(self._grow, self.epoch))  # checkpoint

    def _grow(self, epoch: int) -> None:
        """The job ran short and a node has joined: at the checkpoint boundary it re-forms at full size (nothing rolled
        back; one reload and re-rendezvous)."""
        if epoch != self.epoch or self.phase != RUNNING:
            return
        self._stop_cleanly()
        self._maybe_restart()

    def take_hot_spare(self) -> int | None:
        """A hot spare (joined to the job, idle), or None."""
        if not self.hot:
            return None
        node = self.hot.pop(0)
        self.spares_granted.add(node)
        return node

    def add_hot_spare(self, node: int) -> None:
        """A warm spare taken from the pool has joined the job's rendezvous: it is a hot spare now."""
        self.spares_granted.discard(node)
        self.hot.append(node)

    def send_to_repair(self, node: int, why: str = "replaced") -> None:
        self._move(node, NodeState.REPAIR)
        self.acc.sent_to_repair += 1
        self.acc.repair_reasons[why] = self.acc.repair_reasons.get(why, 0) + 1
        self._clear(node)  # the repair shop fixes what is broken, but cannot see a lemon
        self.clock.after(self.sc.repair_days * 24 * 60, lambda: self.burn_in(node))

    def await_burn_in(self, node: int) -> None:
        """A node waits (in burn-in, not yet running it) until it can be validated, e.g. until it is Ready again."""
        self._move(node, NodeState.BURN_IN)

    def burn_in(self, node: int) -> None:
        """A node back from repair, or fixed off the critical path, is validated before it is a spare again."""
        self._move(node, NodeState.BURN_IN)
        self.clock.after(self.sc.burn_in_hours * 60, lambda: self.make_spare(node))

    def fill(self, slot: int | None, spare: int) -> None:
        """The spare takes the job's pulled slot; with no slot (the job had already lost it) it stays a spare."""
        if slot is not None:
            self.install(slot, spare)
        else:
            self.make_spare(spare)

    def make_spare(self, node: int) -> None:
        """Validated node (burn-in or an offline fix) joins the warm pool."""
        self._clear(node)
        self._move(node, NodeState.SPARE)
        self.record_validation(node)
        self.spare_pool.append(node)
        self._grant_spares()

    def record_validation(self, node: int) -> None:
        """The node passed a health check (burn-in, spare cycling, post-fix verify); lemons pass too."""
        self.validated_at[node] = self.clock.now
        self.validations.setdefault(node, []).append(self.clock.now)

    def exposure_minutes(self, node: int) -> float:
        """Minutes the node has spent in the job so far."""
        since = self.active_since.get(node)
        return self.active_minutes.get(node, 0.0) + (self.clock.now - since if since is not None else 0.0)

    def retire(self, node: int) -> None:
        """A lemon leaves the fleet for good; the vendor's replacement arrives after the repair time."""
        self._move(node, NodeState.RETIRED)
        self._clear(node)
        self.acc.retired += 1
        new = len(self.state)
        self.state.append(NodeState.REPAIR)  # on its way from the vendor
        self.lemon = np.append(self.lemon, False)
        self.rack_of.append(self.rack_of[node])
        self.clock.after(self.sc.repair_days * 24 * 60, lambda: self.burn_in(new))

    def close(self, inc: Incident, how: str) -> None:
        inc.closed = True
        inc.actions.append(how)
        if self.open_by_node.get(inc.node) is inc:
            del self.open_by_node[inc.node]

    def topology(self, node: int) -> Topology:
        return Topology(zone="sim", rack=f"rack-{self.rack_of[node]:04d}")

    def uniform(self, low: float, high: float) -> float:
        return float(self.rng.uniform(low, high))

    def take_spare(self):
        """`spare = yield sim.take_spare()`: the first ready spare, waiting for one if the pool is empty."""
        return TAKE_SPARE

    def ready_spares(self) -> list[int]:
        now = self.clock.now
        return [n for n in self.spare_pool if self.unready_until.get(n, 0.0) <= now]

    def try_take_spare(self, pick=None) -> int | None:
        """Take a ready spare now (chosen by `pick(ready) -> node | None`, default the oldest), or None."""
        ready = self.ready_spares()
        if not ready:
            return None
        node = pick(ready) if pick is not None else ready[0]
        if node is None:
            return None
        self.spare_pool.remove(node)
        self.spares_granted.add(node)
        self.acc.min_spares = min(self.acc.min_spares, len(self.spare_pool))
        return node

    def return_spare(self, node: int) -> None:
        """A spare taken from the pool but not installed goes back (its warned node left the job another way)."""
        self.spares_granted.discard(node)
        self.spare_pool.append(node)
        self._grant_spares()

    # ---- spare pool ---------------------------------------------------------------------------
    def _request_spare(self, proc: Process) -> None:
        self.spare_waiters.append(proc)
        self._grant_spares()

    def _grant_spares(self) -> None:
        now = self.clock.now
        while self.spare_waiters:
            ready = [n for n in self.spare_pool if self.unready_until.get(n, 0.0) <= now]
            if not ready:
                self.acc.spare_shortfalls += 1
                return
            node = ready[0]
            self.spare_pool.remove(node)
            self.spares_granted.add(node)
            proc = self.spare_waiters.popleft()
            self.clock.at(now, partial(self.clock.resume, proc, node))
        self.acc.min_spares = min(self.acc.min_spares, len(self.spare_pool))

    def _move(self, node: int, target: NodeState) -> None:
        current = self.state[node]
        check_transition(f"node-{node}", current, target)
        self.state[node] = target
        # Counts the breaker's fleet view needs, kept incrementally (O(1) per move, not O(fleet) per decision).
        was, now = current in _MANAGED, target in _MANAGED
        if was != now:
            self.managed_by_rack[self.rack_of[node]] += 1 if now else -1
            self.managed_total += 1 if now else -1
        if target is NodeState.QUARANTINED:
            self.quarantined.add(node)
        else:
            self.quarantined.discard(node)

    def check_invariants(self) -> None:
        """Raise AssertionError if the fleet is inconsistent (see `remedy.goodput.invariants`)."""
        check_fleet(self)
