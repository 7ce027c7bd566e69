"""Bisection fault isolation: round bounds for every bad-node position, multiple bad nodes, code vs infrastructure,
the minimum-node guard, early release, timeouts and bad input. The smoke test is a pure callback."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from remedy.isolate.search import BatchOutcome, FaultIsolation, Release, Verdict, run_isolation
from remedy.settings.lemon import IsolationSettings


def pool(n: int) -> list[str]:
    return [f"gpu{i:03d}" for i in range(n)]


def diverges_if_any(*bad: str):
    return lambda batch: BatchOutcome(diverged=any(b in batch for b in bad), detail="loss: nan")


def check_invariants(result, nodes, min_nodes=1) -> None:
    for rnd in result.rounds:
        seen: set[str] = set()
        for batch, _ in rnd.tested:
            assert len(batch.nodes) >= min_nodes, f"round {rnd.number} tested {len(batch.nodes)} < {min_nodes} nodes"
            assert not seen & set(batch.nodes), "batches of one round must be disjoint"
            seen |= set(batch.nodes)
    assert set(result.released) | set(result.held) == set(nodes)
    assert not set(result.released) & set(result.held)
    assert result.tests_run == sum(len(r.tested) for r in result.rounds)
    assert result.rounds_used == len(result.rounds)


@pytest.mark.parametrize("n", [8, 16, 60])
def test_one_bad_node_found_within_log2_rounds_for_every_position(n: int) -> None:
    nodes = pool(n)
    bound = math.ceil(math.log2(n)) + 1
    worst = 0
    for bad in nodes:
        result = run_isolation(nodes, diverges_if_any(bad))
        assert result.verdict is Verdict.INFRASTRUCTURE
        assert result.bad_nodes == (bad,) and result.held == (bad,)
        assert result.rounds_used <= bound
        check_invariants(result, nodes)
        worst = max(worst, result.rounds_used)
    print(f"N={n}: worst {worst} rounds (bound {bound})")


def test_every_pair_of_bad_nodes_in_60_is_found() -> None:
    nodes = pool(60)
    worst_rounds = worst_tests = 0
    for a, b in itertools.combinations(nodes, 2):
        result = run_isolation(nodes, diverges_if_any(a, b))
        assert result.verdict is Verdict.INFRASTRUCTURE, (a, b, result.reason)
        assert set(result.bad_nodes) == {a, b}
        worst_rounds, worst_tests = max(worst_rounds, result.rounds_used), max(worst_tests, result.tests_run)
    print(f"2 bad in 60: worst {worst_rounds} rounds, {worst_tests} tests over all 1770 pairs")
    assert worst_rounds <= math.ceil(math.log2(60)) + 1


def test_three_bad_nodes_in_60() -> None:
    nodes = pool(60)
    result = run_isolation(nodes, diverges_if_any("gpu000", "gpu031", "gpu059"))
    assert set(result.bad_nodes) == {"gpu000", "gpu031", "gpu059"}
    check_invariants(result, nodes)


def test_every_batch_diverges_means_code() -> None:
    nodes = pool(60)
    result = run_isolation(nodes, lambda batch: BatchOutcome(True, detail="loss: nan"))
    assert result.verdict is Verdict.CODE
    assert "every batch diverges" in result.reason and "not hardware" in result.reason
    # 4, then 8, then 16 disjoint batches all diverge: 16 > max_bad_nodes (8) is more than bad nodes could explain.
    assert result.rounds_used == 3 and result.tests_run == 4 + 8 + 16
    assert "16 disjoint batches of ≥ 3 node(s) all diverged" in result.reason
    assert result.bad_nodes == () and set(result.released) == set(nodes) and result.held == ()
    # Fewer bad nodes believed in: code is called as soon as round 1's 4 batches all diverge.
    quick = run_isolation(nodes, lambda batch: BatchOutcome(True), settings=IsolationSettings(max_bad_nodes=3))
    assert quick.verdict is Verdict.CODE and quick.rounds_used == 1 and quick.tests_run == 4


def scattered(n: int, k: int, rng: random.Random) -> list[str]:
    return rng.sample(pool(n), k)


@pytest.mark.parametrize("n", [32, 60, 100])
def test_scattered_bad_nodes_are_pursued_never_released_as_code(n: int) -> None:
    """k = 4..8 bad nodes over many placements: never "code", every bad node found and held, none released."""
    rng = random.Random(n)
    nodes = pool(n)
    print(f"\nN={n}   k  placements  all-round-1-diverge  rounds mean/max  tests mean/max  ⌈log2 C(N,k)⌉")
    for k in range(4, 9):
        placements = [scattered(n, k, rng) for _ in range(300)]
        # The worst case for the old rule: a bad node in every round-1 batch (and in every round-2 batch for k = 8).
        quarter = n // 4
        placements.append([nodes[i * quarter + rng.randrange(quarter)] for i in range(4)] + placements[0][: k - 4])
        round1 = [set(b) for b in (nodes[i * quarter:(i + 1) * quarter] for i in range(4))]
        all_diverge = sum(all(set(bad) & b for b in round1) for bad in placements)
        rounds, tests = [], []
        for bad in placements:
            bad = list(dict.fromkeys(bad))
            result = run_isolation(nodes, diverges_if_any(*bad))
            assert result.verdict is Verdict.INFRASTRUCTURE, (k, bad, result.reason)
            assert set(result.bad_nodes) == set(bad) and not set(result.released) & set(bad)
            check_invariants(result, nodes)
            assert result.tests_bound == math.ceil(math.log2(math.comb(n, len(bad))))
            rounds.append(result.rounds_used)
            tests.append(result.tests_run)
        print(f"{k:>7}  {len(placements):>10}  {all_diverge:>19}  {sum(rounds) / len(rounds):>6.1f}/{max(rounds):<3}"
              f"   {sum(tests) / len(tests):>6.1f}/{max(tests):<4}  {math.ceil(math.log2(math.comb(n, k))):>12}")
        assert all_diverge > 0  # the placements that used to end as "code" are among those tried
        assert max(rounds) <= math.ceil(math.log2(n)) + 1


def test_more_bad_nodes_than_pursued_is_inconclusive_and_held() -> None:
    nodes = pool(60)
    bad = scattered(60, 12, random.Random(7))
    result = run_isolation(nodes, diverges_if_any(*bad))
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.reason.startswith("these batches failed: ")
    assert "more than the 8 bad nodes one isolation pursues (max_bad_nodes)" in result.reason
    assert len(result.failed_batches) > 8
    assert set(bad) <= set(result.held) and not set(result.released) & set(bad)
    assert set(result.held) == {n for b in result.failed_batches for n in b}
    # With room to pursue them all, the same placement is narrowed to the twelve nodes.
    full = run_isolation(nodes, diverges_if_any(*bad), settings=IsolationSettings(max_bad_nodes=12))
    assert full.verdict is Verdict.INFRASTRUCTURE and set(full.bad_nodes) == set(bad)


def test_small_pool_where_every_node_diverges_is_held_not_released() -> None:
    # 8 nodes, every one diverges alone: code, or 8 bad nodes. With max_bad_nodes = 8 that cannot be told apart.
    result = run_isolation(pool(8), lambda b: BatchOutcome(True))
    assert result.verdict is Verdict.INCONCLUSIVE and "cannot tell code from hardware" in result.reason
    assert result.released == () and set(result.held) == set(pool(8)) and len(result.failed_batches) == 8
    assert run_isolation(pool(8), lambda b: BatchOutcome(True),
                         settings=IsolationSettings(max_bad_nodes=7)).verdict is Verdict.CODE


def test_effort_is_reported_beside_the_bound() -> None:
    one = run_isolation(pool(60), diverges_if_any("gpu042"))
    assert (one.faults, one.tests_bound) == (1, 6)  # ⌈log2 60⌉
    assert one.effort == (f"{one.rounds_used} round(s), {one.tests_run} smoke test(s); any search needs at least "
                          "⌈log2 C(60,1)⌉ = 6 test(s) to single out 1 of 60")
    two = run_isolation(pool(60), diverges_if_any("gpu001", "gpu050"))
    assert two.tests_bound == 11  # ⌈log2 1770⌉
    assert run_isolation(pool(16), lambda b: BatchOutcome(False)).effort == "1 round(s), 4 smoke test(s)"


def test_two_bad_nodes_never_fake_a_code_verdict() -> None:
    # Two bad nodes can make at most two of round 1's four batches diverge.
    nodes = pool(16)
    for a, b in itertools.combinations(nodes, 2):
        assert run_isolation(nodes, diverges_if_any(a, b)).verdict is Verdict.INFRASTRUCTURE


@pytest.mark.parametrize("min_nodes", [2, 3, 4, 7])
def test_minimum_node_guard(min_nodes: int) -> None:
    nodes = pool(60)
    for bad in nodes:
        result = run_isolation(nodes, diverges_if_any(bad), min_nodes)
        check_invariants(result, nodes, min_nodes)
        assert result.verdict is Verdict.INFRASTRUCTURE
        assert result.bad_nodes == ()  # never narrowed to one node: that would need a batch below min_nodes
        (batch,) = result.narrowed_batches
        assert bad in batch and min_nodes <= len(batch) < 2 * min_nodes
        assert f"cannot narrow below {min_nodes} nodes without risking OOM-as-fault" in result.reason
        assert set(result.held) == set(batch)


def test_whole_pool_as_the_only_batch_is_inconclusive() -> None:
    # 5 nodes, min 3: no split leaves two batches of ≥ 3, so divergence cannot separate code from hardware.
    result = run_isolation(pool(5), lambda b: BatchOutcome(True), 3)
    assert result.verdict is Verdict.INCONCLUSIVE and "cannot tell code from hardware" in result.reason
    assert result.tests_run == 1


def test_healthy_batches_are_released_before_the_search_ends() -> None:
    nodes = pool(60)
    calls: list[tuple[str, object]] = []

    def smoke_test(batch: list[str]) -> BatchOutcome:
        calls.append(("test", tuple(batch)))
        return BatchOutcome("gpu042" in batch)

    result = run_isolation(nodes, smoke_test, release=lambda ev: calls.append(("release", ev)))
    first_release = next(i for i, c in enumerate(calls) if c[0] == "release")
    last_test = max(i for i, c in enumerate(calls) if c[0] == "test")
    assert first_release < last_test
    releases = [c[1] for c in calls if c[0] == "release"]
    assert all(isinstance(r, Release) for r in releases)
    assert releases[0].round == 1 and len(releases[0].nodes) == 15  # three healthy quarters go back after round 1
    assert "gpu042" not in {n for r in releases for n in r.nodes}
    assert sorted(n for r in releases for n in r.nodes) == sorted(result.released)


def test_nothing_diverges_releases_everything() -> None:
    result = run_isolation(pool(16), lambda b: BatchOutcome(False))
    assert result.verdict is Verdict.NOT_REPRODUCED and result.rounds_used == 1 and result.held == ()


def test_timed_out_batch_is_retested_once_then_reported() -> None:
    nodes = pool(16)
    attempts: dict[tuple[str, ...], int] = {}

    def flaky_once(batch: list[str]) -> BatchOutcome:
        key = tuple(batch)
        attempts[key] = attempts.get(key, 0) + 1
        if key == tuple(nodes[:4]) and attempts[key] == 1:
            return BatchOutcome(False, timed_out=True, detail="no loss line in 900 s")
        return BatchOutcome("gpu002" in batch)

    result = run_isolation(nodes, flaky_once)
    assert result.bad_nodes == ("gpu002",) and result.inconclusive_batches == ()
    assert attempts[tuple(nodes[:4])] == 2
    retested = [b for r in result.rounds for b, _ in r.tested if b.retest]
    assert [b.nodes for b in retested] == [tuple(nodes[:4])] and retested[0].round == 2

    def always_times_out_there(batch: list[str]) -> BatchOutcome:
        if set(batch) & {"gpu012"}:
            return BatchOutcome(False, timed_out=True)
        return BatchOutcome("gpu002" in batch)

    result = run_isolation(nodes, always_times_out_there)
    assert result.verdict is Verdict.INFRASTRUCTURE and result.bad_nodes == ("gpu002",)
    assert result.inconclusive_batches == (tuple(nodes[12:16]),)
    assert set(nodes[12:16]) <= set(result.held)  # neither blamed nor released: a person looks
    assert "inconclusive" in result.reason

    only_timeouts = run_isolation(nodes, lambda b: BatchOutcome(False, timed_out=b[0] == "gpu000"))
    assert only_timeouts.verdict is Verdict.INCONCLUSIVE and "timed out" in only_timeouts.reason
    no_retest = run_isolation(nodes, always_times_out_there, settings=IsolationSettings(max_retests=0))
    assert no_retest.tests_run < result.tests_run


def test_timeout_in_round_one_then_all_diverge_is_still_code() -> None:
    seen: set[tuple[str, ...]] = set()

    def slow_then_nan(batch: list[str]) -> BatchOutcome:
        key = tuple(batch)
        if key not in seen and batch[0] == "gpu000":
            seen.add(key)
            return BatchOutcome(False, timed_out=True)
        return BatchOutcome(True)

    result = run_isolation(pool(16), slow_then_nan)
    assert result.verdict is Verdict.CODE and result.held == ()
    # Round 2: the retest beside 6 halves; round 3: its 2 halves beside 12 single nodes, 14 > 8 disjoint batches.
    assert (result.rounds_used, result.tests_run) == (3, 4 + 7 + 14)


def test_fault_that_needs_both_halves_is_unresolved() -> None:
    # Diverges only when gpu001 and gpu002 train together (e.g. a bad link between them).
    result = run_isolation(pool(8), lambda b: BatchOutcome({"gpu001", "gpu002"} <= set(b)), 1,
                           settings=IsolationSettings(first_round_batches=2))
    assert result.verdict is Verdict.INCONCLUSIVE and "neither half" in result.reason
    assert result.unresolved_groups == (("gpu000", "gpu001", "gpu002", "gpu003"),)
    # Split across round 1's batches the same fault never shows: reported as not reproduced, not as healthy hardware.
    apart = run_isolation(pool(8), lambda b: BatchOutcome({"gpu003", "gpu004"} <= set(b)), 1,
                          settings=IsolationSettings(first_round_batches=2))
    assert apart.verdict is Verdict.NOT_REPRODUCED


def test_step_wise_driving_and_misuse() -> None:
    search = FaultIsolation(pool(8))
    batches = search.plan_round()
    assert [b.id for b in batches] == ["r1-b1", "r1-b2", "r1-b3", "r1-b4"]
    with pytest.raises(RuntimeError, match="still waiting"):
        search.plan_round()
    with pytest.raises(ValueError, match="missing r1-b4"):
        search.record({b.id: BatchOutcome(False) for b in batches[:3]})
    with pytest.raises(ValueError, match="unknown r9-b1"):
        search.record({**{b.id: BatchOutcome(False) for b in batches}, "r9-b1": BatchOutcome(False)})
    with pytest.raises(RuntimeError, match="not finished"):
        _ = search.result
    releases = search.record({b.id: BatchOutcome("gpu005" in b.nodes) for b in batches})
    assert [r.nodes for r in releases] == [("gpu000", "gpu001"), ("gpu002", "gpu003"), ("gpu006", "gpu007")]
    assert not search.done
    with pytest.raises(RuntimeError, match="without a planned round"):
        search.record({})
    second = search.plan_round()
    assert [b.nodes for b in second] == [("gpu004",), ("gpu005",)]
    search.record({b.id: BatchOutcome("gpu005" in b.nodes) for b in second})
    assert search.done and search.result.bad_nodes == ("gpu005",)
    with pytest.raises(RuntimeError, match="finished"):
        search.plan_round()


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="suspect list is empty"):
        FaultIsolation([])
    with pytest.raises(ValueError, match="duplicate node names in the suspect list: gpu001"):
        FaultIsolation(["gpu001", "gpu002", "gpu001"])
    with pytest.raises(ValueError, match="min_nodes=5 is more than the 4 suspect"):
        FaultIsolation(pool(4), 5)
    with pytest.raises(ValueError, match="min_nodes must be an integer ≥ 1"):
        FaultIsolation(pool(4), 0)
    with pytest.raises(ValueError, match="non-empty strings"):
        FaultIsolation(["gpu001", ""])
    with pytest.raises(ValueError, match="both diverge and time out"):
        BatchOutcome(True, timed_out=True)
    search = FaultIsolation(pool(4))
    (b, *_) = search.plan_round()
    with pytest.raises(ValueError, match="must be a BatchOutcome"):
        search.record({x.id: True for x in [b, *_]})  # type: ignore[misc]
