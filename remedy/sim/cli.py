"""`remedy sim serve|inject|save|state`: run the cluster simulator and poke a running one."""

from __future__ import annotations

import argparse
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from remedy.cli_args import http_url, non_negative_int, port_number, positive_float, positive_int
from remedy.errors import ClusterUnreachable, RemedyError


def register(sub: argparse._SubParsersAction) -> None:
    sim = sub.add_parser("sim", help="the Kubernetes-API GPU cluster simulator")
    cmds = sim.add_subparsers(dest="sim_command", metavar="SUBCOMMAND")
    sim.set_defaults(func=lambda args: (sim.print_help(), 2)[1])

    serve = cmds.add_parser("serve", help="serve a simulated GPU cluster on 127.0.0.1 until Ctrl-C")
    serve.add_argument("--port", type=port_number, default=8001, help="port (0 = any free port; default 8001)")
    serve.add_argument("--nodes", type=positive_int, default=63, help="GPU nodes in total, spares included (default 63)")
    serve.add_argument("--spares", type=non_negative_int, default=3, help="warm spares among them (default 3)")
    serve.add_argument("--sessions", type=non_negative_int, default=0,
                       help="training-pool nodes that run a low-priority interactive session instead of the "
                            "training job (default 0)")
    serve.add_argument("--gpus-per-node", type=positive_int, default=8)
    serve.add_argument("--nodes-per-rack", type=positive_int, default=8)
    serve.add_argument("--racks", type=positive_int, default=None, help="number of racks (default: nodes / nodes-per-rack)")
    serve.add_argument("--time-scale", type=positive_float, default=None,
                       help="real seconds per simulated second (0.01 = 100x faster grace periods and jobs; "
                            "default 1, or the saved state's)")
    serve.add_argument("--seed", type=non_negative_int, default=0)
    serve.add_argument("--workload", choices=("Job", "JobSet", "PyTorchJob"), default="Job",
                       help="the training workload's kind (default Job; pair with workload.kind in the config)")
    serve.add_argument("--state", help="load this saved state instead of building a fresh cluster")
    serve.add_argument("--alert-url", type=http_url, help="POST Alertmanager v4 webhooks for injected faults here")
    serve.add_argument("--alert-token", help="bearer token for --alert-url")
    serve.add_argument("--json", action="store_true", help="print the URL as JSON")
    serve.set_defaults(func=cmd_serve)

    inject = cmds.add_parser("inject", help="inject a fault into a running simulator")
    from remedy.sim.faults import FAULT_KINDS, VALUE_PARAM

    inject.add_argument("kind", choices=FAULT_KINDS, help="fault kind")
    inject.add_argument("value", nargs="?", help="the kind's main value: " +
                        ", ".join(f"{k} → {v}" for k, v in VALUE_PARAM.items()))
    inject.add_argument("--node", required=True)
    inject.add_argument("--gpu", type=non_negative_int, help="GPU index on the node")
    inject.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="extra parameter, e.g. --param port=2 --param seconds=30")
    inject.add_argument("--url", type=http_url, help="simulator URL (default: config cluster.simulator_url)")
    inject.add_argument("--json", action="store_true")
    inject.set_defaults(func=cmd_inject)

    save = cmds.add_parser("save", help="save a running simulator's full state (objects + hidden health) to FILE")
    save.add_argument("file")
    save.add_argument("--url", type=http_url, help="simulator URL (default: config cluster.simulator_url)")
    save.add_argument("--json", action="store_true")
    save.set_defaults(func=cmd_save)

    state = cmds.add_parser("state", help="show each node's readiness and hidden health faults")
    state.add_argument("--url", type=http_url, help="simulator URL (default: config cluster.simulator_url)")
    state.add_argument("--json", action="store_true")
    state.set_defaults(func=cmd_state)


def _url(args) -> str:
    if getattr(args, "url", None):
        return args.url.rstrip("/")
    from remedy.config import load_settings

    return load_settings(getattr(args, "config", None)).cluster.simulator_url.rstrip("/")


def _call(url: str, path: str, payload: dict | None = None, timeout: float = 30.0) -> dict:
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(url + path, data=data, method="POST" if data else "GET",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error") or str(exc)
        except (ValueError, AttributeError):
            message = str(exc)
        raise RemedyError(message) from None
    except (urllib.error.URLError, OSError) as exc:
        raise ClusterUnreachable(f"no simulator answering at {url}: {getattr(exc, 'reason', exc)}") from None


def _value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def cmd_serve(args) -> int:
    from remedy.sim.cluster import Cluster, build_cluster
    from remedy.sim.server import SimServer

    try:
        if args.state:
            overrides = {"time_scale": args.time_scale} if args.time_scale is not None else {}
            cluster = Cluster.load(args.state, **overrides)
            cluster.alert_url, cluster.alert_token = args.alert_url, args.alert_token
        else:
            scale = 1.0 if args.time_scale is None else args.time_scale
            cluster = build_cluster(nodes=args.nodes, spares=args.spares, sessions=args.sessions,
                                    gpus_per_node=args.gpus_per_node,
                                    racks=args.racks, nodes_per_rack=args.nodes_per_rack, time_scale=scale,
                                    seed=args.seed, alert_url=args.alert_url, alert_token=args.alert_token,
                                    workload=args.workload)
    except ValueError as exc:
        raise RemedyError(str(exc)) from None
    server = SimServer(cluster, port=args.port).start()
    if args.json:
        print(json.dumps({"url": server.url, "port": server.port, "nodes": len(cluster.health)}), flush=True)
    else:
        print(f"gpu-remedy simulator: {len(cluster.health)} nodes at {server.url}  (Ctrl-C to stop)", flush=True)
        print(f"  kubectl --kubeconfig=/dev/null --server={server.url} get nodes", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def cmd_inject(args) -> int:
    from remedy.sim.faults import VALUE_PARAM

    params = {}
    if args.value is not None:
        if args.kind not in VALUE_PARAM:
            raise RemedyError(f"fault {args.kind} takes no value (got {args.value!r}); use --param KEY=VALUE")
        params[VALUE_PARAM[args.kind]] = _value(args.value)
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise RemedyError(f"--param needs KEY=VALUE, got {item!r}")
        params[key] = _value(value)
    result = _call(_url(args), "/sim/inject", {"kind": args.kind, "node": args.node, "gpu": args.gpu,
                                                 "params": params})
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        alert = result.get("alert")
        where = f"{result['node']}" + (f" GPU {result['gpu']}" if result.get("gpu") is not None else "")
        print(f"injected {_fault_words(result['kind'], params)} on {where}")
        if alert:
            sent = "posted" if alert.get("posted") else f"not posted ({alert.get('error')})"
            print(f"alert {alert['labels'].get('alertname')}: {sent}")
    return 0


def _fault_words(kind: str, params: dict) -> str:
    """`XID 79`, `ib-port-down seconds=30 port=2`: what was injected as an operator writes it (no dict repr)."""
    rest = dict(params)
    head = f"XID {rest.pop('code')}" if kind == "xid" and "code" in rest else kind
    return " ".join([head, *(f"{k}={v}" for k, v in rest.items())])


def cmd_save(args) -> int:
    state = _call(_url(args), "/sim/state")
    path = Path(args.file)
    try:
        path.write_text(json.dumps(state, indent=1))
    except OSError as exc:
        raise RemedyError(f"cannot write {path}: {exc.strerror or exc}") from None
    objects = sum(len(v) for v in state.get("objects", {}).values())
    if args.json:
        print(json.dumps({"file": str(path), "objects": objects, "nodes": len(state.get("health", {}))}))
    else:
        print(f"saved {objects} objects and {len(state.get('health', {}))} nodes' health to {path}")
    return 0


def cmd_state(args) -> int:
    from remedy.sim.health import NodeHealth

    state = _call(_url(args), "/sim/state?objects=false")
    if args.json:
        print(json.dumps(state, indent=1))
        return 0
    training = state.get("training", {})
    print(f"training job: {training.get('ready', 0)}/{training.get('parallelism', 0)} pods ready")
    if state.get("sessions"):
        where = [f"{pod} on {node or 'no node'}" for pod, node in state["sessions"].items()]
        print(f"interactive sessions: {', '.join(where)}")
    for name, health in state.get("health", {}).items():
        faulty = NodeHealth.from_dict(health).faulty()
        ready = "Ready" if state.get("ready", {}).get(name) else "NotReady"
        if faulty or ready != "Ready":
            print(f"{name}: {ready}{', faulty' if faulty else ''}")
    return 0

