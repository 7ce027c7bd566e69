"""Act before the failure (issue 15, item 3), in the flows: an early warning on a node in the job is weighed with
choose_on_warning — the function the simulator's policy calls — against the job's own checkpoint cadence, which the
job publishes on its workload (remedy.domain.checkpoints). Acting swaps the node at a checkpoint boundary (asked for
now when the next is too far), so no work is rolled back, and the node is fixed off the critical path and returns
to the spare pool; otherwise the warning is watched, with the arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.checkpoints import INTERVAL, LAST
from remedy.sim.checkpoints import CADENCE, COST
from tests.fixtures.prefect import newest_artifact_text, run_to_state
from tests.flows.test_triage import cordons, fleet, open_incident  # noqa: F401 - fleet is a fixture

pytestmark = pytest.mark.prefect
NODE = "gpu003"


@pytest.fixture(autouse=True)
def _pool_lends_a_spare(monkeypatch):
    """The simulated fleet has 2 spares: with the breaker's reserve at 0 a warning may take one and the pool keeps
    the other for failures (remedy.spares.warned). The default reserve of 1 is the case of its own below."""
    monkeypatch.setenv("REMEDY_BREAKER__SPARE_RESERVE", "0")


@pytest.fixture
def sim(sim_factory, request):
    """The 16-node simulator with 2 spares, or as many as the test asks for (`indirect` parametrization)."""
    return sim_factory(nodes=16, spares=getattr(request, "param", 2))


def publish(cluster, *, last_minutes_ago: float, interval_minutes: float, answers: bool = True) -> None:
    """What the job's launcher publishes on its Job; `answers`: the simulated job answers checkpoint requests (after
    30 simulated seconds). Its own cadence is set far out, so only a request makes it checkpoint during the test."""
    from remedy.sim.cluster import TRAINING_JOB, TRAINING_NAMESPACE

    last = datetime.now(UTC) - timedelta(minutes=last_minutes_ago)
    ann = {LAST: last.isoformat(), INTERVAL: f"{interval_minutes * 60:g}"}
    if answers:
        ann |= {CADENCE: f"{interval_minutes * 60 / cluster.time_scale:g}", COST: "30"}

    def write(job: dict) -> None:
        job["metadata"].setdefault("annotations", {}).update(ann)

    with cluster.lock:
        cluster.store.mutate("Job", TRAINING_NAMESPACE, TRAINING_JOB, write)


def _options_artifact(incident) -> str:
    """The newest options table for this incident (ledgers are per test, the Prefect server is shared)."""
    from flows.triage import artifact_key

    return newest_artifact_text(artifact_key({"node": incident.node, "id": incident.id}) + "-options")


def warn(node: str = NODE):
    return open_incident(node, signal="early-warning", gpu=None)


def test_a_warned_node_is_swapped_at_a_checkpoint_it_asked_for_then_fixed_off_path(prefect_server, fleet):
    from flows.triage import triage
    from remedy import runtime

    led = runtime.ledger()
    # the next scheduled checkpoint is 110 min away, beyond the warning's 60-min lead: ask for one now
    publish(fleet.cluster, last_minutes_ago=10, interval_minutes=120)
    inc = warn()
    state, out = run_to_state(triage, incident_id=inc.id)
    assert state.is_completed(), (state, out)
    assert out["warning"]["action"] == "checkpoint-now-and-swap", out["warning"]
    assert out["checkpoint"]["reached"] and out["checkpoint"]["asked"], out["checkpoint"]
    assert out["path"] == "replace" and "so the swap loses no work" in out["reason"]
    spare = out["outcome"]["replacement"]
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", spare)
    assert not runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)
    # the order: the checkpoint was asked for and taken before the node was cordoned
    actions = led.actions(incident_id=inc.id)
    asked = next(a for a in actions if a.kind == "request_checkpoint")
    cordoned = next(a for a in actions if a.kind == "cordon_node" and a.node == NODE)
    checkpointed = datetime.fromisoformat(out["checkpoint"]["at"])
    assert asked.finished_at <= checkpointed <= cordoned.started_at
    # fixed off the critical path, burned in, back in the pool
    assert out["recovery"]["status"] == "returned-to-spares", out["recovery"]
    assert led.get_node(NODE).state.value == "spare"
    assert led.get_incident(inc.id).status.value == "resolved"
    table = _options_artifact(inc)
    assert "**Chosen: ask for a checkpoint now and swap the node at it.**" in table
    assert "| swap at a checkpoint boundary | 36.5 min |" in table  # 1 checkpoint + 0.5 drain + 4 join + 31 reload
    assert "| wait for the failure | 64.0 min |" in table  # 2/3 × (60 rolled back + 0.5 detect + 35.5 swap)


def test_a_checkpoint_soon_after_a_long_reload_is_not_worth_a_swap(prefect_server, fleet):
    """Next checkpoint in 1 min, 2-min cadence: a failure would roll back about a minute, a swap costs a 31-min
    reload — waiting is cheaper, and the watch says so with the numbers."""
    from flows.triage import triage
    from remedy import runtime

    publish(fleet.cluster, last_minutes_ago=1, interval_minutes=2)
    inc = warn()
    _, out = run_to_state(triage, incident_id=inc.id)
    assert out["status"] == "watch" and out["warning"]["action"] == "wait-for-failure", out
    assert "swap 35.5 min at the checkpoint due in" in out["reason"]
    assert cordons(inc.id) == [] and "checkpoint" not in out
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)
    assert runtime.ledger().get_incident(inc.id).status.value == "ignored"
    assert "**Chosen: wait for the failure.**" in _options_artifact(inc)


def test_a_job_that_publishes_no_checkpoints_is_never_swapped_on_a_warning(prefect_server, fleet):
    from flows.triage import triage
    from remedy import runtime

    inc = warn()
    _, out = run_to_state(triage, incident_id=inc.id)
    assert out["status"] == "watch", out
    assert "the job publishes no remedy.io/last-checkpoint or remedy.io/checkpoint-interval-seconds" in out["reason"]
    assert cordons(inc.id) == []
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)


def test_no_checkpoint_in_time_means_no_swap(prefect_server, fleet, monkeypatch):
    """The job publishes a cadence but never answers the request: past the wait, nothing is swapped (a swap
    between checkpoints would roll back the work the swap was meant to save)."""
    from flows.triage import triage
    from remedy import runtime

    monkeypatch.setenv("REMEDY_LEMON__EARLY_WARNING__CHECKPOINT_WAIT_MARGIN_MINUTES", "0.03")
    monkeypatch.setenv("REMEDY_WORKLOAD__CHECKPOINT_COST_MINUTES", "0.01")
    runtime.reset()
    publish(fleet.cluster, last_minutes_ago=10, interval_minutes=120, answers=False)
    inc = warn()
    _, out = run_to_state(triage, incident_id=inc.id)
    assert out["warning"]["action"] == "checkpoint-now-and-swap"
    assert not out["checkpoint"]["reached"] and out["status"] == "watch", out
    assert "not swapped: the job reported no checkpoint within" in out["reason"]
    assert cordons(inc.id) == []
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)


def test_an_ecc_storm_xid_92_is_weighed_as_a_warning_and_swapped_at_a_checkpoint(prefect_server, fleet):
    """XID 92 (high single-bit ECC error rate) is the driver's own ECC-storm detector: it announces a failure (48/64)
    rather than reports one, so triage weighs it as an early warning instead of only watching it."""
    from flows.triage import triage
    from remedy import runtime

    publish(fleet.cluster, last_minutes_ago=10, interval_minutes=120)
    inc = open_incident(NODE, xid=92, gpu=1)
    _, out = run_to_state(triage, incident_id=inc.id)
    assert out["warning"]["action"] == "checkpoint-now-and-swap", out.get("warning", out)
    assert out["path"] == "replace" and "ECC-storm detector" in out["reason"], out["reason"]
    assert not runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)
    assert out["recovery"]["status"] == "returned-to-spares", out["recovery"]


def test_an_ordinary_watch_xid_is_not_weighed_as_a_warning(prefect_server, fleet):
    """XID 63 (a row remap was recorded) is watched, not announced failure: no swap is weighed, nothing moves."""
    from flows.triage import triage
    from remedy import runtime

    publish(fleet.cluster, last_minutes_ago=10, interval_minutes=120)
    inc = open_incident(NODE, xid=63, gpu=1)
    _, out = run_to_state(triage, incident_id=inc.id)
    assert out["status"] == "watch" and "warning" not in out, out
    assert cordons(inc.id) == []
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)


def _spares_gone_at_the_boundary(monkeypatch, cluster) -> None:
    """The job reaches its checkpoint and, meanwhile, every spare went NotReady (another failure took one, a
    spare's kubelet died): the spares were there when the warning was weighed, not when the swap comes."""
    import flows.triage as triage_flow
    from remedy import runtime
    from remedy.sim.faults import inject

    reach = triage_flow.wait_for_checkpoint

    def then_the_spares_go(*args, **kwargs):
        out = reach(*args, **kwargs)
        for n in runtime.cluster().list_gpu_nodes():
            if n.state is not None and n.state.value == "spare":
                inject(cluster, "not-ready", n.name)
        return out

    monkeypatch.setattr(triage_flow, "wait_for_checkpoint", then_the_spares_go)


def test_no_spare_at_the_boundary_leaves_the_warned_node_working(prefect_server, fleet, monkeypatch):
    """A warned node still works: without a spare at the swap it is not cordoned, drained, or preempted for — the
    no-spare path of a failed node (preemption, shrink, escalation) is not a warning's. It keeps the job, the
    warning is watched, nothing enters the breaker board, and `kubectl describe node` says why."""
    from flows.triage import triage
    from remedy import runtime
    from remedy.safety.history import GATE_KIND

    publish(fleet.cluster, last_minutes_ago=10, interval_minutes=120)
    _spares_gone_at_the_boundary(monkeypatch, fleet.cluster)
    inc = warn()
    state, out = run_to_state(triage, incident_id=inc.id)
    assert out["warning"]["acts"] and out["checkpoint"]["reached"], out
    assert state.is_completed() and out["status"] == "watched", (state, out)
    assert "preemption" not in out["outcome"] and not out["outcome"].get("replacement"), out["outcome"]
    led = runtime.ledger()
    assert cordons(inc.id) == [] and not led.actions(incident_id=inc.id, kind="drain_node")
    assert not led.actions(incident_id=inc.id, kind=GATE_KIND)  # no capacity held on the board for it
    assert not led.approvals(incident_id=inc.id)  # nobody paged for a node that works
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)
    closed = led.get_incident(inc.id)
    assert closed.status.value == "ignored"
    assert closed.detail.startswith("watch: not swapped: no spare was ready at the checkpoint boundary"), closed.detail
    notes = [e for e in runtime.cluster().node_events(NODE) if e["reason"] == "RemedyWatched"]
    assert len(notes) == 1 and "no spare was ready at the checkpoint boundary" in notes[0]["message"], notes


@pytest.mark.parametrize("sim", [3], indirect=True)  # the failure takes one; the warning may take one of two left
def test_a_held_gate_leaves_the_warned_node_working_and_asks_nobody(prefect_server, fleet, monkeypatch):
    """A failure a moment ago and now a warned swap: two nodes out at once trips the cluster breaker. For a failed
    node that asks a person; for a warned one it is not worth a page — the node keeps working, watched."""
    from flows.replace_node import replace_node
    from flows.triage import triage
    from remedy import runtime

    monkeypatch.setenv("REMEDY_BREAKER__SPARE_RESERVE", "0")
    monkeypatch.setenv("REMEDY_APPROVALS__TIMEOUT_SECONDS", "1")
    # spares come back within the hour: the pool's sizing target is 1, so the warning may take one of the two left
    monkeypatch.setenv("REMEDY_SPARES__REPLACEMENT_LEAD_TIME_HOURS", "0.5")
    runtime.reset()
    done, _ = run_to_state(replace_node, node="gpu011", cause="XID 79", xid=79, gpu=0)
    assert done.is_completed(), done
    publish(fleet.cluster, last_minutes_ago=10, interval_minutes=120)
    inc = warn()
    state, out = run_to_state(triage, incident_id=inc.id)
    assert out["warning"]["acts"], out["warning"]
    assert state.is_completed() and out["status"] == "watched", (state, out)
    assert out["outcome"]["hold"]["skip"] == "breaker-tripped", out["outcome"]
    assert "the gate held the swap: one more node out would trip the cluster breaker" in out["why"], out["why"]
    led = runtime.ledger()
    assert not led.approvals(incident_id=inc.id)
    assert cordons(inc.id) == []
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)


def _warning(led, node: str, detector: str, at: datetime):
    from remedy.domain.model import Incident

    rec, _ = led.open_incident(Incident(node=node, signal="early-warning", first_seen=at, last_seen=at,
                                        detail=f"alertmanager: GpuEarlyWarning {detector}",
                                        evidence={"labels": {"detector": detector, "Hostname": node}}),
                               window_seconds=600)
    return rec


def test_a_detector_whose_warnings_were_false_alarms_stops_swapping_nodes(prefect_server, fleet):
    """Ten thermal warnings on busy but healthy nodes were left to run and no failure followed within a day: the
    detector's record (0 of 10), weighed with the assumed 2/3 as 10 more, is 1/3. The warning the first test swaps
    at a checkpoint on the assumed share is now watched, and the options artifact says where the share came from."""
    from flows.triage import triage
    from remedy import runtime
    from remedy.domain.model import IncidentStatus

    led = runtime.ledger()
    publish(fleet.cluster, last_minutes_ago=10, interval_minutes=120)
    others = [n.name for n in runtime.cluster().list_gpu_nodes() if n.name != NODE][:10]
    then = datetime.now(UTC) - timedelta(hours=48)
    for k in range(10):
        past = _warning(led, others[k % len(others)], "thermal", then - timedelta(days=2 * k))
        led.set_incident_status(past.id, IncidentStatus.IGNORED, detail="watch: not swapped")
    inc = _warning(led, NODE, "thermal", datetime.now(UTC))
    _, out = run_to_state(triage, incident_id=inc.id)
    assert out["status"] == "watch" and out["warning"]["action"] == "wait-for-failure", out.get("warning", out)
    assert (out["warning"]["detector"], out["warning"]["precision_followed"], out["warning"]["precision_judged"]) \
        == ("thermal", 0, 10)
    assert cordons(inc.id) == []
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)
    table = _options_artifact(inc)
    assert "| wait for the failure | 32.0 min |" in table  # 1/3 × (60 rolled back + 0.5 detect + 35.5 swap)
    assert "0 of the 10 thermal warnings left to run were followed by a failure within 24 h" in table


def test_an_unproven_detector_has_its_third_warning_left_to_run(prefect_server, fleet):
    """A new detector's last two warnings were acted on (nodes swapped), so none was ever judged. Acting on the
    assumed 2/3 would pay, but nothing the detector did shows it yet: its third warning is left to run, watched,
    so the record can learn whether its warnings come true. A noisy detector would otherwise keep taking healthy
    nodes out on the assumption alone."""
    from flows.triage import triage
    from remedy import runtime
    from remedy.domain.model import IncidentStatus

    led = runtime.ledger()
    publish(fleet.cluster, last_minutes_ago=10, interval_minutes=120)
    others = [n.name for n in runtime.cluster().list_gpu_nodes() if n.name != NODE][:2]
    for k, other in enumerate(others):
        past = _warning(led, other, "thermal", datetime.now(UTC) - timedelta(days=3 + k))
        led.set_incident_status(past.id, IncidentStatus.RESOLVED, detail="swapped at a checkpoint")
    inc = _warning(led, NODE, "thermal", datetime.now(UTC))
    _, out = run_to_state(triage, incident_id=inc.id)
    assert out["status"] == "watch" and out["warning"]["checking"], out.get("warning", out)
    assert cordons(inc.id) == []
    assert runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)
    assert "left to run to check the thermal detector" in out["reason"]
    table = _options_artifact(inc)
    assert "| wait for the failure | 64.0 min |" in table  # acting pays on the assumed share …
    assert "acting pays above 38% of its warnings being right" in table  # 36.5 / (64.0 / (2/3))
    assert "(0 of 0 judged) shows only 10% with 90% confidence" in table  # … but the record shows nothing yet


def test_a_warning_never_takes_a_spare_the_pool_keeps_for_failures(prefect_server, monkeypatch, fleet):
    """Two spares and a reserve of 1: a swap would leave one, under the reserve + 1 a failure needs without asking a
    person — the warning stays a warning and says why (the simulator's policy decides the same, remedy.spares.warned)."""
    from flows.triage import triage
    from remedy import runtime

    monkeypatch.setenv("REMEDY_BREAKER__SPARE_RESERVE", "1")
    runtime.reset()
    publish(fleet.cluster, last_minutes_ago=10, interval_minutes=120)
    inc = warn()
    state, out = run_to_state(triage, incident_id=inc.id)
    assert state.is_completed() and not out["warning"]["acts"], out["warning"]
    assert "a warned node would leave 1 spare(s), under the 2 the pool keeps for failures" in out["warning"]["why"]
    assert cordons(inc.id) == [] and runtime.cluster().workload_running_on("training", "llm-pretrain", NODE)
