"""One import point for the detect parsers (each lives in its own module; this only re-exports).

    parse_kernel_log(text, node=, bus_to_gpu=, year=)  -> KernelLogResult   (remedy.detect.kernel_log)
    parse_dcgm_metrics(text)                             -> DcgmParseResult   (remedy.detect.dcgm)
    signals_from_dcgm(df, thresholds, previous=, elapsed_seconds=, node=) -> list[Signal]
    parse_alertmanager(payload, strict=True)             -> AlertBatch        (remedy.detect.alertmanager)
    parse_job_log(text, node=, job=)                     -> JobLogResult      (remedy.detect.joblog)
"""

from __future__ import annotations

from remedy.detect.alertmanager import (
    ALERTNAME_KINDS,
    AlertBatch,
    AlertPayloadError,
    alert_to_signal,
    parse_alertmanager,
    validate_payload,
)
from remedy.detect.dcgm import DcgmParseResult, is_dcgm_blank, parse_dcgm_metrics, signals_from_dcgm
from remedy.detect.joblog import JobLogResult, parse_job_log
from remedy.detect.kernel_log import KernelLogResult, normalize_bus_id, parse_kernel_log

__all__ = [
    "ALERTNAME_KINDS",
    "AlertBatch",
    "AlertPayloadError",
    "DcgmParseResult",
    "JobLogResult",
    "KernelLogResult",
    "alert_to_signal",
    "is_dcgm_blank",
    "normalize_bus_id",
    "parse_alertmanager",
    "parse_dcgm_metrics",
    "parse_job_log",
    "parse_kernel_log",
    "signals_from_dcgm",
    "validate_payload",
]
