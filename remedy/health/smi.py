"""`nvidia-smi -q`: an indentation-based parser into nested dicts, and a judged CheckResult.

The report is `Key : Value` lines and bare section headers, nested by indentation:

    Attached GPUs                         : 8
    GPU 00000000:18:00.0
        Product Name                      : NVIDIA H100 80GB HBM3
        PCI
            GPU Link Info                         (under "PCI" in every driver's -q; older
                PCIe Generation                    parsers looked for it one level up)
                    Max                   : 5
                    Current               : 5

A line that has a value *and* deeper lines under it (e.g. `HW Slowdown : Not Active` with
`HW Thermal Slowdown` indented below it) keeps its value; the deeper lines join its parent section,
which is how operators read it.
"""

from __future__ import annotations

import re
from typing import Any

from remedy.health.limits import bounded_lines
from remedy.health.result import CheckOutputError, CheckResult, Judgement, same_gpu_model, tail
from remedy.settings.health import HealthCheckSettings
from remedy.textinput import as_text

CHECK = "nvidia-smi"
_GPU_HEADER = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")

# nvidia-smi's wording → the names NVML and the settings use.
CLOCK_EVENT_KEYS = {
    "HW Slowdown": "hw_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Brake Slowdown": "hw_power_brake_slowdown",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "SW Power Cap": "sw_power_cap",
}


def parse_smi_tree(text: str) -> dict[str, Any]:
    """Nested dicts of the report; repeated keys in one section get ' #2', ' #3' suffixes."""
    text = as_text(text, "nvidia-smi output", CheckOutputError)
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    seen: dict[int, dict[str, int]] = {}  # id(section) → key → times seen, so a repeat is O(1), not a rescan
    for raw in bounded_lines(text, "nvidia-smi output", CheckOutputError):
        if not raw.strip() or raw.strip().startswith("====="):
            continue
        indent = len(raw) - len(raw.lstrip(" \t"))
        line = raw.strip()
        while len(stack) > 1 and indent <= stack[-1][0]:
            stack.pop()
        parent = stack[-1][1]
        if ":" in line and not _GPU_HEADER.match(line):
            key, value = (s.strip() for s in line.split(":", 1))
            _put(parent, key, value, seen)
            # deeper lines under a valued line belong to this same section
            stack.append((indent, parent))
        else:
            section: dict[str, Any] = {}
            _put(parent, line, section, seen)
            stack.append((indent, section))
    return root


def _put(d: dict[str, Any], key: str, value: Any, seen: dict[int, dict[str, int]]) -> None:
    counts = seen.setdefault(id(d), {})
    n = counts.get(key, 0) + 1
    k = key if n == 1 else f"{key} #{n}"
    while k in d:  # a literal "X #2" key printed by the tool: step past it (rare, bounded by such keys)
        n += 1
        k = f"{key} #{n}"
    counts[key] = n
    d[k] = value


def _section(d: Any, key: str) -> dict[str, Any]:
    """d[key] when it is a section; {} when missing or a plain value (a mangled report never raises here)."""
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def _text(d: dict[str, Any], key: str) -> str:
    v = d.get(key, "")
    return v if isinstance(v, str) else ""


def _int(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    m = re.match(r"^\s*(-?\d{1,18})(?!\d)", value)
    return int(m.group(1)) if m else None


def _float(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    m = re.match(r"^\s*(-?\d+(?:\.\d+)?)", value)
    return float(m.group(1)) if m else None


def _sum_ints(section: Any, want: str) -> int:
    """Sum integer leaves whose key (or an enclosing section) names `want` ('uncorrectable' / 'correctable')."""
    if not isinstance(section, dict):
        return 0
    total = 0
    for key, value in section.items():
        low = key.lower()
        if isinstance(value, dict):
            if want == "uncorrectable" and low.startswith("double bit"):
                total += _int(value.get("Total")) or 0
            elif want == "correctable" and low.startswith("single bit"):
                total += _int(value.get("Total")) or 0
            else:
                total += _sum_ints(value, want)
        elif want == "uncorrectable" and "uncorrectable" in low:
            total += _int(value) or 0
        elif want == "correctable" and "correctable" in low and "uncorrectable" not in low:
            total += _int(value) or 0
    return total


def gpu_summary(block: dict[str, Any]) -> dict[str, Any]:
    """The fields gpu-remedy judges, from one GPU block of the tree."""
    link = _section(_section(block, "PCI"), "GPU Link Info") or _section(block, "GPU Link Info")
    gen, width = _section(link, "PCIe Generation"), _section(link, "Link Width")
    events = _section(block, "Clocks Event Reasons") or _section(block, "Clocks Throttle Reasons")
    ecc = _section(block, "ECC Errors")
    remap = _section(block, "Remapped Rows")
    temp = _section(block, "Temperature")
    power = _section(block, "GPU Power Readings") or _section(block, "Power Readings")
    reset = _section(block, "GPU Reset Status")
    return {
        "product_name": _text(block, "Product Name"),
        "serial": _text(block, "Serial Number"),
        "uuid": _text(block, "GPU UUID"),
        "vbios_version": _text(block, "VBIOS Version"),
        "inforom_version": _text(_section(block, "Inforom Version"), "Image Version"),
        "pcie_gen_max": _int(gen.get("Max")),
        "pcie_gen_current": _int(gen.get("Current")),
        "pcie_width_max": _int(width.get("Max")),
        "pcie_width_current": _int(width.get("Current")),
        "clock_events": sorted(
            name for label, name in CLOCK_EVENT_KEYS.items() if str(events.get(label, "")).strip() == "Active"
        ),
        "ecc_volatile_uncorrected": _sum_ints(_section(ecc, "Volatile"), "uncorrectable"),
        "ecc_volatile_corrected": _sum_ints(_section(ecc, "Volatile"), "correctable"),
        "ecc_aggregate_uncorrected": _sum_ints(_section(ecc, "Aggregate"), "uncorrectable"),
        "remapped_correctable": _int(remap.get("Correctable Error")) or 0,
        "remapped_uncorrectable": _int(remap.get("Uncorrectable Error")) or 0,
        "remap_pending": str(remap.get("Pending", "No")).strip() == "Yes",
        "remap_failure": str(remap.get("Remapping Failure Occurred", "No")).strip() == "Yes",
        "temperature_c": _int(temp.get("GPU Current Temp")),
        "performance_state": _text(block, "Performance State"),
        "power_w": _float(power.get("Power Draw") or power.get("Average Power Draw") or power.get("Instantaneous Power Draw")),
        # the driver's own verdict (NVML GPU_RECOVERY_ACTION, drivers >= 565); "" when the report predates it
        "recovery_action": _text(block, "GPU Recovery Action"),
        "reset_required": _text(reset, "Reset Required") == "Yes",
        "drain_and_reset_recommended": _text(reset, "Drain and Reset Recommended") == "Yes",
    }


# Printed for every GPU by every driver `-q` since R450 (values may be N/A, the keys are there); a block without one of
# them was cut. "Temperature" sits past the middle of a block, so a block cut before it is caught. (Not "PCI": trimmed
# reports in the wild drop it, and its fields are judged only when present.)
REQUIRED_SECTIONS = ("Product Name", "Temperature")


def parse_nvidia_smi(text: str) -> dict[str, Any]:
    """{"driver_version", "attached_gpus", "gpus": {bus_id: summary}, "tree": the full nested dicts}."""
    tree = parse_smi_tree(text)
    blocks = {k[4:]: v for k, v in tree.items() if _GPU_HEADER.match(k) and isinstance(v, dict)}
    if "Attached GPUs" not in tree and not blocks:
        raise CheckOutputError("nvidia-smi output has no 'Attached GPUs' line and no GPU blocks (is it `nvidia-smi -q`?)")
    attached = _int(tree.get("Attached GPUs")) if "Attached GPUs" in tree else len(blocks)
    if attached is None:
        raise CheckOutputError(f"nvidia-smi output: 'Attached GPUs' is not a number: {str(tree.get('Attached GPUs'))[:40]!r}")
    return {
        "driver_version": _text(tree, "Driver Version"),
        "attached_gpus": attached,
        "gpus": {bus: gpu_summary(b) for bus, b in blocks.items()},
        "missing": {bus: m for bus, b in blocks.items() if (m := [k for k in REQUIRED_SECTIONS if k not in b])},
        "tree": tree,
    }


def judge_nvidia_smi(parsed: dict[str, Any], settings: HealthCheckSettings, *, expect_gpus: int | None = None,
                     expect_model: str | None = None, raw: str = "") -> CheckResult:
    p, j = settings.probe, Judgement()
    want_gpus = expect_gpus if expect_gpus is not None else settings.gpus_per_node
    want_model = expect_model or settings.gpu_model
    if parsed["attached_gpus"] != want_gpus:
        j.fail(f"{parsed['attached_gpus']} GPUs attached, expected {want_gpus}")
    # A report cut short (a Job log truncated, a paste) has fewer blocks than "Attached GPUs" or a block without the
    # sections every driver prints: judging what is there would pass GPUs nobody looked at.
    if len(parsed["gpus"]) < parsed["attached_gpus"]:
        last = f", the last one seen is GPU {list(parsed['gpus'])[-1]}" if parsed["gpus"] else ""
        j.incomplete(f"{len(parsed['gpus'])} of {parsed['attached_gpus']} GPU blocks (report cut short{last})")
    for bus, missing in parsed.get("missing", {}).items():
        j.incomplete(f"GPU {bus}: no {', '.join(repr(m) for m in missing)} (block cut short)")
    if p.driver_version and parsed["driver_version"] and parsed["driver_version"] != p.driver_version:
        j.fail(f"driver {parsed['driver_version']} differs from fleet baseline {p.driver_version}")
    for bus, g in parsed["gpus"].items():
        at = f"GPU {bus}"
        if want_model and not same_gpu_model(g["product_name"], want_model):
            j.fail(f"{at}: model {g['product_name']!r}, expected {want_model!r}")
        if p.vbios_version and g["vbios_version"] != p.vbios_version:
            j.fail(f"{at}: VBIOS {g['vbios_version']} differs from fleet baseline {p.vbios_version}")
        if None not in (g["pcie_width_current"], g["pcie_width_max"]) and g["pcie_width_current"] < g["pcie_width_max"]:
            j.fail(f"{at}: PCIe link width x{g['pcie_width_current']} below max x{g['pcie_width_max']}")
        # An idle GPU (P8 and below) lowers its link generation to save power, as DCGM sees too; only a busy
        # GPU's generation is judged. Width does not downshift and is always judged.
        idle = (_int(g.get("performance_state", "").lstrip("P")) or 0) >= 5
        if (None not in (g["pcie_gen_current"], g["pcie_gen_max"]) and g["pcie_gen_current"] < g["pcie_gen_max"]
                and not idle):
            msg = f"{at}: PCIe gen {g['pcie_gen_current']} below max gen {g['pcie_gen_max']}"
            j.fail(msg) if p.pcie_gen_below_max == "fail" else j.warn(msg)
        for ev in g["clock_events"]:
            if ev in p.fail_clock_events:
                j.fail(f"{at}: clock event {ev} active")
            elif ev in p.warn_clock_events:
                j.warn(f"{at}: clock event {ev} active")
        if g["ecc_volatile_uncorrected"] >= p.ecc_volatile_uncorrected_fail:
            j.fail(f"{at}: {g['ecc_volatile_uncorrected']} volatile uncorrectable ECC errors")
        if g["remap_failure"]:
            j.fail(f"{at}: row remapping failure occurred (GPU must be replaced)")
        if g["remap_pending"]:
            j.fail(f"{at}: row remap pending (GPU reset needed)")
        if g["remapped_uncorrectable"] >= p.uncorrectable_remaps_fail:
            j.fail(f"{at}: {g['remapped_uncorrectable']} uncorrectable row remaps")
        elif g["remapped_uncorrectable"] >= p.uncorrectable_remaps_warn:
            j.warn(f"{at}: {g['remapped_uncorrectable']} uncorrectable row remaps")
        if g["remapped_correctable"] >= p.correctable_remaps_warn:
            j.warn(f"{at}: {g['remapped_correctable']} correctable row remaps")
        t = g["temperature_c"]
        if t is not None and t >= p.temperature_fail_c:
            j.fail(f"{at}: temperature {t} C >= {p.temperature_fail_c} C")
        elif t is not None and t >= p.temperature_warn_c:
            j.warn(f"{at}: temperature {t} C >= {p.temperature_warn_c} C")
    return CheckResult(
        check=CHECK,
        verdict=j.verdict,
        measurements={k: v for k, v in parsed.items() if k not in ("tree", "missing")},
        thresholds={"gpus": want_gpus, "gpu_model": want_model, **p.model_dump(exclude={"xid_wait_seconds"})},
        reasons=j.reasons,
        raw_tail=tail(raw),
        incomplete=j.missing,
    )


def check_nvidia_smi(text: str, settings: HealthCheckSettings, *, expect_gpus: int | None = None,
                     expect_model: str | None = None) -> CheckResult:
    text = as_text(text, "nvidia-smi output", CheckOutputError)
    return judge_nvidia_smi(parse_nvidia_smi(text), settings, expect_gpus=expect_gpus, expect_model=expect_model, raw=text)
