"""burn_in on the cluster simulator through the real client, with a real Prefect server (test harness)."""

from __future__ import annotations

import pytest

from tests.fixtures.prefect import artifacts_newest_first
from tests.fixtures.sim import settings_for  # noqa: F401  (re-exported for readers: how settings reach the sim)

pytestmark = pytest.mark.prefect

MIB = 1024**2


@pytest.fixture
def sim(sim_factory):
    """16 idle nodes in 2 racks (no training job), 2 spares; a simulated hour of checks lasts 36 s real.

    Not faster: a Job's activeDeadlineSeconds is scaled too, and the ib check's 60 s deadline (0.6 s here) must stay
    above the real cost of creating, scheduling and reading a Job on a loaded 2-core machine (0.001 flaked)."""
    return sim_factory(nodes=16, spares=2, time_scale=0.01, training_job=False)


def make_new(*nodes: str) -> None:
    """Brand-new nodes: no pool label yet, so gpu-remedy has never managed them."""
    from remedy import runtime

    for n in nodes:
        runtime.cluster().set_labels(n, {"remedy.io/pool": None})


def live(node: str):
    from remedy import runtime

    return runtime.cluster().get_node(node)


def read_artifacts(key: str) -> list:
    return artifacts_newest_first(key)  # every test's flow writes the same keys


def test_good_node_becomes_a_validated_spare(prefect_server, remedy_on_sim):
    from flows.burn_in import burn_in
    from remedy import runtime

    make_new("gpu003")
    out = burn_in(nodes=["gpu003"], level="standard")
    r = out["nodes"]["gpu003"]
    assert r["status"] == "spare", r
    assert {c["id"] for c in r["checks"]} == {"nvml-probe", "dcgm-diag-r1", "ib", "dcgm-diag-r2",
                                              "nccl-single-node", "fio"}
    rec = runtime.ledger().get_node("gpu003")
    assert rec.state.value == "spare" and rec.validated_at is not None and rec.validation_level == "standard"
    v = runtime.ledger().validations("gpu003")[-1]
    assert v.passed and v.summary["purpose"] == "burn-in"
    node = live("gpu003")
    assert node.labels["remedy.io/pool"] == "spare"
    assert node.taint_effect("remedy.io/spare") == "NoSchedule" and not node.has_taint("remedy.io/burn-in")
    assert not node.unschedulable
    # The run's story: progress at 100 %, one row per node with each check's state.
    table = read_artifacts("burn-in-checks")
    assert table and "gpu003" in str(table[0].data) and "pass" in str(table[0].data)
    progress = read_artifacts("burn-in-progress")
    assert progress and float(progress[0].data) == 100.0


FAULTS = [
    # (node, fault kind, params, failing check id, words the reason must contain)
    ("gpu002", "row-remap-pending", {"gpu": 2}, "nvml-probe", "pending"),
    ("gpu003", "pcie-degraded", {"gpu": 5, "width": 8}, "nvml-probe", "x8"),
    ("gpu004", "slow-nccl", {"size": 256 * MIB}, "nccl-single-node", "256 MB"),
]


def test_planted_faults_fail_for_the_right_reason_and_go_to_repair(prefect_server, remedy_on_sim, slack_stub,
                                                                     monkeypatch):
    from flows.burn_in import burn_in
    from remedy import runtime
    from remedy.sim.faults import inject

    monkeypatch.setenv("REMEDY_SLACK__BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("REMEDY_SLACK__BASE_URL", slack_stub.base_url)
    monkeypatch.setenv("REMEDY_HEALTH__MAX_FAILED_BURN_INS", "2")
    runtime.reset()
    nodes = ["gpu001"] + [n for n, *_ in FAULTS]
    make_new(*nodes)
    # gpu002 failed a burn-in before: this second failure makes it a retirement candidate; the others fail once.
    led = runtime.ledger()
    led.upsert_node(live("gpu002"))
    led.record_validation("gpu002", level="standard", passed=False, summary={"purpose": "burn-in"}, requested_by="test")
    for node, kind, params, *_ in FAULTS:
        params = dict(params)
        inject(remedy_on_sim.cluster, kind, node, gpu=params.pop("gpu", None), **params)
    out = burn_in(nodes=nodes, level="standard")
    assert out["spares"] == ["gpu001"]
    assert out["failed"] == sorted(n for n, *_ in FAULTS)
    for node, kind, _, check_id, words in FAULTS:
        r = out["nodes"][node]
        failed = [c for c in r["checks"] if c["verdict"] == "fail"]
        assert [c["id"] for c in failed] == [check_id], (kind, r["checks"])
        assert words in " ".join(failed[0]["reasons"]), (kind, failed[0]["reasons"])
        assert led.get_node(node).state.value == "repair"
        assert [t.to_state.value for t in led.transitions(node)][-3:] == ["burn-in", "quarantined", "repair"]
        repair = [a for a in led.actions(node=node, kind="open_repair")]
        assert len(repair) == 1 and repair[0].detail["failed_checks"][0]["id"] == check_id
        n = live(node)
        assert n.labels["remedy.io/pool"] == "repair" and n.has_taint("remedy.io/quarantine") and n.unschedulable
        assert not led.get_node(node).validated_at
    posted = [c.body.get("text", "") for c in slack_stub.calls_to("chat.postMessage")]
    assert sorted(t.split(" ")[2] for t in posted) == sorted(n for n, *_ in FAULTS)
    assert any("gpu004" in t and "256 MB" in t for t in posted)
    assert out["retirement_candidates"] == ["gpu002"]
    marks = led.actions(kind="mark_retirement_candidate")
    assert [(a.node, a.detail["failed_validations"]) for a in marks] == [("gpu002", 2)]
    assert any("gpu002" in t and "retirement candidate" in t for t in posted)


def test_extended_level_catches_thermal_throttle_and_isolates_a_slow_node_in_multi_node_nccl(
        prefect_server, remedy_on_sim, monkeypatch, tmp_path):
    from flows.burn_in import burn_in
    from remedy import runtime
    from remedy.sim.faults import inject

    # The shortest extended suite the settings allow: dcgmi diag -r 3 and a 60 s stress run. (From YAML: the
    # environment gives the string "3", which the Literal[3, 4] field refuses.)
    config = tmp_path / "remedy.yaml"
    config.write_text("health:\n  extended_dcgm_level: 3\n  stress_seconds: 60\n")
    monkeypatch.setenv("REMEDY_CONFIG", str(config))
    runtime.reset()
    nodes = ["gpu001", "gpu002", "gpu003", "gpu004", "gpu005"]
    make_new(*nodes)
    inject(remedy_on_sim.cluster, "thermal", "gpu003", gpu=6, temperature=75)  # cool at idle: only load shows it
    # 80 % bus bandwidth: NVLink inside the node still clears 350 GB/s at 2 GB, the 2-node ring over IB does not.
    inject(remedy_on_sim.cluster, "slow-nccl", "gpu004", factor=0.8)
    out = burn_in(nodes=nodes, level="extended")
    assert out["spares"] == ["gpu001", "gpu002", "gpu005"] and out["failed"] == ["gpu003", "gpu004"], out["counts"]
    bad = [c for c in out["nodes"]["gpu003"]["checks"] if c["verdict"] == "fail"]
    assert len(bad) == 1 and "thermal" in " ".join(bad[0]["reasons"]).lower(), bad

    def multi(n):
        found = [c for c in out["nodes"][n]["checks"] if c["id"] == "nccl-multi-node"]
        assert len(found) == 1, out["nodes"][n]["checks"]
        return found[0]

    # Groups of two: gpu001+gpu002 pass; gpu004+gpu005 fail, and each is re-paired with a known-good node.
    assert multi("gpu001")["verdict"] == "pass" and multi("gpu001")["group"] == ["gpu001", "gpu002"]
    slow = multi("gpu004")
    assert slow["verdict"] == "fail" and slow["group"] == ["gpu004", "gpu001"]
    assert "2 GB" in slow["reasons"][0] and "known-good gpu001" in slow["reasons"][-1]
    assert multi("gpu005")["verdict"] == "warn" and multi("gpu005")["group"] == ["gpu005", "gpu002"]
    for n in nodes:
        assert "remedy.io/nccl-group" not in live(n).labels  # the temporary group label is gone
    assert runtime.ledger().get_node("gpu001").validation_level == "extended"


def test_dry_run_changes_nothing(prefect_server, remedy_on_sim):
    from flows.burn_in import burn_in
    from remedy import runtime
    from remedy.sim.faults import inject

    make_new("gpu005", "gpu006")
    inject(remedy_on_sim.cluster, "pcie-degraded", "gpu006", gpu=1, width=8)
    before = {n: (live(n).labels, live(n).taints, live(n).unschedulable) for n in ("gpu005", "gpu006")}
    out = burn_in(nodes=["gpu005", "gpu006"], level="quick", dry_run=True)
    assert out["dry_run"] and out["counts"] == {"planned-spare": 2}  # no Job ran, so no check could fail
    for n in ("gpu005", "gpu006"):
        assert (live(n).labels, live(n).taints, live(n).unschedulable) == before[n]
        rec = runtime.ledger().get_node(n)
        assert rec.state is None and rec.validated_at is None and not runtime.ledger().validations(n)
        assert all(a.dry_run for a in runtime.ledger().actions(node=n))
    assert not [j for j in remedy_on_sim.cluster.store.objects("Job")]


def test_active_and_unknown_nodes_are_refused_with_a_reason(prefect_server, remedy_on_sim):
    from flows.burn_in import burn_in
    from remedy import runtime

    out = burn_in(nodes=["gpu001", "gpu999"], level="quick")
    assert out["skipped"] == ["gpu001", "gpu999"]
    assert "active" in out["nodes"]["gpu001"]["why"] and "quarantine" in out["nodes"]["gpu001"]["why"]
    assert "not found" in out["nodes"]["gpu999"]["why"]
    assert runtime.ledger().get_node("gpu001").state.value == "active"
    assert not live("gpu001").has_taint("remedy.io/burn-in")


@pytest.mark.parametrize("nodes, level, words", [
    ([], "quick", "non-empty list"),
    (["gpu001", "gpu001"], "quick", "listed twice"),
    (["gpu001"], "thorough", "unknown health-check level"),
])
def test_bad_input_is_one_clear_error(nodes, level, words):
    from flows.burn_in import burn_in

    with pytest.raises(ValueError, match=words):
        burn_in.fn(nodes=nodes, level=level)


def test_nccl_groups_pairs_nodes_and_never_leaves_one_alone():
    from tasks.burn_in import nccl_groups

    assert nccl_groups(["c", "a", "b", "d"]) == [["a", "b"], ["c", "d"]]
    assert nccl_groups(["a", "b", "c"]) == [["a", "b", "c"]]
    assert nccl_groups(["a"]) == []
    with pytest.raises(ValueError, match="at least 2"):
        nccl_groups(["a", "b"], size=1)


def test_progress_board_tracks_each_check_and_the_fraction_done():
    from tasks.burn_in import ProgressBoard

    board = ProgressBoard()
    board.start("run", ["b", "a"], ["probe", "dcgm", "nccl"])
    assert board.fraction("run") == 0.0
    board.set("run", "a", "probe", "running")
    board.set("run", "a", "probe", "fail")
    board.finish_node("run", "a", "skipped")  # the rest of a's suite will not run
    board.set("run", "b", "probe", "pass")
    board.set("run", "zzz", "probe", "pass")  # a node not in the run is ignored, not added
    assert board.rows("run") == [{"node": "a", "probe": "fail", "dcgm": "skipped", "nccl": "skipped"},
                                 {"node": "b", "probe": "pass", "dcgm": "waiting", "nccl": "waiting"}]
    assert board.fraction("run") == pytest.approx(4 / 6)
    board.forget("run")
    assert board.rows("run") == [] and board.fraction("run") == 1.0


def test_burn_in_refusals_name_the_state():
    from remedy.domain.model import NodeState
    from tasks.burn_in import burn_in_refusal

    for ok in (None, NodeState.REPAIR, NodeState.QUARANTINED, NodeState.SPARE, NodeState.BURN_IN):
        assert burn_in_refusal("n", ok) is None
    assert "active" in burn_in_refusal("n", NodeState.ACTIVE)
    assert "operator" in burn_in_refusal("n", NodeState.RETIRED)


def test_slack_failure_never_fails_the_burn_in(prefect_server, remedy_on_sim, slack_stub, monkeypatch):
    from flows.burn_in import burn_in
    from remedy import runtime
    from remedy.sim.faults import inject

    monkeypatch.setenv("REMEDY_SLACK__BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("REMEDY_SLACK__BASE_URL", slack_stub.base_url)
    runtime.reset()
    slack_stub.fail("channel_not_found")
    make_new("gpu007")
    inject(remedy_on_sim.cluster, "pcie-degraded", "gpu007", gpu=0, width=8)
    out = burn_in(nodes=["gpu007"], level="quick")
    assert out["failed"] == ["gpu007"] and runtime.ledger().get_node("gpu007").state.value == "repair"
    assert [c.body.get("text", "")[:30] for c in slack_stub.calls_to("chat.postMessage")]  # it was tried
