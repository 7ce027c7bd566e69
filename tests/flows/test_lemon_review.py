"""lemon_review on a seeded 63-node, 73-day history loaded into the ledger; node histories read back from it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.approvals.helpers import remedy_env  # noqa: F401 - fixture

DAY = timedelta(days=1)


def load_fleet_history(led, fleet, cluster_nodes) -> None:
    """Write a simulated FleetHistory into the ledger the way it would have accumulated: the node joins the
    training pool `exposure_days` before now, its incidents and the validations that followed are recorded."""
    from remedy.domain.model import Incident, IncidentStatus, NodeState

    for n in cluster_nodes:
        led.upsert_node(n, at=fleet.start)
    for h in fleet.histories:
        led.transition(h.node, NodeState.SPARE, reason="seeded: delivered", requested_by="test", at=fleet.start)
        led.transition(h.node, NodeState.ACTIVE, reason="seeded: joined the job", requested_by="test",
                       at=fleet.now - h.exposure_days * DAY)
        for i in h.incidents:
            led.open_incident(Incident(node=h.node, signal=i.signal, gpu=i.gpu, xid=i.xid, first_seen=i.time,
                                       last_seen=i.time, status=IncidentStatus.RESOLVED), window_seconds=0)
        for v in h.validations:
            led.record_validation(h.node, level="standard", passed=v.passed, summary={}, requested_by="test", at=v.time)


@pytest.fixture
def seeded(sim_factory, slack_stub, aws_endpoint, remedy_env):  # noqa: F811
    """63-node simulator (60 training + 3 spares) whose ledger holds seed-shaped history ending now."""
    from remedy.lemon.history import simulate_fleet

    sim = sim_factory(nodes=63, spares=3)
    runtime = remedy_env(sim=sim, slack=slack_stub, AWS__ENDPOINT_URL=aws_endpoint, APPROVALS__TIMEOUT_SECONDS=60)
    now = datetime.now(UTC)
    fleet = simulate_fleet(11, start=now - 73 * DAY)
    load_fleet_history(runtime.ledger(), fleet, runtime.cluster().list_gpu_nodes())
    for n in runtime.cluster().list_gpu_nodes():  # the spare cycle keeps the pool validated: a retired lemon in the
        if n.state and n.state.value == "spare":  # job is swapped for one of them (flows/retire_node.py)
            runtime.ledger().record_validation(n.name, level="standard", passed=True, summary={}, requested_by="test")
    return runtime, fleet


@pytest.mark.prefect
def test_review_flags_planted_lemons_and_retires_within_budget(prefect_server, seeded, aws_endpoint):
    from flows.lemon_review import lemon_review
    from remedy.approvals.auto import AutoApprover
    from remedy.lemon.history import precision_recall

    runtime, fleet = seeded
    with AutoApprover(decision=True, by="U0ALICE"):
        out = lemon_review()
    flagged = {c["node"] for c in out["candidates"]}
    precision, recall = precision_recall(flagged, fleet.lemons)
    print(f"\nlemon review from the ledger: flagged {sorted(flagged)}, planted {sorted(fleet.lemons)}; "
          f"precision {precision:.2f}, recall {recall:.2f}")
    assert out["scored"] == 63
    assert precision >= 0.9 and recall >= 0.9
    assert not flagged & (fleet.busy | fleet.isolated | fleet.rack_event - fleet.lemons)
    # Budget 2 per 7 days (the default): the two strongest are retired, the others deferred with the reason.
    assert len(out["retire"]) == 2 and sorted(out["retired"]) == sorted(out["retire"])
    assert {d["node"] for d in out["deferred"]} == flagged - set(out["retire"])
    assert all("retirement budget: 2 per 7 d, 0 used" in d["why"] for d in out["deferred"])
    for node in out["retired"]:
        assert runtime.ledger().get_node(node).state.value == "retired"
        assert runtime.cluster().get_node(node).taint_effect("remedy.io/retired") == "NoExecute"
    # each retired lemon was in the job: a spare took its place
    assert len({r.get("replacement") for r in out["retirements"]} - {None}) == 2
    rmas = [r["rma"]["key"] for r in out["retirements"]]
    assert sorted(k.split("/")[1] for k in rmas) == sorted(out["retired"])
    # The evidence reached the report: the node's own incidents and the signals that fired.
    import boto3

    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=aws_endpoint)
    text = s3.get_object(Bucket="gpu-remedy-archive", Key=rmas[0])["Body"].read().decode()
    assert "lemon candidate" in text and "fail → pass → fail" in text

    # The next day's review: the retired stay out of scoring, the budget is used up, nobody else is retired.
    again = lemon_review()
    assert sorted(again["already_retired"]) == sorted(out["retired"])
    assert again["retire"] == [] and again["retired"] == []
    assert {d["node"] for d in again["deferred"]} == {d["node"] for d in out["deferred"]}
    assert all("2 used" in d["why"] for d in again["deferred"])


@pytest.mark.prefect
def test_review_only_lists_candidates(prefect_server, seeded):
    from flows.lemon_review import lemon_review

    runtime, fleet = seeded
    out = lemon_review(retire=False)
    assert {c["node"] for c in out["candidates"]} == set(fleet.lemons)
    assert out["retirements"] == [] and runtime.ledger().approvals() == []
    row = out["candidates"][0]
    assert row["incidents"] >= 3 and row["p_value"] < 0.001 and "repeat-xid" in row["signals"]


def test_node_history_from_ledger_transitions(tmp_path):
    """Exposure = days in active inside the window; leaving the pool is an exclusion (deliberate if an operator)."""
    from remedy.domain.model import Incident, IncidentStatus, Node, NodeState
    from remedy.ledger import Ledger
    from remedy.settings.lemon import LemonSettings
    from tasks.lemon import node_histories

    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    led.migrate()
    now = datetime(2026, 3, 1, tzinfo=UTC)
    led.upsert_node(Node(name="gpu001"), at=now - 100 * DAY)
    steps = [(100, NodeState.SPARE, "test"), (60, NodeState.ACTIVE, "test"), (40, NodeState.QUARANTINED, "flow"),
             (38, NodeState.ACTIVE, "flow"), (20, NodeState.SPARE, "operator:bob"), (10, NodeState.ACTIVE, "flow")]
    for days, state, by in steps:
        led.transition("gpu001", state, reason=f"to {state.value}", requested_by=by, at=now - days * DAY)
    led.open_incident(Incident(node="gpu001", signal="xid", gpu=1, xid=79, first_seen=now - 40 * DAY,
                               last_seen=now - 40 * DAY), window_seconds=0)
    led.open_incident(Incident(node="gpu001", signal="xid", gpu=1, xid=13, first_seen=now - 30 * DAY,
                               last_seen=now - 30 * DAY, status=IncidentStatus.IGNORED), window_seconds=0)
    led.record_validation("gpu001", level="quick", passed=True, summary={}, requested_by="t", at=now - 39 * DAY)
    (h,) = node_histories(led, now, LemonSettings(lookback_days=50))
    # Active 50→40 (window starts at 50), 38→20, 10→0: 10 + 18 + 10 = 38 days.
    assert h.exposure_days == pytest.approx(38.0, abs=1e-3)
    assert [(round((now - e.time) / DAY), e.deliberate) for e in h.exclusions] == [(40, False), (20, True)]
    # The ignored one travels with its status; scoring leaves it out and says why.
    assert [(i.xid, i.status, i.ref.startswith("incident")) for i in h.incidents] == [(79, "open", True),
                                                                                      (13, "ignored", True)]
    assert [(v.passed, v.check) for v in h.validations] == [(True, "quick")]


def test_ledger_evidence_reaches_scoring_and_records_follow_the_gpu(tmp_path):
    """GPU serial, alert identity, driver text and a recorded cause come from the incident's evidence; a node the
    ledger no longer lists is not scored, but its GPU's failures follow the GPU to the node it is in now."""
    from remedy.domain.model import Incident, Node, NodeState
    from remedy.ledger import Ledger
    from remedy.settings.lemon import LemonSettings
    from tasks.lemon import lemon_verdicts, node_histories

    led = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    led.migrate()
    now = datetime(2026, 3, 1, tzinfo=UTC)
    for name in ["gpu-new"] + [f"ok{i:02d}" for i in range(20)]:
        led.upsert_node(Node(name=name), at=now - 60 * DAY)
        led.transition(name, NodeState.ACTIVE, reason="joined", requested_by="test", at=now - 50 * DAY)
    for i in range(5):  # a few node-level faults: the fleet's rate, 5 in 1000 node-days
        led.open_incident(Incident(node=f"ok{i:02d}", signal="xid", gpu=i % 8, xid=48, first_seen=now - (i + 2) * DAY,
                                   last_seen=now - (i + 2) * DAY), window_seconds=0)
    # XID 79 on the board with serial 1652922012345, five times on a node since re-created as gpu-new.
    for k, d in enumerate((45, 38, 31, 24, 17)):
        ev = {"gpu_serial": "1652922012345", "alert_fingerprint": f"fp{k}", "starts_at": f"2026-01-{k + 10}T00:00:00+00:00",
              "raw": "NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, GPU has fallen off the bus.", "labels": {}}
        led.open_incident(Incident(node="gpu-old", signal="xid", gpu=3, xid=79, first_seen=now - d * DAY,
                                   last_seen=now - d * DAY, evidence=ev), window_seconds=0)
    led.open_incident(Incident(node="gpu-new", signal="xid", gpu=3, xid=31, first_seen=now - 2 * DAY,
                               last_seen=now - 2 * DAY, evidence={"gpu_serial": "1652922012345"}), window_seconds=0)
    led.open_incident(Incident(node="gpu-new", signal="xid", gpu=1, xid=119, first_seen=now - 3 * DAY,
                               last_seen=now - 3 * DAY, evidence={"cause": "job"}), window_seconds=0)
    hs = {h.node: h for h in node_histories(led, now, LemonSettings())}
    assert not hs["gpu-old"].in_fleet and hs["gpu-new"].in_fleet
    first = hs["gpu-old"].incidents[0]
    assert (first.gpu_serial, first.occurrence, first.status) == ("1652922012345", "fp0@2026-01-10T00:00:00+00:00",
                                                                  "open")
    assert "fallen off the bus" in first.raw and hs["gpu-new"].incidents[0].cause == "job"
    verdicts, _ = lemon_verdicts(led, now, LemonSettings())
    assert "gpu-old" not in {v.node for v in verdicts}
    v = next(v for v in verdicts if v.node == "gpu-new")
    assert v.candidate and v.incidents_counted == 5
    assert sorted(why for _, why in v.excluded) == ["application error (NVIDIA: RESTART_APP)",
                                                    "caused by the job (user code or data), not the node"]


@pytest.mark.prefect
def test_review_lists_nodes_that_failed_burn_in_repeatedly(prefect_server, sim_factory, remedy_env):  # noqa: F811
    from flows.lemon_review import lemon_review
    from remedy.domain.model import Action, ActionOutcome

    sim = sim_factory(nodes=8, spares=1)
    runtime = remedy_env(sim=sim)
    led = runtime.ledger()
    for n in runtime.cluster().list_gpu_nodes():
        led.upsert_node(n)
    rec, _ = led.start_action(Action(kind="mark_retirement_candidate", node="gpu003", requested_by="test",
                                     outcome=ActionOutcome.SUCCEEDED, detail={"why": "3 failed burn-ins"}))
    out = lemon_review(retire=False)
    assert [c["node"] for c in out["failed_burn_in_candidates"]] == ["gpu003"]
    assert "3 failed burn-ins" in out["failed_burn_in_candidates"][0]["detail"]
