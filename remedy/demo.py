"""`remedy demo`: the whole system on one laptop.

Starts the cluster simulator (63 nodes: 60 active in 8 racks, 3 spares), a local Prefect server (SQLite; reused if
one already answers, e.g. PREFECT_API_URL in tests), injects a fault and runs the remediation flow against the
simulator through the real Kubernetes client. Prints the timeline; `--json` prints the same as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

DEMO_NODE = "gpu042"


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    fault: str  # fault kind for the simulator's injector
    node: str = DEMO_NODE
    gpu: int | None = 3
    xid: int | None = None


SCENARIOS: dict[str, Scenario] = {
    "xid79": Scenario("xid79", "GPU fell off the bus (XID 79): replace the node from the warm spare pool", "xid", xid=79),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run a fault → remediation scenario on the embedded simulator")
    p.add_argument("--scenario", default="xid79", choices=sorted(SCENARIOS), help="which scenario (default xid79)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.add_argument("--workdir", default="var/demo", help="where the ledger and Prefect server keep their files")
    p.add_argument("--prefect-port", type=int, default=4200, help="port of the local Prefect server (UI)")
    p.add_argument("--dry-run", action="store_true", help="plan and record every step, change nothing")
    p.add_argument("--time-scale", type=float, default=0.05,
                   help="simulated durations × this (grace periods, reboots); 1.0 = real time")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    outcome = run_demo(
        SCENARIOS[args.scenario], workdir=Path(args.workdir), prefect_port=args.prefect_port,
        dry_run=args.dry_run, time_scale=args.time_scale, quiet=args.json,
    )
    if args.json:
        print(json.dumps(outcome, indent=2, default=str))
    else:
        _print_outcome(outcome)
    return 0 if outcome["status"] in ("replaced", "planned") else 1


def _say(quiet: bool, msg: str) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def run_demo(scenario: Scenario, *, workdir: Path, prefect_port: int = 4200, dry_run: bool = False,
             time_scale: float = 0.05, quiet: bool = False) -> dict[str, Any]:
    from remedy.prefect_server import ensure_server, healthy, offline_env
    from remedy.sim.cluster import build_cluster
    from remedy.sim.faults import inject
    from remedy.sim.server import SimServer

    workdir.mkdir(parents=True, exist_ok=True)
    ledger_file = workdir / "ledger.db"
    ledger_file.unlink(missing_ok=True)  # each demo tells one story from a clean ledger

    t0 = time.monotonic()
    with SimServer(build_cluster(nodes=63, spares=3, time_scale=time_scale)) as sim:
        _say(quiet, f"cluster simulator: {sim.url} (63 nodes, 3 spares) — try: kubectl --server={sim.url} get nodes")
        api_url = os.environ.get("PREFECT_API_URL", "")
        if not (api_url and healthy(api_url)):
            _say(quiet, "starting the Prefect server (first start takes ~20 s)…")
            api_url = ensure_server(workdir, port=prefect_port)
        for k, v in offline_env(workdir / "prefect").items():
            if k != "PREFECT_HOME" or "PREFECT_API_URL" not in os.environ:
                os.environ.setdefault(k, v)
        os.environ["PREFECT_API_URL"] = api_url
        os.environ["REMEDY_CLUSTER__SIMULATOR_URL"] = sim.url
        os.environ["REMEDY_CLUSTER__MODE"] = "simulator"
        os.environ["REMEDY_DB_URL"] = f"sqlite:///{ledger_file.resolve()}"
        from remedy import runtime

        runtime.reset()
        ui = api_url[: -len("/api")] if api_url.endswith("/api") else api_url
        _say(quiet, f"Prefect UI: {ui}")

        detected_at = datetime.now(timezone.utc)
        inject(sim.cluster, scenario.fault, scenario.node, gpu=scenario.gpu, code=scenario.xid)
        _say(quiet, f"injected {scenario.fault.upper()} {scenario.xid or ''} on {scenario.node} GPU {scenario.gpu}")

        from flows.replace_node import replace_node

        result = replace_node(
            node=scenario.node, cause=f"XID {scenario.xid}" if scenario.xid else scenario.fault,
            signal="xid" if scenario.xid else scenario.fault, xid=scenario.xid, gpu=scenario.gpu,
            detected_at=detected_at.isoformat(), dry_run=dry_run,
        )
        ready, desired = runtime.cluster().workload_size("training", "llm-pretrain")
        actions = [
            {"kind": a.kind, "node": a.node, "outcome": a.outcome.value, "dry_run": a.dry_run}
            for a in runtime.ledger().actions(incident_id=result["incident_id"])
        ]
    return {
        "scenario": scenario.name,
        "summary": scenario.summary,
        "node": scenario.node,
        "incident_id": result["incident_id"],
        "status": result["status"],
        "replacement": result.get("replacement"),
        "spare_choice": result.get("spare_choice"),
        "dry_run": dry_run,
        "job": {"ready": ready, "desired": desired},
        "timeline": result["timeline"],
        "actions": actions,
        "prefect_ui": ui,
        "wall_seconds": round(time.monotonic() - t0, 2),
    }


def _print_outcome(outcome: dict[str, Any]) -> None:
    print(f"\n{outcome['summary']}")
    print(f"incident {outcome['incident_id']} on {outcome['node']}: {outcome['status']}"
          + (f" → {outcome['replacement']}" if outcome.get("replacement") else ""))
    if outcome.get("spare_choice"):
        print(f"spare choice: {outcome['spare_choice']}")
    print(f"training job: {outcome['job']['ready']}/{outcome['job']['desired']} pods ready\n")
    print(f"{'step':<14}{'since detection':>16}")
    for row in outcome["timeline"]:
        print(f"{row['step']:<14}{row['since_detection_s']:>14.2f} s")
    print(f"\nledger: {len(outcome['actions'])} actions recorded; Prefect UI: {outcome['prefect_ui']}")
