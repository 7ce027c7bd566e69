"""What the takeover tests (tests/flows/test_takeover.py, test_recovery_takeover.py) and the fencing tests
(tests/flows/test_fencing.py) share: flow processes of their own, started warm, and the takeover of a run that
died or froze in one.

- `FlowZygote`: one process per pytest process (an xdist worker) that imports Prefect and the flows and runs one
  flow, once, then forks a real flow process per case (a fresh interpreter per case cost 3-5 CPU-s of imports).
- `start` / `go` / `kill_when`: a flow process per test that stops itself (SIGSTOP) right after the ledger write
  reaching a kill point (`KILL_POINTS`), and is killed there (SIGKILL).
- `StoppableFlowProcess`: one warm process per module that runs one flow call after another and stops itself with a
  real SIGSTOP at a step a test-side hook names (`stop_at`), then waits to be continued (reused, it costs less per
  case than a fork: measured).
- `lease_runs_out`, `stop_outside_a_write`, `recover`, `assert_settled`: the takeover itself and what it must leave.

Test code only: nothing here is loaded by gpu-remedy itself; the zygote and the stoppable process run this module
(`python -m tests.flows.takeover_helpers [zygote]`)."""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from remedy.domain.model import ActionOutcome, IncidentStatus, NodeState
from tests.approvals.helpers import flow_state, wait_for
from tests.fixtures.prefect import run_to_state_result

REPO = Path(__file__).resolve().parents[2]

# a lease long enough to ride out any stall of this shared machine (flow processes seen silent for over 4 s at load
# 20 on 2 cores, and losing a 10 s lease before the kill point at load 25): nobody waits it out, the test moves its
# ledger's clock past it (lease_runs_out)
LEASES = {"LEASES__TTL_SECONDS": 60, "LEASES__RENEW_SECONDS": 1, "LEASES__WATCHDOG_SECONDS": 0.2}
# the one case that waits for a real lease to run out: short, still well above a renewal
REAL_LEASES = {"LEASES__TTL_SECONDS": 10, "LEASES__RENEW_SECONDS": 0.2, "LEASES__WATCHDOG_SECONDS": 0.2}
SPARES = 2  # the simulator's sim fixture: 16 nodes, 2 spares


@pytest.fixture
def ledger_db(request) -> dict[str, object]:
    """The ledger the flow processes share (remedy_env's SQLite file, or a fresh PostgreSQL database), with the
    test's lease settings."""
    if request.param == "sqlite":
        return dict(LEASES)
    return LEASES | {"DB_URL": request.getfixturevalue("fresh_postgres_url")}


def lease_runs_out(led, run_id: str, what: str, *, real: bool = False) -> None:
    """The dead (or stopped) run's lease runs out: this process's ledger clock moves past it at once (its lease was
    renewed at the latest when the process was killed), or, `real`, we wait for the wall clock."""
    if not real:
        from remedy.domain.model import utcnow

        ahead = timedelta(seconds=LEASES["LEASES__TTL_SECONDS"] + 1)
        led.clock = lambda: utcnow() + ahead
    wait_for(what, lambda: led.run_gone(run_id), timeout=60, every=0.05)


def acts(led, incident_id: int, kind: str, outcome: ActionOutcome | None = None, *, not_node: str | None = None):
    """The incident's ledger rows of `kind` (with that outcome; not on `not_node`)."""
    return [a for a in led.actions(incident_id=incident_id, kind=kind)
            if (outcome is None or a.outcome is outcome) and (not_node is None or a.node != not_node)]


# where a flow process is killed (or stopped), by what the ledger shows then (the flow writes each action's row
# before it acts): evaluated in the flow process itself right after each action row it writes, where it stops
# itself (SIGSTOP) at once for the test to kill (kill_when), and by the test as a check
KILL_POINTS: dict[str, Callable[[Any, int, str], object]] = {
    "replace after cordon": lambda led, i, node: acts(led, i, "cordon_node", ActionOutcome.SUCCEEDED),
    "replace during drain": lambda led, i, node: acts(led, i, "drain_node", ActionOutcome.RUNNING),
    "replace after spare claim": lambda led, i, node: acts(led, i, "claim_spare"),
    "replace during promotion": lambda led, i, node: acts(led, i, "untaint_node", not_node=node),
    # fix-in-place's steps inside one rung (the ladder attempt row is running throughout)
    "fix after cordon": lambda led, i, node: acts(led, i, "cordon_node", ActionOutcome.SUCCEEDED),
    "fix during drain": lambda led, i, node: acts(led, i, "drain_node", ActionOutcome.RUNNING),
    "fix during reset": lambda led, i, node: acts(led, i, "job_gpu-reset", ActionOutcome.RUNNING),
    "fix during verify": lambda led, i, node: (acts(led, i, "job_gpu-reset", ActionOutcome.SUCCEEDED)  # the probe
                                               and acts(led, i, "job_nvml-probe", ActionOutcome.RUNNING)),
    # the reboot was issued (the simulator reboots by Job) and the node is not back yet
    "fix during reboot": lambda led, i, node: (acts(led, i, "job_reboot")
                                               and acts(led, i, "fix_reboot", ActionOutcome.RUNNING)),
    # triage's background repair: its reboot was issued off the critical path, the node is not back yet
    "repair during reboot": lambda led, i, node: any(
        a.detail.get("off_critical_path") for a in acts(led, i, "fix_reboot", ActionOutcome.RUNNING)),
}


def _flow_env() -> dict[str, str]:
    """A flow process's environment: this one's without REMEDY_* settings (another test's would linger; each job
    brings its own), with this session's Prefect API."""
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if not k.startswith("REMEDY_")}
    env["PREFECT_API_URL"] = PREFECT_API_URL.value()
    return env


def _remedy_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("REMEDY_")}


# ---- a flow process per test, killed at a point ------------------------------------------------------------------

class FlowZygote:
    """One process per module that imports Prefect and the flows once (the costly part of starting a flow process
    on this machine: 3-7 CPU-s each) and forks a flow process of its own per `go()`: each fork is a real process
    with the taking test's REMEDY_* settings and log, killed (SIGKILL) or stopped (SIGSTOP) like any. The zygote
    itself runs no flow and starts no thread (it checks), so forking it is safe; it reaps its children (their CPU
    stays in the test's record, tests/fixtures/cpu.py)."""

    def __init__(self, home: Path) -> None:
        from prefect.settings import PREFECT_API_URL

        self.home = home
        self.api = PREFECT_API_URL.value()
        self.boot = home / "zygote.log"
        with open(self.boot, "wb") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.flows.takeover_helpers", "zygote"],
                                         env=_flow_env(), cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log)
        self._ready = False

    def _line(self, timeout: float, what: str) -> dict[str, Any]:
        proc = self.proc
        assert proc.stdout is not None
        if not select.select([proc.stdout], [], [], timeout)[0]:
            pytest.fail(f"the flow zygote did not {what} in {timeout:.0f} s:\n{self.boot.read_text()[-3000:]}")
        line = proc.stdout.readline()
        if not line:
            pytest.fail(f"the flow zygote died:\n{self.boot.read_text()[-3000:]}")
        return json.loads(line)

    def fork(self, call: str, log_path, incident_id: int, stop_at: dict[str, Any] | None = None) -> int:
        if not self._ready:  # generous: importing took over 80 s at load 20 on this machine
            self._line(300, "import the flows")
            self._ready = True
        job = {"env": _remedy_env(), "log": str(log_path), "call": call, "incident_id": incident_id,
               "stop_at": stop_at}
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()
        return int(self._line(60, "fork")["pid"])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class FlowProcess:
    """A flow call in a process of its own (forked from the module's zygote at `go()`); what a test does with a
    Popen: poll, wait, send_signal, kill. Its exit code is not known here (the zygote reaps it): poll() says 0."""

    def __init__(self, zygote: FlowZygote, call: str, log_path, stop_at: dict[str, Any] | None) -> None:
        self.zygote, self.call, self.log_path, self.stop_at = zygote, call, log_path, stop_at
        self.pid = 0

    def go(self, incident_id: int) -> FlowProcess:
        self.pid = self.zygote.fork(self.call, self.log_path, incident_id, self.stop_at)
        return self

    def stopped(self) -> bool:
        return _stopped(self.pid)

    def poll(self) -> int | None:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return 0
        return 0 if state in ("Z", "X") else None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"flow process {self.pid}", timeout or 0)
            time.sleep(0.005)
        return 0

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_zygote: FlowZygote | None = None


@pytest.fixture(scope="module", autouse=True)
def warm_flow_processes(prefect_server, tmp_path_factory):
    """The flow zygote (`start`): autouse in every module that imports it. The first such module of a pytest
    process (an xdist worker) starts it, the next ones reuse it (it holds nothing of a test's: each fork gets its
    test's settings); it stops when the process exits."""
    from prefect.settings import PREFECT_API_URL

    global _zygote
    api = PREFECT_API_URL.value()
    if _zygote is None or _zygote.proc.poll() is not None or _zygote.api != api:
        if _zygote is not None:
            _zygote.close()
        _zygote = FlowZygote(tmp_path_factory.mktemp("warm-flows"))
        atexit.register(_zygote.close)
    return _zygote


def start(call: str, log_path, *, stop_at: str | None = None, node: str = "") -> FlowProcess:
    """`call` (a flow call using `incident_id`) for a flow process of its own, with this test's REMEDY_* settings
    and Prefect API, writing to `log_path`; the process starts, with the flows imported already, at `go()` with
    the incident id. `stop_at` (a KILL_POINTS key, about `node`): it stops itself (SIGSTOP) right after the ledger
    write that reaches that point, once; SIGCONT lets it go on."""
    assert _zygote is not None, "the module needs the warm_flow_processes fixture"
    assert stop_at is None or stop_at in KILL_POINTS, stop_at
    return FlowProcess(_zygote, call, log_path, None if stop_at is None else {"point": stop_at, "node": node})


def go(proc: FlowProcess, incident_id: int) -> FlowProcess:
    return proc.go(incident_id)


def wait_stopped_at(proc: FlowProcess, ready: Callable[[], object], log_path, timeout: float = 240.0) -> None:
    """Until the flow process has stopped itself at its `stop_at` point (a look at /proc, no ledger query every few
    ms); the ledger must show the point then. `ready` read every 0.25 s too, should the point be reached by a write
    the process's hook does not see."""
    # generous: on this shared machine at load 20 a flow process took over 80 s to reach its first fix step
    deadline = time.monotonic() + timeout
    last = 0.0
    while not proc.stopped():
        if proc.poll() is not None:
            pytest.fail(f"the flow process ended before the kill point:\n{log_path.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"kill point not reached in {timeout:.0f} s:\n{log_path.read_text()[-3000:]}")
        if time.monotonic() - last > 0.25:
            if ready():
                proc.send_signal(signal.SIGSTOP)
                break
            last = time.monotonic()
        time.sleep(0.005)
    assert ready(), "the flow process stopped before the ledger showed its kill point"


def kill_when(proc: FlowProcess, ready: Callable[[], object], log_path, timeout: float = 240.0) -> None:
    """SIGKILL the flow process at its `stop_at` point (`ready`: what the ledger shows there)."""
    wait_stopped_at(proc, ready, log_path, timeout)
    proc.kill()
    proc.wait()


# ---- one warm process per module, stopped with SIGSTOP at a step -------------------------------------------------

def _stopped(pid: int) -> bool:
    """The process is stopped (state T in /proc: a SIGSTOP took it), not merely waiting."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except FileNotFoundError:
        return False


class StoppableFlowProcess:
    """A flow process that imports Prefect and the flows once and then runs one flow call per `run()`, each with
    the calling test's REMEDY_* settings and log file. Before a call it loads a hook from test code (`hook`,
    "module:function", called with `step` and a `stop` callable; it returns an undo): the hook calls `stop()` at
    the step, which stops the whole process with a real SIGSTOP (`os.kill(getpid(), SIGSTOP)`: every thread of it,
    the lease renewal included) and, once continued, waits for `let_go()` — so a test may continue it for a moment
    (to leave a SQLite write it was stopped in) without the flow going past the step.

    The test sees the stop (`wait_stopped`), takes the incident over, then `let_go()`s it and reads the call's end
    (`result`). The process is reused for the next test; one left in an unknown state is replaced (`discard`)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.proc: subprocess.Popen | None = None
        self.boot = home / "stoppable-0.log"
        self.log_path = self.boot
        self._started = 0
        self._warming = False  # started, its "ready" line not read yet

    def _ensure(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self._started += 1
            boot = self.home / f"stoppable-{self._started}.log"
            with open(boot, "wb") as log:
                self.proc = subprocess.Popen([sys.executable, "-m", "tests.flows.takeover_helpers"], env=_flow_env(),
                                             cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
            self.boot = boot
            self._warming = True
        return self.proc

    def warm_up(self) -> None:
        """Start it now (its imports and a first flow run go on while the test sets up); `ready()` waits for it."""
        self._ensure()

    def ready(self, timeout: float = 300.0) -> None:
        """Until the process has imported everything and run its first flow."""
        proc = self._ensure()
        if not self._warming:
            return
        assert proc.stdout is not None
        if not select.select([proc.stdout], [], [], timeout)[0]:
            pytest.fail(f"the flow process was not ready in {timeout:.0f} s:\n{self.boot.read_text()[-3000:]}")
        line = proc.stdout.readline()
        if not line:
            pytest.fail(f"the flow process died while warming up:\n{self.boot.read_text()[-3000:]}")
        assert "ready" in json.loads(line), line
        self._warming = False

    def run(self, call: str, log_path: Path, *, hook: str, step: str) -> None:
        """Start `call` (a flow call with `return_state=True`) in the process, stopping at `step`."""
        self.ready()  # a fresh process (the first, or one after a discarded one) is warmed up first
        proc = self._ensure()
        self.log_path = log_path
        job = {"env": _remedy_env(), "log": str(log_path), "call": call, "hook": hook, "step": step}
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(job) + "\n").encode())
        proc.stdin.flush()

    def _said(self) -> str:
        text = self.log_path.read_text() if self.log_path.exists() else ""
        return text[-3000:] or self.boot.read_text()[-3000:]

    def wait_stopped(self, timeout: float = 180.0) -> None:
        """Until the process has stopped itself at the step; fails if the call ended first."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        deadline = time.monotonic() + timeout
        while not _stopped(proc.pid):
            if proc.poll() is not None:
                pytest.fail(f"the flow process died before the step:\n{self._said()}")
            if select.select([proc.stdout], [], [], 0)[0]:
                pytest.fail(f"the run ended before the step: {proc.stdout.readline().decode()}\n{self._said()}")
            if time.monotonic() > deadline:
                pytest.fail(f"the step was not reached in {timeout:.0f} s:\n{self._said()}")
            time.sleep(0.005)

    def let_go(self) -> None:
        """SIGCONT, and the stopped call goes on from the step."""
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        proc.send_signal(signal.SIGCONT)
        proc.stdin.write(b"go\n")
        proc.stdin.flush()

    def result(self, timeout: float = 120.0) -> dict[str, Any]:
        """How the continued call ended: {"type": the state's type, "message": its message} (or {"error": …})."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        if not select.select([proc.stdout], [], [], timeout)[0]:
            self.discard()
            pytest.fail(f"the continued run did not end in {timeout:.0f} s:\n{self._said()}")
        line = proc.stdout.readline()
        if not line:
            pytest.fail(f"the flow process died:\n{self._said()}")
        return json.loads(line)

    def discard(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    close = discard


def _child_stop() -> None:
    """In the child, at the step: stop this whole process (SIGSTOP), then hold the step until the test says go."""
    os.kill(os.getpid(), signal.SIGSTOP)
    sys.stdin.readline()


def warm_up() -> None:
    """A process's first flow run costs many times a later one (the API client, the task engine, the cluster
    client's imports, the ledger's first migration): pay it before the first test waits for it."""
    import tempfile

    from prefect import flow, task

    import remedy.adapters.kubernetes  # noqa: F401 - what every step's task imports first
    from remedy.ledger import Ledger

    with tempfile.TemporaryDirectory() as home:
        Ledger(f"sqlite:///{home}/warm-up.db").migrate()

    @task
    def nothing() -> None:
        return None

    @flow(name="warm-up")
    def warm_up() -> None:
        nothing()

    warm_up()


def _child_loop() -> None:
    """The child of StoppableFlowProcess: imports once, then one job per line of stdin; results on stdout."""
    import importlib

    from prefect.settings import temporary_settings

    from flows.fix_in_place import fix_in_place
    from flows.replace_node import replace_node
    from flows.triage import triage
    from remedy import runtime

    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed before the first job goes to the boot log, not into the results
    namespace = {"fix_in_place": fix_in_place, "replace_node": replace_node, "triage": triage}
    # as the test harness has it (tests/fixtures/prefect.py): no heartbeat thread adding ~1 s to every flow call
    with temporary_settings(updates={"flows.heartbeat_frequency": None}):
        warm_up()
        results.write(json.dumps({"ready": os.getpid()}) + "\n")
        while line := sys.stdin.readline():
            job = json.loads(line)
            for key in [k for k in os.environ if k.startswith("REMEDY_")]:
                del os.environ[key]
            os.environ.update(job["env"])
            runtime.reset()
            sys.stdout.flush()
            sys.stderr.flush()
            log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
            module, _, name = job["hook"].partition(":")
            undo = getattr(importlib.import_module(module), name)(job["step"], _child_stop)
            try:
                state = eval(job["call"], namespace)  # noqa: S307 - test code, the test's own call
                said: dict[str, Any] = {"type": state.type.value, "message": state.message or ""}
            except BaseException as exc:  # noqa: BLE001 - reported to the test, which fails with it
                said = {"error": f"{type(exc).__name__}: {exc}"}
            finally:
                undo()
            results.write(json.dumps(said) + "\n")


def stop_outside_a_write(proc, db_url: str, *, stop: bool = True) -> None:
    """SIGSTOP `proc` (or, stop=False, check one already stopped), but not inside a write transaction: a process
    frozen holding SQLite's write lock blocks every writer until it continues (one reason production runs the ledger
    on PostgreSQL, where a frozen client holds only its own rows); on PostgreSQL, frozen inside its lease renewal,
    it holds its own lease row, which the takeover must end. If it is inside one, let it run a moment and stop it
    again."""
    if stop:
        proc.send_signal(signal.SIGSTOP)
    inside = _sqlite_write_held if db_url.startswith("sqlite") else _postgres_transaction_open
    for _ in range(200):
        if not inside(db_url):
            return
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.01)
        proc.send_signal(signal.SIGSTOP)
    raise AssertionError("the run never left its write transaction")


def _sqlite_write_held(db_url: str) -> bool:
    import sqlite3

    path = db_url.split("///", 1)[-1]
    assert os.path.exists(path), path  # else sqlite3 would create an empty file and the check would prove nothing
    con = sqlite3.connect(path, timeout=0.05)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.rollback()
        return False
    except sqlite3.OperationalError:  # locked: the stopped process is inside a write
        return True
    finally:
        con.close()


def _postgres_transaction_open(db_url: str) -> bool:
    """Another session of the test's database (only the stopped process has one) is in a transaction or a
    statement."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    engine = create_engine(db_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return bool(conn.execute(text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state <> 'idle'")).scalar_one())
    finally:
        engine.dispose()


# ---- the takeover and what it must leave -------------------------------------------------------------------------

def recover(runtime, incident_id: int, how: str, rerun: Callable[[], dict]) -> dict:
    """After the kill: the dead run still looks alive until its lease runs out; then a new run takes over, started
    by a person (`rerun`) or by the watchdog's re-announce (triage with the trigger's parameters)."""
    from remedy.deployments import INCIDENT_TRIGGER, trigger_parameters
    from remedy.receiver.watchdog import LeaseWatchdog

    led = runtime.ledger()
    held = led.get_incident(incident_id)
    holder = held.flow_run_id
    assert held.status is IncidentStatus.ACTING and led.get_lease(holder) is not None
    lease_runs_out(led, holder, "the dead run's lease to run out")
    if how == "rerun":
        out = rerun()
    else:
        sent: list[dict] = []
        dog = LeaseWatchdog(led, sent.extend, every_seconds=0.2, max_reannounces=3)
        [done] = dog.sweep()
        assert done["action"] == "reannounced" and done["from"] == holder
        assert dog.sweep() == []  # once: the incident is open for the new run now
        [event] = sent
        assert event["payload"]["reannounce"] == 1 and event["payload"]["incident_id"] == incident_id
        from flows.triage import triage

        out = run_to_state_result(triage, **trigger_parameters(INCIDENT_TRIGGER, event["payload"]))
        assert out["status"] not in ("duplicate", "already-handled", "skipped"), out
        out = out["outcome"]
    # every run of the dead process (the holder, a subflow under it) is shown Crashed in Prefect and holds nothing;
    # the handover is in the ledger
    dead = dead_process_runs(led, holder)
    assert holder in dead and all(flow_state(run) == "CRASHED" for run in dead), dead
    assert all(led.get_lease(run).ended_at is not None for run in dead)
    handed = led.actions(incident_id=incident_id, kind="take_over_incident" if how == "rerun" else "reannounce_incident")
    assert [a.detail["from"] for a in handed] == [holder]
    return out


def dead_process_runs(led, holder: str) -> list[str]:
    from sqlalchemy import select as sql_select

    from remedy.ledger import schema

    r = schema.run_leases.c
    with led.engine.connect() as conn:
        process = conn.execute(sql_select(r.process).where(r.run_id == holder)).scalar_one()
        return [row.run_id for row in conn.execute(sql_select(r.run_id).where(r.process == process))]


def assert_settled(runtime, incident_id: int, node: str) -> None:
    """Settled, nothing left running, no incident stranded, and a cordoned node has an owner: a repair (replaced)
    or a person (escalated), never a dead run."""
    led = runtime.ledger()
    inc = led.get_incident(incident_id)
    assert inc.status in (IncidentStatus.RESOLVED, IncidentStatus.ESCALATED), inc
    assert [a for a in led.actions(incident_id=incident_id) if a.outcome is ActionOutcome.RUNNING] == []
    assert led.stranded_incidents() == []
    if runtime.cluster().get_node(node).unschedulable:
        assert inc.status is IncidentStatus.ESCALATED or led.get_node(node).state is NodeState.REPAIR, inc


def spares_left(runtime) -> int:
    return [n.labels.get("remedy.io/pool") for n in runtime.cluster().list_gpu_nodes()].count("spare")


def _stop_at(stop_at: dict[str, Any], incident_id: int) -> None:
    """In a forked flow process: after each action row the ledger writes (start_action, finish_action), stop this
    whole process (SIGSTOP: every thread, the lease renewal too) the first time KILL_POINTS[point] holds. Test code
    only: the write itself runs unchanged."""
    import threading

    from remedy.ledger import Ledger

    reached = KILL_POINTS[stop_at["point"]]
    node = stop_at["node"]
    state = {"fired": False}
    checking = threading.local()

    def wrap(method: str) -> None:
        original = getattr(Ledger, method)

        def then_look(led, *args, **kwargs):
            out = original(led, *args, **kwargs)
            if not state["fired"] and not getattr(checking, "now", False):
                checking.now = True  # the look reads the ledger: not through this hook again
                try:
                    if reached(led, incident_id, node):
                        state["fired"] = True
                        os.kill(os.getpid(), signal.SIGSTOP)
                finally:
                    checking.now = False
            return out

        setattr(Ledger, method, then_look)

    for method in ("start_action", "finish_action"):
        wrap(method)


def _zygote_loop() -> None:
    """The FlowZygote process: imports once, then forks one flow process per line of stdin (its pid on stdout)."""
    import gc
    import threading

    from prefect.settings import temporary_settings

    from flows.fix_in_place import fix_in_place
    from flows.replace_node import replace_node
    from flows.triage import triage
    from remedy.adapters import kubernetes  # noqa: F401 - what every step's task imports first

    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed goes to the boot log, not into the answers
    namespace = {"fix_in_place": fix_in_place, "replace_node": replace_node, "triage": triage}

    def reap(_signum, _frame) -> None:  # reaped here, a fork's CPU counts in this process's (the test's record)
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    signal.signal(signal.SIGCHLD, reap)
    # a process's first flow run costs several times a later one: paid here once, not in every fork (Prefect resets
    # its background loop and services in a forked child: prefect._internal.concurrency, os.register_at_fork)
    with temporary_settings(updates={"flows.heartbeat_frequency": None}):
        warm_up()
    # what was built so far stays out of the collector's sweeps: a fork that runs one would touch (and so copy) every
    # page of its parent's objects
    gc.freeze()
    answers.write(json.dumps({"ready": os.getpid(), "threads": threading.active_count()}) + "\n")
    while line := sys.stdin.readline():
        job = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                answers.close()
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)  # the zygote's job lines are not this process's
                os.close(null)
                for key in [k for k in os.environ if k.startswith("REMEDY_")]:
                    del os.environ[key]
                os.environ.update(job["env"])
                if job.get("stop_at"):
                    _stop_at(job["stop_at"], int(job["incident_id"]))
                log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.close(log)
                # as the test harness has it (tests/fixtures/prefect.py): no heartbeat thread adding ~1 s to every
                # flow call; a dead run is shown Crashed by the takeover (remedy.receiver.watchdog), not by Prefect
                with temporary_settings(updates={"flows.heartbeat_frequency": None}):
                    exec(job["call"], dict(namespace, incident_id=int(job["incident_id"])))  # noqa: S102 - test code
                code = 0
            except BaseException:  # noqa: BLE001 - said in the flow's log, which the test prints when it fails
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        answers.write(json.dumps({"pid": pid}) + "\n")


if __name__ == "__main__":
    _zygote_loop() if sys.argv[1:] == ["zygote"] else _child_loop()
