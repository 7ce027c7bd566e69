"""`remedy health parse` / `remedy signals parse` on real output: a result or one line, the right exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from remedy.cli import main

SAMPLES = Path(__file__).parent / "samples"
REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_dcgm_diag_with_null_tests_through_the_real_entry_point():
    # NVIDIA's "Deserialize real output" case used to end in an AttributeError traceback here.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("REMEDY_CONFIG", None)
    p = subprocess.run([sys.executable, "-m", "remedy.cli", "health", "parse", "dcgm-diag",
                        str(SAMPLES / "dcgm3_real_output_with_nulls.txt")],
                       capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    assert p.stdout.splitlines()[:3] == ["dcgm-diag: PASS", "  layout: dcgm3", "  dcgm_version: 3.1.0"]


@pytest.mark.parametrize("file, code, first", [
    ("dcgm3_real_output_with_nulls.txt", 0, "dcgm-diag: PASS"),
    ("dcgm3_per_gpu_diagmanager.json", 1, "dcgm-diag: FAIL"),
    ("dcgm_issue254_text_4_4_1_pcie_fail.txt", 1, "dcgm-diag: FAIL"),
    ("ramble_dcgmi_diag_r3_text_3_3_9.txt", 0, "dcgm-diag: PASS"),
])
def test_dcgm_diag_verdicts_and_exit_codes(capsys, file, code, first):
    got, out, err = run(capsys, "health", "parse", "dcgm-diag", str(SAMPLES / file))
    assert (got, out.splitlines()[0], err) == (code, first, "")


def test_dcgm_diag_json_output_names_the_failing_gpus(capsys):
    code, out, _ = run(capsys, "health", "parse", "dcgm-diag", str(SAMPLES / "dcgm3_per_gpu_diagmanager.json"), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["measurements"]["failed_entities"] == ["GPU 0", "GPU 2", "GPU 3"]


@pytest.mark.parametrize("kind, file, message", [
    ("dcgm-diag", "dcgm_issue254_plugin_dir_error.txt", "dcgm diag did not run"),
    ("dcgm-diag", "gpud_ibstat_h100_some_down.txt", "no JSON object"),
    ("nccl", "gcm_nccl_mpirun_slots_failure.txt", "no result table"),
    ("nvidia-smi", "procfs_fixture_26231.mountstats", "no 'Attached GPUs' line"),
])
def test_output_that_is_not_a_result_is_one_line_and_exit_2(capsys, kind, file, message):
    code, out, err = run(capsys, "health", "parse", kind, str(SAMPLES / file))
    assert code == 2 and out == ""
    assert err.startswith("remedy: error: ") and message in err and err.count("\n") == 1


def test_ibstat_with_roce_ports_passes_through_the_cli(capsys):
    # 8 InfiniBand ports up (the default ib_ports_per_node) next to four Ethernet NICs, three of them down
    code, out, err = run(capsys, "health", "parse", "ibstat", str(SAMPLES / "gpud_ibstat_h100_some_down.txt"), "--json")
    doc = json.loads(out)
    assert (code, doc["verdict"], err) == (0, "pass", "")
    assert doc["measurements"]["not_judged"] == ["mlx5_1/1", "mlx5_2/1", "mlx5_7/1", "mlx5_8/1"]


def test_signals_parse_reads_mig_xid_lines(capsys):
    code, out, _ = run(capsys, "signals", "parse", "dmesg", str(SAMPLES / "nvidia_driver_xid_mig_contained.log"),
                       "--node", "gpu-7", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["matched"] == 3 and doc["summary"]["unparsed"] == 0
    assert doc["signals"][0]["signal"]["labels"]["gpu_instance"] == "5"
