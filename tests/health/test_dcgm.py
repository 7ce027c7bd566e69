"""dcgmi diag -j, DCGM 3.x and 4.x layouts."""

from __future__ import annotations

import json

import pytest

from remedy.health.dcgm import check_dcgm_diag, parse_dcgm_diag
from remedy.health.result import CheckOutputError, Verdict


def test_dcgm3_level1_pass(sample):
    diag = parse_dcgm_diag(sample("dcgm3_r1_pass.json"))
    assert (diag.layout, diag.dcgm_version, diag.driver_version) == ("dcgm3", "3.3.5", "550.54.15")
    assert len(diag.results) == 9 and {r.category for r in diag.results} == {"Deployment"}
    result = check_dcgm_diag(sample("dcgm3_r1_pass.json"))
    assert result.verdict is Verdict.PASS and result.reasons == []
    assert result.measurements["counts"] == {"pass": 8, "fail": 0, "warn": 0, "skip": 1}


def test_dcgm3_failures_name_test_gpu_and_message(sample):
    result = check_dcgm_diag(sample("dcgm3_r2_fail.json"))
    assert result.verdict is Verdict.FAIL
    assert result.reasons[0].startswith("Page Retirement/Row Remap fail on all: GPU 1 had uncorrectable memory errors")
    assert "(error_id 96)" in result.reasons[0]
    assert any(r.startswith("GPU Memory fail on GPU 1: Error using CUDA API cudaMalloc") for r in result.reasons)
    assert any(r.startswith("warning: PCIe on GPU 1") for r in result.reasons)
    assert result.measurements["tests"] == {"Denylist": "pass", "Page Retirement/Row Remap": "fail", "PCIe": "warn",
                                            "GPU Memory": "fail"}
    assert result.measurements["failed_entities"] == ["GPU 1", "all"]


def test_dcgm3_warn_is_a_failure_only_when_configured(sample):
    doc = json.loads(sample("dcgm3_r2_fail.json"))
    doc["DCGM GPU Diagnostic"]["test_categories"] = doc["DCGM GPU Diagnostic"]["test_categories"][1:2]  # PCIe only
    text = json.dumps(doc)
    assert check_dcgm_diag(text).verdict is Verdict.WARN
    assert check_dcgm_diag(text, warn_fails=True).verdict is Verdict.FAIL


def test_dcgm4_layout_with_metadata_and_entities(sample):
    diag = parse_dcgm_diag(sample("dcgm4_r2_fail.json"))
    assert (diag.layout, diag.dcgm_version, diag.driver_version) == ("dcgm4", "4.2.3", "570.124.06")
    result = check_dcgm_diag(sample("dcgm4_r2_fail.json"))
    assert result.verdict is Verdict.FAIL
    assert result.reasons == ["pcie fail on GPU 1: Expected PCIe link width of 16 for GPU 1 but found 8. (error_id 76); "
                              "GPU 1 GPU to Host bandwidth:\t\t27.61 GB/s"]
    assert result.measurements["tests"] == {"software": "pass", "pcie": "fail", "memory": "pass"}


def test_dcgm4_flat_tests_with_errors(sample):
    result = check_dcgm_diag(sample("dcgm4_flat_pass.json"))
    assert result.verdict is Verdict.WARN
    assert result.reasons == ["warning: targeted_power on GPU 0: GPU 0 power limit reached (error_id 22)"]
    assert result.measurements["driver_version"] == "580.65.06"
    assert result.measurements["dcgm_version"] == "4.4.0"


def test_banner_before_json_is_tolerated(sample):
    assert check_dcgm_diag("Successfully ran diagnostic for group.\n" + sample("dcgm3_r1_pass.json")).verdict is Verdict.PASS


@pytest.mark.parametrize("text, message", [
    ("Error: unable to connect to host engine", "no JSON object"),
    ("{\"foo\": 1}", "neither 'DCGM GPU Diagnostic'"),
    ("{\"DCGM Diagnostic\": {\"test_categories\": []}}", "lists no tests"),
    ('{"tests": [{"name": "memory", "results": [{"status": "Maybe"}]}]}', "unknown status 'Maybe'"),
    ('{"tests": [{"name": "memory", "results": []}]}', "test 'memory' has no results"),
])
def test_bad_output_is_a_clear_error(text, message):
    with pytest.raises(CheckOutputError, match=message):
        parse_dcgm_diag(text)


def test_json_cut_after_its_opening_is_incomplete_not_bad_input():
    # issue 30: a report cut short is incomplete (tests/realdata/test_parsers_round3.py cuts real ones everywhere)
    diag = parse_dcgm_diag("{\"DCGM GPU Diagnostic\": {")
    assert diag.results == [] and diag.missing[0].startswith("the JSON report is cut short before any test result")
