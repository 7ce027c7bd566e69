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

Measured here (2 cores shared with other work, SQLite ledger, 2026-11-27), --nodes 12500 --actions 1000000:
see docs/scale.md for the printed tables.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
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
        return dt.astimezone(timezone.utc).replace(tzinfo=None).isoformat(" ", "microseconds") if sqlite else dt.isoformat()

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


def point_runtime(url: str, sim_url: str):
    """gpu-remedy's runtime (settings, ledger, cluster) on this ledger and the simulator."""
    from remedy import runtime

    os.environ.update({"REMEDY_DB_URL": url, "REMEDY_CLUSTER__MODE": "simulator",
                       "REMEDY_CLUSTER__SIMULATOR_URL": sim_url, "REMEDY_DRY_RUN": "false"})
    os.environ.pop("PREFECT_API_URL", None)
    runtime.reset()
    return runtime.settings(), runtime.ledger()


def measure_ledgers(urls: dict[int, str], sim_url: str, nodes, repeat: int, whole: bool) -> dict[int, dict]:
    """Seed one ledger per size, then time the gate and triage on them turn about (small, large, small, ...), so a
    change in the machine's load while the bench runs falls on both sizes alike."""
    from remedy.domain.model import Incident, NodeState, utcnow
    from remedy.receiver.triage_policy import decide as triage_decide
    from remedy.safety import history

    out: dict[int, dict] = {}
    for size, url in urls.items():
        print(f"seeding a ledger with {size:,} actions ...", flush=True)
        seeded = seed_ledger(url, nodes, size, utcnow(), random.Random(size))
        print(f"  seeded in {seeded['seconds']:.1f} s", flush=True)
        out[size] = {"seed_s": seeded["seconds"], "board": [], "gate": [], "triage": []}
    from tasks.gate import check_breaker
    from tasks.triage import choose_remediation, read_incident

    serving = [n for n in nodes if n.state is NodeState.ACTIVE]
    picks = [serving[i * (len(serving) // (repeat + 1))] for i in range(repeat)]
    incidents = {}
    for size, url in urls.items():  # one new incident per decision, on nodes of different racks (no trips)
        _, led = point_runtime(url, sim_url)
        incidents[size] = [led.open_incident(Incident(n.name, "xid", gpu=0, xid=79), window_seconds=600)[0]
                           for n in picks]
        if whole:
            settings = point_runtime(url, sim_url)[0]
            out[size]["whole"] = timed(lambda: whole_history_board(led, settings), 1)
    for i in range(repeat):
        for size, url in urls.items():
            settings, led = point_runtime(url, sim_url)
            out[size]["board"] += timed(lambda: history.spare_claims(led, history.load_board(
                led, settings.breaker, settings.budget, datetime.now(timezone.utc))), 4)
            inc = incidents[size][i]
            t = time.perf_counter()
            check_breaker.fn(inc.node, inc.id, "xid", utcnow().isoformat(), False)
            out[size]["gate"].append(time.perf_counter() - t)
            t = time.perf_counter()
            facts = read_incident.fn(inc.id, 168.0)
            triage_decide(facts["incident"], recurrences=facts["recurrences"], node_state=facts["node_state"],
                          now=utcnow(), detected_at=inc.first_seen, max_age_seconds=300, live_node={},
                          thresholds=settings.signals)
            choose_remediation.fn(inc.node, 79, inc.id)
            out[size]["triage"].append(time.perf_counter() - t)
    return out


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=12500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--actions", type=int, default=1_000_000, help="ledger actions in the large ledger")
    ap.add_argument("--small", type=int, default=1_000, help="ledger actions in the small ledger")
    ap.add_argument("--pg", default="", help="also a PostgreSQL server URL (postgresql+psycopg://...) for the ledger")
    ap.add_argument("--no-whole-history", action="store_true", help="skip the before-bounding rebuild")
    args = ap.parse_args()

    t = time.perf_counter()
    cluster = build_cluster(nodes=args.nodes, spares=max(3, args.nodes // 20), time_scale=0.01)
    build_s = time.perf_counter() - t
    tmp = Path(tempfile.mkdtemp(prefix="sim_scale-"))
    with SimServer(cluster) as sim:
        settings = load_settings(cluster={"simulator_url": sim.url})
        k = KubernetesCluster(settings)
        from kubernetes import client as k8s

        version = k8s.VersionApi(k.api)
        baseline = timed(version.get_code, args.repeat * 4)
        nodes = k.list_gpu_nodes()
        assert len(nodes) == args.nodes + max(3, args.nodes // 20) or len(nodes) >= args.nodes, len(nodes)
        listing = timed(k.list_gpu_nodes, args.repeat)
        active = [n.name for n in nodes if n.state and n.state.value == "active"][-args.batch:]
        t = time.perf_counter()
        per_cordon = timed_each(lambda name: k.cordon(name, reason="bench", by="bench"), active)
        cordon_total = time.perf_counter() - t
        t = time.perf_counter()
        per_drain = timed_each(lambda name: k.drain(name, grace_period_seconds=30, deadline_seconds=30), active)
        drain_total = time.perf_counter() - t
        for name in active:  # back in service: the gate below sees the fleet whole
            k.uncordon(name, reason="bench", by="bench")
        nodes = k.list_gpu_nodes()

        backends = [("sqlite", lambda n: f"sqlite:///{tmp / f'ledger-{n}.db'}")]
        if args.pg:
            backends.append(("postgresql", lambda n: _pg_database(args.pg, f"sim_scale_{n}")))
        ledgers = {}
        for name, url_of in backends:
            got = measure_ledgers({size: url_of(size) for size in (args.small, args.actions)}, sim.url, nodes,
                                  args.repeat, whole=not args.no_whole_history)
            ledgers.update({(name, size): v for size, v in got.items()})

    med = statistics.median
    gpus = sum(n.gpu_count for n in nodes)
    print(f"\nsim_scale: {args.nodes:,} GPU nodes + spares ({gpus:,} GPUs), official kubernetes client over HTTP, "
          f"lists paged {settings.cluster.list_page_size} a page\n")
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
        (f"gate decision, end to end ({args.actions:,} actions)", med(big["gate"]), 1 / med(big["gate"]), None,
         len(big["gate"])),
        (f"triage reads + choice ({args.actions:,} actions)", med(big["triage"]), 1 / med(big["triage"]), None,
         len(big["triage"])),
    ]
    for name, sec, rate, ratio, n in rows:
        print(f"{name:<52}{fmt(sec):>12}{(f'{rate:,.1f}' if rate else ''):>12}{(f'{ratio:,.0f}' if ratio else ''):>12}"
              f"{n:>6}")

    for backend, _ in backends:
        small, large = ledgers[(backend, args.small)], ledgers[(backend, args.actions)]
        print(f"\ngate latency vs ledger history ({backend}): medians; ratio = large / small (target ≤ 2×)\n")
        print(f"{'measurement':<52}{f'{args.small:,} actions':>16}{f'{args.actions:,} actions':>20}{'ratio':>8}")
        pairs = [("breaker board from the ledger (bounded reads)", "board"),
                 ("gate decision end to end (check_breaker)", "gate"),
                 ("triage: read incident + choose the fix", "triage")]
        if "whole" in small:
            pairs.append(("board from the whole history (before bounding)", "whole"))
        for label, key in pairs:
            a, b = med(small[key]), med(large[key])
            print(f"{label:<52}{fmt(a):>16}{fmt(b):>20}{b / a:>7.2f}×")
        gate_ratio = med(large["gate"]) / med(small["gate"])
        board_ratio = med(large["board"]) / med(small["board"])
        verdict = "OK" if max(gate_ratio, board_ratio) <= 2.0 else "OVER TARGET"
        print(f"\ngate flat within 2× from {args.small:,} to {args.actions:,} actions ({backend}): {verdict}")
    print(f"\nlisting target < 1 s: {'OK' if med(listing) < 1.0 else 'OVER TARGET'} ({fmt(med(listing))})")
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average at the end (1 / 5 / 15 min, {os.cpu_count()} cores): {load}")


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
