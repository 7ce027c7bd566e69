"""Kernel log XID/SXid parser on real-format lines (NVIDIA driver, dmesg, syslog, journalctl -o short-iso)."""

from __future__ import annotations

from datetime import UTC, datetime, timezone
from pathlib import Path

import pandas as pd
import pytest

from remedy.detect.kernel_log import normalize_bus_id, parse_kernel_log
from remedy.detect.schemas import KERNEL_EVENTS
from remedy.detect.signals import SignalKind, classify
from remedy.domain.xid import RemediationPath as P

DATA = Path(__file__).parent / "data"


def one(line: str, **kw):
    r = parse_kernel_log(line, **kw)
    assert r.matched == 1, r.summary()
    return r.events.iloc[0], r.signals[0]


def test_full_line_with_pid_and_name() -> None:
    row, s = one("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.", node="n1")
    assert (row.code, row.pid, row.process, row.bus_id, row.message) == (79, 1234, "python3", "0000:3b:00", "GPU has fallen off the bus.")
    assert (s.node, s.kind, s.xid, s.gpu) == ("n1", SignalKind.XID, 79, None)
    assert s.labels["bus_id"] == "0000:3b:00"
    assert classify(s).path is P.REBOOT


def test_without_pid_and_name() -> None:
    row, s = one("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
    assert pd.isna(row.pid) and pd.isna(row.process) and row.message == "GPU has fallen off the bus."
    assert s.node == "unknown"  # no prefix and no node given: kept, named unknown, not dropped


def test_unknown_pid_and_pid_without_name() -> None:
    row, s = one("NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x404600=0x80000002")
    assert pd.isna(row.pid) and pd.isna(row.process) and row.message.startswith("Graphics Exception")
    row, s = one("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.")
    assert row.pid == 1896 and row.message.startswith("Row Remapper")


def test_older_driver_without_pci_prefix_and_dmesg_stamp() -> None:
    row, s = one("[ 966.503025] NVRM: Xid (0000:01:00): 13, Graphics Exception: Class 0x0 Subchannel 0x0 Mismatch")
    assert row.code == 13 and row.bus_id == "0000:01:00" and row.uptime_seconds == pytest.approx(966.503025)


def test_journal_iso_prefix_gives_host_and_time() -> None:
    row, s = one("2026-11-21T10:00:01.123456+00:00 gpu-node-18 kernel: NVRM: Xid (PCI:0000:3b:00): 94, pid=77, name=python, Contained: SM (0x1).")
    assert s.node == "gpu-node-18" and s.at == datetime(2026, 11, 21, 10, 0, 1, 123456, tzinfo=UTC)


def test_syslog_prefix_needs_a_year_for_time() -> None:
    line = "Nov 21 10:00:01 gpu-node-17 kernel: [ 966.503025] NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120, intr 10000000"
    _, s = one(line)
    assert s.node == "gpu-node-17" and s.at is None
    _, s = one(line, year=2026)
    assert s.at == datetime(2026, 11, 21, 10, 0, 1, tzinfo=UTC)


def test_bus_map_gives_gpu_index_any_spelling() -> None:
    _, s = one("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", bus_to_gpu={"00000000:3B:00.0": 3})
    assert s.gpu == 3
    _, s = one("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", bus_to_gpu={"0000:5e:00": 4})
    assert s.gpu is None  # not in the map: gpu stays None, bus id kept
    with pytest.raises(ValueError, match="GPU index must be a non-negative integer"):
        parse_kernel_log("", bus_to_gpu={"0000:3b:00": -1})
    with pytest.raises(ValueError, match="not a PCI bus id"):
        normalize_bus_id("3b")


def test_nvswitch_sxid_fatal_and_nonfatal() -> None:
    row, s = one("nvidia-nvswitch2: SXid (PCI:0000:c5:00.0): 20034, Fatal, Link 47 LTSSM Fault Up")
    assert (row.kind, row.code, row.severity) == ("sxid", 20034, "Fatal")
    assert s.kind is SignalKind.SXID and s.labels == {
        "bus_id": "0000:c5:00", "sxid": "20034", "severity": "fatal", "device": "nvidia-nvswitch2", "link": "47"}
    assert classify(s).path is P.REBOOT
    _, s = one("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)")
    assert s.labels["severity"] == "non-fatal" and classify(s).path is P.WATCH


def test_sample_file_counts_and_schema() -> None:
    r = parse_kernel_log((DATA / "dmesg_sample.log").read_text(), node="n0", bus_to_gpu={"0000:3b:00": 3}, year=2026)
    KERNEL_EVENTS.validate(r.events)
    assert r.lines == 12 and r.matched == 8 and r.ignored == 2 and r.unparsed == 1 and r.continued == 1
    assert [n for n, _ in r.unparsed_samples] == [8]  # the garbage Xid line; line 12 continues the SXid of line 11
    assert "Severity 0 Engine instance 32" in r.signals[-1].labels["detail"]
    assert r.events["code"].tolist() == [79, 79, 31, 63, 13, 20034, 48, 12028]
    assert len(r.signals) == r.matched
    assert r.events["gpu"].tolist()[:2] == [3, 3]


def test_empty_input() -> None:
    r = parse_kernel_log("")
    assert r.lines == 0 and r.events.empty and r.signals == []
    KERNEL_EVENTS.validate(r.events)
