"""The isolate-fault flow's decisions without Prefect or a cluster: input checks, smoke answers, what is released and
what stays quarantined, and the verdict sentence."""

from __future__ import annotations

import pytest

from remedy.isolate.decisions import (
    BatchVerdict,
    check_request,
    final_release,
    held_nodes,
    nodes_cell,
    plain_verdict,
    quarantine_in_ledger,
    read_smoke_answer,
    timed_out_message,
    timed_out_only,
)
from remedy.isolate.search import BatchOutcome, IsolationResult, Verdict, run_isolation

NODES = [f"gpu-{i:02d}" for i in range(8)]


def _search(bad: set[str] | None = None, *, all_time_out: bool = False) -> IsolationResult:
    def test(batch: list[str]) -> BatchOutcome:
        if all_time_out:
            return BatchOutcome(False, True, "no loss line")
        return BatchOutcome(bool(set(batch) & (bad or set())), False, "")
    return run_isolation(NODES, test, min_nodes=1)


@pytest.mark.parametrize("suspects, limit, words", [
    ([], 10, "suspect list is empty"), ("gpu-01", 10, "suspect list is empty"), (None, 10, "suspect list is empty"),
    (["a"], 0, "time_limit_seconds must be > 0"), (["a"], -5, "> 0"), (["a"], "60", "> 0"),
])
def test_bad_request_refused_in_one_line(suspects, limit, words):
    with pytest.raises(ValueError, match=words) as err:
        check_request(suspects, limit)
    assert "\n" not in str(err.value)


def test_good_request_passes():
    check_request(["a", "b"], 0.5)
    check_request(("a",), 600)


@pytest.mark.parametrize("res, verdict, healthy", [
    ({"diverged": True, "timed_out": False, "detail": "matched: loss: nan", "seconds": 3.0}, BatchVerdict.DIVERGED, False),
    ({"diverged": False, "timed_out": True, "detail": "no loss line", "seconds": 600}, BatchVerdict.TIMED_OUT, False),
    ({"diverged": False, "timed_out": False, "detail": "finished", "seconds": 9.5}, BatchVerdict.HEALTHY, True),
])
def test_smoke_answer_read(res, verdict, healthy):
    answer = read_smoke_answer(res)
    assert answer.verdict is verdict and answer.healthy is healthy
    assert answer.outcome == BatchOutcome(res["diverged"], res["timed_out"], res["detail"])
    assert answer.seconds == res["seconds"] and answer.verdict.value in {"diverged", "timed out", "healthy"}


def test_one_bad_node_is_held_and_quarantined_in_ledger():
    r = _search({"gpu-05"})
    assert r.verdict is Verdict.INFRASTRUCTURE
    assert held_nodes(r) == ("gpu-05",) and quarantine_in_ledger(r) == ("gpu-05",)
    final = final_release(NODES, {"gpu-00", "gpu-01"}, r)
    assert final.keep == ("gpu-05",) and "gpu-05" not in final.leftover
    assert set(final.leftover) == set(NODES) - {"gpu-00", "gpu-01", "gpu-05"}
    assert final.why == "isolation ended without blaming these nodes"
    text = plain_verdict(r)
    assert text.startswith("Infrastructure: the divergence follows gpu-05.") and "7 node(s) went back" in text


def test_code_verdict_holds_nothing():
    r = run_isolation([f"gpu-{i:02d}" for i in range(60)], lambda batch: BatchOutcome(True, detail="loss: nan"))
    assert r.verdict is Verdict.CODE
    assert held_nodes(r) == () and quarantine_in_ledger(r) == ()
    assert plain_verdict(r).startswith("Code: every batch diverges")


def test_not_reproduced_releases_everything():
    r = _search(set())
    assert r.verdict is Verdict.NOT_REPRODUCED and not timed_out_only(r)
    assert final_release(NODES, set(), r).leftover == tuple(NODES)
    assert plain_verdict(r).startswith("Not reproduced: no batch diverged") and "All 8 nodes" in plain_verdict(r)


def test_tests_that_never_answer_blame_no_node():
    r = _search(all_time_out=True)
    assert r.verdict is Verdict.INCONCLUSIVE and timed_out_only(r)
    assert held_nodes(r) == ()  # the pattern or the limit is wrong, not the nodes: release them all
    assert final_release(NODES, set(), r).leftover == tuple(NODES)
    assert plain_verdict(r).startswith("Inconclusive — ")
    msg = timed_out_message(r"loss: nan", 90, r.tests_run, 8)
    assert "pattern 'loss: nan' never matched" in msg and "all 8 node(s) released" in msg and "\n" not in msg


def test_an_error_mid_search_releases_every_node_not_yet_back():
    final = final_release(NODES, {"gpu-03"}, None)
    assert final.keep == () and final.why == "isolation failed"
    assert final.leftover == tuple(n for n in NODES if n != "gpu-03")


def test_nodes_cell_shortens_long_batches():
    assert nodes_cell(["a", "b"]) == "a, b"
    assert nodes_cell(NODES) == "gpu-00 … gpu-07 (8)"
