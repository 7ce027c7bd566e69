"""The node probe: read every GPU through NVML and judge it against the pool's expectations.

Runs on the node (the `nvml-probe` check Job, or `remedy probe`). Each reading becomes a Finding
with pass/warn/fail and the rule it was judged by, so a failed burn-in says exactly which GPU, what
value and which threshold.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from remedy.domain.durations import human_duration
from remedy.health.result import Verdict, same_gpu_model
from remedy.probe.nvml import init_cause, load
from remedy.probe.report import ExpectedNode, ProbeReport, ProbeUnavailable
from remedy.settings.health import ProbeThresholds

# NVML clock-event bit names (new spelling, then the pre-535 "throttle" spelling) → our names.
CLOCK_EVENT_BITS = {
    "hw_slowdown": ("nvmlClocksEventReasonHwSlowdown", "nvmlClocksThrottleReasonHwSlowdown"),
    "hw_thermal_slowdown": ("nvmlClocksEventReasonHwThermalSlowdown", "nvmlClocksThrottleReasonHwThermalSlowdown"),
    "hw_power_brake_slowdown": ("nvmlClocksEventReasonHwPowerBrakeSlowdown", "nvmlClocksThrottleReasonHwPowerBrakeSlowdown"),
    "sw_thermal_slowdown": ("nvmlClocksEventReasonSwThermalSlowdown", "nvmlClocksThrottleReasonSwThermalSlowdown"),
    "sw_power_cap": ("nvmlClocksEventReasonSwPowerCap", "nvmlClocksThrottleReasonSwPowerCap"),
}


def probe_node(expected: ExpectedNode, nvml: Any = None, thresholds: ProbeThresholds | None = None, *,
               xid_wait_seconds: float | None = None) -> ProbeReport:
    """Probe this node's GPUs; raise ProbeUnavailable (one clear line) when NVML cannot start or sees no GPU."""
    nvml = nvml if nvml is not None else load()
    t = thresholds or ProbeThresholds()
    wait = t.xid_wait_seconds if xid_wait_seconds is None else xid_wait_seconds
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise ProbeUnavailable(init_cause(exc)) from None
    try:
        return _probe(nvml, expected, t, wait)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


class _Reader:
    """Calls NVML; a call this GPU or driver does not support reads as None instead of failing the probe."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.unsupported = (nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound)

    def __call__(self, fn: str, *args: Any) -> Any:
        try:
            value = getattr(self.nvml, fn)(*args)
        except self.unsupported:
            return None
        return value.decode() if isinstance(value, bytes) else value


def _probe(nvml: Any, expected: ExpectedNode, t: ProbeThresholds, wait: float) -> ProbeReport:
    read = _Reader(nvml)
    report = ProbeReport()
    report.driver_version = read("nvmlSystemGetDriverVersion") or ""
    _same(report, "node", "driver-version", report.driver_version, expected.driver_version)

    try:
        count = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as exc:
        raise ProbeUnavailable(f"NVML could not count the GPUs: {exc}") from None
    if count == 0:
        raise ProbeUnavailable("no NVIDIA GPU found on this node (NVML reports 0 devices)")
    ok = count == expected.gpu_count
    report.add("node", "gpu-count", Verdict.PASS if ok else Verdict.FAIL, count, f"== {expected.gpu_count}",
               "" if ok else f"{count} GPUs visible, expected {expected.gpu_count}")

    handles: dict[int, Any] = {}
    for i in range(count):
        subject = f"GPU {i}"
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            reading = _read_gpu(read, nvml, handle)
        except nvml.NVMLError_GpuIsLost:
            report.gpus.append({"index": i, "lost": True})
            report.add(subject, "gpu-lost", Verdict.FAIL, "lost", "reachable",
                       "GPU is lost (fell off the bus, XID 79): reboot, replace if it recurs")
            continue
        except nvml.NVMLError as exc:  # e.g. reset required, unknown error: the GPU cannot be trusted
            report.gpus.append({"index": i, "error": str(exc)})
            report.add(subject, "nvml-error", Verdict.FAIL, str(exc), "readable", f"NVML error reading this GPU: {exc}")
            continue
        reading["index"] = i
        report.gpus.append(reading)
        handles[i] = handle
        _judge_gpu(report, subject, reading, expected, t)

    _listen_for_xids(nvml, report, handles, wait)
    return report


def _read_gpu(read: _Reader, nvml: Any, h: Any) -> dict[str, Any]:
    ecc_mode = read("nvmlDeviceGetEccMode", h)
    remap = read("nvmlDeviceGetRemappedRows", h)
    retired = [read("nvmlDeviceGetRetiredPages", h, cause) for cause in (
        nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)]
    mask = read("nvmlDeviceGetCurrentClocksEventReasons", h)
    if mask is None:
        mask = read("nvmlDeviceGetCurrentClocksThrottleReasons", h)
    power_mw = read("nvmlDeviceGetPowerUsage", h)
    links_up, links_down, link_errors = _nvlinks(read, nvml, h)
    ecc = {}
    for name, etype in (("corrected", nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                        ("uncorrected", nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
        for scope, ctype in (("volatile", nvml.NVML_VOLATILE_ECC), ("aggregate", nvml.NVML_AGGREGATE_ECC)):
            ecc[f"{scope}_{name}"] = read("nvmlDeviceGetTotalEccErrors", h, etype, ctype)
    return {
        "name": read("nvmlDeviceGetName", h),
        "uuid": read("nvmlDeviceGetUUID", h),
        "vbios_version": read("nvmlDeviceGetVbiosVersion", h),
        "inforom_version": read("nvmlDeviceGetInforomImageVersion", h),
        "gsp_firmware_version": read("nvmlDeviceGetGspFirmwareVersion", h),
        "ecc_enabled": None if ecc_mode is None else bool(ecc_mode[0]),
        "ecc": ecc,
        "remapped_rows": None if remap is None else dict(
            correctable=remap[0], uncorrectable=remap[1], pending=bool(remap[2]), failure=bool(remap[3])),
        "retired_pages": None if None in retired else {"sbe": len(retired[0]), "dbe": len(retired[1])},
        "clock_events": None if mask is None else sorted(
            name for name, attrs in CLOCK_EVENT_BITS.items() if mask & _bit(nvml, attrs)),
        "temperature_c": read("nvmlDeviceGetTemperature", h, nvml.NVML_TEMPERATURE_GPU),
        "power_w": None if power_mw is None else power_mw / 1000.0,
        "pcie": {
            "gen": read("nvmlDeviceGetCurrPcieLinkGeneration", h),
            "max_gen": read("nvmlDeviceGetMaxPcieLinkGeneration", h),
            "width": read("nvmlDeviceGetCurrPcieLinkWidth", h),
            "max_width": read("nvmlDeviceGetMaxPcieLinkWidth", h),
        },
        "nvlink": {"up": links_up, "down": links_down, "errors": link_errors},
    }


def _bit(nvml: Any, names: tuple[str, ...]) -> int:
    for n in names:
        value = getattr(nvml, n, None)
        if value is not None:
            return int(value)
    return 0


def _nvlinks(read: _Reader, nvml: Any, h: Any) -> tuple[int, list[int], int]:
    up, down, errors = 0, [], 0
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        try:
            state = read("nvmlDeviceGetNvLinkState", h, link)
        except nvml.NVMLError_InvalidArgument:
            break  # past the GPU's last link
        if state is None:
            break  # no NVLink on this GPU / driver
        if state == nvml.NVML_FEATURE_ENABLED:
            up += 1
            for counter in (nvml.NVML_NVLINK_ERROR_DL_REPLAY, nvml.NVML_NVLINK_ERROR_DL_RECOVERY,
                            nvml.NVML_NVLINK_ERROR_DL_CRC_FLIT, nvml.NVML_NVLINK_ERROR_DL_CRC_DATA):
                errors += read("nvmlDeviceGetNvLinkErrorCounter", h, link, counter) or 0
        else:
            down.append(link)
    return up, down, errors


def _same(report: ProbeReport, subject: str, item: str, found: Any, want: str | None) -> None:
    if want is None:
        report.add(subject, item, Verdict.PASS, found, "not configured")
    elif found == want:
        report.add(subject, item, Verdict.PASS, found, f"== {want}")
    else:
        report.add(subject, item, Verdict.FAIL, found, f"== {want}", f"{item} {found} differs from fleet baseline {want}")


def _judge_gpu(report: ProbeReport, s: str, r: dict[str, Any], expected: ExpectedNode, t: ProbeThresholds) -> None:
    add = report.add
    if expected.gpu_model is not None:
        ok = same_gpu_model(r["name"], expected.gpu_model)
        add(s, "gpu-model", Verdict.PASS if ok else Verdict.FAIL, r["name"], f"== {expected.gpu_model}",
            "" if ok else f"model {r['name']!r}, expected {expected.gpu_model!r}")
    _same(report, s, "vbios-version", r["vbios_version"], expected.vbios_version)
    _same(report, s, "inforom-version", r["inforom_version"], expected.inforom_version)
    _same(report, s, "gsp-firmware-version", r["gsp_firmware_version"], expected.gsp_firmware_version)

    if r["ecc_enabled"] is not None:
        add(s, "ecc-mode", Verdict.PASS if r["ecc_enabled"] else Verdict.FAIL, "enabled" if r["ecc_enabled"] else "disabled",
            "enabled", "" if r["ecc_enabled"] else "ECC is disabled")
    unc, corr = r["ecc"]["volatile_uncorrected"], r["ecc"]["volatile_corrected"]
    if unc is not None:
        _at_most(report, s, "ecc-volatile-uncorrected", unc, fail=t.ecc_volatile_uncorrected_fail)
    if corr is not None:
        _at_most(report, s, "ecc-volatile-corrected", corr, warn=t.ecc_volatile_corrected_warn)

    rr = r["remapped_rows"]
    if rr is not None:
        if rr["failure"]:
            add(s, "row-remap-failure", Verdict.FAIL, True, "no failure",
                "row remapping failure: a bank ran out of spare rows, replace the GPU")
        if rr["pending"]:
            add(s, "row-remap-pending", Verdict.FAIL, True, "none pending", "row remap pending: reset the GPU")
        _at_most(report, s, "remapped-rows-uncorrectable", rr["uncorrectable"],
                 warn=t.uncorrectable_remaps_warn, fail=t.uncorrectable_remaps_fail)
        _at_most(report, s, "remapped-rows-correctable", rr["correctable"], warn=t.correctable_remaps_warn)
    if r["retired_pages"] is not None:
        _at_most(report, s, "retired-pages", r["retired_pages"]["sbe"] + r["retired_pages"]["dbe"], fail=t.retired_pages_fail)

    events = r["clock_events"] or []
    bad = [e for e in events if e in t.fail_clock_events]
    meh = [e for e in events if e in t.warn_clock_events]
    verdict = Verdict.FAIL if bad else Verdict.WARN if meh else Verdict.PASS
    add(s, "clock-events", verdict, events, f"none of {t.fail_clock_events} (warn: {t.warn_clock_events})",
        f"clocks slowed by {', '.join(bad + meh)}" if bad or meh else "")

    if r["temperature_c"] is not None:
        _at_most(report, s, "temperature-c", r["temperature_c"], warn=t.temperature_warn_c, fail=t.temperature_fail_c)
    if r["power_w"] is not None and t.power_warn_watts is not None:
        _at_most(report, s, "power-w", r["power_w"], warn=t.power_warn_watts)

    pcie = r["pcie"]
    if None not in (pcie["width"], pcie["max_width"]):
        ok = pcie["width"] >= pcie["max_width"]
        add(s, "pcie-width", Verdict.PASS if ok else Verdict.FAIL, pcie["width"], f">= x{pcie['max_width']}",
            "" if ok else f"PCIe link x{pcie['width']} below max x{pcie['max_width']} (degraded link)")
    if None not in (pcie["gen"], pcie["max_gen"]):
        ok = pcie["gen"] >= pcie["max_gen"]
        low = Verdict.FAIL if t.pcie_gen_below_max == "fail" else Verdict.WARN
        add(s, "pcie-gen", Verdict.PASS if ok else low, pcie["gen"], f">= gen {pcie['max_gen']}",
            "" if ok else f"PCIe gen {pcie['gen']} below max gen {pcie['max_gen']}")

    nv = r["nvlink"]
    if nv["up"] or nv["down"]:
        add(s, "nvlink-down", Verdict.FAIL if nv["down"] else Verdict.PASS, nv["down"], "no link down",
            f"NVLink link(s) {nv['down']} down" if nv["down"] else "")
        _at_most(report, s, "nvlink-errors", nv["errors"], warn=t.nvlink_errors_warn)


def _at_most(report: ProbeReport, s: str, item: str, value: float, *, warn: float | None = None,
             fail: float | None = None) -> None:
    """Counter-style finding: fail at >= fail, warn at >= warn."""
    rule = " ".join(p for p in (f"warn >= {warn}" if warn is not None else "",
                                f"fail >= {fail}" if fail is not None else "") if p)
    if fail is not None and value >= fail:
        report.add(s, item, Verdict.FAIL, value, rule, f"{item} = {value:g} (fail at {fail:g})")
    elif warn is not None and value >= warn:
        report.add(s, item, Verdict.WARN, value, rule, f"{item} = {value:g} (warn at {warn:g})")
    else:
        report.add(s, item, Verdict.PASS, value, rule)


def _listen_for_xids(nvml: Any, report: ProbeReport, handles: dict[int, Any], wait: float,
                     clock: Callable[[], float] = time.monotonic) -> None:
    """Collect critical XID events for `wait` seconds; each one fails its GPU."""
    if not handles:
        return
    try:
        event_set = nvml.nvmlEventSetCreate()
    except (nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound):
        report.add("node", "xid-events", Verdict.PASS, None, "not supported by this driver")
        return
    try:
        for h in handles.values():
            try:
                nvml.nvmlDeviceRegisterEvents(h, nvml.nvmlEventTypeXidCriticalError, event_set)
            except (nvml.NVMLError_NotSupported, nvml.NVMLError_GpuIsLost):
                continue
        deadline = clock() + wait
        while True:
            remaining_ms = int(max(0.0, deadline - clock()) * 1000)
            try:
                ev = nvml.nvmlEventSetWait(event_set, remaining_ms)
            except nvml.NVMLError_Timeout:
                break  # the whole remaining time passed quietly
            except nvml.NVMLError as exc:
                report.add("node", "xid-listen", Verdict.WARN, str(exc), "event wait works",
                           f"could not listen for XID events: {exc}")
                break
            gpu = next((i for i, h in handles.items() if h == ev.device), None)
            if gpu is None:
                try:
                    gpu = nvml.nvmlDeviceGetIndex(ev.device)
                except nvml.NVMLError:
                    gpu = -1
            report.xids.append({"gpu": gpu, "xid": int(ev.eventData)})
            if remaining_ms == 0:
                break
    finally:
        try:
            nvml.nvmlEventSetFree(event_set)
        except nvml.NVMLError:
            pass
    for x in report.xids:
        report.add(f"GPU {x['gpu']}", "xid-event", Verdict.FAIL, x["xid"], f"no critical XID in {human_duration(wait)}",
                   f"XID {x['xid']} raised while probing")
    if not report.xids:
        report.add("node", "xid-events", Verdict.PASS, 0, f"no critical XID in {human_duration(wait)}")
