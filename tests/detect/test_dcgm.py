"""dcgm-exporter exposition parser, DCGM blank sentinels, and signals_from_dcgm."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from remedy.detect.dcgm import is_dcgm_blank, parse_dcgm_metrics, signals_from_dcgm
from remedy.detect.schemas import DCGM_SAMPLES
from remedy.detect.signals import SignalKind, classify
from remedy.domain.xid import RemediationPath as P

DATA = Path(__file__).parent / "data"
LABELS = 'gpu="{g}",UUID="GPU-{g}",pci_bus_id="00000000:3B:00.0",device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="{h}",DCGM_FI_DRIVER_VERSION="550.54.15"'


def line(metric: str, value: str, gpu: int = 0, host: str = "gpu-node-17", extra: str = "") -> str:
    return f"{metric}{{{LABELS.format(g=gpu, h=host)}{extra}}} {value}"


# DCGM sentinels: BLANK, NOT_FOUND, NOT_SUPPORTED, NOT_PERMISSIONED (dcgm_structs.h) as the exporter prints them.
SENTINELS = ["2147483632", "2147483633", "2147483634", "2147483635",
             "9223372036854775792", "9223372036854775793", "9223372036854775794", "9223372036854775795",
             "140737488355328", "140737488355329", "140737488355330", "140737488355331",
             "1.40737488355328e+14"]


@pytest.mark.parametrize("text", SENTINELS)
def test_blank_sentinels_become_nan(text: str) -> None:
    r = parse_dcgm_metrics(line("DCGM_FI_DEV_GPU_TEMP", text))
    assert r.parsed == 1 and r.blanks == 1
    assert math.isnan(r.samples["value"].iloc[0])


@pytest.mark.parametrize("value", [0.0, 79.0, 2147483631.0, 2147483636.0, 98123456789.0, 140737488355327.0])
def test_real_values_are_not_blank(value: float) -> None:
    assert not is_dcgm_blank(value)


def test_labels_to_columns() -> None:
    r = parse_dcgm_metrics(line("DCGM_FI_DEV_XID_ERRORS", "79", gpu=3) + "\n")
    row = r.samples.iloc[0]
    assert (row.hostname, row.gpu, row.uuid, row.model, row.device, row.metric, row.value) == (
        "gpu-node-17", 3, "GPU-3", "NVIDIA H100 80GB HBM3", "nvidia3", "DCGM_FI_DEV_XID_ERRORS", 79.0)
    assert row.labels["DCGM_FI_DRIVER_VERSION"] == "550.54.15"


def test_escaped_label_values_and_timestamps() -> None:
    r = parse_dcgm_metrics('DCGM_FI_DEV_GPU_TEMP{gpu="0",pod="a\\"b",Hostname="h"} 41 1732180000000')
    assert r.parsed == 1 and r.samples.iloc[0].labels["pod"] == 'a"b'


def test_sample_file() -> None:
    r = parse_dcgm_metrics((DATA / "dcgm_metrics.txt").read_text())
    DCGM_SAMPLES.validate(r.samples)
    assert (r.parsed, r.blanks, r.unparsed, r.comments) == (18, 3, 2, 30)
    assert r.types["DCGM_FI_DEV_XID_ERRORS"] == "gauge"
    energy = r.samples[r.samples.metric == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]["value"].iloc[0]
    assert energy == 98123456789.0  # a real counter above the int32 sentinel survives

    sigs = signals_from_dcgm(r.samples)
    got = sorted((s.gpu, s.kind.value, s.xid) for s in sigs)
    assert got == sorted([
        (3, "xid", 79), (1, "row-remap-failure", None), (2, "row-remap-pending", None),
        (2, "uncorrectable-remap", None), (4, "correctable-remap", None),
        (5, "hw-slowdown", None), (5, "thermal-throttle", None), (5, "power-brake", None),  # 200 = 0x80|0x40|0x8
        (0, "nvlink-error", None), (7, "pcie-degraded", None),
    ])
    paths = {(s.gpu, s.kind.value): classify(s).path for s in sigs}
    assert paths[(3, "xid")] is P.REBOOT
    assert paths[(1, "row-remap-failure")] is P.REPLACE
    assert paths[(2, "row-remap-pending")] is P.RESET_GPU
    assert paths[(7, "pcie-degraded")] is P.REPLACE


def test_throttle_bits() -> None:
    def kinds(mask: int) -> list[str]:
        df = parse_dcgm_metrics(line("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", str(mask))).samples
        return sorted(s.labels["reason"] for s in signals_from_dcgm(df))

    assert kinds(0x1) == [] and kinds(0x4) == []  # idle, SW power cap: not faults
    assert kinds(0x8) == ["hw_slowdown"]
    assert kinds(0x20) == ["sw_thermal"] and kinds(0x40) == ["hw_thermal"]
    assert kinds(0x80) == ["hw_power_brake"]


def test_pcie_gen_only_counts_under_load() -> None:
    base = [line("DCGM_FI_DEV_PCIE_LINK_WIDTH", "16"), line("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "16"),
            line("DCGM_FI_DEV_PCIE_LINK_GEN", "1"), line("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "5")]
    idle = parse_dcgm_metrics("\n".join(base + [line("DCGM_FI_DEV_GPU_UTIL", "0")])).samples
    busy = parse_dcgm_metrics("\n".join(base + [line("DCGM_FI_DEV_GPU_UTIL", "97")])).samples
    assert signals_from_dcgm(idle) == []
    (s,) = signals_from_dcgm(busy)
    assert s.kind is SignalKind.PCIE_DEGRADED and s.labels["pcie_gen"] == "1"


def test_nvlink_rates_from_two_scrapes() -> None:
    m = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    before = parse_dcgm_metrics(line(m, "1000")).samples
    after = parse_dcgm_metrics(line(m, "4000")).samples
    (s,) = signals_from_dcgm(after, previous=before, elapsed_seconds=15)
    assert s.value == pytest.approx(200.0) and classify(s).path is P.RESET_GPU
    slow = parse_dcgm_metrics(line(m, "1150")).samples
    (s,) = signals_from_dcgm(slow, previous=before, elapsed_seconds=15)
    assert s.value == pytest.approx(10.0) and classify(s).path is P.WATCH
    assert signals_from_dcgm(before, previous=before, elapsed_seconds=15) == []  # no new errors
    r = "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"
    (s,) = signals_from_dcgm(parse_dcgm_metrics(line(r, "3")).samples,
                             previous=parse_dcgm_metrics(line(r, "2")).samples, elapsed_seconds=15)
    assert s.value == 1 and classify(s).path is P.RESET_GPU
    with pytest.raises(ValueError, match="elapsed_seconds must be > 0"):
        signals_from_dcgm(after, previous=before)


def test_blank_never_becomes_a_signal() -> None:
    df = parse_dcgm_metrics(line("DCGM_FI_DEV_ROW_REMAP_FAILURE", "2147483632")).samples
    assert signals_from_dcgm(df) == []


def test_xid_count_collector_and_missing_hostname() -> None:
    text = 'DCGM_EXP_XID_ERRORS_COUNT{gpu="2",UUID="GPU-2",device="nvidia2",modelName="H100",xid="119",window_size_in_ms="300000"} 2'
    (s,) = signals_from_dcgm(parse_dcgm_metrics(text).samples, node="gpu-node-9")
    assert (s.node, s.gpu, s.xid, s.value) == ("gpu-node-9", 2, 119, 2.0)


def test_unparsed_lines_are_counted_with_samples() -> None:
    r = parse_dcgm_metrics('ok_metric 1\nbad{gpu="0" 1\nalso bad\nDCGM_FI_DEV_GPU_TEMP{gpu="0"} forty\n')
    assert r.parsed == 1 and r.unparsed == 3
    assert [n for n, _ in r.unparsed_samples] == [2, 3, 4]
