"""The policy simulator checked against the real stack: one failure trace, played on both (issue 15, item 6).

A trace drawn from a scenario file (remedy.goodput.trace: job MTBF, fault mix with fix depths, rack events) is
injected into the Kubernetes-API simulator at fleet size, with the whole stack running in this process: the alert
receiver (the simulator posts each fault's alert to it), a real Prefect server, the deployments and the warm
dispatcher that runs triage and the remediation flows. The same trace is replayed in the discrete-event simulator
(remedy.goodput.sim, `trace=`). Printed side by side: the job's goodput on the Kubernetes simulator and the
discrete-event prediction, incidents, actions by class, healthy nodes touched, alerts lost, downtime per fault.

    .venv/bin/python bench/fleet_replay.py [--scenario meta-16k | --scenario-file F.yaml] [--hours 72] [--seed 0]
                                           [--time-scale 0.01] [--job-backoff] [--quick]

How time is compressed. The trace's clock and the Kubernetes simulator's clock differ on purpose:
- between failures nothing happens, so the replay skips ahead: the next fault is injected once the last one has
  settled (its flows finished, the job whole again on healthy nodes);
- during an incident the simulator runs at `--time-scale` (0.01: a 30-s drain grace lasts 0.3 s, a 180-s reboot
  1.8 s), and the job's downtime is measured on that clock (real seconds / time scale). Real seconds of
  orchestration (HTTP, Prefect, SQLite) are stretched the same way: 1 s of it reads as 100 s of downtime at 0.01.
The goodput of the measured timeline is accounted exactly as the simulator accounts a run
(remedy.goodput.trace.timeline_goodput), with the scenario's checkpoint cadence and no reload (the Kubernetes
simulator does not load checkpoints; the discrete-event run is told the same, and that a warm spare joins at once,
as the Kubernetes simulator's spares do). Both run with the breakers, budget and spare reserve opened wide (a trace
of independent faults would otherwise wait for a person who is not there) and the same settings object. The
Kubernetes simulator's Job pod-failure back-off is off (`--job-backoff` keeps it): the training Job's pods never
succeed, so its back-off never resets and the k-th fault's new pod waits 10 s x 2^(k-1), at most 10 min; the
model has no such wait (the job's restart cost is the scenario's restart/reload time, 0 on both sides here).

How the two are compared, independently. While the job is down the replay looks, every 20 ms, at what it is waiting
on, from the Kubernetes simulator's own state: a training pod in its termination grace, the Job back-off, a Job pod
running (reset, probe) or a node rebooting, the replay's crash-again delay. That time is the simulator's waits
(simulated durations, shrunk by the time scale); the rest of the downtime is orchestration. A fix on the fault's own
node counts as a wait only when the job came back on that node (else it ran beside the job's restart). Nothing of
this reads the prediction. The discrete-event model of the flows as built (`FlowsAsBuilt`) is then given each
fault's measured orchestration as an explicit input (`orchestration_by_fault`, simulated minutes, one lump before
its first step; detection 0, since the Kubernetes simulator posts the alert at injection) and predicts the goodput
itself: the path each fault takes, the simulator's step durations (its nominal ones, not the measured waits),
overlaps, checkpoints and rollback. Two clocks, each with the real stack's number beside the model's:
- stretched: orchestration read at 1/time scale, as measured;
- production: orchestration at 1× (a real second is a second), the simulator's waits at their simulated length;
  the model gets the same orchestration at 1×.
A third row gives the model only each class's mean orchestration (coarser; shown, not held to the point).

How a trace fault becomes a Kubernetes-simulator fault (the simulator's hidden health decides what fixes it):
- a fault with an XID: that XID's alert on the GPU; `restart` clears by itself once the job restarts, `reset` is
  cleared by a GPU reset, `reboot` only by a reboot, `replace` by neither;
- an unreachable node (NotReady): the kubelet stops; a reboot brings it back, `replace` leaves a failed GPU behind;
- a fault without an XID (fail-slow, application error): XID 94 stands in for its alert (both are "restart the
  application" in NVIDIA's catalog and in the policy), with the same fix depths;
- a rack event: every node of a simulator rack goes NotReady until the upstream cause clears.
Every fault stops the job at once: its worker on that node crashed, so the job counts as down until those pods are
gone (restarted or drained), even when the fault itself was transient. A job restarted on a node that is still
faulty dies again: the replay raises the same alert again 30 s (simulated)
later, as the worker's next crash would.

Measured before replace-first (2 shared cores, quiet), meta-16k, 72-h trace, seed 0: real stack 80.53 %, the model of
the flows as they were then 81.84 % (−1.3 points). Those flows walked the ladder on the critical path, and 4 restarts
left a faulty GPU behind with the job short until a person replaced the node.

Measured after issue 15's flow fixes (replace first, a restart the job cannot come back from is a failed rung, a
NotReady node replaced at once with its stuck pods force-deleted, reboots seen by their boot ID), before this check
was made independent: 68.24 % on the stretched clock against the model's 87.65 %, the production clock re-counted with
the prediction itself (no check at all). Three things were wrong besides the clock, each found by the split below:
a transient fault (needs a restart) read as free, since the job counted as whole while the crashed worker's pods
still ran; the Kubernetes simulator's Job back-off grew to minutes per fault (above); and a rack event could land
on one of the model's spare-only racks (`des_trace`).

Measured 2026-11-27, meta-16k, 72-h trace, seed 0, time scale 0.01, on 2 cores shared with other sessions
(load average 7–9): 36 faults (34 node faults, 2 rack events) in 666 s, about 12 minutes in all with the stack's
start; all settled, none by a person, 384 alerts sent and received, none lost, no healthy node touched; 14 restarts,
40 spares, on both sides. Per fault, median: job down 8.20 real s = the simulator's waits 0.27 + orchestration 7.91.
  stretched clock:  real stack 76.52 %, model given each fault's orchestration 76.52 % (+0.00 points; given its
                    class's mean, 76.85 %, −0.33);
  production clock: real stack 87.34 %, model 87.65 % (−0.32 points); the model as shipped (30-s detection, no
                    orchestration) 87.33 %; gpu-remedy's policy 87.63 %, auto-replace 87.33 %.
An earlier run the same morning (load 6–7, faster orchestration: 5.43 s median), before the rack mapping: stretched
79.52 % vs 81.11 % (−1.58, all of it the one rack event the model played on spares), production 87.66 % vs 87.65 %.
`--quick` (6-h trace, 6 faults) takes about 3 minutes; at that length one point is 3.6 minutes of downtime, so a
quick run is a smoke test, not the check (its numbers: stretched 66.98 % vs 66.98 %, production 83.63 % vs 83.66 %).
`--time-scale 0.1` stretches orchestration 10× instead of 100× (and takes ~10× longer).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")

# A trace of independent faults: no person answers here, so the gates that would wait for one are opened wide, in the
# stack and in the discrete-event run alike (bench/alert_to_action.py does the same).
OPEN_GATES = {
    "REMEDY_BREAKER__CLUSTER__MAX_FAILURES": 1000, "REMEDY_BREAKER__CLUSTER__MAX_PERCENT": 100,
    "REMEDY_BREAKER__RACK__MAX_FAILURES": 1000, "REMEDY_BREAKER__RACK__MAX_PERCENT": 100,
    "REMEDY_BREAKER__SWITCH__MAX_FAILURES": 1000, "REMEDY_BREAKER__SWITCH__MAX_PERCENT": 100,
    "REMEDY_BREAKER__PDU__MAX_FAILURES": 1000, "REMEDY_BREAKER__PDU__MAX_PERCENT": 100,
    "REMEDY_BREAKER__SPARE_RESERVE": 0,
    "REMEDY_BUDGET__MAX_NODES_IN_REMEDIATION": 1000, "REMEDY_BUDGET__MAX_PERCENT_IN_REMEDIATION": 100,
    "REMEDY_APPROVALS__TIMEOUT_SECONDS": 30,
}
STAND_IN_XID = 94  # alert for a fault without an XID (see the module docstring)
DETECT_SIM_SECONDS = 30.0  # a job restarted on a still-faulty node dies again this long after it starts
MAX_REPEATS = 4  # repeated crashes of one fault before the replay stops raising its alert
SIM_RACK_SIZE = 8  # nodes per rack in the Kubernetes simulator (remedy.sim.build_cluster's default)
# ledger actions that disrupt the node they name (a spare's promotion is not counted: it is meant to be touched)
DISRUPTIVE = frozenset({"cordon_node", "drain_node", "taint_node", "restart_app", "job_gpu-reset", "job_reboot",
                        "set_state_quarantined", "set_state_repair", "set_state_retired"})


@dataclass
class Injected:
    """One trace event as played on the Kubernetes simulator."""

    minute: float
    kind: str
    needs: str
    nodes: list[str]
    xid: int | None
    gpu: int | None
    down_real: float = 0.0  # seconds the job was down (not whole, or a job pod on a faulty node)
    settled: bool = True
    person: bool = False  # the on-call engineer replaced the node by hand (the job stayed short)
    repeats: int = 0
    skipped: str = ""
    # Of down_real, the seconds the job waited on the Kubernetes simulator's own clocks (drain grace, Jobs running,
    # reboots, the Job controller's back-off, the replay's crash-again delay): simulated durations shrunk by the time
    # scale. The rest is orchestration (alert → receiver → Prefect → flows → API calls), which does not shrink.
    # Node fixes (a reset Job, a reboot on the fault's own node) are on the job's path only when the job came back
    # on that node; with the job on a spare they ran beside its restart.
    wait_base_real: float = 0.0
    wait_fix_real: float = 0.0
    in_place: bool = False
    waits_by: Counter = field(default_factory=Counter)  # real seconds down, by what the job waited on

    @property
    def wait_real(self) -> float:
        return min(self.down_real, self.wait_fix_real if self.in_place else self.wait_base_real)

    @property
    def orchestration_real(self) -> float:
        return self.down_real - self.wait_real

    @property
    def measured(self) -> bool:
        """Handled by the stack alone (no person, settled): its split into waits and orchestration is the stack's."""
        return self.settled and not self.person and not self.skipped


@dataclass
class Replay:
    events: list[Injected] = field(default_factory=list)
    wall_seconds: float = 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="meta-16k", help="a shipped scenario (default meta-16k: 2,112 nodes)")
    ap.add_argument("--scenario-file", help="a scenario YAML file instead")
    ap.add_argument("--hours", type=float, default=None, help="trace length in simulated hours (default 72; --quick 6)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-scale", type=float, default=0.01, help="Kubernetes simulator time scale during incidents")
    ap.add_argument("--settle-timeout", type=float, default=180.0, help="real seconds one fault may take to settle")
    ap.add_argument("--quick", action="store_true", help="a short smoke run: a 6-hour trace")
    ap.add_argument("--job-backoff", action="store_true",
                    help="keep the Kubernetes simulator's Job pod-failure back-off (the model does not have it)")
    ap.add_argument("--verbose", action="store_true", help="print the job and the watched nodes while a fault settles")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, _stop_children)  # a killed replay leaves no Prefect server behind
    try:
        sc = _scenario(args)
    except ValueError as exc:
        print(f"fleet_replay: {exc}", file=sys.stderr)
        return 2
    if sc.total_nodes < 1000:
        print(f"fleet_replay: {sc.name} has {sc.total_nodes} nodes; the replay is meant for fleets of 1,000 or more",
              file=sys.stderr)
        return 2
    if not 0 < args.time_scale <= 1:
        print("fleet_replay: --time-scale must be in (0, 1]", file=sys.stderr)
        return 2
    hours = args.hours if args.hours is not None else (6.0 if args.quick else 72.0)
    if not hours > 0:
        print("fleet_replay: --hours must be positive", file=sys.stderr)
        return 2

    from remedy.goodput.trace import draw_trace

    racks = -(-sc.total_nodes // SIM_RACK_SIZE)
    trace = draw_trace(sc, hours=hours, seed=args.seed, racks=racks)
    print(f"{sc.name}: {sc.total_nodes} nodes ({sc.training_nodes} in the job, {sc.spares} spares), trace of "
          f"{hours:g} h (seed {args.seed}): {len(trace)} events; Kubernetes simulator time scale {args.time_scale:g}",
          flush=True)
    # the discrete-event run gets the same opened gates, on its own (uncompressed) clock
    os.environ.update({k: str(v) for k, v in OPEN_GATES.items()})
    from remedy.config import load_settings

    settings = load_settings()
    t0 = time.monotonic()
    stack_out = run_stack(sc, trace, args)
    stack_out["replay"].wall_seconds = time.monotonic() - t0
    played = [e for e in stack_out["replay"].events if not e.skipped]
    des = run_des(sc, trace, hours, settings, played, args.time_scale)
    print_report(sc, trace, hours, args, stack_out, des)
    return 0


def _scenario(args):
    from remedy.goodput.scenarios import SCENARIOS, ScenarioFileError, load_scenario_file

    if args.scenario_file:
        try:
            return load_scenario_file(args.scenario_file)
        except ScenarioFileError as exc:
            raise ValueError(str(exc)) from None
    if args.scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {args.scenario!r} (choose from: {', '.join(SCENARIOS)})")
    return SCENARIOS[args.scenario]


def compressed_timeouts(scale: float) -> dict[str, float]:
    """The waits the flows measure in real seconds, on the compressed clock: 600 s → 6 s at 0.01. Step timeouts
    keep a floor of 30 s real for the orchestration itself (HTTP, Prefect) that does not shrink."""
    return {
        # the 2,048-pod gang restarting, and a spare joining, take tens of real seconds of orchestration here
        "REMEDY_WORKLOAD__RESUME_TIMEOUT_SECONDS": max(60.0, 600.0 * scale),
        "REMEDY_SIGNALS__NODE_NOT_READY_SECONDS": max(1.0, 300.0 * scale),
        "REMEDY_LADDER__RESTART_BACKOFF_MINUTES": max(0.01, 10.0 * scale),
        "REMEDY_LADDER__RESTART_APP_TIMEOUT_MINUTES": max(0.5, 60.0 * scale),
        "REMEDY_LADDER__RESET_GPU_TIMEOUT_MINUTES": max(0.5, 10.0 * scale),
        "REMEDY_LADDER__REBOOT_TIMEOUT_MINUTES": max(0.5, 30.0 * scale),
        "REMEDY_LADDER__REPLACE_TIMEOUT_MINUTES": max(0.5, 15.0 * scale),
    }


def _stop_children(*_) -> None:
    """On a kill: stop the Prefect server this process started (its own session), then leave at once."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:  # parent pid
            try:
                os.killpg(int(stat.parent.name), signal.SIGTERM)
            except OSError:
                pass
    os._exit(143)


# ---- the real stack ------------------------------------------------------------------------------------------------
def run_stack(sc, trace, args) -> dict:
    from tests.fixtures.prefect import prefect_server_process

    work = Path(tempfile.mkdtemp(prefix="fleet-replay-"))
    with prefect_server_process(work / "prefect") as api:
        os.environ["PREFECT_API_URL"] = api
        from remedy.platform.stack import start_stack

        t = time.monotonic()
        # The flows wait in real seconds for the job to come back after a restart; on the compressed clock that
        # wait shrinks with everything else (600 s → 6 s at 0.01), with a floor for the orchestration itself.
        compressed = compressed_timeouts(args.time_scale)
        st = start_stack(workdir=work / "stack", api_url=api, nodes=sc.total_nodes, spares=sc.spares,
                         time_scale=args.time_scale, fresh_ledger=True, settings_overrides=OPEN_GATES | compressed)
        # The Job controller's pod-failure back-off (10 s doubled per failure, at most 10 min) never resets for the
        # training Job: its pods never succeed, so the k-th fault's new pod waits 10 s x 2^(k-1). The job's restart
        # cost is the scenario's restart/reload time on both sides (0 here); the back-off stays off unless asked for.
        st.sim.cluster.pod_failure_backoff = args.job_backoff
        print(f"stack up in {time.monotonic() - t:.1f} s: Prefect {api}, receiver {st.receiver.alerts_url}, "
              f"simulator {st.sim.url}", flush=True)
        try:
            replayer = Replayer(st, args.time_scale, args.settle_timeout, sc.manual_mean_minutes or 60.0)
            replayer.verbose = args.verbose
            replay = replayer.play(trace)
            st.dispatcher.wait_idle(120)
            out = collect(st, replay)
        finally:
            # flow runs still waiting (a restart whose job cannot come back) must not keep the server alive
            stopper = threading.Thread(target=st.stop, daemon=True)
            stopper.start()
            stopper.join(30)
    return out


class Replayer:
    def __init__(self, st, time_scale: float, settle_timeout: float, person_minutes: float) -> None:
        self.st, self.cl, self.scale, self.timeout = st, st.sim.cluster, time_scale, settle_timeout
        self.person_after = person_minutes * 60 * time_scale  # real seconds
        self.not_ready_seconds = 300.0  # simulated seconds (the NotReady rule's threshold, settings' default)
        self.verbose = False
        job = self.cl.training_job()
        self.parallelism = int(job["spec"]["parallelism"])
        self.watched: dict[str, Injected] = {}  # nodes with an injected fault not yet known to be cleared
        self.seen_pods: dict[str, set[str]] = {}
        # the job's pods on a node at the moment its fault was injected: that worker crashed, so the job is down
        # until they are gone (restarted or drained), even when the fault itself was transient
        self.crashed: dict[str, set[str]] = {}
        self.wait_kind = ""  # what the job was last seen waiting on (see _sim_waits)
        self.racks: dict[int, list[str]] = {}
        for name in self.cl.node_names():
            labels = self.cl.node(name)["metadata"].get("labels") or {}
            rack = labels.get("remedy.io/rack", "")
            if rack.startswith("rack-"):
                self.racks.setdefault(int(rack[5:]) - 1, []).append(name)
        self.timers: list[threading.Timer] = []

    # what the job sees
    def _job_pods(self, node: str) -> list[dict]:
        return [p for p in self.cl.pods_on(node) if p["metadata"].get("namespace") == "training"
                and p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]

    def job_nodes(self) -> list[str]:
        from remedy.sim.cluster import TRAINING_NAMESPACE

        with self.cl.lock:
            pods = [p for _, p in self.cl.index.in_namespace(TRAINING_NAMESPACE)]
        return sorted({p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName")
                       and p["status"].get("phase") == "Running"})

    def job_ok(self) -> bool:
        if self.cl.training_size() < self.parallelism:
            return False
        with self.cl.lock:
            if any(p["metadata"]["uid"] in uids for n, uids in self.crashed.items() for p in self._job_pods(n)):
                return False
            return not any(self.cl.health_of(n).faulty() and self._job_pods(n) for n in self.watched)

    # faults
    def inject(self, ev, node: str) -> None:
        from remedy.sim.faults import APP_LEVEL_XIDS, inject

        if ev.not_ready:
            inject(self.cl, "not-ready", node)
            if ev.needs == "replace":  # a reboot brings the node back with a GPU that stays failed
                with self.cl.lock:
                    g = self.cl.health_of(node).gpus[0]
                    g.remap_failure, g.reboot_clears = True, False
            return
        xid = ev.xid if ev.xid is not None else STAND_IN_XID
        gpu = ev.gpu if ev.gpu is not None else 0
        inject(self.cl, "xid", node, gpu=gpu, code=xid)
        with self.cl.lock:
            g = self.cl.health_of(node).gpus[gpu]
            if ev.needs == "restart":  # transient: gone once the job restarts
                g.pending_xids, g.fallen_off_bus = [], False
            else:
                if xid in APP_LEVEL_XIDS and xid not in g.pending_xids:
                    g.pending_xids.append(xid)  # an application-level XID that a restart will not clear
                if ev.needs == "reset":
                    g.fallen_off_bus = False  # a reset can clear it
                g.reset_clears = ev.needs == "reset"
                g.reboot_clears = ev.needs in ("reset", "reboot")
            self.cl.reconcile({node})

    def _crash_again(self, node: str, rec: Injected) -> None:
        """The job came back on a node that is still faulty: it dies again, and the alert fires again."""
        from remedy.sim.faults import inject

        with self.cl.lock:
            still = self.cl.health_of(node).faulty() and self._job_pods(node)
        if still and rec.repeats < MAX_REPEATS:
            rec.repeats += 1
            if rec.xid is not None or not rec.kind.startswith("rack"):
                inject(self.cl, "xid", node, gpu=rec.gpu or 0, code=rec.xid or STAND_IN_XID)

    def _person(self, rec: Injected) -> None:
        """The job is still short and no flow is working on it: after the manual runbook's time the on-call engineer
        notices and replaces the failed node by hand, with gpu-remedy's own runbook (`replace_node`, no incident)."""
        from flows.replace_node import replace_node

        rec.person = True
        for node in [n for n, r in self.watched.items() if r is rec]:
            with self.cl.lock:
                bad = self.cl.health_of(node).faulty()
            if bad:
                replace_node(node=node, cause="on-call: the job is short on this node", return_state=True)

    def _still_not_ready(self, node: str, seconds: float) -> None:
        """The NotReady alert again, now with how long the node has been NotReady (`value`, in seconds), as the
        alert rule reports it; the injector's first alert has no duration, and without one triage only watches."""
        from remedy.sim import alerts

        labels = {"alertname": "KubeNodeNotReady", "Hostname": node, "node": node, "severity": "critical",
                  "job": "kube-state-metrics", "instance": f"{node}:9400"}
        alert = alerts.make_alert(labels, {"summary": f"{node} NotReady for {seconds:.0f} s", "value": f"{seconds:.0f}"})
        outcome = alerts.post(self.cl.alert_url, self.cl.alert_token, alerts.webhook_payload([alert]))
        with self.cl.lock:
            self.cl.alerts.append({"at": time.time(), "labels": labels, "status": "firing", **outcome})

    def _heal_rack(self, nodes: list[str]) -> None:
        with self.cl.lock:
            for n in nodes:
                self.cl.health_of(n).not_ready = False
            self.cl.reconcile(set(nodes))

    def play(self, trace) -> Replay:
        from remedy.goodput.trace import RACK

        replay = Replay()
        for i, ev in enumerate(trace):
            if ev.kind == RACK:
                nodes = self.racks.get(ev.rack % max(1, len(self.racks)), [])
                rec = Injected(ev.minute, f"rack ({len(nodes)} nodes)", ev.needs, nodes, None, None)
                for n in nodes:
                    from remedy.sim.faults import inject

                    inject(self.cl, "not-ready", n)
                    self.watched[n] = rec
                clears = ev.clears_after_minutes * 60 * self.scale
                timer = threading.Timer(clears, self._heal_rack, args=(nodes,))
                timer.daemon = True
                timer.start()
                self.timers.append(timer)
            else:
                nodes = [n for n in self.job_nodes() if n not in self.watched]
                if not nodes:
                    replay.events.append(Injected(ev.minute, ev.kind, ev.needs, [], ev.xid, ev.gpu, skipped="no node"))
                    continue
                node = nodes[ev.slot % len(nodes)]
                rec = Injected(ev.minute, ev.kind, ev.needs, [node], ev.xid if ev.xid is not None else
                               (None if ev.not_ready else STAND_IN_XID), ev.gpu)
                self.watched[node] = rec
                self.seen_pods[node] = {p["metadata"]["uid"] for p in self._job_pods(node)}
                self.crashed[node] = set(self.seen_pods[node])
                self.inject(ev, node)
            self._settle(rec)
            replay.events.append(rec)
            print(f"  [{i + 1}/{len(trace)}] {ev.minute / 60:6.1f} h {rec.kind:<22} needs {rec.needs:<8} "
                  f"{','.join(rec.nodes[:2]) + ('…' if len(rec.nodes) > 2 else ''):<20} job down "
                  f"{rec.down_real:6.2f} s real = {rec.down_real / self.scale / 60:6.1f} min simulated (waits "
                  f"{rec.wait_real:5.2f} s, orchestration {rec.orchestration_real:5.2f} s; "
                  + ", ".join(f"{k} {v:.2f}" for k, v in rec.waits_by.most_common()) + ")"
                  f"{'  (replaced by hand)' if rec.person else ''}{'' if rec.settled else '  (did not settle)'}",
                  flush=True)
        for t in self.timers:
            t.join()
        return replay

    def _settle(self, rec: Injected) -> None:
        start = time.monotonic()
        down_since: float | None = start  # the fault stops the job at once (the worker crashed, or the node left)
        ok_since: float | None = None
        crash_at: dict[str, float] = {}
        last_note = start
        not_ready_for = self.not_ready_seconds * self.scale  # real seconds before the rule reports a duration
        next_report = {n: start + not_ready_for for n, r in self.watched.items() if r is rec}
        prev, prev_down, prev_waits, prev_kind = start, True, (False, False), ""
        while True:
            now = time.monotonic()
            if prev_down:  # the interval since the last look, classified by what the job was waiting on then
                rec.wait_base_real += (now - prev) * prev_waits[0]
                rec.wait_fix_real += (now - prev) * prev_waits[1]
                rec.waits_by[prev_kind or "orchestration"] += now - prev
            ok = self.job_ok()
            prev, prev_down, prev_waits = now, not ok, (self._sim_waits(rec, crash_at) if not ok else (False, False))
            prev_kind = self.wait_kind if not ok else ""
            if ok and down_since is not None:
                rec.down_real += now - down_since
                down_since, ok_since = None, now
            elif not ok and down_since is None:
                down_since, ok_since = now, None
            for node in [n for n, r in self.watched.items() if r is rec]:
                with self.cl.lock:
                    faulty = self.cl.health_of(node).faulty()
                    pods = {p["metadata"]["uid"] for p in self._job_pods(node)}
                if not faulty:
                    continue
                if now >= next_report.get(node, float("inf")) and self.cl.health_of(node).not_ready:
                    self._still_not_ready(node, (now - start) / self.scale)
                    next_report[node] = now + not_ready_for
                new = pods - self.seen_pods.get(node, set())
                if new:  # the job restarted here while the fault is still there
                    self.seen_pods.setdefault(node, set()).update(new)
                    crash_at.setdefault(node, now + DETECT_SIM_SECONDS * self.scale)
                if node in crash_at and now >= crash_at[node]:
                    del crash_at[node]
                    self._crash_again(node, rec)
            idle = self.st.dispatcher.wait_idle(0.01)
            if self.verbose and now - last_note >= 5:
                last_note = now
                with self.cl.lock:
                    bad = {n: (self.cl.health_of(n).faulty(), len(self._job_pods(n))) for n in self.watched}
                print(f"      t+{now - start:5.1f}s job {self.cl.training_size()}/{self.parallelism} watched "
                      f"(faulty, job pods) {bad} flow runs in flight {len(self.st.dispatcher._inflight)}", flush=True)
            if not ok and idle and not rec.person and now - start >= self.person_after:
                self._person(rec)
                continue
            if ok and ok_since is not None and now - ok_since >= 0.5 and now - start >= 2.0 and idle:
                break
            if now - start > self.timeout:
                if down_since is not None:
                    rec.down_real += now - down_since
                rec.settled = False
                break
            time.sleep(0.02)
        with self.cl.lock:
            rec.in_place = any(self._job_pods(n) for n, r in self.watched.items() if r is rec)
        for node in rec.nodes:
            self.crashed.pop(node, None)
        for node in [n for n, r in self.watched.items() if r is rec]:
            with self.cl.lock:
                if not self.cl.health_of(node).faulty() or not self._job_pods(node):
                    del self.watched[node]

    def _sim_waits(self, rec: Injected, crash_at: dict[str, float]) -> tuple[bool, bool]:
        """Is the job waiting on a clock of the Kubernetes simulator (a simulated duration, shrunk by the time scale)?
        Read from the simulator's own state, not from any prediction. Returns (without, with) node fixes on the
        fault's own nodes: a training pod in its termination grace, the training Job's pod-failure back-off, the
        replay's crash-again delay, a Job pod running or a node rebooting elsewhere (a spare's check); and, second,
        also a Job pod running on or a reboot of the fault's own nodes."""
        from remedy.sim.cluster import TRAINING_NAMESPACE

        now = time.monotonic()
        mine = {n for n, r in self.watched.items() if r is rec}
        cl = self.cl
        kinds = []
        with cl.lock:
            job = cl.training_job() or {}
            if crash_at:
                kinds.append("crash-again")
            if job.get("metadata", {}).get("uid") in cl.job_backoff_wake:
                kinds.append("job back-off")
            if any(ns == TRAINING_NAMESPACE and due > now for (ns, _), due in cl.deletions.items()):
                kinds.append("pod grace")
            base, fix = bool(kinds), False
            for node, due in cl.rebooting.items():
                if due > now:
                    kinds.append("reboot")
                    if node in mine:
                        fix = True
                    else:
                        base = True
            if not base or not fix:
                for (ns, name), run in cl.runs.items():
                    if run.finish_due > now and ns != TRAINING_NAMESPACE:
                        pod = cl.store.get("Pod", ns, name) or {}
                        kinds.append("node Job")
                        if pod.get("spec", {}).get("nodeName") in mine:
                            fix = True
                        else:
                            base = True
        self.wait_kind = kinds[0] if kinds else ""
        return base, base or fix


def collect(st, replay: Replay) -> dict:
    """What the ledger and the receiver saw."""
    from remedy import runtime

    led = runtime.ledger()
    incidents = led.incidents()
    actions = [a for a in led.actions() if not a.dry_run]
    injected = {n for e in replay.events for n in e.nodes}
    by_kind = Counter(a.kind for a in actions)
    touched = sorted({a.node for a in actions if a.node not in injected and a.kind in DISRUPTIVE})
    m = st.receiver.receiver.metrics
    posted = list(st.sim.cluster.alerts)  # every alert the simulator tried to post, with the HTTP outcome
    not_delivered = sum(1 for a in posted if not a.get("posted"))
    received = m.value("remedy_receiver_alerts_received_total")
    faulted = {n for e in replay.events if not e.skipped and not e.kind.startswith("rack") for n in e.nodes}
    rack_nodes = {n for e in replay.events if e.kind.startswith("rack") for n in e.nodes}
    with_incident = {i.node for i in incidents}
    missed = sorted(faulted - with_incident)
    return {"replay": replay, "incidents": incidents, "actions": by_kind, "touched": touched,
            "alerts_posted": len(posted), "alerts_not_delivered": not_delivered, "alerts_received": received,
            "faults_without_incident": missed, "rack_nodes_without_incident": sorted(rack_nodes - with_incident),
            "incident_status": Counter(str(getattr(i.status, "value", i.status)) for i in incidents)}


# ---- the discrete-event simulator on the same trace ----------------------------------------------------------------
@dataclass
class FlowsAsBuilt:
    """The flows of this branch, played in the discrete-event simulator. Triage: a NotReady node gets a ready spare at
    once (choose(): it rarely comes back by itself), else the NotReady grace, then a spare. An XID whose catalog path is a
    reset or reboot goes to `choose()`: with a spare ready and `workload.reload_minutes` to reload, replacing costs
    the job least, so the job gets the spare and the node is reset / rebooted off the critical path (recover-node:
    back to the spares, or to repair). A catalog "replace" replaces (the node to repair). An application-class
    fault restarts the job in place (fix-in-place); a restart the job cannot come back from (the faulty GPU is out of
    allocatable) is a failed rung, and choose() then takes the spare (or, with none, climbs the ladder on the
    critical path)."""

    name: str = "flows-as-built"
    not_ready_minutes: float = 5.0  # signals.node_not_ready_seconds
    # the Kubernetes simulator's own step durations (simulated): 30-s drain grace, 20-s reset Job or 180-s reboot,
    # then the NVML probe Job; the simulator's gpu-remedy policy assumes 5 and 15 min for a real fleet
    reset_minutes: float = 1.0
    reboot_minutes: float = 4.0
    # a restart deletes the job's pods with their 30-s termination grace (remedy.sim.objects.TERMINATION_GRACE_SECONDS)
    restart_minutes: float = 0.5
    # Detection: a real fleet's alert path (AUTO_DETECT_MINUTES); the Kubernetes simulator posts its alert the
    # moment a fault is injected, so a run checked against it sets 0 and gives the orchestration instead.
    detect_minutes: float | None = None
    # Orchestration the stack measured, per fault class (simulated minutes): alert to triage to flow to API calls,
    # everything but the simulator's own waits. Taken once per incident, before the first step, as one lump.
    orchestration_minutes: dict[str, float] = field(default_factory=dict)
    # the same, fault by fault (key: the fault's trace minute, rounded to 6 places); wins over the class's
    orchestration_by_fault: dict[float, float] = field(default_factory=dict)

    def handle(self, sim, inc):
        from remedy.domain.xid import RemediationPath as P
        from remedy.domain.xid import lookup
        from remedy.goodput.gpu_remedy_policy import _NO_XID_RESOLUTION
        from remedy.goodput.policies import AUTO_DETECT_MINUTES, escalate
        from remedy.safety.ladder import LADDERS

        sim.hold(inc)
        yield ((AUTO_DETECT_MINUTES if self.detect_minutes is None else self.detect_minutes)
               + self.orchestration_by_fault.get(round(inc.start, 6),
                                                 self.orchestration_minutes.get(inc.fault.kind.name, 0.0)))
        fault = inc.fault
        res = lookup(fault.xid).resolution if fault.xid is not None else _NO_XID_RESOLUTION.get(fault.kind.signal)
        rungs = LADDERS.get(res, ())
        if fault.kind.not_ready and sim.ready_spares():  # triage's choose(): the spare now, not the grace
            if (yield from self._replace(sim, inc, recover=False)):
                return
        if fault.kind.not_ready:  # no spare: triage gives a NotReady node the grace, then replaces it (no ladder)
            yield max(0.0, inc.start + self.not_ready_minutes - sim.clock.now)
            if sim.unready_until.get(inc.node, 0.0) <= sim.clock.now and sim.cleared(inc.node, "restart"):
                sim.release(inc)
                sim.close(inc, "came back")
                return
            if (yield from self._replace(sim, inc, recover=False)):
                return
            rungs = ()
        elif rungs and rungs[0] in (P.RESET_GPU, P.REBOOT) and sim.ready_spares():
            yield from self._replace(sim, inc, recover=True)  # replace first: choose() with a spare ready
            return
        elif rungs and rungs[0] is P.RESTART_APP:
            inc.automatic_retries += 1
            yield self.restart_minutes
            sim.release(inc)
            if (yield sim.next_attempt()):
                sim.close(inc, "restarted")
                return
            sim.hold(inc)  # the pod cannot come back (GPU out of allocatable): a failed rung, seen at once
            if sim.ready_spares():
                yield from self._replace(sim, inc, recover=True)
                return
            rungs = rungs[1:]
        for rung in rungs:
            if rung in (P.RESET_GPU, P.REBOOT):
                slot = sim.pull(inc)
                yield self.reset_minutes if rung is P.RESET_GPU else self.reboot_minutes
                ok = sim.fix_in_place(inc.node, "reset" if rung is P.RESET_GPU else "reboot")
                key = "reset-gpu" if rung is P.RESET_GPU else "reboot"
                sim.acc.fix_attempts[key] = sim.acc.fix_attempts.get(key, 0) + 1
                if slot is not None:
                    sim.install(slot, inc.node)
                if ok:
                    sim.release(inc)
                    sim.close(inc, f"fixed-in-place:{rung.value}")
                    return
                if sim.ready_spares():  # a failed rung: choose() takes the spare
                    yield from self._replace(sim, inc, recover=True)
                    return
                continue
            if rung is P.REPLACE and (yield from self._replace(sim, inc, recover=False)):
                return
        yield from escalate(sim, inc)
        sim.close(inc, "by hand")

    def _replace(self, sim, inc, *, recover: bool):
        """replace-node; with `recover`, recover-node fixes the node off the critical path (reset, then reboot)."""
        from remedy.goodput.policies import AUTO_GRACE_MINUTES

        spare = sim.try_take_spare()
        if spare is None:
            return False
        slot = sim.pull(inc)
        yield AUTO_GRACE_MINUTES + sim.sc.spare_join_minutes
        sim.fill(slot, spare)
        sim.release(inc)
        sim.close(inc, "replaced")
        if recover:
            sim.clock.spawn(self._recover(sim, inc.node))
        else:
            sim.send_to_repair(inc.node)
        return True

    def _recover(self, sim, node: int):
        for level, minutes in (("reset", self.reset_minutes), ("reboot", self.reboot_minutes)):
            yield minutes
            if sim.fix_in_place(node, level):
                sim.burn_in(node)
                return
        sim.send_to_repair(node, "reset and reboot did not clear it")


DES_POLICIES = ("flows-as-built", "gpu-remedy", "auto-replace")
# The flows as built, told what the Kubernetes-simulator run measured: its orchestration per fault class, on the
# stretched clock (real seconds / time scale, as the stack's downtime is read) and on the production clock (1×).
# The orchestration is given fault by fault (each fault's own measurement) or, coarser, as its class's mean.
CHECKS = ("stretched", "stretched, class mean", "production")


def orchestration_by_kind(played: list[Injected]) -> dict[str, float]:
    """Mean real seconds of orchestration per fault, by fault class, over the faults the stack handled alone."""
    by: dict[str, list[float]] = {}
    for e in played:
        if e.measured:
            by.setdefault(e.kind.split(" ")[0], []).append(e.orchestration_real)
    return {k: statistics.fmean(v) for k, v in by.items()}


def stack_downtime(played: list[Injected], scale: float, orchestration_factor: float) -> list[tuple[float, float]]:
    """The job's outages on the trace's clock (minutes): each fault's simulator waits read at 1/scale (they are
    simulated durations), its orchestration at `orchestration_factor` (1/scale: as measured, stretched; 1: the
    production clock). A fault not handled by the stack alone keeps its measured downtime."""
    down = []
    for e in played:
        seconds = (e.wait_real / scale + e.orchestration_real * orchestration_factor if e.measured
                   else e.down_real / scale)
        down.append((e.minute, e.minute + seconds / 60.0))
    return down


def des_trace(trace: list, training_nodes: int) -> list:
    """The trace as the discrete-event run plays it. Every Kubernetes-simulator rack holds job nodes (its spares are
    spread one to a rack), while the model keeps its spares in racks of their own after the job's: a rack event that
    lands on one of those would cost the model's job nothing and the stack's job a rack. So a rack event is played on
    the model's job racks (trace rack modulo their number); faults are played as drawn."""
    from dataclasses import replace

    from remedy.goodput.trace import RACK

    job_racks = max(1, training_nodes // SIM_RACK_SIZE)
    return [replace(e, rack=e.rack % job_racks) if e.kind == RACK else e for e in trace]


def run_des(sc, trace, hours: float, settings, played: list[Injected], scale: float) -> dict:
    from remedy.goodput.compare import make_policy
    from remedy.goodput.scenarios import Scenario
    from remedy.goodput.sim import FleetSim

    # what the Kubernetes simulator does not model, the discrete-event run is told too
    same = Scenario.model_validate({**sc.model_dump(), "days": hours / 24.0, "restart_loading_median_minutes": 0.0,
                                    "spare_join_minutes": 0.0, "warning_share": 0.0, "lemon_fraction": 0.0,
                                    "rack_size": SIM_RACK_SIZE})
    not_ready = settings.signals.node_not_ready_seconds / 60.0
    out = {}
    for name in DES_POLICIES + CHECKS:
        if name == "flows-as-built":
            policy = FlowsAsBuilt(not_ready_minutes=not_ready)
        elif name in CHECKS:  # the alert is posted at injection: no detection delay beyond the orchestration
            factor = 1.0 / scale if name.startswith("stretched") else 1.0
            per_class = {k: v * factor / 60.0 for k, v in orchestration_by_kind(played).items()}
            per_fault = {} if name.endswith("class mean") else {
                round(e.minute, 6): e.orchestration_real * factor / 60.0 for e in played if e.measured}
            policy = FlowsAsBuilt(not_ready_minutes=not_ready, detect_minutes=0.0, orchestration_minutes=per_class,
                                  orchestration_by_fault=per_fault)
        else:
            policy = make_policy(name, settings)
        sim = FleetSim(same, policy, seed=0, trace=des_trace(trace, same.training_nodes))
        res = sim.run()
        downs: Counter = Counter()
        per_fault: dict[float, float] = {}  # trace minute → the job's downtime from that fault (a rack: the longest)
        for inc in sim.incidents:
            if inc.slot is not None:
                minutes = (inc.resumed_at if inc.resumed_at is not None else sim.clock.now) - inc.start
                downs[inc.fault.kind.name] += minutes
                key = round(inc.start, 6)
                per_fault[key] = max(per_fault.get(key, 0.0), minutes)
        out[name] = {"result": res, "down_by_kind": downs, "down_by_fault": per_fault, "acc": sim.acc,
                     "checkpoint": (same.checkpoint_interval_minutes, same.checkpoint_cost_minutes),
                     "restarts": sum(i.automatic_retries for i in sim.incidents),
                     "by_hand": sum(1 for i in sim.incidents if i.human_acted)}
    return out


# ---- the report ------------------------------------------------------------------------------------------------------
def print_report(sc, trace, hours, args, st: dict, des: dict) -> None:
    from remedy.goodput.trace import timeline_goodput

    replay: Replay = st["replay"]
    scale = args.time_scale
    played = [e for e in replay.events if not e.skipped]
    down = [(e.minute, e.minute + e.down_real / scale / 60.0) for e in played]
    real = timeline_goodput(down, hours * 60.0, sc.checkpoint_interval_minutes, sc.checkpoint_cost_minutes)
    res = {name: des[name]["result"] for name in DES_POLICIES}
    acts = st["actions"]
    heads = ["real stack", "DES: flows as built", "DES: gpu-remedy", "DES: auto-replace"]
    print()
    print(f"{'':32}" + "".join(f"{h:>22}" for h in heads))

    def row(name: str, real_value: str, per_policy) -> None:
        print(f"{name:32}{real_value:>22}" + "".join(f"{per_policy(n, res[n], des[n]):>22}" for n in DES_POLICIES))

    row("job goodput", f"{real['goodput']:.2%}", lambda n, r, d: f"{r.goodput:.2%}")
    row("  job down, minutes", f"{real['down']:.0f}", lambda n, r, d: f"{r.minutes['down'] + r.minutes['failed_retry']:.0f}")
    row("  work rolled back, minutes", f"{real['rollback']:.0f}", lambda n, r, d: f"{r.minutes['rollback']:.0f}")
    node_faults = sum(1 for e in played if not e.kind.startswith("rack"))
    row("node faults / job failures", f"{node_faults}", lambda n, r, d: f"{r.job_failures}")
    row("rack events", f"{len(played) - node_faults}", lambda n, r, d: f"{r.rack_events}")
    ignored = st["incident_status"].get("ignored", 0)
    row("incidents (closed, no action)", f"{len(st['incidents'])} ({ignored})", lambda n, r, d: f"{r.incidents}")
    row("restarts in place", f"{acts.get('restart_app', 0)}", lambda n, r, d: f"{d['restarts']}")
    row("resets / reboots (on the job's path)", f"{acts.get('job_gpu-reset', 0)}/{acts.get('job_reboot', 0)}",
        lambda n, r, d: "-" if n == "gpu-remedy" else f"{d['acc'].fix_attempts.get('reset-gpu', 0)}/"
                                                      f"{d['acc'].fix_attempts.get('reboot', 0)}")
    row("spares used", f"{acts.get('claim_spare', 0)}", lambda n, r, d: f"{r.spares_consumed}")
    row("nodes sent to repair", f"{acts.get('set_state_repair', 0)}", lambda n, r, d: f"{r.nodes_to_repair}")
    row("handled by a person", f"{sum(1 for e in played if e.person)}", lambda n, r, d: f"{d['by_hand']}")
    row("healthy nodes touched", f"{len(st['touched'])}", lambda n, r, d: "0")
    # lost: sent by the simulator but never received (no retry here, as Alertmanager would), or received for a
    # fault that never became an incident
    lost = st["alerts_not_delivered"] + len(st["faults_without_incident"])
    row("alerts sent / received / lost", f"{st['alerts_posted']}/{st['alerts_received']:.0f}/{lost}", lambda n, r, d: "-")
    print(f"\nincidents by outcome (real stack): {dict(st['incident_status'])}")
    if st["touched"]:
        print(f"healthy nodes touched: {', '.join(st['touched'][:10])}")
    print("actions by class (ledger, real stack): " + ", ".join(f"{k} {v}" for k, v in sorted(acts.items())))
    real_by_kind: Counter = Counter()
    for e in played:
        real_by_kind[e.kind.split(" ")[0]] += e.down_real / scale / 60.0
    print("\njob downtime by fault class, simulated minutes:")
    print(f"  {'fault':24}{'n':>4}{'real stack':>12}" + "".join(f"{h[5:]:>20}" for h in heads[1:]))
    for kind in sorted(set(real_by_kind) | set(des["gpu-remedy"]["down_by_kind"])):
        n = sum(1 for e in played if e.kind.split(" ")[0] == kind)
        print(f"  {kind:24}{n:>4}{real_by_kind.get(kind, 0):>12.1f}"
              + "".join(f"{des[p]['down_by_kind'].get(kind, 0):>20.1f}" for p in DES_POLICIES))
    waits = [e.wait_real for e in played if e.measured]
    orch = [e.orchestration_real for e in played if e.measured]
    print(f"\nreal stack: {len(played)} faults replayed in {replay.wall_seconds:.0f} s of wall clock "
          f"({sum(1 for e in played if not e.settled)} did not settle, {sum(1 for e in played if e.person)} by a "
          f"person); per fault, real seconds (median): job down {statistics.median(e.down_real for e in played):.2f}"
          f" = simulator waits {statistics.median(waits) if waits else 0:.2f} + orchestration "
          f"{statistics.median(orch) if orch else 0:.2f}")
    compare(sc, hours, scale, played, des)


def compare(sc, hours: float, scale: float, played: list[Injected], des: dict) -> None:
    """The check: the real stack's goodput beside the discrete-event run of the same trace, given the orchestration
    time the stack measured (per fault class), on the stretched clock and on the production clock."""
    from remedy.goodput.trace import timeline_goodput

    horizon = hours * 60.0
    stretched = timeline_goodput(stack_downtime(played, scale, 1.0 / scale), horizon,
                                 sc.checkpoint_interval_minutes, sc.checkpoint_cost_minutes)
    production = timeline_goodput(stack_downtime(played, scale, 1.0), horizon,
                                  sc.checkpoint_interval_minutes, sc.checkpoint_cost_minutes)
    real = {"stretched": stretched, "stretched, class mean": stretched, "production": production}
    orchestration = orchestration_by_kind(played)
    print("\norchestration the stack measured (real seconds per fault beyond the simulator's own waits), the "
          "discrete-event run's input:")
    print(f"  {'fault':24}{'n':>4}{'real s':>9}{'stretched, sim. min':>22}")
    for kind, secs in sorted(orchestration.items()):
        n = sum(1 for e in played if e.measured and e.kind.split(" ")[0] == kind)
        print(f"  {kind:24}{n:>4}{secs:>9.2f}{secs / scale / 60:>22.1f}")
    print("\nwhat is compared: the job's goodput over this trace under the flows as built, measured on the real "
          "stack vs predicted by the discrete-event simulator given the same measured orchestration, on one clock")
    print(f"  {'clock (orchestration given to the model)':50}{'real stack':>12}{'discrete-event':>16}"
          f"{'difference':>13}   job down / rolled back, min (real; model)")
    labels = {"stretched": f"stretched ×{1 / scale:g} (each fault's own)",
              "stretched, class mean": f"stretched ×{1 / scale:g} (its class's mean)",
              "production": "production ×1 (each fault's own)"}
    worst = 0.0
    for name in CHECKS:
        r, m = des[name]["result"], real[name]
        diff = 100 * (m["goodput"] - r.goodput)
        if name != "stretched, class mean":  # the coarser input is shown, not held to the point
            worst = max(worst, abs(diff))
        print(f"  {labels[name]:50}{m['goodput']:>12.2%}{r.goodput:>16.2%}{diff:>+10.2f} pt   "
              f"{m['down']:.0f} / {m['rollback']:.0f}; {r.minutes['down'] + r.minutes['failed_retry']:.0f} / "
              f"{r.minutes['rollback']:.0f}")
    plain = des["flows-as-built"]["result"].goodput
    print(f"  (the model as shipped — a real fleet's 30-s detection, no orchestration — predicts {plain:.2%}; "
          f"production clock {100 * (production['goodput'] - plain):+.2f} points from it)")
    print("  they agree within 1 point of goodput on both clocks (each fault's own orchestration)" if worst <= 1.0
          else f"  MORE THAN 1 POINT APART ({worst:.2f} points): by fault class below")
    print("\nfault by fault on the stretched clock, simulated minutes of job downtime (waits: beyond the "
          "orchestration; the model's are its step durations):")
    print(f"  {'hour':>6} {'fault':22}{'needs':>9}{'real':>8}{'model':>8}{'waits real':>12}{'model':>8}{'path':>10}")
    model = des["stretched"]["down_by_fault"]
    for e in played:
        key = round(e.minute, 6)
        orch = e.orchestration_real / scale / 60 if e.measured else 0.0
        got = model.get(key)
        print(f"  {e.minute / 60:6.1f} {e.kind:22}{e.needs:>9}{e.down_real / scale / 60:8.1f}"
              + (f"{got:8.1f}" if got is not None else f"{'-':>8}")
              + f"{e.wait_real / scale / 60:12.1f}"
              + (f"{got - orch:8.1f}" if got is not None else f"{'-':>8}")
              + f"{'in place' if e.in_place else 'spare':>10}")
    person = [e for e in played if e.person]
    if person:
        print(f"  {len(person)} fault(s) left the job short until the on-call engineer replaced the node by hand "
              f"(kept at their measured downtime on both clocks).")
    if worst > 1.0:
        print("  where the two can part: (1) the model takes a fault's orchestration as one lump before its first "
              "step; the stack spreads it over the steps, so a fault can fall on the other side of a checkpoint;\n"
              "  (2) faults closer together than an incident lasts overlap in the model but were replayed one after "
              "the other;\n  (3) the model's step durations are the simulator's nominal ones (1 min to drain and "
              "reset, 4 min to drain and reboot); the stack also waits for Jobs to be scheduled and probed.")


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # worker threads of flow runs the stack stopped do not hold the process open
