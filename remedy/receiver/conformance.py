"""Conformance corpus runner: real label sets and rule names from other people's monitoring, POSTed through the real
receiver (HTTP, bearer token) with the cluster simulator behind it, then triage's decision on every incident they
opened; counts healthy nodes taken out and real faults missed.

A scenario (tests/realdata/alerts/scenarios.json) names the published source its labels come from, the node's truth
(healthy or faulty), pods to create on the node (an exporter's pod, a workload's pod: what `Hostname` and `pod`
labels name), history already in the ledger (a fault gpu-remedy fixed, with the fix), and the webhooks to send.
Label values may say `{node}`, `{ip}` (the node's InternalIP) and `{pod0}`, `{pod1}` … (the pods created for it).

Used by tests/receiver/test_conformance.py (asserts) and bench/decisions.py (prints the counts).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

TOKEN = "conformance-token"
CORPUS = Path(__file__).resolve().parents[2] / "tests" / "realdata" / "alerts" / "scenarios.json"


@dataclass
class ScenarioResult:
    name: str
    truth: str
    source: str
    answers: list[int] = field(default_factory=list)  # HTTP status per webhook
    incidents: int = 0
    decisions: list[str] = field(default_factory=list)
    took_node_out: bool = False
    acted: bool = False
    refused: int = 0
    ignored: int = 0

    @property
    def healthy_taken_out(self) -> bool:
        return self.truth == "healthy" and self.took_node_out

    @property
    def fault_missed(self) -> bool:
        return self.truth == "faulty" and not self.acted

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"healthy_taken_out": self.healthy_taken_out, "fault_missed": self.fault_missed}


def load(path: Path = CORPUS) -> list[dict]:
    scenarios: list[dict] = json.loads(path.read_text())["scenarios"]
    return scenarios


def _iso(minutes_ago: float, now: datetime) -> str:
    return (now - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for k, v in names.items():
            value = value.replace("{" + k + "}", v)
        return value
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    return value


def _alert(spec: dict, names: dict[str, str], now: datetime) -> dict:
    from remedy.sim.alerts import ZERO_TIME, fingerprint

    labels = _fill(spec["labels"], names)
    status = spec.get("status", "firing")
    expr = _fill(spec.get("expr", labels.get("alertname", "")), names)
    return {
        "status": status, "labels": labels, "annotations": _fill(spec.get("annotations", {}), names),
        "startsAt": _iso(spec.get("starts_minutes_ago", 5), now),
        "endsAt": _iso(spec["ends_minutes_ago"], now) if status == "resolved" else ZERO_TIME,
        "generatorURL": "http://prometheus-k8s.monitoring.svc:9090/graph?g0.expr=" + quote(expr) + "&g0.tab=1",
        "fingerprint": spec.get("fingerprint") or fingerprint(labels),
    }


def run(scenarios: list[dict] | None = None) -> list[ScenarioResult]:
    """Every scenario on its own node of one simulated cluster, through one receiver; results in corpus order."""
    import httpx
    from kubernetes import client as k8s

    from remedy.adapters.kubernetes import KubernetesCluster
    from remedy.config import load_settings
    from remedy.domain.model import Action, ActionOutcome, Incident, IncidentStatus
    from remedy.domain.xid import RemediationPath as P
    from remedy.ledger import Ledger
    from remedy.receiver.server import ReceiverServer, build_receiver
    from remedy.receiver.triage_policy import decide
    from remedy.settings.signals import SignalThresholds
    from remedy.sim.alerts import webhook_payload
    from remedy.sim.cluster import build_cluster
    from remedy.sim.server import SimServer

    takes_out = {P.RESET_GPU, P.REBOOT, P.REPLACE}
    acts = takes_out | {P.RESTART_APP, P.ISOLATE, P.ESCALATE}
    scenarios = load() if scenarios is None else scenarios
    results: list[ScenarioResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        sim = SimServer(build_cluster(nodes=max(16, len(scenarios) + 1), spares=0, time_scale=0.01,
                                      training_job=False)).start()
        try:
            settings = load_settings(
                db_url=f"sqlite:///{Path(tmp) / 'ledger.db'}",
                receiver={"token": TOKEN, "dedup_window_seconds": 600},
                cluster={"mode": "simulator", "simulator_url": sim.url, "api_retries": 1,
                         "request_timeout_seconds": 5})
            led = Ledger(settings.db_url)
            led.migrate()

            def cluster() -> KubernetesCluster:
                return KubernetesCluster(settings)

            live = cluster()
            nodes = live.list_gpu_nodes()
            led.upsert_nodes(nodes)
            core: Any = k8s.CoreV1Api(live.api)  # given plain manifests (dicts), as the API server takes them
            ips = {}
            for item in core.list_node().items:
                ips[item.metadata.name] = next(a.address for a in item.status.addresses if a.type == "InternalIP")
            receiver = build_receiver(settings, led, api_url=None, node_lister=lambda: cluster().list_gpu_nodes(),
                                      cluster=cluster)
            server = ReceiverServer(receiver).start()
            http = httpx.Client(timeout=30)
            try:
                for i, sc in enumerate(scenarios):
                    node = f"gpu{i + 1:03d}"
                    names = {"node": node, "ip": ips[node]}
                    for p, pod in enumerate(sc.get("pods", [])):
                        ns = pod.get("namespace", "default")
                        try:
                            core.create_namespace({"metadata": {"name": ns}})
                        except k8s.ApiException:
                            pass  # already there
                        core.create_namespaced_pod(ns, {
                            "metadata": {"name": pod["name"], "namespace": ns},
                            "spec": {"nodeName": node, "containers": [{"name": "c", "image": pod.get("image", "x")}]}})
                        names[f"pod{p}"] = pod["name"]
                    now = datetime.now(UTC)
                    for h in sc.get("history", []):
                        at = now - timedelta(minutes=h["minutes_ago"])
                        rec, _ = led.open_incident(Incident(
                            node=node, signal=h["signal"], gpu=h.get("gpu"), xid=h.get("xid"), first_seen=at,
                            last_seen=at, status=IncidentStatus.RESOLVED, detail="history"), window_seconds=0)
                        if h.get("fix"):
                            led.start_action(Action(kind=h["fix"], node=node, incident_id=rec.id,
                                                    started_at=at + timedelta(minutes=2),
                                                    outcome=ActionOutcome.SUCCEEDED, requested_by="history"))
                    res = ScenarioResult(sc["name"], sc["truth"], sc["source"])
                    for delivery in sc["deliveries"]:
                        before = {x.id for x in led.incidents()}
                        payload = webhook_payload([_alert(a, names, now) for a in delivery])
                        r = http.post(server.alerts_url, json=payload, headers={"Authorization": f"Bearer {TOKEN}"})
                        res.answers.append(r.status_code)
                        try:
                            body = r.json()
                        except ValueError:
                            body = {}
                        res.refused += int(body.get("rejected", 0) or 0) if r.status_code != 422 else len(delivery)
                        res.ignored += int(body.get("ignored", 0) or 0)
                        for inc in [x for x in led.incidents() if x.id not in before]:
                            if inc.status is not IncidentStatus.OPEN:
                                continue
                            recurrences = sum(x.fingerprint == inc.fingerprint for x in led.incidents(node=inc.node))
                            t = datetime.now(UTC)
                            d = decide(asdict(inc), recurrences=recurrences, node_state="active", now=t,
                                       detected_at=t, max_age_seconds=3600, thresholds=SignalThresholds())
                            res.incidents += 1
                            if d.path is not None:
                                res.decisions.append(d.path.value)
                                res.took_node_out |= d.path in takes_out or (d.path is P.ESCALATE and d.quarantine)
                                res.acted |= d.path in acts
                            led.set_incident_status(inc.id, IncidentStatus.IGNORED if d.action != "remediate"
                                                    else IncidentStatus.RESOLVED, detail=d.reason[:200])
                    results.append(res)
            finally:
                http.close()
                server.stop()
                led.close()
        finally:
            sim.stop()
    return results


def counts(results: list[ScenarioResult]) -> dict[str, int]:
    healthy = [r for r in results if r.truth == "healthy"]
    faulty = [r for r in results if r.truth == "faulty"]
    return {"healthy": len(healthy), "faulty": len(faulty),
            "healthy_taken_out": sum(r.healthy_taken_out for r in healthy),
            "faults_missed": sum(r.fault_missed for r in faulty)}


__all__ = ["CORPUS", "ScenarioResult", "counts", "load", "run"]
