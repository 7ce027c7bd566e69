"""nvidia-smi -q: the indentation tree and its judgement."""

from __future__ import annotations

import pytest

from remedy.health.result import CheckOutputError, Verdict
from remedy.health.smi import check_nvidia_smi, parse_nvidia_smi, parse_smi_tree
from remedy.settings.health import HealthCheckSettings

SETTINGS = HealthCheckSettings(gpus_per_node=2)


def test_tree_nests_by_indentation_and_keeps_valued_parents(sample):
    tree = parse_smi_tree(sample("nvidia_smi_q_h100.txt"))
    gpu = tree["GPU 00000000:18:00.0"]
    assert tree["Driver Version"] == "570.124.06" and tree["Attached GPUs"] == "2"
    assert gpu["GPU Link Info"]["PCIe Generation"] == {"Max": "5", "Current": "5", "Device Current": "5",
                                                       "Device Max": "5", "Host Max": "5"}
    events = gpu["Clocks Event Reasons"]
    assert events["HW Slowdown"] == "Not Active" and events["HW Thermal Slowdown"] == "Not Active"
    assert events["SW Thermal Slowdown"] == "Not Active"  # back at the outer level after the nested lines
    assert gpu["Remapped Rows"]["Bank Remap Availability Histogram"]["Max"] == "2560 bank(s)"
    assert gpu["Temperature"]["GPU Current Temp"] == "33 C"


def test_summary_and_failures(sample):
    parsed = parse_nvidia_smi(sample("nvidia_smi_q_h100.txt"))
    good, bad = parsed["gpus"]["00000000:18:00.0"], parsed["gpus"]["00000000:2A:00.0"]
    assert (good["pcie_width_current"], good["pcie_width_max"], good["pcie_gen_current"]) == (16, 16, 5)
    assert good["ecc_volatile_uncorrected"] == 0 and good["temperature_c"] == 33 and good["power_w"] == 71.94
    assert good["inforom_version"] == "G520.0200.00.05" and good["clock_events"] == []
    assert bad["pcie_width_current"] == 8 and bad["remap_pending"] and bad["remapped_uncorrectable"] == 2
    assert bad["clock_events"] == ["hw_power_brake_slowdown", "hw_slowdown"]
    assert bad["ecc_volatile_uncorrected"] == 2 and bad["ecc_volatile_corrected"] == 12

    result = check_nvidia_smi(sample("nvidia_smi_q_h100.txt"), SETTINGS)
    assert result.verdict is Verdict.FAIL
    at = "GPU 00000000:2A:00.0"
    assert f"{at}: PCIe link width x8 below max x16" in result.reasons
    assert f"{at}: row remap pending (GPU reset needed)" in result.reasons
    assert f"{at}: clock event hw_power_brake_slowdown active" in result.reasons
    assert f"{at}: 2 volatile uncorrectable ECC errors" in result.reasons
    assert not any("18:00.0" in r for r in result.reasons)


def test_healthy_block_alone_passes(sample):
    text = sample("nvidia_smi_q_h100.txt").split("GPU 00000000:2A:00.0")[0].replace(": 2\n", ": 1\n", 1)
    result = check_nvidia_smi(text, SETTINGS, expect_gpus=1)
    assert result.verdict is Verdict.PASS, result.reasons
    assert check_nvidia_smi(text, SETTINGS, expect_gpus=8).reasons == ["1 GPUs attached, expected 8"]
    wrong = check_nvidia_smi(text, SETTINGS, expect_gpus=1, expect_model="NVIDIA-B200")
    assert wrong.reasons == ["GPU 00000000:18:00.0: model 'NVIDIA H100 80GB HBM3', expected 'NVIDIA-B200'"]
    # the GPU feature discovery label spelling names the same GPU
    assert check_nvidia_smi(text, SETTINGS, expect_gpus=1, expect_model="NVIDIA-H100-80GB-HBM3").verdict is Verdict.PASS


def test_old_driver_layout_throttle_reasons_and_double_bit_totals(sample):
    parsed = parse_nvidia_smi(sample("nvidia_smi_q_a100_r470.txt"))
    g = parsed["gpus"]["00000000:07:00.0"]
    assert g["clock_events"] == ["sw_thermal_slowdown"]
    assert g["ecc_volatile_uncorrected"] == 1 and g["ecc_volatile_corrected"] == 0
    assert g["power_w"] == 88.21
    result = check_nvidia_smi(sample("nvidia_smi_q_a100_r470.txt"), SETTINGS, expect_gpus=1,
                              expect_model="NVIDIA A100-SXM4-80GB")
    assert result.verdict is Verdict.FAIL
    assert result.reasons == ["warning: GPU 00000000:07:00.0: clock event sw_thermal_slowdown active",
                              "GPU 00000000:07:00.0: 1 volatile uncorrectable ECC errors",
                              "warning: GPU 00000000:07:00.0: temperature 82 C >= 80 C"]


def test_not_nvidia_smi_output():
    with pytest.raises(CheckOutputError, match="no 'Attached GPUs'"):
        parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
