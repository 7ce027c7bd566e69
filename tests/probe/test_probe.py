"""The node probe, driven through the NVML loader: the fake library (selected like the real one) and real pynvml."""

from __future__ import annotations

import ctypes.util
import json
from collections.abc import Callable

import pynvml
import pytest

from remedy.errors import RemedyError
from remedy.health.result import Verdict
from remedy.probe import ExpectedNode, ProbeUnavailable, probe_node
from remedy.probe.fakenvml import FakeHandle, FakeNvml, FakeNvmlState
from remedy.probe.nvml import NvmlBackendError, load
from remedy.settings.health import HealthCheckSettings, ProbeThresholds
from remedy.sim.health import NodeHealth

H100 = "NVIDIA H100 80GB HBM3"
EXPECTED = ExpectedNode(gpu_count=8, gpu_model=H100)


def fake_from_env(tmp_path, monkeypatch, state: dict) -> object:
    """Write the state file and select the fake the way a node would: REMEDY_NVML=fake:<path>."""
    path = tmp_path / "health.json"
    path.write_text(json.dumps(state))
    monkeypatch.setenv("REMEDY_NVML", f"fake:{path}")
    return load()


def probe(health: NodeHealth, expected: ExpectedNode = EXPECTED, **state) -> object:
    return probe_node(expected, FakeNvml(FakeNvmlState(health=health, **state)), xid_wait_seconds=0.05)


def failing(report) -> set[tuple[str, str]]:
    return {(f.subject, f.item) for f in report.findings if f.verdict is Verdict.FAIL}


def warning(report) -> set[tuple[str, str]]:
    return {(f.subject, f.item) for f in report.findings if f.verdict is Verdict.WARN}


def test_healthy_node_passes_through_the_env_selected_fake(tmp_path, monkeypatch):
    nvml = fake_from_env(tmp_path, monkeypatch, NodeHealth.healthy().to_dict())
    assert isinstance(nvml, FakeNvml)
    report = probe_node(EXPECTED, nvml, xid_wait_seconds=0.05)
    assert report.verdict is Verdict.PASS, report.problems()
    assert report.driver_version == "570.124.06" and len(report.gpus) == 8
    g = report.gpus[0]
    assert g["pcie"] == {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16}
    assert g["nvlink"] == {"up": 18, "down": [], "errors": 0} and g["clock_events"] == []
    assert g["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    items = {f.item for f in report.findings}
    assert {"gpu-count", "gpu-model", "driver-version", "pcie-width", "pcie-gen", "clock-events", "remapped-rows-uncorrectable",
            "ecc-volatile-uncorrected", "nvlink-down", "temperature-c", "xid-events", "retired-pages"} <= items
    count = next(f for f in report.findings if f.item == "gpu-count")
    assert (count.value, count.threshold) == (8, "== 8")


def gpu(i: int, **faults) -> Callable[[NodeHealth], None]:
    return lambda h: [setattr(h.gpus[i], k, v) for k, v in faults.items()]


FAULTS = [  # (id, plant, expected fail findings, expected warn findings)
    ("remap-pending", gpu(3, remap_pending=True, uncorrectable_remaps=1), {("GPU 3", "row-remap-pending")},
     {("GPU 3", "remapped-rows-uncorrectable")}),
    ("remap-failure", gpu(1, remap_failure=True, uncorrectable_remaps=8),
     {("GPU 1", "row-remap-failure"), ("GPU 1", "remapped-rows-uncorrectable")}, set()),
    ("correctable-remaps", gpu(2, correctable_remaps=254), set(), {("GPU 2", "remapped-rows-correctable")}),
    ("pcie-x8", gpu(5, pcie_width=8), {("GPU 5", "pcie-width")}, set()),
    ("pcie-gen4", gpu(6, pcie_gen=4), {("GPU 6", "pcie-gen")}, set()),
    ("nvlink-down", gpu(0, nvlink_down=[3, 7]), {("GPU 0", "nvlink-down")}, set()),
    ("nvlink-errors", gpu(0, nvlink_errors=150), set(), {("GPU 0", "nvlink-errors")}),
    ("hw-slowdown", gpu(4, hw_slowdown=True), {("GPU 4", "clock-events")}, set()),
    ("power-brake", gpu(4, power_brake=True), {("GPU 4", "clock-events")}, set()),
    ("hot", gpu(7, temperature_c=88), {("GPU 7", "temperature-c")}, set()),
    ("warm", gpu(7, temperature_c=81), set(), {("GPU 7", "temperature-c")}),
    ("ecc-dbe", gpu(2, ecc_volatile_dbe=1), {("GPU 2", "ecc-volatile-uncorrected")}, set()),
    ("retired-pages", gpu(2, retired_pages_sbe=40, retired_pages_dbe=20), {("GPU 2", "retired-pages")}, set()),
    ("xid", gpu(1, pending_xids=[48, 94]), {("GPU 1", "xid-event")}, set()),
    ("thermal-idle", gpu(1, thermal_throttle=True), set(), set()),  # only shows under load
]


@pytest.mark.parametrize("plant, fails, warns", [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_each_injected_fault_is_found_on_its_gpu(plant, fails, warns):
    health = NodeHealth.healthy()
    plant(health)
    report = probe(health)
    assert failing(report) == fails
    assert warning(report) == warns
    assert report.verdict is (Verdict.FAIL if fails else Verdict.WARN if warns else Verdict.PASS)


def test_findings_carry_value_and_threshold():
    health = NodeHealth.healthy()
    health.gpus[5].pcie_width = 8
    health.gpus[4].power_brake = True
    report = probe(health)
    pcie = next(f for f in report.findings if f.item == "pcie-width" and f.subject == "GPU 5")
    assert (pcie.value, pcie.threshold) == (8, ">= x16")
    clocks = next(f for f in report.findings if f.item == "clock-events" and f.subject == "GPU 4")
    assert clocks.value == ["hw_power_brake_slowdown", "hw_slowdown"]
    assert clocks.message == "clocks slowed by hw_power_brake_slowdown, hw_slowdown"


def test_xids_are_reported_once_each():
    health = NodeHealth.healthy()
    health.gpus[1].pending_xids = [48, 94]
    report = probe(health)
    assert report.xids == [{"gpu": 1, "xid": 48}, {"gpu": 1, "xid": 94}]


def test_thermal_throttle_shows_under_load():
    health = NodeHealth.healthy()
    health.gpus[1].thermal_throttle = True
    report = probe(health, under_load=True)
    assert failing(report) == {("GPU 1", "clock-events"), ("GPU 1", "temperature-c")}


def test_gpu_lost_fails_that_gpu_and_probes_the_rest():
    health = NodeHealth.healthy()
    health.gpus[3].fallen_off_bus = True
    report = probe(health)
    assert failing(report) == {("GPU 3", "gpu-lost")}
    assert report.gpus[3] == {"index": 3, "lost": True} and len(report.gpus) == 8
    assert "fell off the bus" in next(f.message for f in report.findings if f.item == "gpu-lost")


def test_fake_raises_pynvml_own_gpu_is_lost_class():
    health = NodeHealth.healthy()
    health.gpus[3].fallen_off_bus = True
    nvml = FakeNvml(health)
    nvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetRemappedRows(nvml.nvmlDeviceGetHandleByIndex(3))
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetHandleByIndex(8)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetMemoryInfo(FakeHandle(0))  # a pynvml call the fake does not implement
    assert nvml.NVML_FEATURE_ENABLED == pynvml.NVML_FEATURE_ENABLED


def test_other_nvml_errors_fail_that_gpu_without_crashing_the_probe(tmp_path, monkeypatch):
    state = {"health": NodeHealth.healthy().to_dict(), "gpu_errors": {"6": pynvml.NVML_ERROR_RESET_REQUIRED}}
    report = probe_node(EXPECTED, fake_from_env(tmp_path, monkeypatch, state), xid_wait_seconds=0)
    assert failing(report) == {("GPU 6", "nvml-error")}
    finding = next(f for f in report.findings if f.item == "nvml-error")
    assert finding.message == "NVML error reading this GPU: GPU requires restart"
    assert report.gpus[6] == {"index": 6, "error": "GPU requires restart"}


def test_gpu_gone_after_reboot_drops_the_count():
    health = NodeHealth.healthy()
    health.gpus[3].fallen_off_bus = True
    report = probe(health, lost_gpu_mode="gone")
    assert failing(report) == {("node", "gpu-count")}
    assert next(f.message for f in report.findings if f.item == "gpu-count") == "7 GPUs visible, expected 8"


def test_baseline_versions_and_model():
    expected = ExpectedNode(gpu_count=8, gpu_model="NVIDIA-H100-80GB-HBM3", driver_version="570.124.06",
                            vbios_version="96.00.99.00.01", gsp_firmware_version="570.124.06")
    report = probe(NodeHealth.healthy(), expected)
    assert failing(report) == {(f"GPU {i}", "vbios-version") for i in range(8)}
    vbios = next(f for f in report.findings if f.item == "vbios-version")
    assert vbios.message == "vbios-version 97.00.9A.00.0B differs from fleet baseline 96.00.99.00.01"
    b200 = probe(NodeHealth.healthy(), ExpectedNode(gpu_count=8, gpu_model="NVIDIA B200"))
    assert failing(b200) == {(f"GPU {i}", "gpu-model") for i in range(8)}


def test_thresholds_come_from_settings():
    health = NodeHealth.healthy()
    health.gpus[0].pcie_gen = 4
    t = ProbeThresholds(pcie_gen_below_max="warn", temperature_warn_c=40)
    report = probe_node(EXPECTED, FakeNvml(health), t, xid_wait_seconds=0)
    assert failing(report) == set()
    assert ("GPU 0", "pcie-gen") in warning(report) and ("GPU 7", "temperature-c") in warning(report)
    s = HealthCheckSettings(probe=ProbeThresholds(driver_version="999.1"))
    assert ExpectedNode.from_settings(s, gpu_count=4) == ExpectedNode(gpu_count=4, gpu_model=None, driver_version="999.1")
    pinned = HealthCheckSettings(gpu_model="NVIDIA-B200", gpus_per_node=8)
    assert ExpectedNode.from_settings(pinned).gpu_model == "NVIDIA-B200"
    assert ExpectedNode.from_settings(pinned, gpu_model=H100).gpu_model == H100


@pytest.mark.parametrize("code, cause", [
    (12, "NVML library not found: is the NVIDIA driver installed on this node?"),
    (9, "NVIDIA driver not loaded: is the nvidia kernel module loaded (lsmod | grep nvidia)?"),
    (4, "no permission to use NVML: run the probe privileged or with /dev/nvidia* mounted"),
])
def test_cannot_start_nvml_names_the_cause(tmp_path, monkeypatch, code, cause):
    nvml = fake_from_env(tmp_path, monkeypatch, {"health": NodeHealth.healthy().to_dict(), "init_error": code})
    with pytest.raises(ProbeUnavailable) as exc:
        probe_node(EXPECTED, nvml)
    assert str(exc.value) == cause


def test_no_gpu_is_a_clear_error():
    with pytest.raises(ProbeUnavailable, match=r"no NVIDIA GPU found on this node \(NVML reports 0 devices\)"):
        probe(NodeHealth.healthy(gpus=0))


def test_real_pynvml_on_this_machine():
    """With no NVIDIA driver (this machine, CI) the real library must report LibraryNotFound as the cause."""
    nvml = load("pynvml")
    assert nvml is pynvml
    if ctypes.util.find_library("nvidia-ml") is None:
        with pytest.raises(ProbeUnavailable, match="^NVML library not found: is the NVIDIA driver installed on this node\\?$"):
            probe_node(EXPECTED, nvml, xid_wait_seconds=0)
    else:  # a GPU machine: the same code reads the real devices
        assert probe_node(ExpectedNode(gpu_count=0), nvml, xid_wait_seconds=0).gpus


def test_loader_rejects_bad_backends(tmp_path):
    with pytest.raises(NvmlBackendError, match="unknown NVML backend"):
        load("cuda")
    with pytest.raises(NvmlBackendError, match="needs a path"):
        load("fake:")
    with pytest.raises(RemedyError, match="state file not found"):
        load(f"fake:{tmp_path / 'missing.json'}")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"health": NodeHealth.healthy().to_dict(), "gpu_modle": "x"}))
    with pytest.raises(RemedyError, match="unknown field\\(s\\) gpu_modle"):
        load(f"fake:{bad}")
    bad.write_text("{not json")
    with pytest.raises(RemedyError, match="not a NodeHealth JSON"):
        load(f"fake:{bad}")
