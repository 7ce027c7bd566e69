"""Which incidents count against a node: one test per rule of remedy.lemon.attribution, then the rules at work in
score_fleet (a busy node full of application XIDs, re-sent alerts, a failed check that confirms an incident)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.lemon.attribution import HEALTH_CHECK, RESENT, failed_checks, why_not_counted
from remedy.lemon.records import IncidentRecord, NodeHistory, ValidationRecord
from remedy.lemon.scoring import EXCESS_RATE, REPEAT_XID, explain, score_fleet

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def inc(signal: str = "xid", xid: int | None = None, **kw) -> IncidentRecord:
    return IncidentRecord(kw.pop("time", NOW - timedelta(days=1)), signal, xid, kw.pop("gpu", 0), **kw)


@pytest.mark.parametrize("xid", [79, 48, 64, 119, 95, 74])
def test_node_level_xids_count(xid: int) -> None:
    # 79 fell off the bus (RESTART_BM), 48 DBE, 64 remap failure, 119 GSP timeout, 95 uncontained ECC, 74 NVLink.
    assert why_not_counted(inc(xid=xid)) is None


@pytest.mark.parametrize("xid, words", [(13, "application error (NVIDIA: RESTART_APP)"),
                                        (31, "application error (NVIDIA: RESTART_APP)"),
                                        (94, "application error (NVIDIA: RESTART_APP)"),
                                        (43, "informational XID 43 (NVIDIA: IGNORE)"),
                                        (63, "informational XID 63 (NVIDIA: IGNORE)"),
                                        (1, "NVIDIA's class (CONTACT_SUPPORT) does not say the GPU needs fixing"),
                                        (9999, "NVIDIA's class (unknown) does not say the GPU needs fixing"),
                                        (0, "XID 0 is not a valid XID")])
def test_xids_that_do_not_say_the_gpu_needs_fixing(xid: int, words: str) -> None:
    assert words in why_not_counted(inc(xid=xid))


def test_the_drivers_own_words_decide_for_154_and_nvlink5() -> None:
    reboot = "NVRM: Xid (PCI:0000:1b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    none = "NVRM: Xid (PCI:0000:1b:00): 154, GPU recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)"
    assert why_not_counted(inc(xid=154, raw=reboot)) is None
    assert "the driver's message says ignore" in why_not_counted(inc(xid=154, raw=none))
    assert "does not say the GPU needs fixing" in why_not_counted(inc(xid=154))  # no text: the class alone
    nonfatal = "NVRM: Xid (PCI:0000:18:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 09 (0x004505c6)"
    fatal = "NVRM: Xid (PCI:0000:18:00): 145, RLW_REMAP Fatal XC0 i0 Link 09 (0x004505c6)"
    assert "the driver's message says watch" in why_not_counted(inc(xid=145, raw=nonfatal))
    assert why_not_counted(inc(xid=145, raw=fatal)) is None
    assert why_not_counted(inc(xid=145)) is None  # no text: seed 002 resets the GPU


def test_ledger_record_of_cause_and_closing() -> None:
    assert why_not_counted(inc(xid=79, cause="job")) == "caused by the job (user code or data), not the node"
    assert why_not_counted(inc(xid=79, status="ignored")) == "closed as ignored or duplicate"
    for status in ("open", "acting", "resolved", "escalated", ""):
        assert why_not_counted(inc(xid=79, status=status)) is None


@pytest.mark.parametrize("signal", ["row-remap-failure", "row-remap-pending", "uncorrectable-remap", "hw-slowdown",
                                    "thermal-throttle", "power-brake", "pcie-degraded", "nvlink-error", "ib-port-down",
                                    "ib-downtime", "sxid", "node-not-ready", HEALTH_CHECK, "fail-slow"])
def test_hardware_signals_count(signal: str) -> None:
    assert why_not_counted(inc(signal)) is None


@pytest.mark.parametrize("signal, words", [("nccl-timeout", "job symptom"), ("loss-nan", "job symptom"),
                                           ("correctable-remap", "trend for early warning"),
                                           ("escalation", "says nothing about the node's hardware"),
                                           ("unknown", "says nothing about the node's hardware")])
def test_other_signals_do_not(signal: str, words: str) -> None:
    assert words in why_not_counted(inc(signal))


def test_a_failed_check_confirming_an_incident_is_not_a_second_failure() -> None:
    fault = inc(xid=79, time=NOW - timedelta(days=10))
    checks = [ValidationRecord(NOW - timedelta(days=10) + timedelta(hours=20), False, "post-fix verify", "v1"),
              ValidationRecord(NOW - timedelta(days=10) + timedelta(hours=30), True, "burn-in", "v2"),
              ValidationRecord(NOW - timedelta(days=3), False, "spare cycle", "v3")]
    out = failed_checks(checks, [fault], timedelta(hours=48))
    assert [(r.signal, r.ref, r.raw) for r in out] == [(HEALTH_CHECK, "v3", "spare cycle")]
    assert len(failed_checks(checks, [fault], timedelta(hours=12))) == 2  # 20 h later is no longer a confirmation


def quiet_fleet(n: int = 30, exposure: float = 40.0) -> list[NodeHistory]:
    """n nodes with one node-level fault each: 1 per 40 node-days."""
    return [NodeHistory(f"ok{i:02d}", exposure, (inc(xid=(79, 48, 119)[i % 3], gpu=i % 8, ref=f"ok{i}",
                                                     time=NOW - timedelta(days=2 + i)),))
            for i in range(n)]


def test_busy_node_full_of_application_errors_is_not_a_lemon() -> None:
    # 40 XID 13s on one GPU, each escalated as a "recurrence" by the old receiver, a passing check after each.
    apps = tuple(inc(xid=13, gpu=2, ref=f"a{d}", status="escalated", time=NOW - timedelta(days=d)) for d in range(1, 41))
    checks = tuple(ValidationRecord(NOW - timedelta(days=d) + timedelta(hours=6), True, "burn-in") for d in range(1, 41))
    busy = NodeHistory("busy", 58.0, apps + (inc(xid=79, gpu=5, ref="hw", time=NOW - timedelta(days=20)),), checks)
    v = next(v for v in score_fleet(quiet_fleet() + [busy], NOW) if v.node == "busy")
    assert not v.candidate and v.incidents_counted == 1 and v.fired == ()
    assert len(v.excluded) == 40 and {why for _, why in v.excluded} == {"application error (NVIDIA: RESTART_APP)"}
    assert "not counted against the node: 40 incident(s): 40 application error (NVIDIA: RESTART_APP)" in explain(v)


def test_resent_alert_counts_once() -> None:
    # A row-remap-pending alert re-sent every 4 h while still firing: one occurrence, one failure.
    first = inc("row-remap-pending", gpu=3, ref="r0", occurrence="fp-1@2026-02-20T00:00:00Z",
                time=NOW - timedelta(days=9))
    resent = [inc("row-remap-pending", gpu=3, ref=f"r{k}", occurrence=first.occurrence, status="escalated",
                  time=first.time + timedelta(hours=4 * k)) for k in range(1, 5)]
    node = NodeHistory("hot", 40.0, (first, *resent))
    v = next(v for v in score_fleet(quiet_fleet() + [node], NOW) if v.node == "hot")
    assert v.incidents_counted == 1 and [why for _, why in v.excluded] == [RESENT] * 4


def test_lemon_keeps_its_signals_among_application_noise() -> None:
    # Six XID 48s on GPU 3 a week apart, each followed by a passing check, plus app errors: still a lemon.
    bad = tuple(inc(xid=48, gpu=3, ref=f"b{d}", time=NOW - timedelta(days=d)) for d in (45, 38, 31, 24, 17, 10))
    noise = tuple(inc(xid=31, gpu=g, ref=f"n{g}", time=NOW - timedelta(days=40 - g)) for g in range(8))
    checks = tuple(ValidationRecord(i.time + timedelta(hours=8), True, "burn-in", f"v{k}") for k, i in enumerate(bad))
    v = next(v for v in score_fleet(quiet_fleet() + [NodeHistory("lemon", 40.0, bad + noise, checks)], NOW)
             if v.node == "lemon")
    assert v.candidate and {EXCESS_RATE, REPEAT_XID} <= set(v.fired)
    assert v.incidents_counted == 6 and len(v.excluded) == 8
