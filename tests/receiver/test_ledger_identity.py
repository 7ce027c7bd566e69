"""Run keys are unique per ledger (issue 32, item 4): triage runs were keyed `triage:incident:<id>`, so after a ledger
reset (or with two stacks on one Prefect server) a new incident 1 got the old incident 1's run back from Prefect and
was never triaged, its node left cordoned. Every ledger has an identity, written by the migration that created it;
it goes into the incident event's payload, its id, and the triage run's idempotency key; a triage run started by
another ledger's event touches nothing here.

Real parts: SQLite files and a real PostgreSQL 15 (the identity is made by the alembic migration on both), a real
Prefect server (test harness) answering `create_flow_run_from_deployment` with an idempotency key."""

from __future__ import annotations

import pytest

from remedy.domain.model import Incident
from remedy.ledger import Ledger
from remedy.receiver.dispatcher import DirectTriageSink, triage_key
from remedy.receiver.events import IncidentAnnouncer
from remedy.receiver.metrics import ReceiverMetrics
from remedy.receiver.outbox import RECEIVER_MARK
from remedy.receiver.triage_policy import foreign_ledger


@pytest.fixture(params=["sqlite", "postgresql"])
def new_ledger_url(request, tmp_path):
    """A factory of fresh, migrated ledgers (a reset is a new one) on each backend."""
    made = []

    def make() -> str:
        if request.param == "sqlite":
            url = f"sqlite:///{tmp_path / f'ledger-{len(made)}.db'}"
        else:
            url = request.getfixturevalue("postgres_server").create_database()
        with Ledger(url) as led:
            led.migrate()
        made.append(url)
        return url

    return make


class _Keep:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def send(self, events) -> None:
        self.events += events

    def close(self) -> None:
        pass


def _announce_incident_one(url: str) -> dict:
    """Incident 1 of this ledger, announced as the receiver's outbox does; returns its event."""
    with Ledger(url) as led:
        rec, _ = led.open_incident(Incident(node="gpu003", signal="xid", gpu=2, xid=79,
                                                  detail=f"{RECEIVER_MARK} GpuXid"), window_seconds=600)
        assert rec.id == 1
        keep = _Keep()
        IncidentAnnouncer(led, keep, ReceiverMetrics()).announce_pending()
        [event] = keep.events
        return event


def test_identity_is_written_at_migration_and_kept(new_ledger_url):
    url = new_ledger_url()
    with Ledger(url) as led:
        first = led.identity()
        led.migrate()  # a second migrate (every `remedy up`) keeps it
    with Ledger(url) as led:
        assert led.identity() == first and len(first) == 32
    with Ledger(new_ledger_url()) as other:
        assert other.identity() != first


def test_a_reset_ledgers_incident_one_is_keyed_apart(new_ledger_url):
    before, after = _announce_incident_one(new_ledger_url()), _announce_incident_one(new_ledger_url())
    assert before["payload"]["incident_id"] == after["payload"]["incident_id"] == 1
    assert before["payload"]["ledger"] != after["payload"]["ledger"]
    assert triage_key(before["payload"]) != triage_key(after["payload"])
    assert before["id"] != after["id"]  # Prefect's trigger service dedupes on the event id too


def test_triage_stands_down_on_another_ledgers_event():
    assert foreign_ledger("", "abc") == ""  # started by hand: no ledger named
    assert foreign_ledger("abc", "abc") == ""
    assert "another stack" in foreign_ledger("old", "abc")


@pytest.mark.prefect
def test_prefect_gives_a_reset_ledgers_incident_a_run_of_its_own(prefect_server, tmp_path):
    """On a real Prefect server: the embedded stack's sink creates one triage run per incident event. With the old
    key the second ledger's incident 1 got the first one's run back (same id) and was never triaged."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    from remedy.deployments import INCIDENT_TRIGGER

    urls = [f"sqlite:///{tmp_path / 'before.db'}", f"sqlite:///{tmp_path / 'after-reset.db'}"]
    for url in urls:
        with Ledger(url) as led:
            led.migrate()
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("triage")
        deployment = client.create_deployment(flow_id=flow_id, name="ledger-identity-test", paused=True)
    runs = []
    for url in urls:
        event = _announce_incident_one(url)
        keep = _Keep()
        DirectTriageSink(keep, deployment, INCIDENT_TRIGGER).send([event])
        assert keep.events == [event]
        runs.append(event)
    with get_client(sync_client=True) as client:
        # filtered on the server: the session's shared server holds more runs than one unfiltered page
        mine = client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment])))
    assert len(mine) == 2, [r.idempotency_key for r in mine]
    assert {r.parameters["ledger"] for r in mine} == {e["payload"]["ledger"] for e in runs}
    assert all(r.parameters["incident_id"] == 1 for r in mine)
