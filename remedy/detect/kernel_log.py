"""Kernel log (dmesg / journal / syslog) → NVIDIA XID and NVSwitch SXid events and signals.

Handles the variants real drivers and log tools print:

    NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
    NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.
    NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.
    NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ...
    NVRM: Xid (0000:3b:00): 13, Graphics Exception: ...                          (older drivers: no "PCI:")
    NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No
    NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, ...                       (MIG: GPU / compute instance)
    NVRM: Xid (PCI:0000:3f:00): 46                                               (no message at all)
    [12345.678901] NVRM: Xid ...                                                 (dmesg uptime stamp)
    [Sun Feb 23 16:24:18 2025] NVRM: Xid ...                                     (dmesg -T / --ctime)
    Nov 21 10:00:01 gpu-node-17 kernel: [ 966.503025] NVRM: Xid ...            (syslog / journalctl short)
    2026-11-21T10:00:01.123456+00:00 gpu-node-17 kernel: NVRM: Xid ...         (journalctl -o short-iso)
    nvidia-nvswitch2: SXid (PCI:0000:c5:00.0): 20034, Fatal, Link 47 LTSSM Fault Up

Lines that mention Xid/SXid but do not parse are counted and sampled in the result, never raised and never
silently dropped; lines without Xid/SXid are counted as ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from remedy.detect.schemas import KERNEL_EVENTS
from remedy.detect.signals import Signal, SignalKind
from remedy.textinput import as_text

_BUS = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
# The driver (src/nvidia/src/kernel/gpu/rc/kernel_rc.c) adds " GPU-I:%02u" and " GPU-CI:%02u" inside the
# parenthesis when a MIG instance is to blame. Codes and pids are bounded so a garbage line of digits is
# "unparsed", never a huge-int conversion error.
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>" + _BUS + r")(?:\s+GPU-I:(?P<gi>\d{1,4}))?(?:\s+GPU-CI:(?P<ci>\d{1,4}))?\):"
    r"\s*(?P<code>\d{1,9})(?:(?:,|\s)\s*(?P<rest>.*?))?\s*$"
)
_SXID = re.compile(
    r"(?P<dev>nvidia-nvswitch\d{1,4}): SXid \((?:PCI:)?(?P<bus>" + _BUS + r")\):\s*(?P<code>\d{1,9})\s*,\s*"
    r"(?P<sev>Fatal|Non-fatal|Nonfatal|Non-Fatal)\s*,\s*(?P<rest>.*?)\s*$",
    re.IGNORECASE,
)
_MENTION = re.compile(r"\bS?Xid\b", re.IGNORECASE)
_PID = re.compile(r"^pid=(?P<pid>'?<?[^,]*?>?'?)\s*(?:,\s*|$)")
_CTIME = re.compile(r"^\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]")
_NAME = re.compile(r"^name=(?P<name>[^,]*?)\s*(?:,\s*|$)")
_ISO = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s+(?P<host>\S+)\s+kernel:"
)
_SYSLOG = re.compile(r"^(?P<ts>[A-Z][a-z]{2}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2})\s+(?P<host>\S+)\s+kernel:")
_UPTIME = re.compile(r"\[\s*(?P<up>\d+\.\d+)\]")
_LINK = re.compile(r"\bLink (?P<link>\d{1,6})\b")


def normalize_bus_id(bus: str) -> str:
    """'00000000:3B:00.0' / 'PCI:0000:3b:00' → '0000:3b:00' (domain 4 hex digits, lower case, no function)."""
    b = bus.strip().lower().removeprefix("pci:")
    parts = b.split(":")
    if len(parts) == 2:
        parts = ["0000", *parts]
    if len(parts) != 3:
        raise ValueError(f"not a PCI bus id: {bus!r} (want [domain:]bus:device[.function])")
    domain = parts[0][-4:].rjust(4, "0")
    return f"{domain}:{parts[1]}:{parts[2].split('.')[0]}"


@dataclass
class KernelLogResult:
    events: pd.DataFrame  # KERNEL_EVENTS schema
    signals: list[Signal]
    lines: int = 0
    matched: int = 0
    ignored: int = 0  # lines with no Xid/SXid mention
    unparsed: int = 0  # lines that mention Xid/SXid but did not parse
    unparsed_samples: list[tuple[int, str]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "matched": self.matched,
            "ignored": self.ignored,
            "unparsed": self.unparsed,
            "unparsed_samples": [{"line": n, "text": t} for n, t in self.unparsed_samples],
        }


def _parse_time(prefix: re.Match[str] | None, iso: bool, year: int | None, ctime: bool = False) -> datetime | None:
    if prefix is None:
        return None
    ts = prefix.group("ts")
    try:
        if ctime:  # dmesg -T prints the host's local time; like syslog stamps it is taken as UTC
            return datetime.strptime(" ".join(ts.split()), "%a %b %d %H:%M:%S %Y").replace(tzinfo=timezone.utc)
        if iso:
            dt = datetime.fromisoformat(ts.replace(",", ".").replace("Z", "+00:00"))
            return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
        if year is None:
            return None  # syslog stamps carry no year; the caller must say which
        return datetime.strptime(f"{year} {' '.join(ts.split())}", "%Y %b %d %H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _split_rest(rest: str) -> tuple[int | None, str | None, str]:
    pid: int | None = None
    name: str | None = None
    m = _PID.match(rest)
    if m:
        raw = m.group("pid").strip("'")
        pid = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 10 else None
        rest = rest[m.end():]
    m = _NAME.match(rest)
    if m:
        name = m.group("name").strip("'")
        name = None if name in ("", "<unknown>") else name
        rest = rest[m.end():]
    return pid, name, rest.strip()


def parse_kernel_log(
    text: str,
    *,
    node: str | None = None,
    bus_to_gpu: dict[str, int] | None = None,
    year: int | None = None,
    max_samples: int = 20,
) -> KernelLogResult:
    """Parse kernel log text into XID/SXid events (DataFrame) and signals.

    node: host to use when a line has no journal/syslog prefix naming one.
    bus_to_gpu: PCI bus id → GPU index (any common spelling of the bus id); without it gpu stays None.
    year: year for syslog-style stamps that omit it (else `at` is None for those lines).
    """
    text = as_text(text, "kernel log")
    gpu_map: dict[str, int] = {}
    for bus, idx in (bus_to_gpu or {}).items():
        if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
            raise ValueError(f"bus_to_gpu[{bus!r}]: GPU index must be a non-negative integer, got {idx!r}")
        gpu_map[normalize_bus_id(bus)] = idx

    rows: list[dict[str, Any]] = []
    signals: list[Signal] = []
    res = KernelLogResult(events=pd.DataFrame(), signals=signals)
    for line_no, line in enumerate(text.splitlines(), start=1):
        res.lines += 1
        if not line.strip():
            res.ignored += 1
            continue
        xm = _XID.search(line)
        sm = None if xm else _SXID.search(line)
        if not xm and not sm:
            if _MENTION.search(line):
                res.unparsed += 1
                if len(res.unparsed_samples) < max_samples:
                    res.unparsed_samples.append((line_no, line[:300]))
            else:
                res.ignored += 1
            continue
        m = xm or sm
        assert m is not None
        code = int(m.group("code"))
        if not 1 <= code <= 65535:
            res.unparsed += 1
            if len(res.unparsed_samples) < max_samples:
                res.unparsed_samples.append((line_no, line[:300]))
            continue
        iso = _ISO.match(line)
        prefix = iso or _SYSLOG.match(line)
        host = prefix.group("host") if prefix else node
        at = _parse_time(prefix, iso is not None, year)
        if prefix is None and (ct := _CTIME.match(line)):
            at = _parse_time(ct, False, None, ctime=True)
        up = _UPTIME.search(line[: m.start()])
        bus = normalize_bus_id(m.group("bus"))
        gpu = gpu_map.get(bus)
        rest = m.group("rest") or ""
        res.matched += 1
        if xm:
            pid, name, message = _split_rest(rest)
            row = dict(kind="xid", severity=None, pid=pid, process=name, message=message)
            labels = {"bus_id": bus}
            if m.group("gi") is not None:  # MIG: the error is attributed to this GPU (and compute) instance
                labels["gpu_instance"] = str(int(m.group("gi")))
            if m.group("ci") is not None:
                labels["compute_instance"] = str(int(m.group("ci")))
            if pid is not None:
                labels["pid"] = str(pid)
            if name:
                labels["process"] = name
            signals.append(Signal(
                node=host or "unknown", kind=SignalKind.XID, gpu=gpu, xid=code, at=at, labels=labels,
                source="kernel-log", raw=line.strip(),
            ))
        else:
            sev = m.group("sev")
            severity = "fatal" if sev.lower() == "fatal" else "non-fatal"
            row = dict(kind="sxid", severity=sev, pid=None, process=None, message=rest)
            labels = {"bus_id": bus, "sxid": str(code), "severity": severity, "device": m.group("dev")}
            link = _LINK.search(rest)
            if link:
                labels["link"] = str(int(link.group("link")))  # "Link 04" and "Link 4" are one link
            signals.append(Signal(
                node=host or "unknown", kind=SignalKind.SXID, at=at, labels=labels, source="kernel-log",
                raw=line.strip(),
            ))
        rows.append(dict(
            line_no=line_no, node=host, at=at, uptime_seconds=float(up.group("up")) if up else None,
            bus_id=bus, gpu=gpu, code=code, **row,
        ))
    res.events = _frame(rows)
    return res


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    cols = list(KERNEL_EVENTS.columns)
    df = pd.DataFrame(rows, columns=cols)
    df["line_no"] = df["line_no"].astype(int)
    df["code"] = df["code"].astype(int)
    df["at"] = pd.to_datetime(df["at"], utc=True).astype("datetime64[ns, UTC]")
    df["uptime_seconds"] = df["uptime_seconds"].astype(float)
    df["gpu"] = df["gpu"].astype("Int64")
    df["pid"] = df["pid"].astype("Int64")
    for c in ("node", "kind", "bus_id", "process", "severity", "message"):
        df[c] = df[c].astype("str") if len(df) == 0 else df[c].astype(object).where(df[c].notna(), None).astype("str")
    return KERNEL_EVENTS.validate(df)
