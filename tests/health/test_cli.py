"""`remedy health parse|suite` and `remedy probe`, through remedy.cli.main."""

from __future__ import annotations

import ctypes.util
import json

import pytest

from remedy.cli import main
from remedy.sim.health import NodeHealth
from tests.health.conftest import SAMPLES


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_parse_nccl_json_and_text(capsys):
    code, out, _ = run(capsys, "health", "parse", "nccl", str(SAMPLES / "all_reduce_perf_8xh100.txt"), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] == "pass" and doc["check"] == "nccl"
    assert doc["thresholds"]["sizes"]["256 MB"] == {"min_busbw_gbps": 225.0}
    code, out, _ = run(capsys, "health", "parse", "nccl", str(SAMPLES / "all_reduce_perf_8gpu_slow.txt"))
    assert code == 1
    assert out.splitlines()[0] == "nccl: FAIL"
    assert "  - 2 GB: BusBW 265.66 GB/s < 350 GB/s" in out
    assert "   256 MB: p95 1790.29 us, BusBW 262.39 GB/s" in out


def test_parse_several_nccl_runs(capsys):
    f = str(SAMPLES / "all_reduce_perf_8xh100.txt")
    code, out, _ = run(capsys, "health", "parse", "nccl", f, f, f, "--json")
    assert code == 0 and json.loads(out)["measurements"]["runs"] == 3


@pytest.mark.parametrize("kind, file, code, first_reason", [
    ("dcgm-diag", "dcgm4_r2_fail.json", 1, "pcie fail on GPU 1"),
    ("dcgm-diag", "dcgm3_r1_pass.json", 0, None),
    ("nvidia-smi", "nvidia_smi_q_h100.txt", 1, "GPU 00000000:2A:00.0: PCIe link width x8 below max x16"),
    ("ibstat", "ibstat_one_down.txt", 1, "2 InfiniBand ports found, expected 8"),
    ("fio", "fio_ckpt.json", 0, None),
    ("stress", "stress_thermal.json", 1, "2 GPUs stressed, expected 8"),
])
def test_parse_each_kind(capsys, kind, file, code, first_reason):
    extra = ["--expect-gpus", "2"] if kind == "nvidia-smi" else []
    got, out, _ = run(capsys, "health", "parse", kind, str(SAMPLES / file), "--json", *extra)
    doc = json.loads(out)
    assert got == code
    if first_reason:
        assert doc["reasons"][0].startswith(first_reason)
    else:
        assert doc["reasons"] == []


def test_config_changes_the_verdict(capsys, tmp_path):
    cfg = tmp_path / "remedy.yaml"
    cfg.write_text("health:\n  fio:\n    min_write_gbps: 2.0\n")
    code, out, _ = run(capsys, "--config", str(cfg), "health", "parse", "fio", str(SAMPLES / "fio_ckpt.json"))
    assert code == 1 and "write 1.21 GB/s < 2 GB/s" in out


def test_ibstat_with_counters_dir(capsys, tmp_path):
    d = tmp_path / "mlx5_0" / "ports" / "1" / "counters"
    d.mkdir(parents=True)
    (d / "link_downed").write_text("4\n")
    code, out, _ = run(capsys, "health", "parse", "ibstat", str(SAMPLES / "ibstat_one_down.txt"), "--counters", str(tmp_path), "--json")
    assert code == 1 and "mlx5_0/1: link_downed = 4 (fail at 1)" in json.loads(out)["reasons"]


def test_operator_errors_are_one_line_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, "health", "parse", "fio", str(tmp_path / "nope.json"))
    assert code == 2 and err == f"remedy: error: file not found: {tmp_path / 'nope.json'}\n"
    bad = tmp_path / "bad.txt"
    bad.write_text("dcgmi: command not found\n")
    code, _, err = run(capsys, "health", "parse", "dcgm-diag", str(bad))
    assert code == 2 and err == "remedy: error: dcgm diag output has no JSON object (-j) and no result table\n"
    code, _, err = run(capsys, "health", "parse", "fio", str(bad), str(bad))
    assert code == 2 and "give one file" in err


def test_suite_lists_levels(capsys):
    code, out, _ = run(capsys, "health", "suite", "quick", "--json")
    assert code == 0 and [s["id"] for s in json.loads(out)] == ["nvml-probe", "dcgm-diag-r1", "ib"]
    code, out, _ = run(capsys, "health", "suite", "extended")
    assert code == 0 and "nccl-multi-node" in out and "multi-node" in out


def test_probe_with_fake_nvml_from_env(capsys, tmp_path, monkeypatch):
    health = NodeHealth.healthy()
    state = tmp_path / "health.json"
    state.write_text(json.dumps(health.to_dict()))
    monkeypatch.setenv("REMEDY_NVML", f"fake:{state}")  # the loader's selector, not a config field
    code, out, _ = run(capsys, "probe", "--json", "--xid-wait", "0")
    assert code == 0 and json.loads(out)["verdict"] == "pass"
    health.gpus[2].pcie_width = 8
    state.write_text(json.dumps(health.to_dict()))
    code, out, _ = run(capsys, "probe", "--xid-wait", "0", "--expect-gpus", "8")
    assert code == 1
    assert out.splitlines() == ["probe: FAIL  driver 570.124.06, 8 GPU(s)",
                                "  fail  GPU 2: PCIe link x8 below max x16 (degraded link)  [>= x16]"]
    code, out, _ = run(capsys, "probe", "--json", "--xid-wait", "0", "--expect-model", "NVIDIA-B200")
    assert code == 1 and {f["item"] for f in json.loads(out)["findings"] if f["verdict"] == "fail"} == {"gpu-model", "pcie-width"}


def test_probe_without_driver_exits_2_naming_the_cause(capsys, monkeypatch):
    monkeypatch.delenv("REMEDY_NVML", raising=False)
    code, out, err = run(capsys, "probe", "--json", "--nvml", "pynvml", "--xid-wait", "0")
    if ctypes.util.find_library("nvidia-ml") is not None:  # a GPU machine: the real probe ran
        assert code in (0, 1) and json.loads(out)["verdict"] in ("pass", "warn", "fail")
        return
    assert code == 2
    assert json.loads(out) == {"verdict": "error", "error": "NVML library not found: is the NVIDIA driver installed on this node?"}
    assert err == "remedy: error: cannot probe: NVML library not found: is the NVIDIA driver installed on this node?\n"
