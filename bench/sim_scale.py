"""Fleet scale: the simulator + Kubernetes adapter + gate + triage at 12,500 GPU nodes (100,000 GPUs).

Part 1, through the official client over HTTP: listing every GPU node (paged, `cluster.list_page_size` 500 a page),
cordoning and draining a batch of nodes (30 s grace scaled to 0.3 s). Baseline: a bare `GET /version` round trip.

Part 2, the ledger at two sizes, seeded in bulk with the same last hour: a small one (1,000 actions) and one with a
fleet's years of history (1,000,000 actions). Measured at each size: the breaker board from the ledger's bounded
window (remedy.safety.history), a whole gate decision (`tasks.gate.check_breaker`: lock, ledger reads, the
12,500-node list, decide, write), triage's reads (`read_incident` + `choose_remediation`), and — for comparison —
the board rebuilt from the whole history, as the gate did before its reads were bounded. Target: the gate flat
within 2× from 1k to 1M actions.

    nice .venv/bin/python bench/sim_scale.py [--nodes 12500] [--actions 1000000] [--repeat 5]

Part 3, the watch-fed node cache: the GPU node list and a gate decision measured before (the adapter lists the fleet
every time, watch_nodes=False) and after (remedy.adapters.kubernetes.NodeCache), turn about in the same run, with
Nodes carrying 50 images each as kubelets report them (--no-images for the old lean ones); then the same on a real
kube-apiserver v1.36.2 when KUBE_CONTROL_PLANE_BIN / KUBE_CONTROL_PLANE_TOOLS point at the kube-control-plane tool
(../shared/tools/kube-control-plane/unpack.sh prints them): the simulator's nodes are created through its API and the
gate runs against it on the same ledger. Target: a gate decision at 12,500 nodes within 150 ms.

2026-11-28, --nodes 12500 --actions 10000 (load average 19–34 on 2 cores): list 56.4 s → 0.1 ms from the cache; gate
68.1 s → 1.79 s on the simulator (38×), 39.9 s → 415 ms on the real control plane (96×); docs/scale.md has the table.

Part 4, the gate on the node cache, before and after issue 29's cuts, turn about in the same run (mode "before":
`fleet_view_before`, the fleet view as it was: every cached node sorted and scoped on every decision, every spare's
whole row read, every spare claim since the oldest remediation in flight read and matched in Python; "after": the
node summary kept per state of the cache (remedy.safety.fleet), spare validation times as two columns, claims
matched on detail.replaces in the database). The table prints both medians, their ratio and the load average.

2026-11-28 21:29–21:40 UTC, --nodes 12500 --actions 10000 --repeat 5 --no-whole-history --no-real (load average
12.4 at the start, 10.9 at the end, 2 cores shared with six sessions): gate decision 271.5 ms before → 116.3 ms
after (2.3×; slowest 158 ms): within the 150 ms target. Of it now: the board's bounded reads 62.8 ms (54 %; most
of it `unfinished`'s two index seeks per node), the fleet view 25.7 ms (22 %).

Measured here 2026-11-27 (2 cores shared with five other sessions: load average 8.8–15; SQLite ledger), --nodes
12500 --actions 1000000 --repeat 5 --no-whole-history; the full table is in docs/scale.md:
    list 12,500 GPU nodes 19.6 s (25 pages); cordon 5.9 ms a node (67/s); drain 1.19 s a node (0.3 s grace)
    gate decision end to end: 5.88 s at 1,000 actions, 6.28 s at 1,000,000 (1.07×) — most of it the node list
    triage reads + choice: 76.6 ms vs 83.5 ms (1.09×); the board's own reads 16.4 ms vs 176 ms (two index seeks
    per node with history: bounded by the fleet, not the history)
    before bounding (earlier run): the board from the whole history 205 ms at 1,000 actions, 331 s at 1,000,000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from remedy.adapters.kubernetes import KubernetesCluster  # noqa: E402
from remedy.config import load_settings  # noqa: E402
from remedy.sim.cluster import build_cluster  # noqa: E402
from remedy.sim.server import SimServer  # noqa: E402


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def timed_each(fn, items) -> list[float]:
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - t)
    return out


# ---------------------------------------------------------------------------------------------- ledger seeding
def seed_ledger(url: str, nodes, actions: int, now: datetime, rng: random.Random) -> dict:
    """Nodes, then `actions` rows of history in bulk: remediation episodes (gate decision, cordon, drain, a fix
    attempt, sometimes a spare claim, the outcome) and holds spread over the past year, a trip and re-close of a
    rack breaker now and then; the last hour is the same at every size (a few decisions, all finished)."""
    from remedy.domain.model import NodeState
    from remedy.ledger import Ledger, schema
    from remedy.safety.history import CLAIM_KIND, GATE_KIND, OUTCOME_KIND
    from remedy.safety.scopes import Decision, FailureEvent, Skip, SkipReason, Verdict

    led = Ledger(url)
    led.migrate()
    node_rows = [{"name": n.name, "gpu_model": n.gpu_model, "gpu_count": n.gpu_count, "zone": n.topology.zone,
                  "rack": n.topology.rack, "switch": n.topology.switch, "pdu": n.topology.pdu, "instance_type": "",
                  "provider_id": "", "state": (n.state or NodeState.ACTIVE).value, "state_version": 1,
                  "validated_at": None, "validation_level": None, "updated_at": now} for n in nodes]
    serving = [n for n in nodes if n.state is NodeState.ACTIVE]

    def episode(node, at: datetime, recent: bool) -> list[dict]:
        base = {"node": node.name, "incident_id": None, "requested_by": "bench", "dry_run": False, "error": "",
                "idempotency_key": None}
        failure = FailureEvent(node.name, at, node.topology, needs_spare=True, signal="xid")
        if not recent and rng.random() < 0.15:  # a hold: one row
            d = Decision(Verdict.HOLD, failure, at, Skip(SkipReason.CAPACITY_BUDGET, "budget in use"))
            return [{**base, "kind": GATE_KIND, "started_at": at, "finished_at": at, "outcome": "skipped",
                     "detail": {"act": False, "skip": "capacity-budget", "scope": None, "decision": d.to_dict()}}]
        d = Decision(Verdict.ACT, failure, at)
        rows = [{**base, "kind": GATE_KIND, "started_at": at, "finished_at": at, "outcome": "succeeded",
                 "detail": {"act": True, "skip": None, "scope": None, "decision": d.to_dict()}}]
        for i, kind in enumerate(("cordon_node", "drain_node")):
            t = at + timedelta(seconds=1 + 60 * i)
            rows.append({**base, "kind": kind, "started_at": t, "finished_at": t, "outcome": "succeeded",
                         "detail": {}})
        t = at + timedelta(minutes=3)
        rows.append({**base, "kind": rng.choice(("fix_restart-app", "fix_reset-gpu", "fix_reboot")), "started_at": t,
                     "finished_at": t, "outcome": rng.choice(("succeeded", "succeeded", "failed")),
                     "detail": {"xid": rng.choice((79, 48, 64, 94))}})
        if rng.random() < 0.5:
            t = at + timedelta(minutes=5)
            rows.append({**base, "node": f"spare-of-{node.name}", "kind": CLAIM_KIND, "started_at": t,
                         "finished_at": t, "outcome": "succeeded", "detail": {"replaces": node.name}})
        t = at + timedelta(minutes=20)
        rows.append({**base, "kind": OUTCOME_KIND, "started_at": t, "finished_at": t, "outcome": "succeeded",
                     "detail": {"succeeded": True}})
        return rows

    recent = []
    for i in range(8):  # the last hour, identical at every size (its own rng)
        r = random.Random(i)
        recent += episode(serving[r.randrange(len(serving))], now - timedelta(minutes=55 - 5 * i), True)
    t0 = time.perf_counter()
    with led.engine.begin() as conn:
        conn.execute(schema.nodes.insert(), node_rows)
    left, year, events, batch = actions - len(recent), 365 * 24 * 3600, [], []
    insert = _bulk_insert(led)
    with led.engine.begin() as conn:
        rebuild = _drop_indexes(conn)  # built once after the load: a million random inserts into five B-trees is slow
        while left > 0:
            at = now - timedelta(days=1, seconds=rng.randrange(year))
            rows = episode(serving[rng.randrange(len(serving))], at, False)[:left]
            batch += rows
            left -= len(rows)
            if rng.random() < 0.002:  # a rack storm now and then: the breaker opened and a person re-closed it
                rack = rows[0]["detail"]["decision"]["failure"]["topology"]["rack"]
                events += [{"scope_kind": "rack", "scope": rack, "from_state": "closed", "to_state": "open",
                            "reason": "bench storm", "at": at, "by": "automation"},
                           {"scope_kind": "rack", "scope": rack, "from_state": "open", "to_state": "closed",
                            "reason": "closed by bench", "at": at + timedelta(minutes=30), "by": "bench"}]
            if len(batch) >= 20000:
                insert(conn, batch)
                batch = []
        insert(conn, batch + recent)
        for sql in rebuild:
            conn.exec_driver_sql(sql)
        if events:
            conn.execute(schema.breaker_events.insert(), events)
    if url.startswith("sqlite"):
        with led.engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
        with led.engine.connect() as conn:  # fold the bulk load's write-ahead log into the file, as a checkpoint would
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        with led.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()
    return {"seconds": time.perf_counter() - t0, "breaker_events": len(events)}


def _drop_indexes(conn) -> list[str]:
    """Drop the actions table's secondary indexes; returns the statements that re-create them."""
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'actions' "
                                    "AND sql IS NOT NULL").all()
    else:
        rows = conn.exec_driver_sql("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'actions' AND "
                                    "indexname LIKE 'ix_%'").all()
    for name, _ in rows:
        conn.exec_driver_sql(f'DROP INDEX "{name}"')
    return [sql for _, sql in rows]


def _bulk_insert(led):
    """Insert action rows through the driver's executemany (SQLite) or COPY (PostgreSQL), values encoded as the
    ledger's column types store them: ~20× faster than row-by-row type processing for a million rows."""
    import json

    cols = ("kind", "node", "incident_id", "requested_by", "dry_run", "started_at", "finished_at", "outcome",
            "error", "detail", "idempotency_key")
    sqlite = led.engine.dialect.name == "sqlite"

    def when(dt: datetime) -> str:
        return dt.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds") if sqlite else dt.isoformat()

    def values(r: dict) -> tuple:
        return (r["kind"], r["node"], None, r["requested_by"], bool(r["dry_run"]), when(r["started_at"]),
                when(r["finished_at"]), r["outcome"], r["error"], json.dumps(r["detail"]), None)

    def insert(conn, rows: list[dict]) -> None:
        if not rows:
            return
        raw = conn.connection.driver_connection
        if sqlite:
            raw.executemany(f"INSERT INTO actions ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                            [values(r) for r in rows])
            return
        with raw.cursor().copy(f"COPY actions ({', '.join(cols)}) FROM STDIN") as copy:
            for r in rows:
                copy.write_row(values(r))

    return insert


def whole_history_board(led, settings):
    """The gate's board as it was built before its reads were bounded: every decision, event and outcome."""
    from remedy.safety.board import BreakerBoard
    from remedy.safety.history import GATE_KIND, OUTCOME_KIND
    from remedy.safety.scopes import BreakerState, BreakerTransition, Decision

    decisions = [Decision.from_dict(a.detail["decision"]) for a in led.actions(kind=GATE_KIND)
                 if not a.dry_run and a.detail.get("decision")]
    transitions = [BreakerTransition(e.scope_kind, e.scope, BreakerState(e.from_state), BreakerState(e.to_state),
                                     e.reason, e.at, e.by) for e in led.breaker_events()]
    outcomes = [(a.node, a.finished_at or a.started_at) for a in led.actions(kind=OUTCOME_KIND) if not a.dry_run]
    return BreakerBoard.rebuild(decisions, transitions, outcomes, settings.breaker, settings.budget)


def fleet_view_before(ports, board, now=None):
    """The gate's fleet view as it was before the node summary was kept per cache state (issue 29): every node
    sorted on every decision, every spare's whole record read, every spare claim since the oldest remediation in
    flight read and matched in Python. Selected by the bench's "before" mode (`before_fleet_view`)."""
    from remedy.domain.model import ActionOutcome, NodeState
    from remedy.ledger.recent import actions_since
    from remedy.safety.fleet import FleetNodes
    from remedy.safety.history import CLAIM_KIND
    from remedy.safety.scopes import FleetView
    from remedy.spares.lemons import lemon_candidates
    from remedy.spares.selection import validated_for_work

    led = ports.ledger
    got = ports.gpu_nodes()
    nodes = got.nodes if isinstance(got, FleetNodes) else got
    serving = [n for n in nodes if n.state not in (NodeState.SPARE, NodeState.BURN_IN, NodeState.RETIRED)]
    now = now or datetime.now(UTC)
    validated = {r.name: r.validated_at for r in led.nodes(NodeState.SPARE)}
    lemons = lemon_candidates(led)
    ready_spares = sum(1 for n in nodes if n.state is NodeState.SPARE and n.ready and n.name not in lemons
                       and validated_for_work(validated.get(n.name), now, ports.settings.spares))
    in_remediation = {n.name for n in nodes if n.state is NodeState.QUARANTINED}
    out_of_service = {n.name: n.state.value for n in nodes if n.state in (NodeState.REPAIR, NodeState.RETIRED)}
    open_incidents = {i.node for i in led.incidents(status="open", severity="critical")}
    waiting = {n: f for n, f in board.active.items() if f.needs_spare}
    claims: set[str] = set()
    if waiting:
        since = min(f.at for f in waiting.values()) - timedelta(microseconds=1)
        claims = {r for a in actions_since(led, CLAIM_KIND, since, outcomes=(ActionOutcome.SUCCEEDED,))
                  if (r := a.detail.get("replaces")) in waiting and a.started_at >= waiting[r].at}
    return FleetView.from_nodes(serving, ready_spares=ready_spares, in_remediation=in_remediation - set(board.active),
                                flagged=open_incidents, spare_claims=claims, out_of_service=out_of_service)


@contextlib.contextmanager
def before_fleet_view():
    """The gate decides on `fleet_view_before` inside the block (the procedure's own, after)."""
    from remedy.safety import procedure

    kept = procedure.fleet_view
    procedure.fleet_view = fleet_view_before  # type: ignore[assignment]
    try:
        yield
    finally:
        procedure.fleet_view = kept  # type: ignore[assignment]


_ADAPTER: dict[str, object] = {}


def _chosen_cluster(dry_run=None):
    """runtime.cluster for the bench: the adapter being measured (polling or watch-fed), kept across decisions as
    a long-running flow process keeps its own (runtime.cluster is cached per process)."""
    return _ADAPTER["cluster"]


_chosen_cluster.cache_clear = lambda: None  # type: ignore[attr-defined]  # runtime.reset() clears it


def point_runtime(url: str, cluster_env: dict[str, str], adapter=None):
    """gpu-remedy's runtime (settings, ledger, cluster) on this ledger and cluster (`cluster_env`: the
    REMEDY_CLUSTER__* variables); `adapter`: the KubernetesCluster the gate uses (None: the runtime builds one)."""
    from remedy import runtime

    os.environ.update({"REMEDY_DB_URL": url, "REMEDY_DRY_RUN": "false", **cluster_env})
    os.environ.pop("PREFECT_API_URL", None)
    if not hasattr(runtime, "_bench_cluster"):
        runtime._bench_cluster = runtime.cluster  # type: ignore[attr-defined]
    runtime.cluster = runtime._bench_cluster  # type: ignore[attr-defined]
    runtime.reset()
    if adapter is not None:
        _ADAPTER["cluster"] = adapter
        runtime.cluster = _chosen_cluster  # type: ignore[assignment]
    return runtime.settings(), runtime.ledger()


def seed_ledgers(urls: dict[int, str], nodes) -> dict[int, dict]:
    from remedy.domain.model import utcnow

    out: dict[int, dict] = {}
    for size, url in urls.items():
        print(f"seeding a ledger with {size:,} actions ...", flush=True)
        seeded = seed_ledger(url, nodes, size, utcnow(), random.Random(size))
        print(f"  seeded in {seeded['seconds']:.1f} s", flush=True)
        out[size] = {"seed_s": seeded["seconds"]}
    return out


def measure_ledgers(urls: dict[int, str], cluster_env: dict[str, str], nodes, repeat: int, whole: bool,
                    adapters: dict[str, object], out: dict[int, dict], poll_repeat: int = 2) -> dict[int, dict]:
    """Time the gate and triage on each seeded ledger, turn about (small, large, small, ...), with each adapter
    in `adapters` ("poll": lists the fleet per decision; "watch": the watch-fed node cache), so a change in the
    machine's load while the bench runs falls on every size and adapter alike."""
    from remedy.domain.model import Incident, NodeState, utcnow
    from remedy.receiver.triage_policy import decide as triage_decide
    from remedy.safety import history, procedure
    from tasks.gate import RunPorts, check_breaker
    from tasks.triage import choose_remediation, read_incident

    serving = [n for n in nodes if n.state is NodeState.ACTIVE]
    picks = [serving[i * (len(serving) // (repeat * len(adapters) + 1))] for i in range(repeat * len(adapters))]
    incidents = {}
    for size, url in urls.items():  # one new incident per decision, on nodes of different racks (no trips)
        _, led = point_runtime(url, cluster_env)
        incidents[size] = [led.open_incident(Incident(n.name, "xid", gpu=0, xid=79), window_seconds=600)[0]
                           for n in picks]
        out[size].update({"board": [], "triage": [], "view": [], **{f"gate:{m}": [] for m in adapters}})
        if whole:
            settings = point_runtime(url, cluster_env)[0]
            out[size]["whole"] = timed(lambda led=led, settings=settings: whole_history_board(led, settings), 1)
    k = 0
    for i in range(repeat):
        for mode, adapter in adapters.items():
            if mode == "poll" and i >= poll_repeat:
                k += 1
                continue
            for size, url in urls.items():
                settings, led = point_runtime(url, cluster_env, adapter)
                if mode == "watch":  # where a decision's time goes: the fleet view (the cached nodes + ledger reads)
                    ports = RunPorts()
                    board = history.load_board(led, settings.breaker, settings.budget, datetime.now(UTC))
                    out[size]["view"] += timed(lambda p=ports, b=board: procedure.fleet_view(p, b), 3)
                    out[size]["board"] += timed(lambda led=led, settings=settings: history.spare_claims(
                        led, history.load_board(led, settings.breaker, settings.budget,
                                                datetime.now(UTC))), 4)
                inc = incidents[size][k]
                with before_fleet_view() if mode == "before" else contextlib.nullcontext():
                    t = time.perf_counter()
                    check_breaker.fn(inc.node, inc.id, "xid", utcnow().isoformat(), False)
                    out[size][f"gate:{mode}"].append(time.perf_counter() - t)
                if mode == "watch":
                    t = time.perf_counter()
                    facts = read_incident.fn(inc.id, 168.0)
                    triage_decide(facts.incident, recurrences=facts.recurrences,
                                  node_state=facts.node_state, now=utcnow(), detected_at=inc.first_seen,
                                  max_age_seconds=300, live_node={}, thresholds=settings.signals)
                    choose_remediation.fn(inc.node, 79, inc.id)
                    out[size]["triage"].append(time.perf_counter() - t)
            k += 1
    return out


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


class RealControlPlane:
    """A real kube-apiserver + kube-controller-manager (v1.36.2, ../shared/tools/kube-control-plane) holding the
    simulator's nodes, created through its API. The node lifecycle controller is off: no kubelet heartbeats here,
    and the nodes must stay as created (Ready) while the gate reads them."""

    def __init__(self) -> None:
        self.bin, self.tools = os.environ.get("KUBE_CONTROL_PLANE_BIN", ""), os.environ.get("KUBE_CONTROL_PLANE_TOOLS",
                                                                                            "")
        self.state = Path(tempfile.mkdtemp(prefix="sim_scale-k8s-"))
        self.conf: dict[str, str] = {}

    @staticmethod
    def missing() -> str | None:
        import shutil

        bin_dir, tools = os.environ.get("KUBE_CONTROL_PLANE_BIN"), os.environ.get("KUBE_CONTROL_PLANE_TOOLS")
        if not bin_dir or not (Path(bin_dir) / "kube-apiserver").is_file():
            return "KUBE_CONTROL_PLANE_BIN is not set to the kube-control-plane tool's bin directory"
        if not tools or not (Path(tools) / "start-apiserver").is_file():
            return "KUBE_CONTROL_PLANE_TOOLS is not set to the directory holding start-apiserver"
        if not shutil.which("etcd"):
            return "no etcd on PATH"
        return None

    def start(self) -> RealControlPlane:
        import subprocess

        env = {**os.environ, "K8S_BIN_DIR": self.bin, "K8S_CONTROLLERS": "*,-node-lifecycle-controller"}
        out = subprocess.run([str(Path(self.tools) / "start-apiserver"), str(self.state)], env=env,
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise SystemExit(f"start-apiserver failed: {out.stderr[-500:]}")
        self.conf = dict(line.split("=", 1) for line in (self.state / "env").read_text().splitlines() if "=" in line)
        return self

    def stop(self) -> None:
        import shutil
        import subprocess

        if self.conf:
            subprocess.run([str(Path(self.tools) / "stop-apiserver"), str(self.state)],
                           env={**os.environ, "K8S_STOP_SIGNAL": "KILL"}, capture_output=True, timeout=120)
        shutil.rmtree(self.state, ignore_errors=True)

    def create_nodes(self, objects: list[dict], threads: int = 4) -> float:
        """POST every node (status included: a Node's status may be set on create), on keep-alive connections."""
        import http.client
        import json
        import ssl
        from concurrent.futures import ThreadPoolExecutor
        from urllib.parse import urlparse

        url, token = urlparse(self.conf["SERVER"]), self.conf["TOKEN"]
        ctx = ssl.create_default_context(cafile=self.conf["CA_FILE"])
        t0 = time.perf_counter()

        def post(chunk: list[dict]) -> None:
            conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=120)
            for obj in chunk:
                body = json.dumps(obj).encode()
                conn.request("POST", "/api/v1/nodes", body=body, headers={
                    "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                if resp.status != 201:
                    raise SystemExit(f"creating node {obj['metadata']['name']}: {resp.status} {data[:300]!r}")
            conn.close()

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(post, [objects[i::threads] for i in range(threads)]))
        return time.perf_counter() - t0


def _as_created(node: dict) -> dict:
    """A simulator Node as a kubelet would register it: no server-set metadata, heartbeats now."""
    import json

    from remedy.sim.store import now_iso

    obj = json.loads(json.dumps(node))
    for k in ("uid", "resourceVersion", "creationTimestamp", "generation", "annotations"):
        obj["metadata"].pop(k, None)
    obj["spec"].pop("unschedulable", None)
    ts = now_iso()
    for c in obj["status"].get("conditions") or []:
        c["lastHeartbeatTime"] = c["lastTransitionTime"] = ts
    return obj


def measure_cluster(label: str, settings, repeat: int) -> tuple[dict, object, object]:
    """List the GPU nodes as before (paged, every time) and from the watch-fed cache; returns the timings and the
    two adapters (polling, watching)."""
    from kubernetes import client as k8s

    poll = KubernetesCluster(settings, watch_nodes=False)
    watch = KubernetesCluster(settings)
    out = {"baseline": timed(k8s.VersionApi(poll.api).get_code, repeat * 4)}
    out["list"] = timed(poll.list_gpu_nodes, min(repeat, 3))
    t = time.perf_counter()
    watch.list_gpu_nodes()
    out["cache_start"] = [time.perf_counter() - t]
    out["cached"] = timed(watch.list_gpu_nodes, repeat * 4)
    print(f"{label}: listed {len(watch.list_gpu_nodes()):,} nodes; the cache listed {watch.node_cache().lists} "
          f"time(s), {watch.node_cache().events} watch event(s) since", flush=True)
    return out, poll, watch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=12500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--actions", type=int, default=1_000_000, help="ledger actions in the large ledger")
    ap.add_argument("--small", type=int, default=1_000, help="ledger actions in the small ledger")
    ap.add_argument("--pg", default="", help="also a PostgreSQL server URL (postgresql+psycopg://...) for the ledger")
    ap.add_argument("--no-whole-history", action="store_true", help="skip the before-bounding rebuild")
    ap.add_argument("--no-images", action="store_true", help="nodes without status.images (as before issue 31)")
    ap.add_argument("--no-real", action="store_true", help="skip the real control plane even if its binaries exist")
    ap.add_argument("--poll-repeat", type=int, default=2,
                    help="gate decisions that list the fleet every time (the before; each costs a whole list)")
    args = ap.parse_args()

    t = time.perf_counter()
    cluster = build_cluster(nodes=args.nodes, spares=max(3, args.nodes // 20), time_scale=0.01,
                            node_images=not args.no_images)
    build_s = time.perf_counter() - t
    tmp = Path(tempfile.mkdtemp(prefix="sim_scale-"))
    clusters: dict[str, dict] = {}
    with SimServer(cluster) as sim:
        settings = load_settings(cluster={"simulator_url": sim.url})
        sim_env = {"REMEDY_CLUSTER__MODE": "simulator", "REMEDY_CLUSTER__SIMULATOR_URL": sim.url}
        clusters["simulator"], poll, watch = measure_cluster("simulator", settings, args.repeat)
        baseline, listing = clusters["simulator"]["baseline"], clusters["simulator"]["list"]
        nodes = poll.list_gpu_nodes()
        active = [n.name for n in nodes if n.state and n.state.value == "active"][-args.batch:]
        k = poll
        t = time.perf_counter()
        per_cordon = timed_each(lambda name: k.cordon(name, reason="bench", by="bench"), active)
        cordon_total = time.perf_counter() - t
        t = time.perf_counter()
        per_drain = timed_each(lambda name: k.drain(name, grace_period_seconds=30, deadline_seconds=30), active)
        drain_total = time.perf_counter() - t
        for name in active:  # back in service: the gate below sees the fleet whole
            k.uncordon(name, reason="bench", by="bench")
        nodes = k.list_gpu_nodes()
        time.sleep(0.5)  # the watch has had every change of the cordons and drains by now
        behind = [n.name for n in nodes if (c := watch.node_cache().get(n.name)) is None
                  or c.resource_version != n.resource_version]
        print(f"watch-fed cache after {len(active)} cordons, drains and uncordons by another client: "
              f"{len(behind)} node(s) differ from a fresh list", flush=True)

        load_at_start = " / ".join(f"{x:.1f}" for x in os.getloadavg())
        backends = [("sqlite", lambda n: f"sqlite:///{tmp / f'ledger-{n}.db'}")]
        if args.pg:
            backends.append(("postgresql", lambda n: _pg_database(args.pg, f"sim_scale_{n}")))
        ledgers, urls = {}, {}
        for name, url_of in backends:
            urls[name] = {size: url_of(size) for size in (args.small, args.actions)}
            got = seed_ledgers(urls[name], nodes)
            got = measure_ledgers(urls[name], sim_env, nodes, args.repeat, not args.no_whole_history,
                                  {"poll": poll, "before": watch, "watch": watch}, got,
                                  args.poll_repeat)
            ledgers.update({(name, size): v for size, v in got.items()})
        poll.close()
        watch.close()
        objects = [_as_created(o) for o in cluster.store.objects("Node")]

    real_note = RealControlPlane.missing() if not args.no_real else "--no-real"
    real_gate: dict = {}
    if real_note is None:
        real = RealControlPlane()
        try:
            print(f"real control plane: starting, then creating {len(objects):,} nodes ...", flush=True)
            real.start()
            created = real.create_nodes(objects)
            print(f"  created in {created:.1f} s ({len(objects) / created:,.0f} nodes/s)", flush=True)
            real_settings = load_settings(cluster={"mode": "kubeconfig", "kubeconfig": real.conf["KUBECONFIG"]})
            real_env = {"REMEDY_CLUSTER__MODE": "kubeconfig", "REMEDY_CLUSTER__KUBECONFIG": real.conf["KUBECONFIG"]}
            clusters["real v1.36.2"], rpoll, rwatch = measure_cluster("real", real_settings, args.repeat)
            big = {args.actions: urls["sqlite"][args.actions]}
            real_gate = measure_ledgers(big, real_env, nodes, args.repeat, False, {"poll": rpoll, "before": rwatch,
                                                                                   "watch": rwatch},
                                        {args.actions: {}}, args.poll_repeat)[args.actions]
            rpoll.close()
            rwatch.close()
        finally:
            real.stop()

    med = statistics.median
    gpus = sum(n.gpu_count for n in nodes)
    images = "no images" if args.no_images else f"{len(cluster.store.get('Node', '', nodes[0].name)['status'].get('images') or ()):d} images each"
    print(f"\nsim_scale: {args.nodes:,} GPU nodes + spares ({gpus:,} GPUs; Nodes carry {images}), official kubernetes "
          f"client over HTTP, lists paged {settings.cluster.list_page_size} a page\n")
    print(f"{'measurement':<52}{'median':>12}{'per second':>12}{'× baseline':>12}{'n':>6}")
    rows = [
        ("build simulated cluster", build_s, None, None, 1),
        ("GET /version via client (baseline)", med(baseline), 1 / med(baseline), None, len(baseline)),
        (f"list {len(nodes):,} GPU nodes", med(listing), None, med(listing) / med(baseline), args.repeat),
        (f"cordon 1 node (median of {len(active)})", med(per_cordon), len(active) / cordon_total,
         med(per_cordon) / med(baseline), len(active)),
        (f"drain 1 node incl. 0.3 s grace (median of {len(active)})", med(per_drain), len(active) / drain_total,
         None, len(active)),
    ]
    big = ledgers[("sqlite", args.actions)]
    rows += [
        (f"gate decision, end to end ({args.actions:,} actions)", med(big["gate:watch"]), 1 / med(big["gate:watch"]),
         None, len(big["gate:watch"])),
        (f"triage reads + choice ({args.actions:,} actions)", med(big["triage"]), 1 / med(big["triage"]), None,
         len(big["triage"])),
    ]
    for name, sec, rate, ratio, n in rows:
        print(f"{name:<52}{fmt(sec):>12}{(f'{rate:,.1f}' if rate else ''):>12}{(f'{ratio:,.0f}' if ratio else ''):>12}"
              f"{n:>6}")

    print(f"\nthe GPU node list and the gate: listed every time (before) vs the watch-fed node cache (after), same run; "
          f"{args.actions:,}-action ledger (SQLite); medians\n")
    print(f"{'cluster':<16}{'measurement':<40}{'before: list':>14}{'after: cache':>14}{'ratio':>9}")
    gates = {"simulator": big}
    if real_gate:
        gates["real v1.36.2"] = real_gate
    for where, c in clusters.items():
        print(f"{where:<16}{'list the GPU nodes':<40}{fmt(med(c['list'])):>14}{fmt(med(c['cached'])):>14}"
              f"{med(c['list']) / med(c['cached']):>8.0f}×")
        print(f"{'':<16}{'start the cache (list + open the watch)':<40}{'':>14}{fmt(c['cache_start'][0]):>14}")
        g = gates.get(where)
        if g:
            a, b = med(g["gate:poll"]), med(g["gate:watch"])
            print(f"{'':<16}{'gate decision, end to end':<40}{fmt(a):>14}{fmt(b):>14}{a / b:>8.0f}×")
    print("\nwhere a gate decision on the node cache spends its time (same run; medians)\n")
    print(f"{'cluster':<16}{'measurement':<52}{'median':>12}{'share':>8}{'n':>5}")
    for where, g in gates.items():
        whole = med(g["gate:watch"])
        print(f"{where:<16}{'gate decision, end to end':<52}{fmt(whole):>12}{'':>8}{len(g['gate:watch']):>5}")
        for label, key in (("the fleet view: cached nodes + spare/lemon reads", "view"),
                           ("the breaker board from the ledger (bounded reads)", "board")):
            if g.get(key):
                print(f"{'':<16}{label:<52}{fmt(med(g[key])):>12}{med(g[key]) / whole:>7.0%} {len(g[key]):>4}")
    print(f"\nthe gate on the node cache: the fleet view summed every decision (before) vs the node summary kept per "
          f"cache state, spare rows and claims read narrow (after), turn about in the same run; load average "
          f"{load_at_start} at the start\n")
    print(f"{'cluster':<16}{'measurement':<40}{'before':>14}{'after':>14}{'ratio':>9}{'n':>5}")
    for where, g in gates.items():
        a, b = med(g["gate:before"]), med(g["gate:watch"])
        print(f"{where:<16}{'gate decision, end to end':<40}{fmt(a):>14}{fmt(b):>14}{a / b:>8.1f}×"
              f"{len(g['gate:watch']):>5}")
    for where, g in gates.items():
        b = med(g["gate:watch"])
        print(f"gate decision at {args.nodes:,} nodes within 150 ms ({where}): {'OK' if b <= 0.150 else 'OVER TARGET'} "
              f"({fmt(b)}; slowest {fmt(max(g['gate:watch']))}; before {fmt(med(g['gate:before']))})")
    if real_note:
        print(f"real control plane: not measured ({real_note})")

    for backend, _ in backends:
        small, large = ledgers[(backend, args.small)], ledgers[(backend, args.actions)]
        print(f"\ngate latency vs ledger history ({backend}): medians; ratio = large / small (target ≤ 2×)\n")
        print(f"{'measurement':<52}{f'{args.small:,} actions':>16}{f'{args.actions:,} actions':>20}{'ratio':>8}")
        pairs = [("breaker board from the ledger (bounded reads)", "board"),
                 ("gate decision end to end, listing the nodes", "gate:poll"),
                 ("gate decision end to end, node cache", "gate:watch"),
                 ("triage: read incident + choose the fix", "triage")]
        if "whole" in small:
            pairs.append(("board from the whole history (before bounding)", "whole"))
        for label, key in pairs:
            a, b = med(small[key]), med(large[key])
            print(f"{label:<52}{fmt(a):>16}{fmt(b):>20}{b / a:>7.2f}×")
        gate_ratio = med(large["gate:watch"]) / med(small["gate:watch"])
        board_ratio = med(large["board"]) / med(small["board"])
        verdict = "OK" if gate_ratio <= 2.0 else "OVER TARGET"
        print(f"\ngate decision flat within 2× from {args.small:,} to {args.actions:,} actions ({backend}): {verdict} "
              f"({gate_ratio:.2f}×; the board's own reads {board_ratio:.2f}×: two index seeks per node with history, "
              "so they grow with the fleet until every node has some, then stay)")
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nload average at the end (1 / 5 / 15 min, {os.cpu_count()} cores): {load}")


def _pg_database(server_url: str, name: str) -> str:
    """A fresh database `name` on the PostgreSQL server at `server_url` (dropped first if it exists)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    url = make_url(server_url)
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return url.set(database=name).render_as_string(hide_password=False)


if __name__ == "__main__":
    main()
