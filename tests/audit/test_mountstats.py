from pathlib import Path

import pytest

from remedy.audit.mountstats import MountstatsError, parse_mountstats, read_mountstats

SAMPLES = Path(__file__).parent / "samples"


def test_nfsv3_tcp_every_section():
    ms = read_mountstats(SAMPLES / "v3_tcp.mountstats")
    assert ms.skipped == 4 and ms.skipped_fstypes == {"rootfs": 1, "proc": 1, "sysfs": 1, "tmpfs": 1}
    [m] = ms.mounts
    assert (m.device, m.mountpoint, m.fstype, m.statvers) == ("10.20.0.5:/export/ckpt", "/mnt/ckpt", "nfs", "1.1")
    assert m.nfs_version == "3" and m.nconnect == 1 and m.opts["wsize"] == "1048576" and "hard" in m.opts
    assert m.age_seconds == 86400
    assert m.caps["wtmult"] == "4096" and m.sec == {"flavor": "1", "pseudoflavor": "1"}
    assert len(m.events) == 27 and m.events["vfswritepages"] == 9000 and m.events["pnfswrites"] == 0
    assert len(m.bytes) == 8 and m.bytes["serverreadbytes"] == 5100000000 and m.bytes["writepages"] == 488281
    assert (m.rpc_version, m.program, m.program_version) == ("1.1", 100003, 3)
    [x] = m.transports
    assert (x.protocol, x.port, x.bind_count, x.connect_count, x.connect_time, x.idle_time) == ("tcp", 785, 1, 1, 0, 3)
    assert (x.sends, x.recvs, x.bad_xids, x.req_u, x.bklog_u) == (200000, 199990, 0, 6400000, 1200000)
    assert (x.max_slots, x.sending_u, x.pending_u) == (128, 40000, 90000)
    assert len(m.ops) == 22
    w = m.ops["WRITE"]
    assert (w.ops, w.trans, w.timeouts, w.bytes_sent, w.bytes_recv) == (2000, 2000, 0, 2000320000, 272000)
    assert (w.queue_ms, w.rtt_ms, w.execute_ms, w.errors) == (2990000, 252000, 3242000, 0)
    assert m.ops["LOOKUP"].errors == 12


def test_nfsv41_nconnect_gives_one_transport_per_connection():
    [m] = read_mountstats(SAMPLES / "v41_nconnect.mountstats").mounts
    assert m.fstype == "nfs4" and m.nfs_version == "4.1" and m.nconnect == 4
    assert [x.port for x in m.transports] == [912, 913, 914, 915]
    assert [x.max_slots for x in m.transports] == [128, 128, 127, 128]
    assert "nfsv4" in m.extra and "impl_id" in m.extra
    # op names with underscores and long names parse
    assert m.ops["SETCLIENTID_CONFIRM"].ops == 0 and m.ops["BIND_CONN_TO_SESSION"].ops == 3


def test_nfsv42_rdma_long_field_list():
    [m] = read_mountstats(SAMPLES / "v42_rdma.mountstats").mounts
    [x] = m.transports
    assert x.protocol == "rdma" and x.sends == 3000 and x.req_u == 96000 and x.bklog_u == 0
    assert x.max_slots is None and x.sending_u is None  # rdma does not print them
    assert len(x.rdma) == 17
    assert x.rdma["write_chunk_count"] == 2861 and x.rdma["reply_chunk_count"] == 0 and x.rdma["mrs_allocated"] == 32
    assert x.rdma["total_rdma_request"] == 3000 and x.rdma["reply_waits_for_send"] == 0


def test_old_kernel_formats_without_errors_field_and_short_xprt():
    text = (SAMPLES / "v3_tcp.mountstats").read_text()
    text = text.replace("\txprt:\ttcp 785 1 1 0 3 200000 199990 0 6400000 1200000 128 40000 90000",
                        "\txprt:\ttcp 785 1 1 0 3 200000 199990 0 6400000 1200000")  # fmt: skip
    text = text.replace("2990000 252000 3242000 0\n", "2990000 252000 3242000\n")
    [m] = parse_mountstats(text).mounts
    assert m.transports[0].max_slots is None and m.transports[0].bklog_u == 1200000
    assert m.ops["WRITE"].errors is None and m.ops["WRITE"].execute_ms == 3242000


def test_udp_and_local_transports():
    text = (SAMPLES / "v3_tcp.mountstats").read_text()
    udp = text.replace("tcp 785 1 1 0 3 200000 199990 0 6400000 1200000 128 40000 90000",
                       "udp 785 1 200000 199990 0 6400000 1200000 16 40000 90000")  # fmt: skip
    assert parse_mountstats(udp).mounts[0].transports[0].max_slots == 16
    local = text.replace("tcp 785 1 1 0 3 200000 199990 0 6400000 1200000 128 40000 90000",
                         "local 1 1 0 3 200000 199990 0 6400000 1200000 64 40000 90000")  # fmt: skip
    x = parse_mountstats(local).mounts[0].transports[0]
    assert x.protocol == "local" and x.port is None and x.max_slots == 64


@pytest.mark.parametrize(
    "cut, message",
    [
        (lambda t: t[: t.index("READDIRPLUS") + 20], r"line 31: file ends mid-line"),
        (lambda t: t[: t.index("\tRPC iostats")], r"ends before RPC iostats"),
        (lambda t: t.replace("\tevents:\t120 4000 3", "\tevents:\t120"), r"line 9: events: has 25 counters, expected 27"),
        (lambda t: t.replace("128 40000 90000", "128 40000"), r"line 12: xprt tcp has 12 fields, expected 13 or 10"),
        (lambda t: t.replace("WRITE: 2000 2000 0", "WRITE: 2000 2000 x"), r"line 21: expected whole numbers"),
    ],
)
def test_truncated_or_malformed_input_names_the_line(cut, message):
    text = cut((SAMPLES / "v3_tcp.mountstats").read_text())
    with pytest.raises(MountstatsError, match=message):
        parse_mountstats(text, source="node7")


def test_a_shorter_per_op_table_is_read_and_names_what_it_leaves_out():
    # prometheus/procfs reads such files (its fixtures list only a few ops per mount), so a cut at a line
    # boundary inside the op table cannot be told from a short table: it parses, and says what is missing.
    text = (SAMPLES / "v3_tcp.mountstats").read_text()
    [m] = parse_mountstats(text[: text.index("\t      CREATE")]).mounts
    assert "WRITE" in m.ops and "CREATE" not in m.ops
    assert m.ops_absent[0] == "CREATE" and m.ops_absent[-1] == "COMMIT"
    [full] = parse_mountstats(text).mounts
    assert full.ops_absent == ()


def test_unknown_transport_and_missing_file(tmp_path):
    text = (SAMPLES / "v3_tcp.mountstats").read_text().replace("xprt:\ttcp 785", "xprt:\tsctp 785")
    with pytest.raises(MountstatsError, match="unknown transport 'sctp'"):
        parse_mountstats(text)
    with pytest.raises(MountstatsError, match="not found"):
        read_mountstats(tmp_path / "nope")


def test_non_nfs_only_parses_to_no_mounts():
    ms = parse_mountstats("device proc mounted on /proc with fstype proc\ndevice sysfs mounted on /sys with fstype sysfs\n")
    assert ms.mounts == [] and ms.skipped == 2
