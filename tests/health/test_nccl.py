"""all_reduce_perf parsing and seed 001's criteria table."""

from __future__ import annotations

import pytest

from remedy.health.nccl import check_nccl, human_size, p95, parse_nccl
from remedy.health.result import CheckOutputError, Verdict
from remedy.settings.health import GIB, KIB, MIB, HealthCheckSettings, NcclCriteriaProfile, NcclSizeCriterion

SEED = HealthCheckSettings().nccl_criteria_for()

# Seed 001's published 16-GPU run: (size, p95 latency µs, BusBW GB/s).
SEED_001_RUN = [
    (1 * KIB, 120, 0.016), (1 * MIB, 319, 6.82), (16 * MIB, 408, 79.1), (128 * MIB, 1200, 213),
    (256 * MIB, 1700, 299), (1 * GIB, 6500, 315), (2 * GIB, 9070, 445),
]


def table(rows: list[tuple[int, float, float]], *, wrong: str = "0", ranks: int = 16) -> str:
    """An all_reduce_perf output whose out-of-place and in-place halves both show (time, busbw)."""
    factor = 2 * (ranks - 1) / ranks
    lines = ["# nThread 1 nGpus 8 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 5 iters: 20",
             "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"]
    for size, t, busbw in rows:
        half = f"{t:g} {busbw / factor:.3f} {busbw:g} {wrong}"
        lines.append(f"{size} {size // 4} float sum -1 {half} {half}")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 150.2 ", "#"]
    return "\n".join(lines)


def test_parses_both_halves_footer_and_ranks(sample):
    run = parse_nccl(sample("all_reduce_perf_8xh100.txt"))
    assert len(run.rows) == 29  # 8 B .. 2 GiB, factor 2
    assert run.ranks == 8
    assert run.avg_busbw_gbps == pytest.approx(145.556)
    assert run.out_of_bounds == 0
    last = run.row(2 * GIB)
    assert (last.out_of_place.time_us, last.out_of_place.busbw_gbps, last.out_of_place.wrong) == (7854.37, 478.47, 0)
    assert (last.in_place.time_us, last.in_place.algbw_gbps) == (7901.49, 271.78)
    assert last.dtype == "float" and last.redop == "sum" and last.root == -1


def test_healthy_h100_sweep_passes_and_slow_one_fails_on_bandwidth(sample):
    ok = check_nccl(sample("all_reduce_perf_8xh100.txt"), SEED)
    assert ok.verdict is Verdict.PASS, ok.reasons
    assert ok.measurements["sizes"][str(256 * MIB)]["busbw_gbps"] == pytest.approx(465.25)  # lower half wins
    slow = check_nccl(sample("all_reduce_perf_8gpu_slow.txt"), SEED)
    assert slow.verdict is Verdict.FAIL
    assert "2 GB: BusBW 265.66 GB/s < 350 GB/s" in slow.reasons
    assert not any("256 MB" in r for r in slow.reasons)  # 262.39 >= 225


def test_seed_001_published_run_passes():
    result = check_nccl(table(SEED_001_RUN), SEED)
    assert result.verdict is Verdict.PASS, result.reasons
    assert result.measurements["sizes"][str(16 * MIB)] == {
        "p50_latency_us": 408, "p95_latency_us": 408, "busbw_gbps": 79.1, "samples": 2}


@pytest.mark.parametrize("criterion", [c for c in SEED.sizes if c.min_busbw_gbps], ids=lambda c: human_size(c.size_bytes))
def test_busbw_exactly_at_bound_passes_one_percent_below_fails(criterion):
    def run_with(busbw: float) -> str:
        return table([(s, t, busbw if s == criterion.size_bytes else b) for s, t, b in SEED_001_RUN])

    assert check_nccl(run_with(criterion.min_busbw_gbps), SEED).verdict is Verdict.PASS
    below = check_nccl(run_with(criterion.min_busbw_gbps * 0.99), SEED)
    assert below.verdict is Verdict.FAIL
    assert below.reasons == [f"{human_size(criterion.size_bytes)}: BusBW {criterion.min_busbw_gbps * 0.99:g} GB/s "
                             f"< {criterion.min_busbw_gbps:g} GB/s"]


@pytest.mark.parametrize("criterion", [c for c in SEED.sizes if c.max_p95_latency_us], ids=lambda c: human_size(c.size_bytes))
def test_latency_exactly_at_bound_passes_one_percent_above_fails(criterion):
    def run_with(t: float) -> str:
        return table([(s, t if s == criterion.size_bytes else t0, b) for s, t0, b in SEED_001_RUN])

    assert check_nccl(run_with(criterion.max_p95_latency_us), SEED).verdict is Verdict.PASS
    above = check_nccl(run_with(criterion.max_p95_latency_us * 1.01), SEED)
    assert above.verdict is Verdict.FAIL
    assert "p95 latency" in above.reasons[0] and human_size(criterion.size_bytes) in above.reasons[0]


def test_seed_table_defaults_match_the_published_criteria():
    got = {(c.size_bytes, c.max_p95_latency_us, c.min_busbw_gbps) for c in SEED.sizes}
    assert got == {(KIB, 250, None), (MIB, 500, None), (16 * MIB, 750, 50), (128 * MIB, None, 150),
                   (256 * MIB, None, 225), (GIB, None, 250), (2 * GIB, None, 350)}


def test_p95_over_repeated_runs_ignores_one_slow_run_in_twenty_but_not_three():
    fast = table(SEED_001_RUN)
    slow = table([(s, 900 if s == KIB else t, b) for s, t, b in SEED_001_RUN])
    assert check_nccl([fast] * 19 + [slow], SEED).verdict is Verdict.PASS  # 2 slow samples of 40
    three = check_nccl([fast] * 17 + [slow] * 3, SEED)  # 6 of 40: above the 95th percentile
    assert three.verdict is Verdict.FAIL and three.reasons == ["1 KB: p95 latency 900 us > 250 us"]
    assert three.measurements["sizes"][str(KIB)]["samples"] == 40


def test_p95_nearest_rank():
    assert p95([float(i) for i in range(1, 101)]) == 95.0
    assert p95([3.0]) == 3.0
    assert p95([1.0, 2.0]) == 2.0


def test_wrong_elements_fail_and_na_is_accepted():
    wrong = check_nccl(table(SEED_001_RUN, wrong="3"), SEED)
    assert wrong.verdict is Verdict.FAIL
    assert "6 wrong elements at 1 KB (data corruption)" in wrong.reasons
    na = parse_nccl(table(SEED_001_RUN, wrong="N/A"))
    assert na.rows[0].out_of_place.wrong is None
    assert check_nccl(table(SEED_001_RUN, wrong="N/A"), SEED).verdict is Verdict.PASS


def test_sweep_cut_short_fails_for_the_missing_sizes():
    result = check_nccl(table(SEED_001_RUN[:4]) + "\ngpu-node-017: Test NCCL failure common.cu:1005 'unhandled system error'", SEED)
    assert result.verdict is Verdict.FAIL
    assert "no result for 256 MB: the sweep did not reach it" in result.reasons
    assert any("Test NCCL failure" in r for r in result.reasons)


def test_output_without_a_table_is_a_clear_error():
    with pytest.raises(CheckOutputError, match="no result table"):
        parse_nccl("# nThread 1 nGpus 8\n#\n")
    with pytest.raises(CheckOutputError, match="line 3: time is not a number"):
        parse_nccl("#\n#\n8 2 float sum -1 abc 0.0 0.0 0 1.0 0.0 0.0 0\n")


def test_criteria_profile_by_gpu_model_and_fabric():
    b200 = NcclCriteriaProfile(gpu_model="NVIDIA B200", fabric="*", sizes=[NcclSizeCriterion(size_bytes=2 * GIB, min_busbw_gbps=600)])
    roce = NcclCriteriaProfile(gpu_model="NVIDIA B200", fabric="roce", sizes=[NcclSizeCriterion(size_bytes=2 * GIB, min_busbw_gbps=500)])
    s = HealthCheckSettings(nccl_profiles=[HealthCheckSettings().nccl_profiles[0], b200, roce])
    assert s.nccl_criteria_for("NVIDIA B200", "infiniband-ndr") is s.nccl_profiles[1]
    assert s.nccl_criteria_for("NVIDIA B200", "roce") is s.nccl_profiles[2]
    assert s.nccl_criteria_for("NVIDIA H100 80GB HBM3", "roce").gpu_model == "*"
    # the seed-001 run passes the default table but not the B200 one (445 < 600)
    assert check_nccl(table(SEED_001_RUN), s.nccl_criteria_for("NVIDIA B200")).verdict is Verdict.FAIL
    with pytest.raises(ValueError, match="no NCCL criteria profile matches"):
        HealthCheckSettings(nccl_profiles=[b200]).nccl_criteria_for("NVIDIA H100 80GB HBM3")


def test_sweep_repeated_inside_one_output_counts_as_several_runs():
    fast = table(SEED_001_RUN)
    slow = table([(s, 900 if s == KIB else t, b) for s, t, b in SEED_001_RUN])
    one_output = "\n".join([fast] * 17 + [slow] * 3)  # all_reduce_perf -N 20 prints the table 20 times
    result = check_nccl(one_output, SEED)
    assert result.measurements["sizes"][str(KIB)]["samples"] == 40
    assert result.reasons == ["1 KB: p95 latency 900 us > 250 us"]
