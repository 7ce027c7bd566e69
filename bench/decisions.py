"""Decision benchmark: a labelled corpus of alert scenarios through the receiver's intake (real ledger, SQLite) and
triage's decision, as the flows make it; prints a confusion table.

Scenarios plant the hard cases, not only the easy ones: re-sent and flapping alerts, application errors repeating on
busy healthy nodes, benign noise below every threshold, real faults of every class, NVLink5 lines the driver marks
non-fatal, XID 154 with its recovery action, codes NVIDIA lists without a bucket. Each scenario is labelled with the
node's truth (healthy or faulty) and what NVIDIA's catalog says to do. Targets: 0 healthy nodes taken out of work,
0 faults missed; every action that differs from NVIDIA's column is listed with its documented reason.

A second table runs the bring-your-own-monitoring corpus (tests/realdata/alerts/scenarios.json: label sets and rule
names others publish for dcgm-exporter, the GPU operator, kube-prometheus-stack, node_exporter) through the real
receiver over HTTP, with the cluster simulator behind it (remedy.receiver.conformance); `--corpus-only` runs just
that. Measured on main before issue 30: 8 of 12 faults missed, 1 of 9 healthy nodes taken out; after it (with the
GPU operator's rules added): 0 of 13 and 0 of 11. The first table: 0 of 12 faults missed, 0 of 11 healthy nodes taken
out (XID 149 subcode 38, which NVIDIA's catalog says needs no recovery although the driver prints "Fatal", is a healthy
node; subcode 37 a fault).

    .venv/bin/python bench/decisions.py [--json] [--corpus-only]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

from remedy.domain.model import IncidentStatus, Node, NodeState, Topology
from remedy.domain.xid import RemediationPath as P
from remedy.domain.xid import lookup, unsafe_to_run
from remedy.ledger import Ledger
from remedy.receiver.alerts import AlertIntake, NodeDirectory
from remedy.receiver.events import verdict_of
from remedy.receiver.triage_policy import decide
from remedy.safety.intake import decide_intake
from remedy.settings.signals import SignalThresholds
from remedy.sim.alerts import make_alert, webhook_payload

TAKES_OUT = {P.RESET_GPU, P.REBOOT, P.REPLACE}  # drains or removes the node
ACTS = TAKES_OUT | {P.RESTART_APP, P.ISOLATE, P.ESCALATE}


def _iso(minutes_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _alert(name: str, signal: str, node: str, *, starts: float, value: str | None = None, summary: str = "",
           status: str = "firing", **labels: str) -> dict:
    lab = {"alertname": name, "Hostname": node, "gpu": labels.pop("gpu", "0"), "signal": signal, **labels}
    ann = {"summary": summary or name} | ({"value": value} if value is not None else {})
    return make_alert(lab, ann, status=status, starts_at=_iso(starts))


# (name, node truth, deliveries: list of (alert, settle the incident as), what must happen)
# truth: "healthy" = nothing wrong with the node; "faulty" = the node needs a fix
def corpus() -> list[dict]:
    xid = lambda n, code, starts=30, **kw: _alert("GpuXidError", "xid", n, starts=starts, xid=str(code), **kw)  # noqa: E731
    return [
        {"name": "app XID 13, re-sent by Alertmanager 4 h later", "node": "n01", "truth": "healthy",
         "alerts": [xid("n01", 13, 250), xid("n01", 13, 250)], "resend_hours": 4},
        {"name": "app XID 31 twice on one GPU in a week (busy node)", "node": "n02", "truth": "healthy",
         "alerts": [xid("n02", 31, 6000), xid("n02", 31, 30)]},
        {"name": "XID 43 (application stopped)", "node": "n03", "truth": "healthy", "alerts": [xid("n03", 43)]},
        {"name": "XID 94 contained ECC, twice", "node": "n04", "truth": "healthy",
         "alerts": [xid("n04", 94, 3000), xid("n04", 94, 20)]},
        {"name": "flapping NVLink CRC below the limit", "node": "n05", "truth": "healthy",
         "alerts": [_alert("GpuNvlinkErrors", "nvlink-error", "n05", starts=10, value="0.5", counter="crc"),
                    _alert("GpuNvlinkErrors", "nvlink-error", "n05", starts=10, value="0.5", counter="crc",
                           status="resolved"),
                    _alert("GpuNvlinkErrors", "nvlink-error", "n05", starts=8, value="0.5", counter="crc")]},
        {"name": "2 min of thermal throttling", "node": "n06", "truth": "healthy",
         "alerts": [_alert("GpuThermalThrottle", "thermal-throttle", "n06", starts=2, value="120", severity="warning")]},
        {"name": "NotReady 60 s (kubelet restart)", "node": "n07", "truth": "healthy",
         "alerts": [_alert("NodeNotReady", "node-not-ready", "n07", starts=1, value="60")]},
        {"name": "NVLink5 XID 144, driver says Nonfatal", "node": "n08", "truth": "healthy",
         "alerts": [xid("n08", 144, summary="NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 "
                                            "(0x00000001 0x00000008 0x0 0x0 0x0 0x0)")]},
        {"name": "XID 163 power smoothing disengaged", "node": "n09", "truth": "healthy", "alerts": [xid("n09", 163)]},
        {"name": "XID 160 channel retirement event", "node": "n10", "truth": "healthy", "alerts": [xid("n10", 160)]},
        # real faults
        {"name": "XID 79 GPU fell off the bus", "node": "n11", "truth": "faulty", "alerts": [xid("n11", 79)]},
        {"name": "XID 64 row remap failure", "node": "n12", "truth": "faulty", "alerts": [xid("n12", 64)]},
        {"name": "XID 48 double-bit ECC", "node": "n13", "truth": "faulty", "alerts": [xid("n13", 48)]},
        {"name": "XID 119 GSP timeout", "node": "n14", "truth": "faulty", "alerts": [xid("n14", 119)]},
        # XID 149 NETIR_LINK_EVT: IntrInfo 0x025001c6 is subcode 37 (NVIDIA's catalog: reset the GPU); 0x026001c6 is
        # subcode 38, which the catalog says needs no recovery although the driver prints "Fatal"
        {"name": "NVLink5 XID 149 subcode 37, driver says Fatal", "node": "n15", "truth": "faulty",
         "alerts": [xid("n15", 149, summary="NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 "
                                            "(0x025001c6 0x00000000 0x0 0x0)")]},
        {"name": "NVLink5 XID 149 subcode 38, driver says Fatal", "node": "n23", "truth": "healthy",
         "alerts": [xid("n23", 149, summary="NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 "
                                            "(0x026001c6 0x00000000 0x0 0x0)")]},
        {"name": "XID 154: Node Reboot Required", "node": "n16", "truth": "faulty",
         "alerts": [xid("n16", 154, summary="NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 "
                                            "(None) to 0x2 (Node Reboot Required)")]},
        {"name": "NotReady 15 min", "node": "n17", "truth": "faulty",
         "alerts": [_alert("NodeNotReady", "node-not-ready", "n17", starts=15, value="900")]},
        {"name": "30 min of thermal throttling", "node": "n18", "truth": "faulty",
         "alerts": [_alert("GpuThermalThrottle", "thermal-throttle", "n18", starts=30, value="1800", severity="critical")]},
        {"name": "InfiniBand down 60 s in the window", "node": "n19", "truth": "faulty",
         "alerts": [_alert("InfinibandDowntime", "ib-downtime", "n19", starts=5, value="60", port="mlx5_0/1")]},
        {"name": "NVLink CRC 500/s", "node": "n20", "truth": "faulty",
         "alerts": [_alert("GpuNvlinkErrors", "nvlink-error", "n20", starts=5, value="500", counter="crc")]},
        {"name": "row remap pending", "node": "n21", "truth": "faulty",
         "alerts": [_alert("GpuRowRemapPending", "row-remap-pending", "n21", starts=5, value="1")]},
        {"name": "throttle 2 min, then still throttling at 15 min", "node": "n22", "truth": "faulty",
         "alerts": [_alert("GpuThermalThrottle", "thermal-throttle", "n22", starts=15, value="120", severity="warning"),
                    _alert("GpuThermalThrottle", "thermal-throttle", "n22", starts=15, value="900", severity="critical")]},
    ]


def run() -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        led = Ledger(f"sqlite:///{Path(tmp) / 'ledger.db'}")
        led.migrate()
        led.upsert_nodes([Node(name=f"n{i:02d}", topology=Topology(rack=f"r{i // 4}")) for i in range(1, 30)])
        intake = AlertIntake(led, NodeDirectory(led), window_seconds=600)
        for sc in corpus():
            decisions, cordoned_at_intake = [], False
            for alert in sc["alerts"]:
                got = intake.ingest(webhook_payload([alert]))
                for opened in got.opened:
                    inc = led.get_incident(opened.record.id)
                    recurrences = sum(i.fingerprint == inc.fingerprint for i in led.incidents(node=inc.node))
                    now = datetime.now(UTC)
                    d = decide(asdict(inc), recurrences=recurrences, node_state="active", now=now, detected_at=now,
                               max_age_seconds=3600, thresholds=SignalThresholds())
                    decisions.append(d)
                    # the receiver's quarantine at intake, on the same incident, before triage ran
                    quarantine = decide_intake(path=verdict_of(inc)["path"], node_state=NodeState.ACTIVE, cordoned=False,
                                           open_loop=False, scopes_not_closed=[], quarantined_by_intake=0,
                                           max_nodes=4, dry_run=False)
                    cordoned_at_intake |= quarantine.quarantine
                    # triage settles what it records; a remediation is taken as having worked (resolved)
                    led.set_incident_status(inc.id, IncidentStatus.IGNORED if d.action != "remediate"
                                            else IncidentStatus.RESOLVED, detail=d.reason[:200])
            paths = [d.path for d in decisions if d.path is not None]
            took_out = any(p in TAKES_OUT or (p is P.ESCALATE and d.quarantine) for d, p in
                           zip(decisions, paths))
            acted = any(p in ACTS for p in paths)
            xid_codes = {int(a["labels"]["xid"]) for a in sc["alerts"] if a["labels"].get("xid")}
            nvidia = ", ".join(f"{c}: {lookup(c).catalog_bucket or 'no bucket'}" for c in sorted(xid_codes))
            deviation = [f"XID {c}: {lookup(c).reason}" for c in sorted(xid_codes)
                         if "deliberately" in lookup(c).reason]
            rows.append({
                "scenario": sc["name"], "truth": sc["truth"], "incidents": len(decisions),
                "decisions": [p.value for p in paths], "took_node_out": took_out,
                "healthy_taken_out": sc["truth"] == "healthy" and took_out,
                "cordoned_at_intake": cordoned_at_intake,
                "healthy_cordoned_at_intake": sc["truth"] == "healthy" and cordoned_at_intake,
                "intake_not_followed": cordoned_at_intake and not took_out,
                "fault_missed": sc["truth"] == "faulty" and not acted,
                "nvidia": nvidia, "deviation": deviation,
                "unsafe": any(unsafe_to_run(c) for c in xid_codes),
            })
        led.close()
    return rows


def corpus_table() -> dict:
    """The bring-your-own-monitoring corpus through the real receiver: per-scenario rows and both counts."""
    from remedy.receiver import conformance

    results = conformance.run()
    return {"rows": [r.to_dict() for r in results], "counts": conformance.counts(results)}


def print_corpus(table: dict) -> None:
    rows, c = table["rows"], table["counts"]
    w = max(len(r["name"]) for r in rows)
    print(f"{'scenario (published label sets and rule names, through the receiver over HTTP)':{w}}  {'truth':7}  "
          f"{'HTTP':9}  decided")
    for r in rows:
        flag = " <- healthy taken out" if r["healthy_taken_out"] else (" <- missed" if r["fault_missed"] else "")
        print(f"{r['name']:{w}}  {r['truth']:7}  {','.join(map(str, r['answers'])):9}  "
              f"{', '.join(r['decisions']) or '-'}{flag}")
    print()
    print(f"corpus: faults missed {c['faults_missed']} of {c['faulty']}; healthy nodes taken out "
          f"{c['healthy_taken_out']} of {c['healthy']} (on main before issue 30: 8 of 12 and 1 of 9; target 0 and 0)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--corpus-only", action="store_true", help="only the bring-your-own-monitoring corpus")
    args = ap.parse_args()
    table = corpus_table()
    if args.corpus_only:
        print(json.dumps(table, indent=2)) if args.json else print_corpus(table)
        return
    rows = run()
    if args.json:
        print(json.dumps({"scenarios": rows, "corpus": table}, indent=2))
        return
    w = max(len(r["scenario"]) for r in rows)
    print(f"{'scenario':{w}}  {'truth':7}  {'incidents':9}  {'decided':28}  {'node out':8}  NVIDIA bucket")
    for r in rows:
        print(f"{r['scenario']:{w}}  {r['truth']:7}  {r['incidents']:9}  {', '.join(r['decisions']):28}  "
              f"{'yes' if r['took_node_out'] else 'no':8}  {r['nvidia']}")
    healthy = sum(r["truth"] == "healthy" for r in rows)
    faulty = len(rows) - healthy
    taken = [r["scenario"] for r in rows if r["healthy_taken_out"]]
    missed = [r["scenario"] for r in rows if r["fault_missed"]]
    print()
    print(f"healthy nodes taken out: {len(taken)} of {healthy} (target 0){': ' + '; '.join(taken) if taken else ''}")
    print(f"faults missed:           {len(missed)} of {faulty} (target 0){': ' + '; '.join(missed) if missed else ''}")
    brief = [r["scenario"] for r in rows if r["healthy_cordoned_at_intake"]]
    undone = [r["scenario"] for r in rows if r["intake_not_followed"]]
    print(f"healthy nodes cordoned at intake (before triage; released when it does not act): {len(brief)} of {healthy}"
          f"{': ' + '; '.join(brief) if brief else ''}")
    print(f"intake cordons triage does not follow with a remediation: {len(undone)}"
          f"{': ' + '; '.join(undone) if undone else ''}")
    devs = sorted({d for r in rows for d in r["deviation"]})
    print(f"actions that differ from NVIDIA's column: {len(devs)}")
    for d in devs:
        print(f"  - {d}")
    print()
    print_corpus(table)


if __name__ == "__main__":
    main()
