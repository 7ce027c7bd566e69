"""The intake cordon cap is global (issue 32, item 6): two receivers on one ledger cordoned 7 nodes against a cap of
4, because each counted its own quarantines. Now the count and the claim are one ledger transaction.

Real parts: the cluster simulator over HTTP (each receiver its own Kubernetes client), one ledger file or one
PostgreSQL database opened by two separate Ledger objects (two engines, two pools: what two receiver processes
have), both announcers' own call path (`IncidentAnnouncer.announce_pending`) started together."""

from __future__ import annotations

import threading

from remedy.adapters.kubernetes import ANN_CORDONED_BY
from remedy.domain.model import Incident
from remedy.ledger import Ledger
from remedy.receiver.events import IncidentAnnouncer
from remedy.receiver.metrics import ReceiverMetrics
from remedy.receiver.outbox import RECEIVER_MARK
from remedy.receiver.quarantine import KIND, IntakeQuarantine
from remedy.safety.intake import INTAKE_OWNER_PREFIX, IntakeSkip
from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture
from tests.fixtures.postgres import fresh_postgres_url, postgres_server  # noqa: F401 - fixtures


class Sink:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def send(self, events: list[dict]) -> None:
        self.events.extend(events)

    def close(self) -> None:
        pass


def _two_receivers_cordon(sim_factory, remedy_env, db_url: str | None):
    sim = sim_factory(nodes=16, spares=2)
    env = {"RECEIVER__QUARANTINE__MAX_NODES": 4} | ({"DB_URL": db_url} if db_url else {})
    runtime = remedy_env(sim=sim, **env)
    settings = runtime.settings()
    runtime.ledger()  # migrated once
    ledgers = [Ledger(settings.db_url), Ledger(settings.db_url)]
    # 8 node-out faults, each opened as the receiver opens them, visible to both announcers
    for n in range(8):
        ledgers[0].open_incident(Incident(node=f"gpu{n + 1:03d}", signal="xid", gpu=0, xid=79,
                                          detail=f"{RECEIVER_MARK} XID 79"), window_seconds=600)
    announcers = []
    for led in ledgers:
        a = IncidentAnnouncer(led, Sink(), ReceiverMetrics(), thresholds=settings.signals)
        a.quarantine = IntakeQuarantine(led, settings, runtime.cluster)
        announcers.append(a)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(a: IncidentAnnouncer) -> None:
        try:
            start.wait()
            a.announce_pending()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(a,)) for a in announcers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    cluster = runtime.cluster()
    by_intake = [n for n in (f"gpu{i + 1:03d}" for i in range(8))
                 if cluster.get_node(n).annotations.get(ANN_CORDONED_BY, "").startswith(INTAKE_OWNER_PREFIX)]
    claims = ledgers[0].actions(kind=KIND)
    skips = [(i, d) for a in announcers for i, d in a.quarantine.decisions if not d.quarantine]
    for led in ledgers:
        led.close()
    return by_intake, claims, skips


def test_two_receivers_on_one_sqlite_ledger_cordon_no_more_than_the_cap(sim_factory, remedy_env):
    cordoned, claims, skips = _two_receivers_cordon(sim_factory, remedy_env, None)
    assert len(cordoned) == 4, cordoned  # per-process counting cordoned up to 8 here
    assert len(claims) == 4 and len({c.incident_id for c in claims}) == 4
    # the other four were judged at the limit, by whichever receiver looked at them (a receiver may also judge at
    # the limit an incident the other one claimed a moment before: it is not cordoned twice either way)
    assert {i for i, _ in skips} >= set(range(1, 9)) - {c.incident_id for c in claims}
    # at the limit, or (the race the two receivers run) already cordoned by the other one a moment before
    assert all(d.skip in (IntakeSkip.LIMIT, IntakeSkip.ALREADY_CORDONED) for _, d in skips), skips


def test_two_receivers_on_one_postgresql_ledger_cordon_no_more_than_the_cap(sim_factory, remedy_env,
                                                                              fresh_postgres_url):
    cordoned, claims, skips = _two_receivers_cordon(sim_factory, remedy_env, fresh_postgres_url)
    assert len(cordoned) == 4, cordoned
    assert len(claims) == 4 and len({c.incident_id for c in claims}) == 4
    # the other four were judged at the limit, by whichever receiver looked at them (a receiver may also judge at
    # the limit an incident the other one claimed a moment before: it is not cordoned twice either way)
    assert {i for i, _ in skips} >= set(range(1, 9)) - {c.incident_id for c in claims}
    # at the limit, or (the race the two receivers run) already cordoned by the other one a moment before
    assert all(d.skip in (IntakeSkip.LIMIT, IntakeSkip.ALREADY_CORDONED) for _, d in skips), skips
