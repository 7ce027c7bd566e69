"""Seed 002 Table 13 rebuilt from counters, plus wrap / remount / zero-op edge cases."""

import pytest

from remedy.audit.delta import counter_delta, diff_mountstats
from remedy.audit.mountstats import MountstatsError, parse_mountstats
from remedy.audit.rpc import audit_mount
from remedy.audit.synth import MountSpec, OpCounters, XprtCounters, render_mountstats
from remedy.settings.audit import NfsAuditSettings

from .helpers import table13_pair


def _audit(before: str, after: str, interval=None, settings=None):
    [d] = diff_mountstats(parse_mountstats(before), parse_mountstats(after), interval)
    return audit_mount(d, settings or NfsAuditSettings(), node="gpu074")


def test_table13_write_1621_is_1495_slot_wait_plus_126_network_server():
    a = _audit(*table13_pair("WRITE"))
    w = a.op("WRITE")
    assert a.interval_seconds == 30.0
    assert round(w.rate_per_s) == 600
    assert round(w.execute_ms) == 1621 and round(w.slot_wait_ms) == 1495 and round(w.network_server_ms) == 126
    assert f"{w.slot_wait_share:.1%}" == "92.2%"
    assert f"{1 - w.slot_wait_share:.1%}" == "7.8%"
    assert f"{a.link_utilization:.1%}" == "1.4%"
    assert a.verdict.kind == "rpc-slot-starvation"
    assert a.verdict.headline.startswith(
        "RPC slot starvation: 92% of WRITE latency is waiting for a slot (1,495.0 of 1,621.0 ms per request); "
        "the storage link is 1.4% used; raising bandwidth will not help"
    )
    remedies = " | ".join(a.verdict.remedies)
    assert "sunrpc.tcp_max_slot_table_entries" in remedies and "128 of 128" in remedies
    assert "nfs.max_session_slots" in remedies and "nconnect=2 (now 1)" in remedies and "stagger checkpoint" in remedies
    assert a.transport.slot_table_full and a.transport.avg_backlog == pytest.approx(900 * 18000 / (18000))


def test_table13_read_59ms_is_31_5_plus_27_3():
    a = _audit(*table13_pair("READ"))
    r = a.op("READ")
    assert round(r.rate_per_s) == 5400
    assert r.slot_wait_ms == pytest.approx(31.5) and r.network_server_ms == pytest.approx(27.3)
    assert round(r.execute_ms) == 59 and round(r.slot_wait_ms + r.network_server_ms) == 59
    assert f"{r.slot_wait_share:.1%}" == "53.3%" and f"{r.network_server_ms / r.execute_ms:.1%}" == "46.2%"
    assert f"{a.link_utilization:.1%}" == "10.4%"
    assert a.verdict.kind == "rpc-slot-starvation" and "53% of READ latency" in a.verdict.headline
    assert any("read_ahead_kb" in r for r in a.verdict.remedies)


def test_threshold_from_settings_changes_the_verdict():
    strict = NfsAuditSettings(slot_wait_share_starved=0.6)
    a = _audit(*table13_pair("READ"), settings=strict)
    assert a.verdict.kind == "healthy"  # 53% < 60%: not called starvation


def test_slow_server_and_saturated_link():
    before, after = table13_pair("READ")
    fast = NfsAuditSettings(slot_wait_share_starved=0.9, slow_rtt_ms=20)
    assert _audit(before, after, settings=fast).verdict.kind == "slow-server"
    tiny_link = NfsAuditSettings(slot_wait_share_starved=0.9, link_gbps=20)  # 26 GB/s … on a 2.5 GB/s link
    v = _audit(before, after, settings=tiny_link).verdict
    assert v.kind == "link-saturated" and "20 Gbps" in v.headline


def _spec(age, write_ops, bytes_sent, sends, xprt_bklog=0):
    return MountSpec("s:/x", "/x", vers="3", age=age,
                     ops={"WRITE": OpCounters(write_ops, bytes_sent, 0, write_ops * 2, write_ops, write_ops * 3)},
                     xprts=[XprtCounters(sends=sends, bklog_u=xprt_bklog, max_slots=10)])  # fmt: skip


def test_counter_wrap_32_and_64_bit():
    assert counter_delta(2**32 - 100, 500) == (600, True)
    assert counter_delta(2**64 - 10, 5) == (15, True)
    assert counter_delta(7, 9) == (2, False)
    before = render_mountstats([_spec(100, 2**32 - 100, 2**64 - 1000, 2**32 - 50)])
    after = render_mountstats([_spec(110, 500, 3000, 550)])
    [d] = diff_mountstats(parse_mountstats(before), parse_mountstats(after))
    assert d.ops["WRITE"].ops == 600 and d.ops["WRITE"].bytes_sent == 4000 and d.transports[0].sends == 600
    assert "WRITE.ops" in d.wrapped and "WRITE.bytes_sent" in d.wrapped and "xprt[0].sends" in d.wrapped
    a = audit_mount(d)
    assert a.op("WRITE").rate_per_s == 60.0 and a.wrapped == d.wrapped


def test_remount_between_snapshots_is_an_error_not_a_wrap():
    before = parse_mountstats(render_mountstats([_spec(5000, 100, 10, 10)]))
    after = parse_mountstats(render_mountstats([_spec(20, 1, 1, 1)]))
    with pytest.raises(MountstatsError, match=r"remounted between snapshots \(age went from 1.4 h to 20 s\)"):
        diff_mountstats(before, after)


def test_zero_ops_and_zero_interval():
    text = render_mountstats([_spec(100, 0, 0, 0)])
    ms = parse_mountstats(text)
    [d] = diff_mountstats(ms, ms, interval_seconds=30)
    a = audit_mount(d)
    w = a.op("WRITE")
    assert w.ops == 0 and w.slot_wait_ms is None and w.slot_wait_share is None and w.rate_per_s == 0
    assert a.transport.avg_backlog is None and a.verdict.kind == "idle"
    with pytest.raises(MountstatsError, match="0 s apart"):
        diff_mountstats(ms, ms)  # same age, no interval given
    zero_age = parse_mountstats(render_mountstats([_spec(0, 0, 0, 0)]))
    with pytest.raises(MountstatsError, match="rates since mount are undefined"):
        diff_mountstats(None, zero_age)


def test_no_nfs_mounts_is_a_clear_error():
    ms = parse_mountstats("device proc mounted on /proc with fstype proc\ndevice tmpfs mounted on /dev/shm with fstype tmpfs\n", "n1")
    with pytest.raises(MountstatsError, match=r"n1: no NFS mounts found \(2 other mounts skipped: proc, tmpfs\)"):
        diff_mountstats(None, ms)


def test_new_mount_since_before_uses_its_lifetime():
    one = parse_mountstats(render_mountstats([_spec(100, 10, 10, 10)]))
    spec2 = _spec(5, 50, 10, 10)
    spec2.device, spec2.mountpoint = "s:/y", "/y"
    two = parse_mountstats(render_mountstats([_spec(130, 40, 40, 40), spec2]))
    d1, d2 = diff_mountstats(one, two)
    assert (d1.interval_seconds, d1.ops["WRITE"].ops, d1.lifetime) == (30.0, 30, False)
    assert (d2.interval_seconds, d2.ops["WRITE"].ops, d2.lifetime) == (5.0, 50, True)


def test_nconnect_transports_are_combined():
    spec = _spec(100, 10, 10, 10)
    spec.xprts = [XprtCounters(port=1, sends=100, req_u=1000, bklog_u=500, max_slots=64),
                  XprtCounters(port=2, sends=300, req_u=9000, bklog_u=100, max_slots=128)]  # fmt: skip
    [d] = diff_mountstats(None, parse_mountstats(render_mountstats([spec])))
    a = audit_mount(d, NfsAuditSettings(rpc_slot_limit=128))
    assert a.nconnect == 2 and a.transport.connections == 2
    assert a.transport.avg_backlog == 1.5 and a.transport.avg_in_flight == 25.0
    assert a.transport.max_slots_seen == 128 and a.transport.slot_table_full
