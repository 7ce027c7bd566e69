"""`remedy demo`: the whole system on one laptop.

Starts the cluster simulator (63 nodes: 60 active in 8 racks, 3 spares) and remedy's own Prefect server (SQLite;
never one that merely answers on the port: see remedy.platform.prefect_server.use_server; PREFECT_API_URL or --prefect-url
names another), runs a named scenario (`remedy.scenarios`) against the
simulator through the real Kubernetes client, and prints what happened; `--json` prints the same as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from remedy.cli_args import positive_float
from remedy.domain.durations import human_duration, minutes
from remedy.errors import RemedyError
from remedy.scenarios import DemoContext, Scenario, all_scenarios


def register(sub: argparse._SubParsersAction) -> None:
    from remedy.platform.stack import add_prefect_arguments

    p = sub.add_parser("demo", help="run a fault → remediation scenario on the embedded simulator")
    p.add_argument("--scenario", default="xid79", help="which scenario (default xid79; --list shows all)")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.add_argument("--workdir", default="var/demo", help="where the ledger and Prefect server keep their files")
    add_prefect_arguments(p)
    p.add_argument("--dry-run", action="store_true", help="plan and record every step, change nothing")
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("--approve", dest="approve", action="store_const", const=True,
                        help="answer approval requests with approve (unattended)")
    answer.add_argument("--deny", dest="approve", action="store_const", const=False,
                        help="answer approval requests with deny (unattended)")
    p.add_argument("--bad", default="", help="nan-loss scenario: comma-separated nodes to plant as divergent")
    p.add_argument("--time-scale", type=positive_float, default=0.05,
                   help="simulated durations × this (grace periods, reboots); 1.0 = real time")
    p.set_defaults(func=_main, approve=None)


def _main(args: argparse.Namespace) -> int:
    scenarios = all_scenarios()
    if args.list:
        for sc in scenarios.values():
            print(f"{sc.name:<18} {sc.summary}")
        return 0
    if args.scenario not in scenarios:
        raise RemedyError(f"unknown scenario {args.scenario!r}; known: {', '.join(sorted(scenarios))}")
    outcome = run_demo(
        scenarios[args.scenario], workdir=Path(args.workdir), prefect_port=args.prefect_port,
        prefect_url=args.prefect_url, dry_run=args.dry_run,
        time_scale=args.time_scale, quiet=args.json, approve=args.approve,
        options={"bad": [b for b in args.bad.split(",") if b]},
    )
    if args.json:
        print(json.dumps(outcome, indent=2, default=str))
    else:
        _print_outcome(outcome)
    return 0 if outcome["status"] in scenarios[args.scenario].ok_statuses else 1


def run_demo(scenario: Scenario, *, workdir: Path, prefect_port: int | None = None, prefect_url: str | None = None,
             dry_run: bool = False, time_scale: float = 0.05, quiet: bool = False, approve: bool | None = None,
             options: dict[str, Any] | None = None) -> dict[str, Any]:
    from remedy.platform import processes
    from remedy.platform.prefect_server import offline_env, point_clients_at, use_server

    workdir.mkdir(parents=True, exist_ok=True)
    ledger_file = workdir / "ledger.db"
    say = (lambda msg: None) if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    # the server first: a port in use must stop the demo before anything is started or written
    server = use_server(workdir, port=prefect_port, named_url=prefect_url, say=say)
    point_clients_at(server.api_url, offline_env(workdir / "prefect") if server.owned else None)
    with contextlib.ExitStack() as running:
        running.enter_context(processes.recorded(workdir, "remedy-demo"))  # before the ledger is cleared: one at a time
        for suffix in ("", "-wal", "-shm"):
            Path(f"{ledger_file}{suffix}").unlink(missing_ok=True)  # each demo tells its story from a clean ledger
        return _run(scenario, workdir, ledger_file, server, dry_run=dry_run, time_scale=time_scale, quiet=quiet,
                    approve=approve, options=options)


def _run(scenario: Scenario, workdir: Path, ledger_file: Path, server, *, dry_run: bool, time_scale: float,
         quiet: bool, approve: bool | None, options: dict[str, Any] | None) -> dict[str, Any]:
    from remedy.sim.cluster import build_cluster
    from remedy.sim.server import SimServer

    t0 = time.monotonic()
    sim_options = {"nodes": 63, "spares": 3, "time_scale": time_scale} | scenario.sim_options
    with SimServer(build_cluster(**sim_options)) as sim:
        ctx = DemoContext(sim=sim, workdir=workdir, dry_run=dry_run, approve=approve, quiet=quiet,
                          options=options or {})
        sessions = f", {sim_options['sessions']} sessions" if sim_options.get("sessions") else ""
        ctx.say(f"cluster simulator: {sim.url} ({sim_options['nodes']} nodes, {sim_options['spares']} spares"
                f"{sessions}) — try: kubectl --server={sim.url} get nodes")
        os.environ["REMEDY_CLUSTER__MODE"] = "simulator"
        os.environ["REMEDY_CLUSTER__SIMULATOR_URL"] = sim.url
        os.environ["REMEDY_DB_URL"] = f"sqlite:///{ledger_file.resolve()}"
        from remedy import runtime

        runtime.reset()
        approvers, defaulted = use_default_approver(runtime)
        ui = server.ui_url
        whose = "remedy's own server" if server.owned else f"named by {server.source}"
        ctx.say(f"Prefect UI: {ui} ({whose})")
        if approve is None:
            from remedy.approvals.model import approvers_note

            ctx.say(f"approvals: {approvers_note(approvers, defaulted)}")
        _spares_validated_at_build(runtime)
        ctx.say(f"time scale {time_scale:g}: simulated waits (grace periods, reboots, spares joining) take "
                f"{time_scale:g}× their real duration" + (" — DRY RUN: nothing will change" if dry_run else ""))
        from prefect import tags

        # every run of the demo carries `demo`, and `dry-run` when nothing changes, in the Prefect UI's runs list
        with tags("demo", *(["dry-run"] if dry_run else [])):
            result = scenario.run(ctx)
        summary = _ledger_summary(runtime.ledger())
        try:
            ready, desired = runtime.cluster().workload_size("training", "llm-pretrain")
        except Exception:  # scenarios without the training job
            ready, desired = 0, 0
    return {
        "scenario": scenario.name,
        "summary": scenario.summary,
        "dry_run": dry_run,
        **result,
        "job": {"ready": ready, "desired": desired},
        **summary,
        "prefect_ui": ui,
        "prefect_server": "remedy's own" if server.owned else f"named by {server.source}",
        "time_scale": time_scale,
        "wall_seconds": round(time.monotonic() - t0, 2),
    }


def use_default_approver(runtime) -> tuple[list[str], bool]:
    """(approvers, defaulted): the configured approvals.approvers, or — none configured — the local user, set for
    this process and the flows it runs, so the first approval can be answered at once."""
    from remedy.approvals.model import APPROVERS_ENV, default_approver

    configured = runtime.settings().approvals.approvers
    if configured:
        return list(configured), False
    os.environ[APPROVERS_ENV] = json.dumps([default_approver()])
    runtime.reset()
    return list(runtime.settings().approvals.approvers), True


def _spares_validated_at_build(runtime) -> None:
    """The simulator builds its spares as burn-in would leave them: validated. Record that in the ledger."""
    led = runtime.ledger()
    for node in runtime.cluster().list_gpu_nodes():
        led.upsert_node(node)
        if node.state is not None and node.state.value == "spare":
            led.transition(node.name, node.state, reason="adopted from pool label", requested_by="demo")
            led.record_validation(node.name, level="standard", passed=True, requested_by="demo",
                                  summary={"source": "simulator: spares are built pre-validated"})


def _ledger_summary(led) -> dict[str, Any]:
    return {
        "incidents": [
            {"id": i.id, "node": i.node, "signal": i.signal, "xid": i.xid, "gpu": i.gpu, "status": i.status.value,
             "count": i.count}
            for i in led.incidents()
        ],
        "actions": [
            {"kind": a.kind, "node": a.node, "incident_id": a.incident_id, "outcome": a.outcome.value,
             "dry_run": a.dry_run}
            for a in led.actions()
        ],
        "breaker_transitions": [
            {"scope": f"{b.scope_kind}/{b.scope}", "from": b.from_state, "to": b.to_state, "reason": b.reason}
            for b in led.breaker_events()
        ],
        "approvals": [
            {"id": a.id, "kind": a.kind, "decision": a.decision, "by": a.decided_by} for a in led.approvals()
        ],
    }


# A dry run marks the same steps as a live one; said as what would happen, it cannot be mistaken for one.
WOULD = {"cordoned": "would cordon", "drained": "would drain", "spare ready": "would bring in spare",
         "job resumed": "would resume job", "to repair": "would send to repair", "preempted": "would preempt",
         "approved": "approved"}


def _print_outcome(outcome: dict[str, Any]) -> None:
    """The outcome on stdout (progress went to stderr): what happened, why, the timeline, what is left running."""
    dry = bool(outcome.get("dry_run"))
    print(f"\n{outcome['summary']}")
    if dry:
        print("DRY RUN: nothing was changed; every step below is what a live run would do")
    status = outcome.get("status", "?")
    line = f"{outcome.get('node', '')}: {status}"
    if outcome.get("replacement"):
        line += f" → {outcome['replacement']}" if not dry else f" (would use {outcome['replacement']})"
    print(line.strip(": "))
    if isinstance(outcome.get("runs"), dict):
        print("runs: " + ", ".join(f"{node} {status}" for node, status in outcome["runs"].items()))
    choice = outcome.get("choice")
    if choice:
        others = ", ".join(f"{o['option']} {minutes(o['downtime_minutes'])}" for o in choice.get("options", [])
                           if o["option"] != choice["option"])
        print(f"triage chose {choice['option']}: {choice['reason']} (others: {others})")
    elif outcome.get("path"):
        print(f"triage: {outcome['path']}" + (f" — {outcome['triage']}" if outcome.get("triage") else ""))
    if outcome.get("spare_choice"):
        print("spare choice: " + outcome["spare_choice"].splitlines()[0])
    if outcome.get("preemption"):
        print("preemption: " + outcome["preemption"]["explain"].splitlines()[0])
    recovery = outcome.get("recovery")
    if isinstance(recovery, dict) and recovery:
        steps = " → ".join(f"{s.get('step')} ({s.get('verdict')})" for s in recovery.get("steps", [])
                           if isinstance(s, dict))
        print(f"{recovery.get('node', outcome.get('node'))} off the critical path: {steps or 'no fix tried'} → "
              f"{recovery.get('status')}")
    for key in ("verdict_text", "why", "pool"):
        if outcome.get(key) and (key != "why" or outcome.get("status") not in ("replaced", "fixed", "restarted")):
            print(outcome[key] if key != "why" else f"why: {outcome[key]}")
    for warning in outcome.get("diversity") or []:
        print(f"spare pool: {warning}")
    if outcome["job"]["desired"]:
        print(f"training job: {outcome['job']['ready']}/{outcome['job']['desired']} pods ready")
    if outcome.get("timeline"):
        scale = outcome.get("time_scale", 1.0)
        print(f"\n{'step':<22}{'since detection':>16}   (wall-clock seconds at time scale {scale:g}: simulated "
              f"waits took {scale:g}× their real duration)")
        for row in outcome["timeline"]:
            step = WOULD.get(row["step"], row["step"]) if dry else row["step"]
            print(f"{step:<22}{human_duration(row['since_detection_s']):>16}")
    for b in outcome.get("breaker_transitions", []):
        print(f"breaker {b['scope']}: {b['from']} → {b['to']} ({b['reason']})")
    for a in outcome.get("approvals", []):
        print(f"approval {a['id']} ({a['kind']}): {a['decision'] or 'pending'}" + (f" by {a['by']}" if a["by"] else ""))
    n_inc, n_act = len(outcome["incidents"]), len(outcome["actions"])
    print(f"\nledger: {n_inc} incident{'' if n_inc == 1 else 's'}, {n_act} action{'' if n_act == 1 else 's'} "
          f"(remedy ledger history NODE reads it)")
    if outcome.get("prefect_server") == "remedy's own":
        print(f"Prefect UI: {outcome['prefect_ui']} — remedy's server stays up so you can look at the runs; "
              "`remedy down` stops it")
    else:
        print(f"Prefect UI: {outcome['prefect_ui']} ({outcome.get('prefect_server')})")
