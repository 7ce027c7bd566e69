"""InfiniBand port flaps add up across receivers and restarts (issue 30): the downtime tracker lives in the ledger.

deployments/prometheus/rules.yml promises that the receiver folds InfinibandPortDown firing/resolved into cumulative
downtime (7 s within 1 h replaces the node). The tracker lived in each receiver's memory, so with two receivers on
one ledger (an HA pair behind Alertmanager) or after a restart, each saw part of the flapping and none escalated.

Real parts: two receivers over HTTP (uvicorn on loopback ports), each with its own Ledger object (its own engine and
pool, as two processes have) on one SQLite file or one PostgreSQL database; Alertmanager's webhook bodies."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from remedy.config import load_settings
from remedy.ledger import Ledger
from remedy.ledger.ib_ports import port_outages
from remedy.receiver.server import ReceiverServer, build_receiver
from remedy.sim.alerts import fingerprint, webhook_payload
from tests.fixtures.postgres import fresh_postgres_url, postgres_server  # noqa: F401 - fixtures
from tests.receiver.conftest import FLEET, TOKEN

NODE = "gpu005"


def port_alert(start: datetime, end: datetime | None, *, port: str = "1") -> dict:
    """node_exporter's port-state alert as Alertmanager sends it (rules.yml InfinibandPortDown)."""
    labels = {"alertname": "InfinibandPortDown", "signal": "ib-port-down", "severity": "warning",
              "instance": f"{NODE}:9100", "node": NODE, "device": "mlx5_0", "port": port}
    z = "%Y-%m-%dT%H:%M:%S.%fZ"
    return {"status": "resolved" if end else "firing", "labels": labels,
            "annotations": {"summary": f"IB mlx5_0 port {port} down on {NODE}:9100"},
            "startsAt": start.strftime(z), "endsAt": end.strftime(z) if end else "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus:9090/graph?g0.expr=node_infiniband_state_id+%21%3D+4",
            "fingerprint": fingerprint(labels)}


class Pair:
    """Two receivers on one ledger URL, each with its own Ledger (engine, pool)."""

    def __init__(self, url: str) -> None:
        self.url = url
        setup = Ledger(url)
        setup.migrate()
        setup.upsert_nodes(FLEET)
        setup.close()
        self.settings = load_settings(db_url=url, receiver={"token": TOKEN, "dedup_window_seconds": 600})
        self.ledgers: list[Ledger] = []
        self.servers: list[ReceiverServer] = []
        self.client = httpx.Client(timeout=30)

    def start(self) -> ReceiverServer:
        led = Ledger(self.url)
        self.ledgers.append(led)
        server = ReceiverServer(build_receiver(self.settings, led, api_url=None)).start()
        self.servers.append(server)
        return server

    def post(self, server: ReceiverServer, *alerts: dict) -> httpx.Response:
        r = self.client.post(server.alerts_url, json=webhook_payload(list(alerts)),
                             headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200, r.text
        return r

    def downtime_incidents(self) -> list:
        return [i for i in self.ledgers[0].incidents(node=NODE) if i.signal == "ib-downtime"]

    def close(self) -> None:
        for s in self.servers:
            s.stop()
        for led in self.ledgers:
            led.close()
        self.client.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def pair(request, tmp_path):
    url = (f"sqlite:///{tmp_path / 'ledger.db'}" if request.param == "sqlite"
           else request.getfixturevalue("fresh_postgres_url"))
    p = Pair(url)
    yield p
    p.close()


def _flap(pair: Pair, server: ReceiverServer, start: datetime, seconds: float) -> None:
    """One past outage as Alertmanager reports it once the port is back: the resolved notification carries both
    ends (the firing one, sent while it was down, is covered by test_firing_then_resolved_is_one_outage)."""
    pair.post(server, port_alert(start, start + timedelta(seconds=seconds)))


def test_flaps_seen_by_two_receivers_add_up_to_one_escalation(pair) -> None:
    a, b = pair.start(), pair.start()
    t0 = datetime.now(UTC) - timedelta(minutes=20)
    _flap(pair, a, t0, 3)  # 3 s down, seen only by receiver A
    assert pair.downtime_incidents() == []  # one 3 s outage: below the 7 s budget, and one outage alone never trips
    _flap(pair, b, t0 + timedelta(minutes=5), 5)  # 5 s more, seen only by receiver B: 8 s in the hour
    (incident,) = pair.downtime_incidents()
    assert incident.evidence["value"] == 8.0 and incident.evidence["labels"]["port"] == "mlx5_0:1"
    assert incident.evidence["labels"]["outages"] == "2"
    assert incident.severity == "critical"
    # a third flap in the same crossing (on either receiver) does not report the port again
    _flap(pair, a, t0 + timedelta(minutes=9), 2)
    _flap(pair, b, t0 + timedelta(minutes=11), 2)
    assert len(pair.downtime_incidents()) == 1
    assert [(s - t0, e - s) for s, e in port_outages(pair.ledgers[0], NODE, "mlx5_0:1")] == [
        (timedelta(0), timedelta(seconds=3)), (timedelta(minutes=5), timedelta(seconds=5)),
        (timedelta(minutes=9), timedelta(seconds=2)), (timedelta(minutes=11), timedelta(seconds=2))]


def test_flaps_before_and_after_a_receiver_restart_add_up(pair) -> None:
    first = pair.start()
    t0 = datetime.now(UTC) - timedelta(minutes=30)
    _flap(pair, first, t0, 4)
    first.stop()
    pair.servers.remove(first)
    again = pair.start()  # a new process: nothing in memory
    _flap(pair, again, t0 + timedelta(minutes=10), 4)
    (incident,) = pair.downtime_incidents()
    assert incident.evidence["value"] == 8.0


def test_alertmanager_ha_sending_each_flap_to_both_receivers_counts_it_once(pair) -> None:
    """An Alertmanager HA pair (or a re-send) delivers the same outage twice: it is one outage, not two."""
    a, b = pair.start(), pair.start()
    t0 = datetime.now(UTC) - timedelta(minutes=20)
    for start in (t0, t0 + timedelta(minutes=5)):
        for server in (a, b):
            _flap(pair, server, start, 3)  # 3 s + 3 s = 6 s: below budget however often it is sent
    assert pair.downtime_incidents() == []
    assert len(port_outages(pair.ledgers[0], NODE, "mlx5_0:1")) == 2
    # the flap that crosses the budget reaches both receivers at the same moment: one escalation
    last = t0 + timedelta(minutes=8)
    alert = port_alert(last, last + timedelta(seconds=2))
    go = threading.Barrier(2)
    errors: list[BaseException] = []

    def send(server: ReceiverServer) -> None:
        try:
            client = httpx.Client(timeout=30)
            go.wait()
            r = client.post(server.alerts_url, json=webhook_payload([alert]),
                            headers={"Authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 200, r.text
            client.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(s,)) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    # one escalation: the receiver that did not trip may send the same crossing again, which the ledger folds into
    # the same incident (its count is sightings, not incidents)
    (incident,) = pair.downtime_incidents()
    assert incident.evidence["value"] == 8.0 and incident.count in (1, 2)


def test_budget_rearms_once_the_window_forgets_the_old_flaps(pair) -> None:
    """The hour slides: flaps that left the window no longer count, and a new crossing is reported again."""
    a, b = pair.start(), pair.start()
    t0 = datetime.now(UTC) - timedelta(hours=3)
    _flap(pair, a, t0, 4)
    _flap(pair, b, t0 + timedelta(minutes=1), 4)
    assert [i.count for i in pair.downtime_incidents()] == [1]
    later = t0 + timedelta(hours=2)  # the first two are out of the 1 h window
    _flap(pair, b, later, 3)
    assert [i.count for i in pair.downtime_incidents()] == [1]  # 3 s in this hour: re-armed, not tripped
    _flap(pair, a, later + timedelta(minutes=2), 5)
    # reported again: the port's incident, still open (nobody triaged it here), counts the second crossing rather
    # than opening a twin (the ledger's dedup: never act twice on one incident)
    (incident,) = pair.downtime_incidents()
    assert incident.count == 2


def test_firing_then_resolved_is_one_outage_counted_up_to_now_while_down(pair) -> None:
    """A port still down when its firing notification arrives counts up to now (rules.yml: the receiver folds
    firing/resolved); the resolved notification then fixes its length."""
    a, b = pair.start(), pair.start()
    now = datetime.now(UTC)
    _flap(pair, a, now - timedelta(minutes=10), 5)
    pair.post(b, port_alert(now - timedelta(seconds=4), None))  # down 4 s ago and still down: 9 s in the hour
    (incident,) = pair.downtime_incidents()
    assert 8.5 <= incident.evidence["value"] < 60
    pair.post(a, port_alert(now - timedelta(seconds=4), now - timedelta(seconds=2)))  # back up after 2 s
    outages = port_outages(pair.ledgers[0], NODE, "mlx5_0:1")
    assert [e - s for s, e in outages] == [timedelta(seconds=5), timedelta(seconds=2)]
    assert len(pair.downtime_incidents()) == 1


def test_the_crossing_alert_sent_again_after_a_failed_write_still_escalates(pair, monkeypatch) -> None:
    """The trip mark is written, then the incident cannot be (the ledger fails): the receiver answers 503 and
    Alertmanager sends the same alert again, which must still open the escalation, once."""
    a, b = pair.start(), pair.start()
    t0 = datetime.now(UTC) - timedelta(minutes=20)
    _flap(pair, a, t0, 4)
    crossing = port_alert(t0 + timedelta(minutes=3), t0 + timedelta(minutes=3, seconds=4))
    ledger_b = pair.ledgers[1]
    real_open = ledger_b.open_incident
    calls = {"n": 0}

    def failing_open(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            from sqlalchemy.exc import OperationalError

            raise OperationalError("INSERT INTO incidents", None, Exception("disk I/O error"))
        return real_open(*args, **kwargs)

    monkeypatch.setattr(ledger_b, "open_incident", failing_open)
    r = pair.client.post(b.alerts_url, json=webhook_payload([crossing]), headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 503 and pair.downtime_incidents() == []
    pair.post(b, crossing)  # Alertmanager's retry
    (incident,) = pair.downtime_incidents()
    assert incident.evidence["value"] == 8.0 and incident.count == 1
    pair.post(a, crossing)  # and the other receiver of an HA pair: the same incident, seen twice
    (incident,) = pair.downtime_incidents()
    assert incident.count == 2
    # a later flap in the same crossing is not the crossing alert: nothing more
    _flap(pair, a, t0 + timedelta(minutes=6), 2)
    assert [i.count for i in pair.downtime_incidents()] == [2]
