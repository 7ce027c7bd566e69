"""The burn-in flow's decisions without Prefect or a cluster: the batch check, who goes on to NCCL, re-pairing a failed
group with known-good nodes, what each re-run means, and the summary."""

from __future__ import annotations

import pytest

from remedy.health.burn_in_decisions import (
    MultiNodeStart,
    check_batch,
    failed_members,
    first_verdicts,
    group_error,
    judge_repair,
    known_good,
    lone_node_check,
    no_peer_to_isolate,
    node_error,
    pairing_rounds,
    plan_multi_node,
    settle_multi_node,
    summarise,
)


def node(status: str = "checked", passed: bool = True, **more) -> dict:
    return {"status": status, "passed": passed, "checks": [], "why": ""} | more


def group(members: list[str], verdict: str, reasons: list[str] | None = None) -> dict:
    return {"id": "nccl-multi-node", "check": "nccl", "group": members, "verdict": verdict,
            "reasons": reasons if reasons is not None else [f"{verdict}: busbw"]}


@pytest.mark.parametrize("nodes, words", [
    ([], "non-empty list"), ("gpu-01", "non-empty list"), (["gpu-01", ""], "non-empty strings"),
    (["gpu-01", 7], "non-empty strings"), (["a", "b", "a"], "nodes listed twice: a"),
])
def test_bad_batch_refused(nodes, words):
    with pytest.raises(ValueError, match=words):
        check_batch(nodes)


def test_good_batch_is_a_list():
    assert check_batch(("a", "b")) == ["a", "b"]


def test_only_nodes_that_passed_alone_go_on_to_nccl():
    plan = plan_multi_node({"a": node(), "b": node(passed=False), "c": node("error", False), "d": node()})
    assert plan.checked == ("a", "d") and plan.skipped == ("b",) and plan.start is MultiNodeStart.SWEEP
    lone = plan_multi_node({"a": node(), "b": node(passed=False)})
    assert lone.start is MultiNodeStart.LONE
    check = lone_node_check("nccl-multi-node", "nccl")
    assert check["verdict"] == "warn" and "no other idle node" in check["reasons"][0]


def test_failed_group_members_are_suspects_and_passing_groups_lend_peers():
    groups = [["a", "b"], ["c", "d"], ["e", "f"], ["g", "h"]]
    runs = [group(["a", "b"], "fail"), group(["c", "d"], "pass"), group(["e", "f"], "warn"), group(["g", "h"], "error")]
    assert failed_members(groups, runs) == ["a", "b"]
    assert known_good(groups, runs) == ["c", "d", "e", "f"]  # an error lends no peer: nothing is known about it
    assert first_verdicts(groups, runs)["h"]["verdict"] == "error"


def test_pairing_rounds_use_each_peer_once_per_round():
    rounds = pairing_rounds(["s1", "s2", "s3", "s4", "s5"], ["g1", "g2"])
    assert [r.first for r in rounds] == [0, 2, 4]
    assert [r.pairs for r in rounds] == [(("s1", "g1"), ("s2", "g2")), (("s3", "g1"), ("s4", "g2")), (("s5", "g1"),)]
    assert pairing_rounds(["s1"], []) == []


def test_repair_result_blames_only_the_member_that_fails_again():
    first = group(["a", "b"], "fail")
    again_fail = judge_repair("a", "g1", first, group(["a", "g1"], "fail", ["fail: busbw 12 GB/s"]))
    assert again_fail["verdict"] == "fail"
    assert again_fail["reasons"] == ["fail: busbw 12 GB/s", "also failed beside known-good g1 (first group: a, b)"]
    cleared = judge_repair("b", "g2", first, group(["b", "g2"], "pass"))
    assert cleared["verdict"] == "warn"
    assert cleared["reasons"] == ["warning: group a, b failed, but b passed beside known-good g2"]
    err = group(["b", "g2"], "error", ["could not run"])
    assert judge_repair("b", "g2", first, err) is err


def test_no_known_good_peer_keeps_the_fail_and_says_why():
    out = no_peer_to_isolate(group(["a", "b"], "fail", ["fail: slow"]))
    assert out["verdict"] == "fail" and out["reasons"][-1].startswith("no known-good node in the batch")


def test_settle_attaches_the_verdict_or_keeps_the_node_in_burn_in_on_our_error():
    r = node()
    mark = settle_multi_node(r, group(["a", "b"], "fail"), "nccl-multi-node")
    assert r["passed"] is False and r["checks"][-1]["verdict"] == "fail" and (mark.check_id, mark.state) == (
        "nccl-multi-node", "fail")
    w = node()
    settle_multi_node(w, group(["a", "b"], "warn"), "nccl-multi-node")
    assert w["passed"] is True
    e = node()
    mark = settle_multi_node(e, group_error(ConnectionError("api down")), "nccl-multi")
    assert e["status"] == "error" and e["passed"] is False and e["checks"] == []
    assert "ConnectionError: api down" in e["why"] and (mark.check_id, mark.state) == ("nccl-multi", "error")


def test_node_error_never_means_repair():
    r = node_error("gpu-01", TimeoutError("slow"))
    assert r["status"] == "error" and r["passed"] is False and r["why"] == "could not check: TimeoutError: slow"


def test_summary_groups_nodes_by_outcome():
    results = {"a": node("spare"), "b": node("planned-spare"), "c": node("repair", False, retirement_candidate=True),
               "d": node("skipped"), "e": node("error", False), "f": node("planned-repair", False)}
    out = summarise(results, "standard", True)
    assert out["counts"] == {"spare": 1, "planned-spare": 1, "repair": 1, "skipped": 1, "error": 1, "planned-repair": 1}
    assert out["spares"] == ["a", "b"] and out["failed"] == ["c", "f"] and out["skipped"] == ["d"]
    assert out["errors"] == ["e"] and out["retirement_candidates"] == ["c"]
    assert out["level"] == "standard" and out["dry_run"] is True and out["nodes"] is results
