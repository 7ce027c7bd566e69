"""dcgm-exporter's Prometheus text exposition → long DataFrame → signals.

A sample line looks like (dcgm-exporter README):

    DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-…",pci_bus_id="00000000:3B:00.0",device="nvidia0",
        modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-17",DCGM_FI_DRIVER_VERSION="550.54.15"} 79

The parser is strict and line-based so one bad line is counted, not fatal. DCGM's blank sentinels
("no data / not found / not supported / not permissioned", dcgm_structs.h / dcgmvalue.py) become NaN.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, TypedDict

import pandas as pd

from remedy.detect.schemas import DCGM_SAMPLES
from remedy.detect.signals import Signal, SignalKind
from remedy.health.limits import bounded_lines
from remedy.settings.signals import SignalThresholds
from remedy.textinput import as_text

# DCGM blank sentinels (dcgm_structs.h): BLANK, NOT_FOUND, NOT_SUPPORTED, NOT_PERMISSIONED = BLANK + 0..3.
DCGM_INT32_BLANK = 0x7FFFFFF0  # 2147483632
DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
DCGM_FP64_BLANK = 140737488355328.0  # 2**47
_INT32_BLANKS = frozenset(float(DCGM_INT32_BLANK + i) for i in range(4))
_FP64_BLANKS = frozenset(DCGM_FP64_BLANK + i for i in range(4))
# int64 blanks print as 9223372036854775792..95; as float64 they all round to 2**63, which no real
# counter reaches, so anything that large is blank.
_INT64_BLANK_FLOOR = float(DCGM_INT64_BLANK)


def is_dcgm_blank(value: float) -> bool:
    """True for DCGM's 'no value' sentinels. Exact matches for int32/fp64 so real large counters survive."""
    return value in _INT32_BLANKS or value in _FP64_BLANKS or value >= _INT64_BLANK_FLOOR


_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+))?\s*$"
)
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ESCAPE = re.compile(r"\\[\\\"n]")
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _labels(text: str) -> dict[str, str] | None:
    """`a="1",b="x\\"y"` → dict; None unless the whole text is well-formed label pairs."""
    text = text.strip()
    out: dict[str, str] = {}
    pos = 0
    for m in _LABEL.finditer(text):
        if m.start() != pos:
            return None
        value = m.group(2)
        if "\\" in value:
            value = _ESCAPE.sub(lambda e: _UNESCAPE[e.group(0)], value)
        out[m.group(1)] = value
        pos = m.end()
    return out if pos == len(text) else None


def _index(text: str) -> int | None:
    """A GPU index label as an int; None for anything that is not a plain small number (ASCII digits only)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else None


def _value(text: str) -> float | None:
    try:
        return float(text)  # accepts NaN, +Inf, -Inf as the exposition format spells them
    except ValueError:
        return None


@dataclass
class DcgmParseResult:
    samples: pd.DataFrame  # DCGM_SAMPLES schema
    lines: int = 0
    comments: int = 0
    parsed: int = 0
    blanks: int = 0  # samples whose value was a DCGM sentinel (now NaN)
    unparsed: int = 0
    unparsed_samples: list[tuple[int, str]] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)  # metric → TYPE

    def summary(self) -> dict[str, Any]:
        return {
            "lines": self.lines, "comments": self.comments, "parsed": self.parsed, "blanks": self.blanks,
            "unparsed": self.unparsed,
            "unparsed_samples": [{"line": n, "text": t} for n, t in self.unparsed_samples],
        }


def parse_dcgm_metrics(text: str, *, max_samples: int = 20) -> DcgmParseResult:
    """Parse exposition text into the DCGM_SAMPLES long frame; bad lines are counted and sampled."""
    text = as_text(text, "dcgm-exporter metrics")
    rows: list[dict[str, Any]] = []
    res = DcgmParseResult(samples=pd.DataFrame())

    def bad(n: int, line: str) -> None:
        res.unparsed += 1
        if len(res.unparsed_samples) < max_samples:
            res.unparsed_samples.append((n, line[:300]))

    for n, line in enumerate(bounded_lines(text, "dcgm-exporter metrics"), start=1):
        res.lines += 1
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            res.comments += 1
            parts = s.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                res.types[parts[2]] = parts[3]
            continue
        m = _SAMPLE.match(s)
        labels = _labels(m.group("labels") or "") if m else None
        value = _value(m.group("value")) if m else None
        if m is None or labels is None or value is None:
            bad(n, line)
            continue
        if not math.isnan(value) and is_dcgm_blank(value):
            res.blanks += 1
            value = math.nan
        gpu_text = labels.get("gpu", "")
        rows.append({
            "hostname": labels.get("Hostname"),
            "gpu": _index(gpu_text),
            "uuid": labels.get("UUID"),
            "model": labels.get("modelName"),
            "device": labels.get("device"),
            "metric": m.group("name"),
            "value": value,
            "labels": labels,
        })
        res.parsed += 1
    res.samples = _frame(rows)
    return res


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    cols = list(DCGM_SAMPLES.columns)
    df = pd.DataFrame(rows, columns=cols)
    df["gpu"] = df["gpu"].astype("Int64")
    df["value"] = df["value"].astype(float)
    for c in ("hostname", "uuid", "model", "device", "metric"):
        df[c] = df[c].astype("str")
    df["labels"] = df["labels"].astype(object)
    return DCGM_SAMPLES.validate(df)


# --- samples → signals ----------------------------------------------------------------------

# Clock-event (throttle) reason bits (NVML nvmlClocksEventReason*; DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
# formerly DCGM_FI_DEV_CLOCK_THROTTLE_REASONS).
THROTTLE_BITS: dict[int, tuple[SignalKind, str]] = {
    0x08: (SignalKind.HW_SLOWDOWN, "hw_slowdown"),
    0x20: (SignalKind.THERMAL_THROTTLE, "sw_thermal"),
    0x40: (SignalKind.THERMAL_THROTTLE, "hw_thermal"),
    0x80: (SignalKind.POWER_BRAKE, "hw_power_brake"),
}
THROTTLE_METRICS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
REMAP_METRICS: dict[str, SignalKind] = {
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": SignalKind.ROW_REMAP_FAILURE,
    "DCGM_FI_DEV_ROW_REMAP_PENDING": SignalKind.ROW_REMAP_PENDING,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": SignalKind.UNCORRECTABLE_REMAP,
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": SignalKind.CORRECTABLE_REMAP,
}
NVLINK_METRICS: dict[str, str] = {
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "crc",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "crc",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": "replay",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "recovery",
}
XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"  # value = the last XID code seen on the GPU
XID_COUNT_METRIC = "DCGM_EXP_XID_ERRORS_COUNT"  # dcgm-exporter's xid collector: label xid, value = count


class _Where(TypedDict):
    """Which node and GPU a series is about (the Signal's `node`, `gpu`)."""

    node: str
    gpu: int | None


def _key(row: Any) -> tuple[str | None, int | None]:
    host = row.hostname if isinstance(row.hostname, str) and row.hostname else None
    return (host, None if pd.isna(row.gpu) else int(row.gpu))


def signals_from_dcgm(
    df: pd.DataFrame,
    thresholds: SignalThresholds | None = None,
    *,
    previous: pd.DataFrame | None = None,
    elapsed_seconds: float | None = None,
    node: str | None = None,
) -> list[Signal]:
    """Signals from one scrape (DCGM_SAMPLES frame).

    previous + elapsed_seconds: the scrape before this one, so NVLink counters become rates/deltas
    (without it a non-zero counter yields a 'rate unknown' signal). node: used when a series has no Hostname.
    """
    DCGM_SAMPLES.validate(df)
    if previous is not None:
        DCGM_SAMPLES.validate(previous)
        if elapsed_seconds is None or elapsed_seconds <= 0:
            raise ValueError(f"elapsed_seconds must be > 0 when previous is given, got {elapsed_seconds!r}")
    _ = thresholds  # thresholds are applied by classify(); kept for symmetry with other emitters
    prev: dict[tuple[Any, Any, str, str], float] = {}
    if previous is not None:
        for r in previous.itertuples(index=False):
            prev[(*_key(r), r.metric, r.labels.get("link", ""))] = r.value
    busy: dict[tuple[Any, Any], float] = {
        _key(r): r.value for r in df.itertuples(index=False) if r.metric == "DCGM_FI_DEV_GPU_UTIL"
    }
    pcie: dict[tuple[Any, Any], dict[str, Any]] = {}  # metric → value, and "_node"
    out: list[Signal] = []

    for r in df.itertuples(index=False):
        v = r.value
        if v is None or not math.isfinite(v):
            continue  # blank (NaN) or ±Inf: no usable number
        host, gpu = _key(r)
        where: _Where = {"node": host or node or "unknown", "gpu": gpu}
        base = {k: r.labels[k] for k in ("UUID", "modelName", "pci_bus_id") if k in r.labels}
        raw = f"{r.metric}{{gpu={gpu}}} {v:g}"
        if r.metric == XID_METRIC and v > 0:
            out.append(Signal(kind=SignalKind.XID, xid=int(v), labels=base, source="dcgm", raw=raw, **where))
        elif r.metric == XID_COUNT_METRIC and v > 0 and _index(str(r.labels.get("xid", ""))) is not None:
            x = int(r.labels["xid"])
            out.append(Signal(kind=SignalKind.XID, xid=x, value=v, labels=base, source="dcgm", raw=raw, **where))
        elif r.metric in REMAP_METRICS and v > 0:
            out.append(Signal(kind=REMAP_METRICS[r.metric], value=v, labels=base, source="dcgm", raw=raw, **where))
        elif r.metric in THROTTLE_METRICS:
            bits = int(v)
            for bit, (kind, reason) in THROTTLE_BITS.items():
                if bits & bit:
                    out.append(Signal(kind=kind, labels={**base, "reason": reason, "bitmask": hex(bits)},
                                      source="dcgm", raw=raw, **where))
        elif r.metric.startswith("DCGM_FI_DEV_PCIE_") and r.metric.endswith(("LINK_WIDTH", "LINK_GEN")):
            pcie.setdefault((host, gpu), {"_node": where["node"]})[r.metric] = v
        elif r.metric in NVLINK_METRICS and v > 0:
            counter = NVLINK_METRICS[r.metric]
            link = r.labels.get("link", "")
            labels = {**base, "counter": counter, "metric": r.metric, **({"link": link} if link else {})}
            before = prev.get((host, gpu, r.metric, link))
            if previous is None or before is None or math.isnan(before):
                out.append(Signal(kind=SignalKind.NVLINK_ERROR, value=None, labels=labels, source="dcgm", raw=raw, **where))
                continue
            delta = max(v - before, 0.0)  # a counter reset (driver reload) is not negative errors
            if delta <= 0:
                continue
            value = delta / elapsed_seconds if counter == "crc" else delta
            out.append(Signal(kind=SignalKind.NVLINK_ERROR, value=value, labels=labels, source="dcgm", raw=raw, **where))

    for (host, gpu), f in pcie.items():
        width, max_width = f.get("DCGM_FI_DEV_PCIE_LINK_WIDTH"), f.get("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH")
        gen, max_gen = f.get("DCGM_FI_DEV_PCIE_LINK_GEN"), f.get("DCGM_FI_DEV_PCIE_MAX_LINK_GEN")
        low_width = width is not None and max_width is not None and width < max_width
        # GPUs lower the link generation when idle to save power, so a low gen only counts under load.
        util = busy.get((host, gpu))
        low_gen = gen is not None and max_gen is not None and gen < max_gen and (util is None or util > 0)
        if low_width or low_gen:
            labels = {k: f"{val:g}" for k, val in (("pcie_width", width), ("pcie_max_width", max_width),
                                                    ("pcie_gen", gen), ("pcie_max_gen", max_gen)) if val is not None}
            out.append(Signal(node=str(f["_node"]), gpu=gpu, kind=SignalKind.PCIE_DEGRADED, labels=labels,
                              source="dcgm", raw=f"PCIe x{width:g} gen{gen:g} of x{max_width:g} gen{max_gen:g}"
                              if None not in (width, gen, max_width, max_gen) else "PCIe link below max"))
    return out
