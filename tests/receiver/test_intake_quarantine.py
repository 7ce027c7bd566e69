"""Quarantine at intake (remedy.receiver.quarantine): the receiver cordons a failed node before the flows start,
within its limit, never a node someone else cordoned, never behind an open breaker, once per incident.

Real parts: the cluster simulator over HTTP (the official client's PATCH and Event), a SQLite ledger, the
announcer's own call path (`IncidentAnnouncer.announce_pending` with a sink that records what it would send)."""

from __future__ import annotations

from remedy.adapters.kubernetes import ANN_CORDONED_BY
from remedy.domain.model import ActionOutcome, Incident
from remedy.receiver.events import IncidentAnnouncer
from remedy.receiver.metrics import ReceiverMetrics
from remedy.receiver.outbox import RECEIVER_MARK
from remedy.receiver.quarantine import KIND, IntakeQuarantine
from remedy.safety.intake import IntakeSkip, intake_owner
from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture


class Sink:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def send(self, events: list[dict]) -> None:
        self.events.extend(events)

    def close(self) -> None:
        pass


def _setup(sim_factory, remedy_env, **env):
    sim = sim_factory(nodes=16, spares=2)
    runtime = remedy_env(sim=sim, **env)
    led = runtime.ledger()
    announcer = IncidentAnnouncer(led, Sink(), ReceiverMetrics(), thresholds=runtime.settings().signals)
    announcer.quarantine = IntakeQuarantine(led, runtime.settings(), runtime.cluster)
    return runtime, led, announcer


def _fault(led, node: str, xid: int, gpu: int = 0):
    # opened as the receiver opens them (its outbox mark), so the announcer announces them
    record, created = led.open_incident(Incident(node=node, signal="xid", gpu=gpu, xid=xid,
                                                 detail=f"{RECEIVER_MARK} XID {xid}"), window_seconds=600)
    assert created
    return record


def test_a_node_fault_is_cordoned_before_its_run_exists_and_only_once(sim_factory, remedy_env):
    runtime, led, announcer = _setup(sim_factory, remedy_env)
    inc = _fault(led, "gpu003", 79)
    app = _fault(led, "gpu004", 13)  # the application's fault: the node stays in service
    announcer.announce_pending()
    node = runtime.cluster().get_node("gpu003")
    assert node.unschedulable and node.annotations[ANN_CORDONED_BY] == intake_owner(inc.id)
    assert not runtime.cluster().get_node("gpu004").unschedulable
    [row] = led.actions(kind=KIND)
    assert row.incident_id == inc.id and row.outcome is ActionOutcome.SUCCEEDED
    events = runtime.cluster().api  # the Event an operator reads in `kubectl describe node`
    from kubernetes import client as k8s

    cordons = [e for e in k8s.CoreV1Api(events).list_namespaced_event("default").items
               if e.involved_object.name == "gpu003" and e.reason == "RemedyCordon"]
    assert cordons and "quarantined at intake" in cordons[0].message
    # the announcement failed and is retried: decided once, no second action
    announcer.quarantine([led.get_incident(inc.id)], ["replace"])
    assert len(led.actions(kind=KIND)) == 1
    assert app.id not in {a.incident_id for a in led.actions(kind=KIND)}


def test_the_limit_holds_until_a_flow_takes_a_quarantine_over(sim_factory, remedy_env, monkeypatch):
    from remedy.receiver import quarantine

    monkeypatch.setattr(quarantine, "RECHECK_SECONDS", 0.0)  # look again at once (in service: once a second)
    runtime, led, announcer = _setup(sim_factory, remedy_env, RECEIVER__QUARANTINE__MAX_NODES=1)
    first, second = _fault(led, "gpu002", 79), _fault(led, "gpu010", 79)
    announcer.announce_pending()
    cluster = runtime.cluster()
    assert cluster.get_node("gpu002").unschedulable and not cluster.get_node("gpu010").unschedulable
    skips = dict(announcer.quarantine.decisions)
    assert skips[second.id].skip is IntakeSkip.LIMIT, skips
    # replace-node's cordon for the same incident takes the quarantine over: the limit has room again
    change = cluster.cordon("gpu002", reason="XID 79", by="flow-run:replace", adopt=intake_owner(first.id))
    assert change.changed and cluster.get_node("gpu002").annotations[ANN_CORDONED_BY] == "flow-run:replace"
    third = _fault(led, "gpu011", 48)
    announcer.announce_pending()
    assert cluster.get_node("gpu011").unschedulable, dict(announcer.quarantine.decisions)[third.id]


def test_someone_elses_cordon_an_open_breaker_and_dry_run_are_left_alone(sim_factory, remedy_env):
    runtime, led, announcer = _setup(sim_factory, remedy_env)
    cluster = runtime.cluster()
    cluster.cordon("gpu001", reason="maintenance", by="alice")
    rack = cluster.get_node("gpu009").topology.rack
    led.record_breaker_event("rack", rack, "closed", "open", reason="three failures in a minute", by="test")
    mine, opened = _fault(led, "gpu001", 79), _fault(led, "gpu009", 79)
    announcer.announce_pending()
    decisions = dict(announcer.quarantine.decisions)
    assert decisions[mine.id].skip is IntakeSkip.ALREADY_CORDONED
    assert cluster.get_node("gpu001").annotations[ANN_CORDONED_BY] == "alice"  # theirs, untouched
    assert decisions[opened.id].skip is IntakeSkip.BREAKER and rack in decisions[opened.id].reason
    assert not cluster.get_node("gpu009").unschedulable
    assert led.actions(kind=KIND) == []


def test_dry_run_cordons_nothing(sim_factory, remedy_env):
    runtime, led, announcer = _setup(sim_factory, remedy_env, DRY_RUN="true")
    inc = _fault(led, "gpu005", 79)
    announcer.announce_pending()
    assert dict(announcer.quarantine.decisions)[inc.id].skip is IntakeSkip.DRY_RUN
    assert not runtime.cluster().get_node("gpu005").unschedulable


def test_an_api_failure_is_one_line_and_the_incident_is_still_announced(sim_factory, remedy_env, caplog):
    runtime, led, announcer = _setup(sim_factory, remedy_env)
    inc = _fault(led, "gpu006", 79)
    announcer.quarantine._cluster = lambda: (_ for _ in ()).throw(ConnectionError("API server down"))
    assert announcer.announce_pending() == 1  # the run is still created: the flow cordons as before
    assert any("not quarantined at intake" in r.getMessage() and "API server down" in r.getMessage()
               for r in caplog.records)
    assert [e["payload"]["incident_id"] for e in announcer.sink.events] == [inc.id]


def test_the_evidence_decides_as_in_triage_a_nonfatal_nvlink5_line_is_not_cordoned(sim_factory, remedy_env):
    # the driver's own word in the kernel line (real format, NVIDIA's XID catalog for NVLink5 subcodes): Nonfatal →
    # watch; before the announcer classified with the evidence, the intake saw only "XID 144" and would cordon
    runtime, led, announcer = _setup(sim_factory, remedy_env)
    raw = "NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000000 0x00000000)"
    record, _ = led.open_incident(Incident(node="gpu007", signal="xid", gpu=0, xid=144, detail=f"{RECEIVER_MARK} x",
                                           evidence={"raw": raw}), window_seconds=600)
    fatal, _ = led.open_incident(Incident(node="gpu009", signal="xid", gpu=0, xid=149,
                                          detail=f"{RECEIVER_MARK} x",
                                          evidence={"raw": raw.replace("144", "149").replace("Nonfatal", "Fatal")}),
                                 window_seconds=600)
    announcer.announce_pending()
    paths = {e["payload"]["incident_id"]: e["payload"]["path"] for e in announcer.sink.events}
    assert paths[record.id] == "watch" and paths[fatal.id] == "reset-gpu", paths
    assert not runtime.cluster().get_node("gpu007").unschedulable
    assert runtime.cluster().get_node("gpu009").unschedulable
