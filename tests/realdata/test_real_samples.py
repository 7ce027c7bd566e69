"""Every real sample in samples/ parses, and gives the values its source states (see SOURCES.md)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timezone
from pathlib import Path

import pytest

from remedy.audit.mountstats import parse_mountstats
from remedy.detect.dcgm import parse_dcgm_metrics, signals_from_dcgm
from remedy.detect.joblog import parse_job_log
from remedy.detect.kernel_log import parse_kernel_log
from remedy.detect.signals import SignalKind
from remedy.health.dcgm import check_dcgm_diag, parse_dcgm_diag
from remedy.health.ib import check_ib, parse_ibstat
from remedy.health.nccl import check_nccl, parse_nccl
from remedy.health.result import CheckOutputError, Verdict
from remedy.health.smi import check_nvidia_smi, parse_nvidia_smi
from remedy.settings.health import HealthCheckSettings, IbThresholds, NcclCriteriaProfile, NcclSizeCriterion

HERE = Path(__file__).parent
SAMPLES = HERE / "samples"


def text(name: str) -> str:
    return (SAMPLES / name).read_text()


def test_every_sample_has_a_source_note():
    notes = (HERE / "SOURCES.md").read_text()
    # subfolders (one per contributing round/helper) hold files too; each file needs its note by name
    files = sorted(p.relative_to(SAMPLES).as_posix() for p in SAMPLES.rglob("*") if p.is_file())
    assert len(files) >= 30
    assert [f for f in files if f"`{f}`" not in notes and f"`{f.rsplit('/', 1)[-1]}`" not in notes] == []


# --- kernel log ----------------------------------------------------------------------------------

def xids(name: str) -> list[tuple[int, str]]:
    return [(s.xid, s.labels["bus_id"]) for s in parse_kernel_log(text(name), node="n").signals]


def test_mig_attributed_xid_is_read_with_its_gpu_instance():
    r = parse_kernel_log(text("nvidia_driver_xid_mig_contained.log"), node="n")
    assert (r.matched, r.unparsed) == (3, 0)
    assert [(s.xid, s.labels["bus_id"], s.labels.get("gpu_instance"), s.labels.get("pid")) for s in r.signals] == [
        (94, "0000:01:00", "5", "7194"), (94, "0000:01:00", None, "7062"), (95, "0000:01:00", None, "7062")]
    assert r.events["message"].iloc[2].startswith("Uncontained: LTC TAG")


def test_mig_compute_instance_as_the_driver_formats_it():
    # kernel_rc.c: "PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u"
    [s] = parse_kernel_log("NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, pid=9, name=a, x", node="n").signals
    assert (s.xid, s.labels["gpu_instance"], s.labels["compute_instance"], s.labels["process"]) == (13, "1", "2", "a")


def test_gpud_match_cases():
    r = parse_kernel_log(text("gpud_kmsg_match_cases.log"), node="n")
    assert xids("gpud_kmsg_match_cases.log") == [
        (79, "0000:05:00"), (14, "0000:03:00"), (149, "0009:01:00"), (154, "0009:01:00"), (149, "0008:01:00"),
        (154, "0019:01:00"), (149, "0009:01:00"), (149, "0009:01:00"), (149, "0008:01:00"), (154, "0018:01:00"),
        (154, "0008:01:00")]
    # both lines gpud expects no match for mention "Xid" without one: counted and sampled, not read as XIDs
    assert [n for n, _ in r.unparsed_samples] == [3, 4]
    assert r.events["uptime_seconds"].iloc[2] == pytest.approx(171167.620236)


def test_gpud_dmesg_ctime_file_has_five_xid_119():
    r = parse_kernel_log(text("gpud_dmesg_xid119_ctime.log"), node="n")
    assert xids("gpud_dmesg_xid119_ctime.log") == [(119, "0000:9b:00")] * 5
    assert r.events["at"].iloc[0] == datetime(2025, 2, 23, 16, 24, 18, tzinfo=UTC)
    assert r.events["process"].tolist()[:3] == ["nvidia-smi"] * 3


def test_nvsentinel_xid_cases():
    r = parse_kernel_log(text("nvsentinel_xid_csv_parser_cases.log"), node="n")
    assert xids("nvsentinel_xid_csv_parser_cases.log") == [
        (149, "0018:01:00"), (13, "0000:b5:00"), (13, "0000:b5:00"), (74, "0003:00:00"), (32, "0000:66:00"),
        (46, "0000:3f:00"), (69, "0001:ab:cd"), (8, "0000:9b:00"), (999, "0000:66:00"), (154, "0008:01:00"),
        (154, "0008:01:00"), (154, "0000:01:00"), (145, "0000:00:08")]
    assert r.unparsed == 2  # "Xid : 32" and "Xid (...): abc": named, not dropped
    assert r.signals[4].labels["process"] == "train.3" and r.signals[4].labels["pid"] == "2280636"


def test_nvsentinel_sxid_cases():
    r = parse_kernel_log(text("nvsentinel_sxid_handler_cases.log"), node="n")
    linked = [(s.labels["device"], int(s.labels["sxid"]), s.labels["severity"], s.labels["link"])
              for s in r.signals if "link" in s.labels]
    assert linked == [("nvidia-nvswitch3", 28006, "non-fatal", "46"), ("nvidia-nvswitch0", 20009, "non-fatal", "4"),
                      ("nvidia-nvswitch0", 24007, "fatal", "28")]
    assert all(s.kind is SignalKind.SXID for s in r.signals)
    # every line mentions SXid: read, counted and sampled, or (line 9, "Severity 1 Engine instance 00", whose first
    # line is not in the file) counted as the detail of an event the input does not hold
    assert r.matched + r.unparsed + r.orphan_details == 10 and r.orphan_details == 1


def test_issue_pastes_of_dmesg_and_journal():
    assert xids("akash_support_244_dmesg_T.log") == [
        (43, "0000:00:05"), (43, "0000:00:05"), (31, "0000:00:07"), (94, "0000:00:08")]
    assert xids("ogkm_issue1150_journal_xid45.log") == [
        (45, b) for b in ("0000:dc:00", "0000:ed:00", "0000:ba:00", "0000:97:00", "0000:dc:00", "0000:ba:00", "0000:ed:00")]
    assert xids("gpud_pr1174_nvlink_xids.log") == [
        (149, "0019:01:00"), (149, "0000:00:00"), (145, "0018:01:00"), (94, "0000:9b:00")]
    r = parse_kernel_log(text("dra_driver_issue904_xid43.log"), node="n")
    assert [(s.xid, s.labels["pid"], s.labels["process"]) for s in r.signals] == [(43, "3188489", "trigger_xid")]
    assert r.events["uptime_seconds"].iloc[0] == pytest.approx(1231741.378609)


# --- dcgmi diag ----------------------------------------------------------------------------------

def test_nvidia_deserialize_real_output_with_null_tests():
    raw = text("dcgm3_real_output_with_nulls.txt")
    assert raw.count("null,") == 8
    d = parse_dcgm_diag(raw)
    assert (d.layout, d.dcgm_version) == ("dcgm3", "3.1.0")
    deployment = [r for r in d.results if r.category == "Deployment"]
    assert len(deployment) == 9 and {r.status for r in deployment} == {"pass"}
    assert deployment[0].entity == "GPU 0,1,2,3,4,5,6,7"
    assert [r.entity for r in d.results if r.test == "software"] == [f"GPU {i}" for i in range(8)]
    assert check_dcgm_diag(raw).verdict is Verdict.PASS


def test_nvidia_per_gpu_json_fails_on_the_gpus_it_names():
    d = parse_dcgm_diag(text("dcgm3_per_gpu_diagmanager.json"))
    assert d.dcgm_version == "1.7" and len(d.results) == 38
    assert sorted(r.entity for r in d.failures()) == ["GPU 0", "GPU 2", "GPU 3"]
    assert {r.test for r in d.failures()} == {"sm_stress"}
    assert "did not exceed desired stress level of 3000.0" in d.failures()[0].messages[0]
    assert "error_id 50" in d.failures()[0].messages[0]
    memory = {r.entity: r.status for r in d.results if r.test == "memory"}
    assert memory == {"GPU 0": "skip", "GPU 1": "pass", "GPU 2": "pass", "GPU 3": "pass"}
    result = check_dcgm_diag(text("dcgm3_per_gpu_diagmanager.json"))
    assert result.verdict is Verdict.FAIL and result.measurements["failed_entities"] == ["GPU 0", "GPU 2", "GPU 3"]


def test_gcm_fail_and_warn():
    result = check_dcgm_diag(text("gcm_dcgm3_fail_warn.json"))
    assert result.verdict is Verdict.FAIL
    assert result.measurements["tests"]["Persistence Mode"] == "fail"
    assert result.measurements["tests"]["Environment Variables"] == "warn"
    assert result.measurements["counts"] == {"pass": 7, "fail": 1, "warn": 1, "skip": 0}


def test_text_table_3x_pass_all():
    d = parse_dcgm_diag(text("ramble_dcgmi_diag_r3_text_3_3_9.txt"))
    assert (d.layout, d.dcgm_version, d.driver_version) == ("text", "3.3.9", "570.133.20")
    status = {r.test: r.status for r in d.results}
    assert status.pop("EUD Test") == "skip" and set(status.values()) == {"pass"} and len(status) == 15
    assert {r.test: r.category for r in d.results}["PCIe"] == "Integration"
    assert check_dcgm_diag(text("ramble_dcgmi_diag_r3_text_3_3_9.txt")).verdict is Verdict.PASS
    d = parse_dcgm_diag(text("go_dcgm_issue52_text_3_3_1_excerpt.txt"))
    assert (d.dcgm_version, d.driver_version, len(d.results)) == ("3.3.1", "535.129.03", 7)


def test_text_table_4x_per_gpu_lines():
    d = parse_dcgm_diag(text("dcgm_issue253_text_4_2_3_excerpt.txt"))
    assert (d.dcgm_version, d.driver_version) == ("4.2.3", "570.148.08")
    assert [(r.test, r.entity, r.status) for r in d.results] == [("software", f"GPU {i}", "pass") for i in range(4)]


def test_text_table_4x_failure_with_wrapped_warning():
    result = check_dcgm_diag(text("dcgm_issue254_text_4_4_1_pcie_fail.txt"))
    assert result.verdict is Verdict.FAIL
    assert result.measurements["dcgm_version"] == "4.4.1" and result.measurements["tests"] == {"pcie": "fail"}
    assert result.reasons[0] == ("pcie fail on all: There was an internal error during the test: 'A child process "
                                 "(2378806) exited with non-zero status 1' Check DCGM and system logs for errors. "
                                 "Reset GPU. Restart DCGM. Rerun diagnostics.")
    # the paste stops inside the table (the user's "..."): also incomplete, but the failure is what it reports
    assert result.incomplete == ["the table has no closing border (cut after test 'pcie')"] and result.status == "fail"


def test_dcgmi_that_could_not_run_is_a_clear_error_quoting_it():
    with pytest.raises(CheckOutputError, match=r"did not run.*Unable to complete diagnostic for entities 0,1,2,3"):
        parse_dcgm_diag(text("dcgm_issue254_plugin_dir_error.txt"))


# --- nccl-tests ----------------------------------------------------------------------------------

def test_gcm_allreduce_rows_and_average():
    run = parse_nccl(text("gcm_nccl_allreduce_8xa100.txt"))
    assert (run.ranks, run.avg_busbw_gbps, run.out_of_bounds) == (8, 210.99, 0)
    assert [r.size_bytes for r in run.rows] == [33554432 * 2**i for i in range(6)]
    assert (run.rows[-1].out_of_place.busbw_gbps, run.rows[-1].in_place.busbw_gbps) == (231.72, 231.70)
    pair = parse_nccl(text("gcm_nccl_allreduce_pairwise_16xa100.txt"))
    assert (pair.ranks, pair.avg_busbw_gbps, pair.rows[-1].out_of_place.time_us) == (16, 150.209, 11013.0)


def test_gcm_floor_as_a_criteria_table():
    # gcm passes this output at a 200 GB/s floor and fails it at 211 (on its average, 210.99); the same floor
    # as a per-size criterion on the 1 GiB row (busbw 231.70) passes, and one above it fails.
    def judge(floor: float) -> Verdict:
        c = NcclCriteriaProfile(gpu_model="*", fabric="*", sizes=[NcclSizeCriterion(size_bytes=2**30, min_busbw_gbps=floor)])
        return check_nccl(text("gcm_nccl_allreduce_8xa100.txt"), c).verdict
    assert judge(200) is Verdict.PASS and judge(232) is Verdict.FAIL


def test_mpirun_that_never_started_is_a_clear_error():
    with pytest.raises(CheckOutputError, match="no result table"):
        parse_nccl(text("gcm_nccl_mpirun_slots_failure.txt"))


def test_nccl_tests_2_20_and_alltoall_with_na():
    run = parse_nccl(text("nccl_tests_2_20_dgx_spark.txt"))
    first = run.rows[0]
    assert (run.ranks, first.size_bytes, first.out_of_place.time_us, first.in_place.busbw_gbps) == (2, 8192, 35.15, 0.27)
    run = parse_nccl(text("nccl_tests_issue287_alltoall_inplace_na.txt"))
    [row] = run.rows
    assert (row.redop, row.out_of_place.algbw_gbps, row.out_of_place.wrong, row.in_place.wrong) == ("none", 1715.44, 0, None)
    assert (run.out_of_bounds, run.avg_busbw_gbps) == (0, 0.0)


def test_old_tables_without_root_read_error_as_a_tolerance():
    run = parse_nccl(text("nccl_tests_issue176_old_error_column.txt"))
    assert len(run.rows) == 6
    row = run.rows[-1]
    assert (row.size_bytes, row.out_of_place.time_us, row.out_of_place.busbw_gbps, row.in_place.busbw_gbps) == (
        131072, 120.9, 2.15, 2.22)
    assert {r.out_of_place.max_error for r in run.rows} == {1e-06} and row.out_of_place.wrong is None
    legacy = parse_nccl(text("nccl_issue120_legacy_nccl1_test.txt"))
    assert [(r.dtype, r.redop) for r in legacy.rows][:4] == [("char", "sum"), ("char", "prod"), ("char", "max"), ("char", "min")]
    assert (legacy.rows[0].out_of_place.algbw_gbps, legacy.rows[0].out_of_place.max_error) == (157.38, 0.0)


# --- ibstat --------------------------------------------------------------------------------------

def test_roce_ports_next_to_infiniband_are_not_judged_as_ib_failures():
    raw = text("gpud_ibstat_h100_some_down.txt")
    ports = parse_ibstat(raw)
    assert len(ports) == 12
    eth = {p.name: (p.state, p.rate_gbps) for p in ports if p.link_layer == "Ethernet"}
    assert eth == {"mlx5_1/1": ("Active", 100), "mlx5_2/1": ("Down", 40), "mlx5_7/1": ("Down", 40), "mlx5_8/1": ("Down", 40)}
    ib = [p for p in ports if p.link_layer == "InfiniBand"]
    assert len(ib) == 8 and {(p.state, p.rate_gbps) for p in ib} == {("Active", 400)}
    result = check_ib(raw, IbThresholds(), expected_ports=8)
    assert result.verdict is Verdict.PASS and result.measurements["not_judged"] == sorted(eth)
    # a node whose fabric *is* RoCE judges the Ethernet ports instead
    roce = check_ib(raw, IbThresholds(link_layer="Ethernet", expected_rate_gbps=100), expected_ports=4)
    assert roce.verdict is Verdict.FAIL and "mlx5_2/1: state Down (physical Disabled)" in roce.reasons


def test_ibpanic_partial_output_keeps_the_eight_cards():
    ports = parse_ibstat(text("gpud_ibstat_a100_ibpanic.txt"))
    assert len(ports) == 8 and {(p.state, p.rate_gbps, p.link_layer) for p in ports} == {("Active", 200, "InfiniBand")}
    assert check_ib(text("gpud_ibstat_a100_ibpanic.txt"), IbThresholds(), expected_ports=9).reasons[0] == (
        "8 InfiniBand ports found, expected 9")


def test_ibstat_issue_pastes():
    [p] = parse_ibstat(text("gpud_ibstat_parse_test_roce.txt"))
    assert (p.device, p.state, p.physical_state, p.rate_gbps, p.link_layer) == ("mlx5_0", "Active", "LinkUp", 400, "Ethernet")
    ports = parse_ibstat(text("mooncake_issue1999_ibstat_roce.txt"))
    assert [(p.name, p.state, p.link_layer) for p in ports] == [
        ("mlx5_0/1", "Active", "Ethernet"), ("mlx5_1/1", "Active", "Ethernet"), ("mlx5_10/1", "Down", "")]
    [p] = parse_ibstat(text("network_operator_issue249_ibstat_ib_down.txt"))
    assert (p.state, p.physical_state, p.rate_gbps) == ("Down", "LinkUp", 200)
    assert check_ib(text("network_operator_issue249_ibstat_ib_down.txt"), IbThresholds(expected_rate_gbps=200)).reasons == [
        "mlx5_7/1: state Down (physical LinkUp)"]
    [p] = parse_ibstat(text("azhpc_issue59_ibstat_unindented.txt"))
    assert (p.device, p.state, p.physical_state, p.rate_gbps, p.link_layer) == (
        "mlx5_ib0", "Initializing", "LinkUp", 200, "InfiniBand")


# --- nvidia-smi -q -------------------------------------------------------------------------------

def test_single_gpu_reports_read_pcie_under_pci():
    p = parse_nvidia_smi(text("thamada_L4_nvidia_smi_q.txt"))
    assert (p["driver_version"], p["attached_gpus"]) == ("550.90.07", 1)
    g = p["gpus"]["00000000:01:00.0"]
    assert (g["product_name"], g["serial"]) == ("NVIDIA L4", "1653723016068")
    assert (g["pcie_gen_max"], g["pcie_gen_current"], g["pcie_width_max"], g["pcie_width_current"]) == (4, 1, 16, 8)
    assert (g["temperature_c"], g["power_w"], g["performance_state"]) == (33, 16.47, "P8")
    assert (g["ecc_volatile_uncorrected"], g["remapped_uncorrectable"], g["remap_pending"]) == (0, 0, False)
    g = parse_nvidia_smi(text("jesse_rtx4070_laptop_nvidia_smi_q_excerpt.txt"))["gpus"]["00000000:01:00.0"]
    assert (g["pcie_gen_max"], g["pcie_gen_current"], g["pcie_width_max"], g["pcie_width_current"]) == (4, 4, 8, 8)
    assert (g["recovery_action"], g["temperature_c"], g["power_w"]) == ("None", 42, 1.97)


def test_idle_gen_downshift_is_not_a_fault_but_half_width_is():
    s = HealthCheckSettings(gpus_per_node=1, gpu_model="NVIDIA L4")
    result = check_nvidia_smi(text("thamada_L4_nvidia_smi_q.txt"), s)
    assert result.reasons == ["GPU 00000000:01:00.0: PCIe link width x8 below max x16"]
    busy = text("thamada_L4_nvidia_smi_q.txt").replace("Performance State                     : P8",
                                                        "Performance State                     : P0")
    assert "GPU 00000000:01:00.0: PCIe gen 1 below max gen 4" in check_nvidia_smi(busy, s).reasons


# --- mountstats ----------------------------------------------------------------------------------

def test_procfs_fixture_with_a_partial_op_list():
    ms = parse_mountstats(text("procfs_fixture_26231.mountstats"))
    assert ms.skipped == 4
    [m] = ms.mounts
    assert (m.device, m.mountpoint, m.nfs_version, m.age_seconds) == ("192.168.1.1:/srv/test", "/mnt/nfs/test", "4.0", 13968)
    assert list(m.ops) == ["NULL", "READ", "WRITE", "ACCESS"] and m.ops_absent == ("COMMIT",)
    assert tuple(m.ops["READ"])[1:9] == (1298, 1298, 0, 207680, 1210292152, 6, 79386, 79407)
    assert m.ops["ACCESS"].queue_ms == 18446743919241604546
    assert m.bytes["normalreadbytes"] == 1207640230
    [x] = m.transports
    assert (x.protocol, x.port, x.sends, x.recvs, x.req_u, x.max_slots, x.sending_u, x.pending_u) == (
        "tcp", 832, 6428, 6428, 12154, 24, 26, 5726)


def test_procfs_rdma_mount_listing_only_null():
    [m] = parse_mountstats(text("procfs_rdma_partial_ops.mountstats")).mounts
    assert tuple(m.ops["NULL"])[1:] == (16, 16, 0, 640, 384, 320, 11, 331, 0)
    assert m.ops_absent[0] == "GETATTR" and len(m.ops_absent) == 21 and m.nconnect == 16
    [x] = m.transports
    assert (x.protocol, x.connect_count, x.connect_time, x.sends, x.recvs) == ("rdma", 5808, 62, 494490723, 494490687)


def test_procfs_extended_examples():
    [m] = parse_mountstats(text("procfs_nfs41_extended_ops.mountstats")).mounts
    assert (m.nfs_version, len(m.ops), m.ops["OPEN"].errors, m.ops["FREE_STATEID"].errors) == ("4.1", 63, 394, 10413)
    [m] = parse_mountstats(text("procfs_rdma_nconnect16.mountstats")).mounts
    assert (len(m.transports), m.ops_absent, m.ops["READ"].ops) == (16, (), 2654501510)


# --- dcgm-exporter -------------------------------------------------------------------------------

def test_exporter_pastes():
    d = parse_dcgm_metrics(text("dcgm_exporter_pr326_pci_bus_id.prom"))
    assert (d.parsed, d.unparsed) == (2, 0)
    fb = d.samples[d.samples.metric == "DCGM_FI_DEV_FB_FREE"].iloc[0]
    assert (fb.value, fb.gpu, fb.hostname, fb.labels["pci_bus_id"]) == (24268, 0, "debian", "00000000:08:00.0")
    assert signals_from_dcgm(d.samples) == []  # XID_ERRORS 0 means no error yet

    d = parse_dcgm_metrics(text("dcgm_exporter_pr239_xid_count.prom"))
    [row] = d.samples.itertuples()
    assert (row.metric, row.labels["xid"], row.value, row.model) == ("DCGM_FI_DEV_XID_ERRORS_ACTIVE", "42", 1.0, "NVIDIA T400 4GB")

    d = parse_dcgm_metrics(text("dcgm_exporter_issue250_v100.prom"))
    assert (d.parsed, d.unparsed) == (7, 0)
    limits = d.samples[d.samples.metric == "DCGM_FI_DEV_POWER_MGMT_LIMIT"]
    assert limits.gpu.tolist() == [2, 3] and set(limits.value) == {300.0}

    d = parse_dcgm_metrics(text("dcgm_exporter_issue317_mig_a30.prom"))
    assert d.samples.labels.map(lambda lb: lb["GPU_I_ID"]).tolist() == ["4", "5", "6", "3", "4", "5"]
    assert d.samples.value.tolist()[3:5] == [135188274123.0, 135188279787.0]


# --- job logs ------------------------------------------------------------------------------------

def test_pytorch_watchdog_timeouts_new_and_old_format():
    r = parse_job_log(text("basicsr_issue737_nccl_watchdog.log"), node="n")
    assert r.nccl_timeouts == 3
    [s] = r.signals
    assert (s.kind, s.value, s.labels["seq"], s.labels["op"], s.labels["rank"], s.labels["count"]) == (
        SignalKind.NCCL_TIMEOUT, 600.02, "808", "ALLREDUCE", "1", "3")
    r = parse_job_log(text("pytorch_issue118369_old_watchdog.log"), node="n")
    assert r.nccl_timeouts == 5 and r.bad_losses == 0
    [s] = r.signals
    assert (s.value, s.labels["seq"], s.labels["rank"]) == (25624.887, "96120", "0")


def test_zero_loss_after_a_real_one():
    r = parse_job_log(text("llamafactory_issue8261_zero_loss.log"), node="n")
    assert (r.losses, r.bad_losses) == (2, 1)
    [s] = r.signals
    assert s.kind is SignalKind.LOSS_NAN and s.labels["loss"] == "0.0" and s.labels["first_line"] == "7"


def test_sample_names_say_which_parser_reads_them():
    # a guard for the table above: every XID/SXid sample carries at least one line the kernel parser reads
    for f in SAMPLES.glob("*.log"):
        body = f.read_text()
        if re.search(r"S?Xid \(", body):
            assert parse_kernel_log(body, node="n").matched, f.name
