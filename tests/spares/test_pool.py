"""Spare-pool sizing (Poisson over one replacement lead time) and topological diversity."""

from __future__ import annotations

import math

import pytest

from remedy.domain.model import Node, Topology
from remedy.settings.safety import SpareSettings
from remedy.spares.pool import check_diversity, poisson_tail, size_pool, spares_needed


def test_hand_computed_case_seed000_1024_gpus():
    """Seed 000: 1,024 GPUs (128 nodes) fail about every 8 h. With a 24-h lead time, λ = 24 / 8 = 3.

    P(N = k) = e^-3 · 3^k / k!; e^-3 = 0.049787
      k:      0        1        2        3        4        5        6        7        8
      P:  0.049787 0.149361 0.224042 0.224042 0.168031 0.100819 0.050409 0.021604 0.008102
      CDF:0.049787 0.199148 0.423190 0.647232 0.815263 0.916082 0.966491 0.988095 0.996197
    P(N > 7) = 1 − 0.988095 = 0.011905 > 0.01, P(N > 8) = 1 − 0.996197 = 0.003803 ≤ 0.01  →  8 spares.
    """
    sizing = size_pool(128, ready=3, fleet_mtbf_hours=8.0, lead_time_hours=24.0, risk=0.01)
    assert sizing.lam == pytest.approx(3.0)
    assert poisson_tail(7, 3.0) == pytest.approx(0.011905, abs=1e-6)
    assert poisson_tail(8, 3.0) == pytest.approx(0.003803, abs=1e-6)
    assert sizing.target == 8
    assert sizing.shortfall == 5
    # with 3 ready: P(N > 3) = 1 − 0.647232
    assert sizing.risk_at_ready == pytest.approx(0.352768, abs=1e-6)
    assert "short by 5" in sizing.explain()


def test_per_node_mtbf_gives_the_same_lambda():
    """Seed 000's per-node MTBF: 47 days = 1,128 h. 63 nodes (seed 002) and 48 h lead time:
    λ = 63 × 48 / 1128 = 2.680851, e^-λ = 0.068505.
      k:      0        1        2        3        4        5        6        7
      P:  0.068505 0.183651 0.246171 0.219982 0.147435 0.079050 0.035320 0.013527
      CDF:0.068505 0.252156 0.498327 0.718309 0.865744 0.944795 0.980115 0.993642
    P(N > 6) = 0.019885 > 1 %, P(N > 7) = 0.006358 ≤ 1 %  →  7 spares; seed 002 ran 3 (P(N > 3) = 0.281691)."""
    sizing = size_pool(63, ready=3, node_mtbf_hours=1128.0, lead_time_hours=48.0, risk=0.01)
    assert sizing.lam == pytest.approx(63 * 48 / 1128)
    lam = sizing.lam
    cdf6 = sum(math.exp(-lam) * lam**k / math.factorial(k) for k in range(7))
    assert poisson_tail(6, lam) == pytest.approx(1 - cdf6, rel=1e-9)
    assert poisson_tail(6, lam) == pytest.approx(0.019885, abs=1e-6)
    assert poisson_tail(7, lam) == pytest.approx(0.006358, abs=1e-6)
    assert sizing.target == 7 and sizing.shortfall == 4
    assert sizing.risk_at_ready == pytest.approx(0.281691, abs=1e-6)
    assert size_pool(63, 3).lam == pytest.approx(lam)  # the settings' defaults are exactly this case


def test_small_lambda_and_edges():
    # λ = 0.5: P(N > 2) = 1 − (0.606531 + 0.303265 + 0.075816) = 0.014388 > 1 %; P(N > 3) = 0.001752 → 3
    assert spares_needed(0.5, 0.01) == 3
    assert spares_needed(0.0, 0.01) == 0
    assert size_pool(0, 0).target == 0
    # large fleets stay finite and monotone: 2,048 nodes, λ = 87.1
    big = size_pool(2048, 0)
    assert big.lam == pytest.approx(2048 * 48 / 1128)
    assert big.lam < big.target < big.lam + 4 * math.sqrt(big.lam)
    with pytest.raises(ValueError, match="risk must be between 0 and 1"):
        spares_needed(1.0, 0)
    with pytest.raises(ValueError, match="not both"):
        size_pool(10, 1, node_mtbf_hours=1, fleet_mtbf_hours=1)


def spare(name, rack, switch="", pdu=""):
    return Node(name, gpu_model="H100", topology=Topology(rack=rack, switch=switch or f"sw-{rack}", pdu=pdu or f"pdu-{rack}"))


def test_all_spares_in_one_rack_is_named():
    warnings = check_diversity([spare("s1", "r2"), spare("s2", "r2"), spare("s3", "r2")])
    msgs = [w.message for w in warnings]
    assert "all 3 spares are in rack r2: one rack failure takes the whole pool — move some elsewhere" in msgs
    assert {(w.domain, w.name) for w in warnings} == {("rack", "r2"), ("switch", "sw-r2"), ("pdu", "pdu-r2")}


def test_spread_spares_pass_and_shared_pdu_is_caught():
    spread = [spare("s1", "r1"), spare("s2", "r2"), spare("s3", "r3")]
    assert check_diversity(spread) == []
    # different racks, but 3 of 4 hang on one PDU (> 50 %)
    mixed = [spare("s1", "r1", pdu="pA"), spare("s2", "r2", pdu="pA"), spare("s3", "r3", pdu="pA"), spare("s4", "r4", pdu="pB")]
    [w] = check_diversity(mixed)
    assert (w.domain, w.name, w.count, w.total) == ("pdu", "pA", 3, 4)
    assert check_diversity(mixed, SpareSettings(max_share_per_domain=0.8)) == []


def test_unlabelled_spares_are_reported_not_ignored():
    [w] = [w for w in check_diversity([Node("s1", topology=Topology(switch="a", pdu="x")), spare("s2", "r2")]) if w.domain == "rack"]
    assert "1 of 2 spares have no rack label (s1)" in w.message


@pytest.mark.parametrize("lam", [0.01, 0.5, 3.0, 10.0, 87.15, 400.0])
@pytest.mark.parametrize("risk", [0.1, 0.01, 1e-4])
def test_target_is_the_smallest_k_meeting_the_risk(lam, risk):
    k = spares_needed(lam, risk)
    assert poisson_tail(k, lam) <= risk
    assert k == 0 or poisson_tail(k - 1, lam) > risk
