"""Load checks: the GPU stress Job's JSON summary and `fio --output-format=json` checkpoint-storage runs.

Stress summary (printed by the stress Job; gpu-remedy defines it):

    {"tool": "gpu-stress", "duration_s": 1800,
     "gpus": [{"index": 0, "max_temp_c": 71, "throttle_reasons": [], "errors": []}, ...]}

`throttle_reasons` uses NVML clock-event names (hw_slowdown, hw_thermal_slowdown,
hw_power_brake_slowdown, sw_thermal_slowdown, ...); `errors` are strings (XIDs, miscompares).
"""

from __future__ import annotations

import json
from typing import Any

from remedy.domain.durations import human_duration
from remedy.health.result import CheckOutputError, CheckResult, Judgement, tail
from remedy.settings.health import FioThresholds, ProbeThresholds, StressThresholds


def _json(text: str, what: str) -> Any:
    start = text.find("{")
    if start < 0:
        raise CheckOutputError(f"{what} output has no JSON object")
    try:
        return json.loads(text[start : text.rfind("}") + 1])
    except json.JSONDecodeError as exc:
        raise CheckOutputError(f"{what} output is not valid JSON: {exc}") from None


def check_stress(text: str, t: StressThresholds, probe: ProbeThresholds, *, expect_gpus: int | None = None) -> CheckResult:
    doc = _json(text, "stress")
    if "gpus" not in doc or not isinstance(doc["gpus"], list):
        raise CheckOutputError("stress JSON has no 'gpus' list")
    try:
        duration = float(doc.get("duration_s", 0))
    except (TypeError, ValueError):
        raise CheckOutputError(f"stress JSON: duration_s is not a number: {doc.get('duration_s')!r}") from None
    j = Judgement()
    if duration < t.min_duration_seconds:
        j.fail(f"ran {human_duration(duration)}, less than the {human_duration(t.min_duration_seconds)} minimum")
    if expect_gpus is not None and len(doc["gpus"]) != expect_gpus:
        j.fail(f"{len(doc['gpus'])} GPUs stressed, expected {expect_gpus}")
    per_gpu: dict[str, Any] = {}
    for g in doc["gpus"]:
        idx = g.get("index", "?")
        temp = g.get("max_temp_c")
        reasons = [str(r).lower() for r in g.get("throttle_reasons") or []]
        errors = [str(e) for e in g.get("errors") or []]
        per_gpu[str(idx)] = {"max_temp_c": temp, "throttle_reasons": reasons, "errors": errors}
        for e in errors[:3]:
            j.fail(f"GPU {idx}: {e}")
        if isinstance(temp, (int, float)) and temp >= t.max_temperature_c:
            j.fail(f"GPU {idx}: max temperature {temp} C >= {t.max_temperature_c} C under load")
        for r in reasons:
            if r in probe.fail_clock_events:
                j.fail(f"GPU {idx}: throttled under load ({r})")
            elif r in probe.warn_clock_events:
                j.warn(f"GPU {idx}: throttled under load ({r})")
    return CheckResult(
        check="stress",
        verdict=j.verdict,
        measurements={"duration_s": duration, "gpus": per_gpu},
        thresholds={**t.model_dump(), "fail_clock_events": probe.fail_clock_events},
        reasons=j.reasons,
        raw_tail=tail(text),
    )


def check_fio(text: str, t: FioThresholds) -> CheckResult:
    """Sum bandwidth per direction over fio's jobs; judge write (and read, if read was tested) against the floors."""
    doc = _json(text, "fio")
    jobs = doc.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise CheckOutputError("fio JSON has no 'jobs' (was it run with --output-format=json?)")
    j = Judgement()
    bw = {"read": 0.0, "write": 0.0}
    tested = {"read": False, "write": False}
    for job in jobs:
        name = job.get("jobname", "?")
        if job.get("error"):
            j.fail(f"fio job {name} ended with error {job['error']}")
        for d in ("read", "write"):
            part = job.get(d) or {}
            if part.get("io_bytes", 0) or part.get("bw_bytes", 0):
                tested[d] = True
                bw[d] += float(part.get("bw_bytes", 0))
    if not any(tested.values()):
        j.fail("fio moved no data (io_bytes 0 for read and write)")
    gbps = {d: bw[d] / 1e9 for d in bw}
    if tested["write"] and gbps["write"] < t.min_write_gbps:
        j.fail(f"write {gbps['write']:.2f} GB/s < {t.min_write_gbps:g} GB/s")
    if tested["read"] and gbps["read"] < t.min_read_gbps:
        j.fail(f"read {gbps['read']:.2f} GB/s < {t.min_read_gbps:g} GB/s")
    return CheckResult(
        check="fio",
        verdict=j.verdict,
        measurements={
            "fio_version": doc.get("fio version", ""),
            "jobs": len(jobs),
            "write_gbps": round(gbps["write"], 3) if tested["write"] else None,
            "read_gbps": round(gbps["read"], 3) if tested["read"] else None,
        },
        thresholds=t.model_dump(),
        reasons=j.reasons,
        raw_tail=tail(text, 5),
    )
