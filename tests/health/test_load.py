"""GPU stress summary and fio checkpoint-storage checks."""

from __future__ import annotations

import json

import pytest

from remedy.health.load import check_fio, check_stress
from remedy.health.result import CheckOutputError, Verdict
from remedy.settings.health import FioThresholds, ProbeThresholds, StressThresholds

S, P = StressThresholds(), ProbeThresholds()


def test_stress_pass_and_thermal_throttle(sample):
    ok = check_stress(sample("stress_pass.json"), S, P, expect_gpus=2)
    assert ok.verdict is Verdict.PASS and ok.measurements["gpus"]["1"]["max_temp_c"] == 74
    hot = check_stress(sample("stress_thermal.json"), S, P, expect_gpus=2)
    assert hot.verdict is Verdict.FAIL
    assert hot.reasons == ["GPU 1: max temperature 89 C >= 87 C under load", "GPU 1: throttled under load (hw_slowdown)",
                           "GPU 1: throttled under load (hw_thermal_slowdown)"]


def test_stress_too_short_errors_and_gpu_count():
    doc = {"duration_s": 30, "gpus": [{"index": 0, "max_temp_c": 60, "errors": ["XID 79 during stress"]}]}
    result = check_stress(json.dumps(doc), S, P, expect_gpus=8)
    assert result.reasons == ["ran 30 s, less than the 1 min minimum", "1 GPUs stressed, expected 8",
                              "GPU 0: XID 79 during stress"]
    with pytest.raises(CheckOutputError, match="no 'gpus' list"):
        check_stress('{"duration_s": 60}', S, P)
    with pytest.raises(CheckOutputError, match="duration_s is not a number"):
        check_stress('{"duration_s": "long", "gpus": []}', S, P)


def test_fio_sums_jobs_per_direction(sample):
    result = check_fio(sample("fio_ckpt.json"), FioThresholds())
    assert result.verdict is Verdict.PASS
    assert result.measurements["write_gbps"] == pytest.approx((612345678 + 598765432) / 1e9, abs=1e-3)
    assert result.measurements["read_gbps"] == pytest.approx(1.235, abs=1e-3)


def test_fio_below_floor_fails(sample):
    strict = FioThresholds(min_write_gbps=1.5, min_read_gbps=2.0)
    assert check_fio(sample("fio_ckpt.json"), strict).reasons == ["write 1.21 GB/s < 1.5 GB/s", "read 1.23 GB/s < 2 GB/s"]
    write_only = json.loads(sample("fio_ckpt.json"))
    write_only["jobs"] = write_only["jobs"][:2]
    only = check_fio(json.dumps(write_only), FioThresholds())
    assert only.measurements["read_gbps"] is None and only.verdict is Verdict.PASS


def test_fio_job_error_and_garbage():
    doc = {"jobs": [{"jobname": "ckpt-write", "error": 28, "write": {"io_bytes": 0, "bw_bytes": 0}, "read": {}}]}
    assert check_fio(json.dumps(doc), FioThresholds()).reasons == [
        "fio job ckpt-write ended with error 28", "fio moved no data (io_bytes 0 for read and write)"]
    with pytest.raises(CheckOutputError, match="no 'jobs'"):
        check_fio('{"fio version": "fio-3.33"}', FioThresholds())
    with pytest.raises(CheckOutputError, match="no JSON object"):
        check_fio("fio: pid=0, err=2/file:filesetup.c", FioThresholds())
