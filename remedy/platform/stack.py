"""`remedy up`: the embedded stack on one machine, and `remedy receiver serve` for production.

    remedy up  →  its own Prefect server (or the one PREFECT_API_URL / --prefect-url names)
                  + every deployment in remedy.deployments with its triggers
                  + the warm dispatcher (runs their flow runs in this process) + the alert receiver (uvicorn)
                  + the cluster simulator (63 nodes), whose fault injector posts its alerts to the receiver
                  + a Prometheus scraping the simulator's NFS mountstats, which the nfs-audit deployment reads.

Then `remedy sim inject xid 64 --node gpu042 --url <sim>` opens an incident, whose event triggers a `triage` run
that shows up in the Prefect UI and starts the remediation. Ctrl-C stops everything it started: open runs are
cancelled (no Resume button left live), the parts stop, and so does the Prefect server it started; `remedy down`
(from another terminal) does the same, and also stops the Prefect server `remedy demo` leaves running.

No default secrets: `remedy up` generates the receiver's tokens for its session when none are configured (and wires
the simulator's alerts with it); `remedy receiver serve` refuses a non-loopback address without a token.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import secrets
import signal
import sys
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from remedy.cli_args import http_url, port_number, positive_float, positive_int
from remedy.domain.durations import human_duration
from remedy.errors import RemedyError

log = logging.getLogger(__name__)
UP_ROLE = "remedy-up"  # its record in <workdir>/running.json (remedy.platform.processes)


def add_prefect_arguments(p: argparse.ArgumentParser) -> None:
    """--prefect-port / --prefect-url, shared by `remedy up` and `remedy demo`."""
    p.add_argument("--prefect-port", type=port_number, default=None,
                   help="port of remedy's own Prefect server (UI): default $REMEDY_PREFECT_PORT, else 4200; "
                   "0 = any free port")
    p.add_argument("--prefect-url", type=http_url, default=None,
                   help="use this Prefect API (…/api) instead of starting one (default $PREFECT_API_URL)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("up", help="start the embedded stack: Prefect, deployments, dispatcher, receiver, simulator")
    p.add_argument("--workdir", default="var/stack", help="where the ledger and the Prefect server keep their files")
    add_prefect_arguments(p)
    p.add_argument("--receiver-port", type=port_number, default=None,
                   help="alert receiver port (default: settings; 0 = free)")
    p.add_argument("--sim-port", type=port_number, default=8001, help="simulator port (0 = free)")
    p.add_argument("--prometheus-port", type=port_number, default=0,
                   help="port of the Prometheus that scrapes the simulator's NFS mountstats for nfs-audit (default 0: "
                   "a free port); none is started when nfs.prometheus_url is configured")
    p.add_argument("--nodes", type=positive_int, default=63, help="simulated nodes (default 63: 60 active, 3 spares)")
    p.add_argument("--time-scale", type=positive_float, default=0.05,
                   help="simulated durations × this (default 0.05: a 10 min reboot takes 30 s; 1.0 = real time)")
    p.add_argument("--json", action="store_true", help="print the URLs as one JSON line once everything is up")
    p.set_defaults(func=_up)

    d = sub.add_parser("down", help="stop what `remedy up` and `remedy demo` left running (and nothing else)")
    d.add_argument("--workdir", action="append", default=None,
                   help="a --workdir given to `remedy up`/`remedy demo` (repeatable; default var/stack and var/demo)")
    d.set_defaults(func=_down)

    r = sub.add_parser("receiver", help="the Alertmanager webhook receiver")
    rsub = r.add_subparsers(dest="receiver_command", metavar="SUBCOMMAND")
    serve = rsub.add_parser("serve", help="serve the receiver (config from settings; announces to PREFECT_API_URL)")
    serve.add_argument("--host", default=None, help="bind address (default receiver.host)")
    serve.add_argument("--port", type=port_number, default=None, help="port (default receiver.port)")
    serve.set_defaults(func=_receiver_serve)
    r.set_defaults(func=lambda args: (r.print_help(), 2)[1])


@dataclass
class Stack:
    """Handles of a running stack (for tests and the bench too): stop() ends every part it started."""

    api_url: str
    sim: Any
    receiver: Any
    dispatcher: Any
    deployment_ids: dict[str, Any]
    ledger: Any
    parts: list[Any] = field(default_factory=list)
    prometheus: Any = None  # remedy.platform.prometheus.StackPrometheus, when the stack started one
    workdir: Path | None = None
    previous_ledger: Path | None = None  # the last session's ledger, kept when this one started fresh
    approvers: tuple[list[str], bool] = ([], False)  # who answers in the form, and whether it is the local user
    own_env: dict[str, str] = field(default_factory=dict)  # settings the stack chose itself: undone by stop()

    @property
    def urls(self) -> dict[str, str]:
        urls = {"prefect_ui": self.api_url.removesuffix("/api"), "prefect_api": self.api_url,
                "receiver": self.receiver.alerts_url, "metrics": self.receiver.url + "/metrics",
                "simulator": self.sim.url}
        if self.prometheus is not None:
            urls["prometheus"] = self.prometheus.url
        return urls

    def stop(self, *, cancel_runs: bool = True) -> list[str]:
        """Stop every part; runs still open (paused for approval, waiting, running) are cancelled first, so none is
        left with a live Resume button. Returns the names of the cancelled runs. cancel_runs=False when the Prefect
        server is gone: there is nobody to tell, and its client would retry for half a minute."""
        cancelled: list[str] = []
        for part in reversed(self.parts):
            if part is self.dispatcher and cancel_runs:
                try:
                    cancelled = cancel_open_runs([run_id for run_id, _ in self.dispatcher.started_runs])
                except Exception as exc:  # the server may be gone already: say so, stop the rest anyway
                    log.warning("could not cancel the stack's open runs: %s", exc)
            try:
                part.stop()
            except Exception:
                pass
        for key, value in self.own_env.items():  # a later stack or test in this process must not inherit them
            if os.environ.get(key) == value:
                del os.environ[key]
        return cancelled


CANCEL_MESSAGE = "remedy up stopped before this run finished: cancelled, nothing more is done by it"
DOWN_MESSAGE = ("stopped by remedy down: the `remedy up` that started this run was no longer running; cancelled, "
                "nothing more is done by it")


def cancel_open_runs(run_ids: list[Any], message: str = CANCEL_MESSAGE, client: Any = None) -> list[str]:
    """Cancel every run in `run_ids` and every subflow run under them that is not finished yet. Names cancelled."""
    if not run_ids:
        return []
    if client is None:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            return cancel_open_runs(run_ids, message, client)
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, FlowRunFilterParentFlowRunId
    from prefect.states import Cancelled

    runs = list(client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=list(run_ids)))))
    seen = {r.id for r in runs}
    frontier = list(seen)
    while frontier:  # walk down the subflow tree: a paused child is what shows the Resume button
        children = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=frontier)))
        frontier = [c.id for c in children if c.id not in seen]
        seen.update(frontier)
        runs.extend(c for c in children if c.id in frontier)
    names: list[str] = []
    for run in reversed(runs):  # children first: a parent must not see its child's cancellation as news
        if run.state is not None and not run.state.is_final():
            client.set_flow_run_state(run.id, Cancelled(message=message), force=True)
            names.append(run.name)
    return names


def cancel_left_runs(entry: dict[str, Any]) -> list[str]:
    """`remedy down` after a `remedy up` that could not clean up (killed): cancel the runs of its deployments created
    since it started that are still open, from the record it left (api_url, since, deployment ids)."""
    from datetime import datetime

    api_url, since, deployments = entry.get("api_url"), entry.get("since"), entry.get("deployments") or []
    from remedy.platform.prefect_server import healthy

    if not (api_url and since and deployments) or not healthy(api_url):  # no server left: no run left open in it
        return []
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterDeploymentId

    started = datetime.fromisoformat(since)
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_KEY

    secret = [getattr(v, "get_secret_value", lambda v=v: v)() for v in (PREFECT_API_KEY.value(),
                                                                      PREFECT_API_AUTH_STRING.value())]
    with SyncPrefectClient(api_url, api_key=secret[0], auth_string=secret[1]) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            deployment_id=FlowRunFilterDeploymentId(any_=list(deployments))))
        roots = [r.id for r in runs if r.created is None or r.created >= started]
        return cancel_open_runs(roots, DOWN_MESSAGE, client)


def apply_deployments(specs=None, *, triggers_enabled: bool = True) -> tuple[dict[str, Any], dict[Any, Any]]:
    """Create/update every deployment (with triggers and schedules) on the current Prefect API.

    Returns (name → deployment id, deployment id → flow). A missing flow module raises before anything is applied.
    """
    from remedy.deployments import DEPLOYMENTS, check_entrypoints, runner_deployment

    specs = DEPLOYMENTS if specs is None else specs
    flows = check_entrypoints(specs)
    ids, by_id = {}, {}
    for spec in specs:
        dep_id = runner_deployment(spec, flows[spec.name], triggers_enabled=triggers_enabled).apply()
        ids[spec.name], by_id[dep_id] = dep_id, flows[spec.name]
    return ids, by_id


def start_stack(*, workdir: Path, api_url: str, nodes: int = 63, spares: int = 3, time_scale: float = 0.05,
                sim_port: int = 0, receiver_host: str = "127.0.0.1", receiver_port: int = 0,
                settings_overrides: dict[str, Any] | None = None, fresh_ledger: bool = False,
                start_triage: str = "direct", prometheus_port: int | None = None) -> Stack:
    """Start simulator, ledger, deployments, dispatcher and receiver against a running Prefect API.

    start_triage: "direct" (default) — the stack creates each incident's triage run itself right after Prefect took
    the event (the trigger is applied disabled); "trigger" — Prefect's event trigger creates it (production's path,
    seconds slower here: see remedy.platform.dispatcher.DirectTriageSink).
    prometheus_port: start a Prometheus scraping the simulator's NFS mountstats on this port (0 = free) and point
    nfs.prometheus_url at it, unless the settings name one already; None: none (remedy.platform.prometheus).
    """
    if start_triage not in ("direct", "trigger"):
        raise RemedyError(f"start_triage must be 'direct' or 'trigger', got {start_triage!r}")
    from remedy import runtime
    from remedy.platform.dispatcher import Dispatcher
    from remedy.platform.prefect_server import point_clients_at
    from remedy.receiver.server import ReceiverServer, build_receiver
    from remedy.settings.triage import triage_settings
    from remedy.sim.cluster import build_cluster
    from remedy.sim.server import SimServer

    workdir.mkdir(parents=True, exist_ok=True)
    ledger_file = workdir / "ledger.db"
    previous = start_ledger_fresh(ledger_file) if fresh_ledger else None
    parts: list[Any] = []
    try:
        sim = SimServer(build_cluster(nodes=nodes, spares=spares, time_scale=time_scale), port=sim_port).start()
        parts.append(sim)
        point_clients_at(api_url)
        os.environ["REMEDY_CLUSTER__MODE"] = "simulator"
        os.environ["REMEDY_CLUSTER__SIMULATOR_URL"] = sim.url
        os.environ["REMEDY_DB_URL"] = f"sqlite:///{ledger_file.resolve()}"
        for key, value in (settings_overrides or {}).items():
            os.environ[key] = str(value)
        runtime.reset()
        if _generate_tokens(runtime.settings()):
            runtime.reset()
        settings = runtime.settings()
        prometheus = None
        if prometheus_port is not None:
            prometheus = _start_prometheus(workdir, prometheus_port, sim.url, settings)
            if prometheus is not None:
                parts.append(prometheus)
                runtime.reset()
                settings = runtime.settings()
        own_env = {}
        if _archive_locally(workdir, settings):
            own_env["REMEDY_AWS__ARCHIVE_DIR"] = os.environ["REMEDY_AWS__ARCHIVE_DIR"]
            runtime.reset()
            settings = runtime.settings()
        led = runtime.ledger()
        _adopt_fleet(runtime)

        ids, flows = apply_deployments(triggers_enabled=start_triage == "trigger")
        dispatcher = Dispatcher(flows, poll_seconds=triage_settings(settings).dispatcher_poll_seconds).start()
        parts.append(dispatcher)
        receiver = build_receiver(settings, led, api_url=api_url, on_sent=dispatcher.wake,
                                  node_lister=lambda: runtime.cluster().list_gpu_nodes(), cluster=runtime.cluster)
        if start_triage == "direct" and receiver.announcer is not None:
            from remedy.deployments import INCIDENT_TRIGGER
            from remedy.platform.dispatcher import DirectTriageSink

            announcer = receiver.announcer
            announcer.sink = DirectTriageSink(announcer.sink, ids["triage"], INCIDENT_TRIGGER, dispatcher)
        server = ReceiverServer(receiver, host=receiver_host, port=receiver_port).start()
        parts.append(server)
        sim.cluster.alert_url = server.alerts_url
        sim.cluster.alert_token = settings.receiver.token.get_secret_value()
        if _warnings_to_receiver(settings, server.alerts_url):
            own_env[WARNINGS_URL_ENV] = server.alerts_url
            runtime.settings.cache_clear()  # settings only: the receiver keeps the ledger it was built with
        return Stack(api_url=api_url, sim=sim, receiver=server, dispatcher=dispatcher, deployment_ids=ids,
                     ledger=led, parts=parts, prometheus=prometheus, own_env=own_env, workdir=workdir,
                     previous_ledger=previous)
    except BaseException:
        for part in reversed(parts):
            part.stop()
        if os.environ.get("REMEDY_AWS__ARCHIVE_DIR") == str((workdir / "archive").resolve()):
            del os.environ["REMEDY_AWS__ARCHIVE_DIR"]
        raise


PREVIOUS_LEDGER = "ledger.previous.db"


def start_ledger_fresh(ledger_file: Path) -> Path | None:
    """The simulator builds a new cluster every session, so the ledger starts new with it: an old ledger would hold
    incidents, cordons and spares of nodes the new cluster never had (a node carrying the job read as a spare).
    The last session's ledger is kept beside it as ledger.previous.db; returns its path when there was one."""
    kept = None
    if ledger_file.exists():
        kept = ledger_file.with_name(PREVIOUS_LEDGER)
        ledger_file.replace(kept)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{ledger_file}{suffix}").unlink(missing_ok=True)
    return kept


def _start_prometheus(workdir: Path, port: int, sim_url: str, settings) -> Any:
    """The stack's Prometheus for the NFS audit, and nfs.prometheus_url pointed at it. None when the settings name a
    Prometheus already (config or REMEDY_NFS__PROMETHEUS_URL) or no `prometheus` binary is installed (said at start)."""
    from remedy.platform.prometheus import URL_ENV, PrometheusNotInstalled, start_prometheus

    default = type(settings.nfs).model_fields["prometheus_url"].default
    if os.environ.get(URL_ENV) or settings.nfs.prometheus_url != default:  # the operator named one
        return None
    try:
        prometheus = start_prometheus(workdir, port, sim_url)
    except PrometheusNotInstalled as exc:
        log.warning("%s: the nfs-audit deployment has no Prometheus to read", exc)
        return None
    os.environ[URL_ENV] = prometheus.url
    return prometheus


WARNINGS_URL_ENV = "REMEDY_LEMON__EARLY_WARNING__SCAN__RECEIVER_URL"


def _warnings_to_receiver(settings, alerts_url: str) -> bool:
    """This stack runs no Alertmanager: the warning scan posts its findings straight to the stack's receiver, unless
    the operator named an Alertmanager (or a receiver) for it. Returns whether the setting was changed."""
    scan = settings.lemon.early_warning.scan
    if scan.receiver_url or scan.alertmanager_url != type(scan).model_fields["alertmanager_url"].default:
        return False
    os.environ[WARNINGS_URL_ENV] = alerts_url
    return True


def _archive_locally(workdir: Path, settings) -> bool:
    """No S3 configured (no endpoint, no AWS credentials): RMA reports and audits go to <workdir>/archive, so the
    flows that archive work under the stack. Returns whether the setting was changed."""
    aws = settings.aws
    if aws.archive_dir or aws.endpoint_url or any(k in os.environ for k in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE")):
        return False
    os.environ["REMEDY_AWS__ARCHIVE_DIR"] = str((workdir / "archive").resolve())
    return True


def _generate_tokens(settings) -> bool:
    """No default secrets: a token left unset gets a random one for this stack's session (the simulator's alerts
    and the demo's AutoApprover read it from the settings). Returns whether any was generated."""
    generated = False
    for name, env in (("token", "REMEDY_RECEIVER__TOKEN"), ("execute_token", "REMEDY_RECEIVER__EXECUTE_TOKEN")):
        if not getattr(settings.receiver, name).get_secret_value():
            os.environ[env] = secrets.token_urlsafe(24)
            generated = True
    return generated


def _adopt_fleet(runtime) -> None:
    """Every simulated node into the ledger; spares as the simulator builds them: validated by burn-in."""
    led = runtime.ledger()
    nodes = runtime.cluster().list_gpu_nodes()
    led.upsert_nodes(nodes)
    for node in nodes:
        if node.state is not None and node.state.value == "spare":
            led.transition(node.name, node.state, reason="adopted from pool label", requested_by="remedy up")
            led.record_validation(node.name, level="standard", passed=True, requested_by="remedy up",
                                  summary={"source": "simulator: spares are built pre-validated"})


def _up(args: argparse.Namespace) -> int:
    from remedy.config import load_settings
    from remedy.platform import processes
    from remedy.platform.prefect_server import (
        offline_env,
        point_clients_at,
        port_in_use,
        port_taken_message,
        stop_server,
        use_server,
    )

    workdir = Path(args.workdir)
    settings = load_settings(args.config)
    port = settings.receiver.port if args.receiver_port is None else args.receiver_port
    for taken, flag in ((args.sim_port, "--sim-port"), (port, "--receiver-port"),
                        (args.prometheus_port, "--prometheus-port")):
        if taken and port_in_use(taken, "127.0.0.1"):
            raise RemedyError(port_taken_message(taken, flag))
    if args.config:
        os.environ["REMEDY_CONFIG"] = args.config
    from remedy.approvals.model import APPROVERS_ENV, default_approver

    defaulted = not settings.approvals.approvers  # the first approval can be answered at once: by the local user
    if defaulted:
        os.environ[APPROVERS_ENV] = json.dumps([default_approver()])
    exit_code, died, server_gone = 0, None, False
    with _stop_on_sigterm(), processes.recorded(workdir, UP_ROLE):
        server = use_server(workdir, port=args.prefect_port, named_url=args.prefect_url,
                            say=lambda msg: print(msg, file=sys.stderr if args.json else sys.stdout, flush=True))
        point_clients_at(server.api_url, offline_env(workdir / "prefect") if server.owned else None)
        since = datetime.now(UTC).isoformat()
        stack = None
        try:
            stack = start_stack(workdir=workdir, api_url=server.api_url, nodes=args.nodes, time_scale=args.time_scale,
                                sim_port=args.sim_port, receiver_host=settings.receiver.host, receiver_port=port,
                                prometheus_port=args.prometheus_port, fresh_ledger=True)
            from remedy import runtime

            stack.approvers = (list(runtime.settings().approvals.approvers), defaulted)
            # what `remedy down` needs to cancel this stack's runs should this process die without cleaning up
            processes.record(workdir, UP_ROLE, os.getpid(), api_url=server.api_url, since=since,
                             deployments=[str(i) for i in stack.deployment_ids.values()])
            _announce(stack, server, args)
            died = supervise(stack, server)
            if died:
                logging.disable(logging.CRITICAL)  # the parts' own complaints about it would bury the one line
                print(f"remedy up: {died}; stopping the stack", file=sys.stderr, flush=True)
                exit_code = 1
        except KeyboardInterrupt:
            pass
        finally:
            _say("stopping…")
            server_gone = bool(died) and "Prefect server" in died
            cancelled = stack.stop(cancel_runs=not server_gone) if stack is not None else []
            if cancelled:
                _say(f"cancelled {len(cancelled)} open run(s): {', '.join(cancelled)}")
            # what is left are daemon threads of cancelled runs and Prefect's event workers: their complaints about
            # the server going away are expected, and none may write to stderr while the interpreter shuts down
            logging.disable(logging.CRITICAL)
            if server.owned:
                stop_server(workdir)  # also forgets the record of a server that died
                if not server_gone:
                    _say(f"stopped remedy's Prefect server ({server.ui_url})")
    _exit_now(exit_code)
    return exit_code


def _say(line: str) -> None:
    """A line on stdout that cannot stop the clean-up: under `remedy up | tee log`, Ctrl-C ends tee too, and a
    print into the closed pipe (BrokenPipeError) would leave the server and its parts running."""
    try:
        print(line, flush=True)
    except OSError:
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the rest of this process's life


def _exit_now(code: int) -> None:
    """Leave without the interpreter's shutdown: daemon threads still inside a cancelled flow (a paused approval, a
    recovery waiting on a reboot) can hold stdio locks there and make Python abort. Everything of ours is stopped
    and recorded by now (a closed stdout or stderr is no reason to stay)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):
            stream.flush()
    os._exit(code)


def _announce(stack: Stack, server, args: argparse.Namespace) -> None:
    urls = stack.urls
    if args.json:
        print(json.dumps(urls), flush=True)
        return
    whose = "remedy's own" if server.owned else f"named by {server.source}"
    print(f"Prefect UI:      {urls['prefect_ui']}  ({whose})")
    print(f"alert receiver:  {urls['receiver']}  (metrics {urls['metrics']})")
    print(f"simulator:       {urls['simulator']}  (kubectl --server={urls['simulator']} get nodes)")
    kept = f"; the last session's is {stack.previous_ledger}" if stack.previous_ledger else ""
    print(f"ledger:          {Path(args.workdir) / 'ledger.db'}  (new, like the simulator's cluster: both start "
          f"fresh each session{kept})")
    archive_dir = runtime_archive_dir()
    if archive_dir:
        print(f"archive:         {archive_dir}  (RMA reports, audits; aws.archive_dir)")
    print(f"deployments:     {', '.join(stack.deployment_ids)}")
    from remedy.approvals.model import approvers_note

    print(f"approvals:       {approvers_note(*stack.approvers) if stack.approvers[0] else 'nobody'}")
    print(f"time scale:      {args.time_scale:g} (simulated waits: a 10 min reboot takes "
          f"{human_duration(600 * args.time_scale)})")
    print(f"nfs-audit:       {_prometheus_note(urls.get('prometheus'))}")
    print(f"try:             remedy sim inject xid 64 --node gpu042 --url {urls['simulator']}")
    print("Ctrl-C (or `remedy down` from another terminal) stops everything this started.", flush=True)


def runtime_archive_dir() -> str | None:
    from remedy import runtime

    return runtime.settings().aws.archive_dir


def _prometheus_note(started: str | None) -> str:
    """Where the NFS audit reads node_exporter's mountstats, said at start: the stack's own Prometheus, the one the
    settings name, or that there is none (with the setting that names one) instead of a failed daily run."""
    import httpx

    from remedy import runtime

    if started:
        return f"Prometheus {started} scrapes the simulator's NFS mountstats (nfs.prometheus_url points there)"
    url = runtime.settings().nfs.prometheus_url
    try:
        if httpx.get(f"{url.rstrip('/')}/-/ready", timeout=1.0).status_code == 200:
            return f"Prometheus {url} (nfs.prometheus_url)"
    except httpx.HTTPError:
        pass
    return (f"no Prometheus at {url}: the daily audit fails until nfs.prometheus_url (REMEDY_NFS__PROMETHEUS_URL) "
            "names one that scrapes node_exporter's mountstats (or install Debian's prometheus)")


class _Stop(KeyboardInterrupt):
    """SIGTERM (e.g. from `remedy down`): stop the way Ctrl-C does."""


@contextlib.contextmanager
def _stop_on_sigterm():
    def handler(*_):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop at a time: let the clean-up finish
        raise _Stop()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True)
class PartDown:
    """A part of the stack gone: the line that says which; `certain` when it is known to be gone (its process
    exited, its serving thread ended), not just slow to answer."""

    line: str
    certain: bool


def part_down(stack: Stack, server, timeout: float = 5.0) -> PartDown | None:
    """What of the stack is gone, or None. remedy's own Prefect server is gone when its process is, or when it does
    not answer; the simulator when its thread ended (or it was stopped), or when it does not answer."""
    import httpx

    from remedy.platform import processes
    from remedy.platform.prefect_server import ROLE, healthy

    if server.owned:
        record = processes.read_state(stack_workdir(stack)).get(ROLE) if stack_workdir(stack) else None
        if record and not processes.alive(record):
            return PartDown(f"remedy's Prefect server ({server.ui_url}, pid {record['pid']}) exited; its log: "
                            f"{record.get('log', 'prefect/server.log')}", certain=True)
    if not healthy(stack.api_url, timeout=timeout):
        return PartDown(f"the Prefect server at {server.ui_url} stopped answering", certain=False)
    try:
        sim_url = stack.sim.url
    except RuntimeError:  # stopped: a SimServer that no longer listens has no URL (remedy.sim.server)
        return PartDown("the cluster simulator stopped", certain=True)
    thread = getattr(stack.sim, "_thread", None)
    if thread is not None and not thread.is_alive():
        return PartDown(f"the cluster simulator ({sim_url}) stopped", certain=True)
    try:
        httpx.get(f"{sim_url}/version", timeout=timeout).raise_for_status()
    except httpx.HTTPError as exc:
        return PartDown(f"the cluster simulator at {sim_url} stopped answering ({type(exc).__name__})",
                        certain=False)
    return None


def stack_workdir(stack: Stack) -> Path | None:
    return getattr(stack, "workdir", None)


def supervise(stack: Stack, server, *, every: float = 2.0, grace: float = 20.0) -> str | None:
    """Until Ctrl-C / SIGTERM (None), or until a part is gone: the line that says which. A part that fails to answer
    is given `grace` seconds (a loaded machine can stall a health check); one known to be gone (a Prefect server
    whose process exited, a simulator whose thread ended) is reported at once."""
    import time

    failing_since: float | None = None
    while True:
        try:
            down = part_down(stack, server)
        except KeyboardInterrupt:
            return None
        now = time.monotonic()
        if down is None:
            failing_since = None
        elif down.certain or (failing_since is not None and now - failing_since >= grace):
            return down.line
        elif failing_since is None:
            failing_since = now
        try:
            threading.Event().wait(every)
        except KeyboardInterrupt:
            return None


def _wait_for_interrupt() -> None:
    """Until Ctrl-C (or SIGTERM inside `_stop_on_sigterm`)."""
    done = threading.Event()
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass


def _down(args: argparse.Namespace) -> int:
    """Stop what `remedy up` / `remedy demo` recorded in their workdirs' running.json; nothing else is signalled."""
    from remedy.platform import processes
    from remedy.platform.prefect_server import ROLE, stop_server

    workdirs = [Path(w) for w in args.workdir] if args.workdir else list(processes.DEFAULT_WORKDIRS)
    stopped: list[str] = []
    for workdir in workdirs:
        state = processes.read_state(workdir)
        for role, entry in sorted(state.items(), key=lambda kv: kv[0] == ROLE):  # the server last
            if role == ROLE:
                if stop_server(workdir):
                    stopped.append(f"stopped remedy's Prefect server for {workdir} (pid {entry['pid']}, "
                                   f"{entry.get('api_url', '').removesuffix('/api')})")
                continue
            if processes.terminate(entry, group=False, grace=60.0):
                stopped.append(f"stopped `{role.replace('-', ' ')}` for {workdir} (pid {entry['pid']}) and what it "
                               "started")
            if role == UP_ROLE:  # a killed `remedy up` cancelled nothing: its paused runs would keep a Resume button
                try:
                    left = cancel_left_runs(entry)
                except Exception as exc:  # its server is gone too: nothing is left open there
                    log.warning("could not cancel the runs `remedy up` left in %s: %s", entry.get("api_url"), exc)
                    left = []
                if left:
                    stopped.append(f"cancelled {len(left)} run(s) `remedy up` for {workdir} left open: "
                                   f"{', '.join(left)}")
            processes.forget(workdir, role)
    for line in stopped:
        print(line)
    if not stopped:
        print(f"nothing of remedy's is running (looked in {', '.join(str(w) for w in workdirs)})")
    return 0


def _receiver_serve(args: argparse.Namespace) -> int:
    """Production: receiver only. Announces incidents to PREFECT_API_URL; the deployments run on a work pool."""
    from remedy import runtime
    from remedy.receiver.server import ReceiverServer, build_receiver, check_bind

    settings = runtime.settings() if not args.config else None
    if settings is None:
        os.environ["REMEDY_CONFIG"] = args.config
        runtime.reset()
        settings = runtime.settings()
    host = args.host or settings.receiver.host
    warning = check_bind(host, settings.receiver.token.get_secret_value())  # before anything else: one line, exit 2
    if warning:
        print(f"remedy: warning: {warning}", file=sys.stderr, flush=True)
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_KEY, PREFECT_API_URL

    api_url = PREFECT_API_URL.value()
    if not api_url:
        raise RemedyError("PREFECT_API_URL is not set: the receiver needs the Prefect API to announce incidents")
    led = runtime.ledger()
    key = PREFECT_API_KEY.value()
    auth = PREFECT_API_AUTH_STRING.value()
    receiver = build_receiver(settings, led, api_url=api_url,
                              api_key=key.get_secret_value() if hasattr(key, "get_secret_value") else key,
                              auth_string=auth.get_secret_value() if hasattr(auth, "get_secret_value") else auth,
                              node_lister=lambda: runtime.cluster().list_gpu_nodes(), cluster=runtime.cluster)
    port = settings.receiver.port if args.port is None else args.port
    server = ReceiverServer(receiver, host=host, port=port).start()
    print(f"alert receiver on {server.alerts_url} (metrics {server.url}/metrics); Ctrl-C stops it", flush=True)
    with _stop_on_sigterm():
        _wait_for_interrupt()
    server.stop()
    return 0
