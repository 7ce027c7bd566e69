"""Remediation policies the fleet simulator compares.

Each policy's `handle(sim, incident)` is a generator process (see `remedy.goodput.events`): it
holds the job, waits, pulls nodes, takes spares and releases the job, using the primitives on
`FleetSim`. Durations are the seeds' published ones; see each class.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from remedy.goodput.events import Process
from remedy.goodput.scenarios import REBOOT, UPSTREAM

# Seed 000's manual runbook, minutes (uniform draws): page, triage, cordon/drain/replace, validate, restart.
MANUAL_STEPS: tuple[tuple[str, float, float], ...] = (
    ("page", 5, 30),
    ("triage", 10, 20),
    ("replace", 20, 40),
    ("validate", 10, 15),
    ("restart", 5, 10),
)
MANUAL_STEPS_MEAN = sum((lo + hi) / 2 for _, lo, hi in MANUAL_STEPS)  # 82.5 min as listed

# Seed 000's automated replacement: 30 s detect, cordon (immediate), 30 s grace; the spare's join time is the
# scenario's `spare_join_minutes` (seed 000: 4 min).
AUTO_DETECT_MINUTES = 0.5
AUTO_GRACE_MINUTES = 0.5

# The off-path reboot the stronger auto-replace baseline gives a pulled node: the same 15 min gpu-remedy's policy
# charges for a reboot (drain, reboot, wait Ready, verify).
OFF_PATH_REBOOT_MINUTES = 15.0
NOT_READY_POLL_MINUTES = 10.0  # a NotReady node off the critical path is looked at this often
NOT_READY_WAIT_MINUTES = 24 * 60.0  # and sent to repair if it is still NotReady after a day

# Seed 002 §4.3.2: FastTrack retried every ~10 minutes (measured interval median 11 min).
AUTO_RETRY_DELAY_MINUTES = 10.0
AUTO_RETRY_MAX_ATTEMPTS = 1000  # seed 002 saw a chain fail 30 times in a row; effectively unlimited


def manual_steps(sim) -> dict[str, float]:
    """One draw of the manual runbook, scaled to the scenario's `manual_mean_minutes`.

    Seed 000 lists steps whose midpoints sum to 82.5 min but does its arithmetic with 60 min;
    scaling keeps each step's spread and makes the mean the one the article (or seed 002) uses.
    """
    target = sim.sc.manual_mean_minutes
    scale = (target / MANUAL_STEPS_MEAN) if target else 1.0
    return {name: sim.uniform(lo, hi) * scale for name, lo, hi in MANUAL_STEPS}


def human_replaces(sim, inc, steps: dict[str, float], *, restart: bool = True) -> Process:
    """An engineer cordons, drains and swaps the node for a spare, validates it and restarts the job.

    A whole rack down is an upstream fault (PDU, switch): the engineer swaps in a ready spare to get
    the job back, and the pulled node rejoins the pool once the facility fix lands (no repair trip);
    with no spare ready they chase the fix and bring the node back in place.
    """
    inc.human_acted = True
    sim.hold(inc)
    if inc.fault.needs == UPSTREAM:
        spare = sim.try_take_spare()
        if spare is None:
            yield max(0.0, inc.fault.clears_at - sim.clock.now)
            sim.fix_in_place(inc.node, REBOOT)  # the node never left its slot
            yield steps["validate"]
            inc.actions.append("human-upstream-fix")
        else:
            slot = sim.pull(inc)
            yield steps["replace"]
            yield steps["validate"]
            sim.fill(slot, spare)
            sim.clock.spawn(_rejoin_after_upstream_fix(sim, inc))
            inc.actions.append("human-swap-upstream")
        if restart:
            yield steps["restart"]
        sim.release(inc)
        return
    slot = sim.pull(inc)
    spare = yield sim.take_spare()
    yield steps["replace"]
    yield steps["validate"]
    if slot is not None:
        sim.install(slot, spare)
    else:
        sim.make_spare(spare)  # the node was not in the job after all; the spare goes back
    sim.send_to_repair(inc.node, "a person replaced it")
    inc.actions.append("human-replace")
    if restart:
        yield steps["restart"]
    sim.release(inc)


def _rejoin_after_upstream_fix(sim, inc) -> Process:
    yield max(0.0, inc.fault.clears_at - sim.clock.now)
    sim.fix_in_place(inc.node, REBOOT)
    sim.make_spare(inc.node)  # quarantined → spare, validated: nothing was wrong with the node itself


def escalate(sim, inc) -> Process:
    """Hand the incident to the on-call engineer (one at a time) and run the manual runbook."""
    sim.hold(inc)
    yield sim.on_call.acquire()
    if inc.fault.needs == UPSTREAM and sim.clock.now >= inc.fault.clears_at:
        # The engineer already brought this rack back while working a sibling incident.
        sim.fix_in_place(inc.node, REBOOT)
        inc.human_acted = True
        inc.actions.append("human-upstream-fix")
        sim.on_call.release()
        sim.release(inc)
        return
    steps = manual_steps(sim)
    yield steps["page"] + steps["triage"]
    yield from human_replaces(sim, inc, steps)
    sim.on_call.release()


@dataclass
class Manual:
    """Seed 000's purely manual runbook: page, triage, replace, validate, restart (~60 min)."""

    name: str = "manual"

    def handle(self, sim, inc) -> Process:
        yield from escalate(sim, inc)
        sim.close(inc, "handled-by-hand")


@dataclass
class AutoReplace:
    """Seed 000's automatic replacement: detect 30 s, cordon, 30 s grace, warm spare joins in 4 min."""

    name: str = "auto-replace"

    def handle(self, sim, inc) -> Process:
        sim.hold(inc)
        yield AUTO_DETECT_MINUTES
        spare = sim.try_take_spare()
        if spare is None:  # pool empty: the automation pages a human instead
            yield from escalate(sim, inc)
            sim.close(inc, "escalated-no-spare")
            return
        slot = sim.pull(inc)  # cordoned immediately
        yield AUTO_GRACE_MINUTES
        yield sim.sc.spare_join_minutes
        sim.fill(slot, spare)
        self.after_swap(sim, inc.node)
        sim.release(inc)
        sim.close(inc, "auto-replaced")

    def after_swap(self, sim, node: int) -> None:
        """Where the pulled node goes once the spare has its place: seed 000's automation sends it to repair."""
        sim.send_to_repair(node)


@dataclass
class AutoRebootReplace(AutoReplace):
    """auto-replace with one off-path reboot before repair, knowing nothing of the fault: the strongest simple
    baseline (issue 34). The job gets the spare exactly as in auto-replace; the pulled node is then rebooted (once
    it is Ready: a NotReady node is observable without fault knowledge) and, if that clears it, burned in back to
    the spare pool; otherwise it goes to repair. A lemon passes the reboot and comes back, as it would in a shop
    that reboots first."""

    name: str = "auto-replace-reboot"

    def after_swap(self, sim, node: int) -> None:
        sim.clock.spawn(_reboot_off_path(sim, node))


def until_ready(sim, node: int) -> Generator[float, None, bool]:
    """Wait for a NotReady node (its rack may be down with it) to report Ready, a day at most: True if it did. A
    NotReady node is observable, so every policy may wait on it."""
    waited = 0.0
    while sim.unready_until.get(node, 0.0) > sim.clock.now:
        if waited >= NOT_READY_WAIT_MINUTES:
            return False
        yield NOT_READY_POLL_MINUTES
        waited += NOT_READY_POLL_MINUTES
    return True


def _reboot_off_path(sim, node: int) -> Process:
    if not (yield from until_ready(sim, node)):
        sim.send_to_repair(node, "still NotReady after a day")
        return
    yield OFF_PATH_REBOOT_MINUTES
    if sim.fix_in_place(node, REBOOT):
        sim.burn_in(node)
    else:
        sim.send_to_repair(node, "a reboot did not clear it")


@dataclass
class AutoRetry:
    """Seed 002's FastTrack: restart the job every 10 min on the same nodes, no exclusion.

    A fault a restart clears (contained ECC, a transient NCCL hang) recovers on the first retry;
    a hardware fault keeps killing each attempt until the on-call engineer, on the manual
    runbook's clock, cordons the node and swaps it for a spare.
    """

    name: str = "auto-retry"

    def handle(self, sim, inc) -> Process:
        sim.clock.spawn(self._human(sim, inc))
        attempt = sim.next_attempt()
        for _ in range(AUTO_RETRY_MAX_ATTEMPTS):
            sim.hold(inc)
            yield AUTO_RETRY_DELAY_MINUTES
            inc.automatic_retries += 1
            sim.release(inc)
            ok = yield attempt
            if ok:
                inc.chain_success = not inc.human_acted
                sim.close(inc, "retry-recovered" if inc.chain_success else "human-recovered")
                return
            inc.failed_retries += 1
        inc.chain_success = False
        sim.close(inc, "retries-exhausted")

    def _human(self, sim, inc) -> Process:
        steps = manual_steps(sim)
        yield steps["page"]
        if inc.closed:
            return  # the retry chain recovered before anyone looked
        yield sim.on_call.acquire()
        yield steps["triage"]
        if not (inc.closed or sim.cleared(inc.node, "restart")):
            yield from human_replaces(sim, inc, steps, restart=False)
        sim.on_call.release()


# gpu-remedy's own policy lives in remedy.goodput.gpu_remedy_policy (it wires the domain modules).
