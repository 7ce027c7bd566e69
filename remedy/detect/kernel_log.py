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
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from remedy.detect.schemas import KERNEL_EVENTS
from remedy.detect.signals import Signal, SignalKind
from remedy.health.limits import bounded_lines
from remedy.textinput import as_text

_BUS = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
# The driver (src/nvidia/src/kernel/gpu/rc/kernel_rc.c) adds " GPU-I:%02u" and " GPU-CI:%02u" inside the
# parenthesis when a MIG instance is to blame. Codes and pids are bounded so a garbage line of digits is
# "unparsed", never a huge-int conversion error.
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>" + _BUS + r")(?:\s+GPU-I:(?P<gi>\d{1,4}))?(?:\s+GPU-CI:(?P<ci>\d{1,4}))?\):"
    r"\s*(?P<code>\d{1,9})(?:(?:,|\s)\s*(?P<rest>.*))?$"
)
_SXID = re.compile(
    r"(?P<dev>nvidia-nvswitch\d{1,4}): SXid \((?:PCI:)?(?P<bus>" + _BUS + r")\):\s*(?P<code>\d{1,9})\s*,\s*"
    r"(?P<sev>Fatal|Non-fatal|Nonfatal|Non-Fatal)\s*,\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_MENTION = re.compile(r"\bS?Xid\b", re.IGNORECASE)
# Patterns run on right-stripped lines and end in a greedy `.*` or a `[^,]*` (stripped after): a lazy `.*?`
# before `\s*$` rescans every run of blanks and is quadratic on a line of spaces (issue 32 item 9).
_PID = re.compile(r"^pid=(?P<pid>[^,]*)(?:,\s*|$)")
_CTIME = re.compile(r"^\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]")
_NAME = re.compile(r"^name=(?P<name>[^,]*)(?:,\s*|$)")
_ISO_TS = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"
_ISO = re.compile(r"^(?P<ts>" + _ISO_TS + r")\s+(?P<host>\S+)\s+kernel:")
# `dmesg --time-format iso` (util-linux): the stamp alone, no host and no "kernel:" ("2026-11-21T10:00:01,123456+00:00").
_DMESG_ISO = re.compile(r"^\[?(?P<ts>" + _ISO_TS + r")\]?\s")
# `talosctl dmesg`: "<node>: kern: warning: [2025-09-13T20:46:45.810476849Z]: <message>" (facility, level, RFC 3339).
_TALOS = re.compile(r"^(?P<host>[^\s:]+): (?P<facility>[a-z]{2,8}):\s*(?P<level>[a-z]{2,8}): \[(?P<ts>" + _ISO_TS + r")\]:")
# syslog / journalctl short: "%b %d %H:%M:%S host kernel:"; %b is the locale's month ("Dez", "déc.", "дек", "11月").
_SYSLOG = re.compile(r"^(?P<mon>[^\W\d_]{3,5}\.?|\d{1,2}(?:月|월))\s+(?P<day>\d{1,2})\s+(?P<hms>\d{2}:\d{2}:\d{2})\s+"
                     r"(?P<host>\S+)\s+kernel:")
# Month abbreviations journalctl/syslog print under common locales (glibc's %b), lower case, trailing dot removed.
_MONTHS: dict[str, int] = {}
for _i, _names in enumerate((
    "jan janv ene gen sty янв",
    "feb févr fév fev lut фев",
    "mar mär mrz mars мар",
    "apr avr abr kwi апр",
    "may mai mag mei maj мая май",
    "jun juin giu cze июн",
    "jul juil lug lip июл",
    "aug août ago sie авг",
    "sep sept set wrz сен",
    "oct okt ott out paź окт",
    "nov lis ноя",
    "dec dez déc dic gru дек",
), start=1):
    for _name in _names.split():
        _MONTHS[_name] = _i
_UPTIME = re.compile(r"\[\s*(?P<up>\d+\.\d+)\]")
_LINK = re.compile(r"\bLink (?P<link>\d{1,6})\b")
# The 2nd/3rd line of an SXid event: same device and code, no severity word ("Severity 0 Engine instance 60 ...",
# "Data {0x0000003c, ...}").
_SXID_MORE = re.compile(
    r"(?P<dev>nvidia-nvswitch\d{1,4}): SXid \((?:PCI:)?(?P<bus>" + _BUS + r")\):\s*(?P<code>\d{1,9})\s*,\s*(?P<rest>.*)$"
)
# what the driver prints on an event's later lines (anything else without a severity word is its own, unread event)
_DETAIL = re.compile(r"(?:Severity \d{1,3} Engine instance|Data \{)")
_SXID_MORE_LINES = 4  # the later lines follow within a few lines of the first (other devices may interleave)
# Lines that name a GPU before the driver says it fell off the bus (open-gpu-kernel-modules nv.c / osHandleGpuLost):
#   NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off the bus ...
#   NVRM: The NVIDIA GPU 0000:b3:00.0 / NVRM: (PCI ID: ...) installed in this system has / NVRM: fallen off the bus ...
#   NVRM: GPU at PCI:0000:3b:00: GPU-2e4b... / NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.
_GPU_NAMED = re.compile(r"NVRM: (?:The NVIDIA GPU |GPU at PCI:|GPU )(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
# A bus id with its domain, so a clock time ("10:00:01") is never read as one.
_BUS_ANY = re.compile(r"(?<![\w:])(?:PCI:)?[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?(?![\w:])")
_FALLEN_NAMED_LINES = 3  # "The NVIDIA GPU <bus>" then up to two lines later "fallen off the bus"
_SAME_EVENT_LINES = 10  # an Xid 79 this close to a "fallen off the bus" message for the same GPU is the same event


def _continues(last: tuple[int, str, str, Any, Any], cont: re.Match[str], line_no: int) -> bool:
    return last[1] == cont.group("dev") and last[2] == str(int(cont.group("code"))) and line_no - last[0] <= _SXID_MORE_LINES


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
    continued: int = 0  # lines that belong to an event already counted (SXid detail lines, a repeated "fell off")
    orphan_details: int = 0  # SXid detail lines whose first line is not in the input (log cut before it)
    unparsed_samples: list[tuple[int, str]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "matched": self.matched,
            "ignored": self.ignored,
            "unparsed": self.unparsed,
            "continued": self.continued,
            "orphan_details": self.orphan_details,
            "unparsed_samples": [{"line": n, "text": t} for n, t in self.unparsed_samples],
        }


def _iso_time(ts: str) -> datetime | None:
    """RFC 3339 / ISO 8601 as printed by journalctl, dmesg and Talos; nanoseconds cut to microseconds."""
    ts = ts.replace(",", ".").replace("Z", "+00:00")
    if m := re.match(r"^(.*?\.\d{6})\d+(.*)$", ts):
        ts = m.group(1) + m.group(2)
    try:
        dt = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _syslog_time(m: re.Match[str], year: int | None) -> datetime | None:
    if year is None:
        return None  # syslog stamps carry no year; the caller must say which
    mon = m.group("mon").lower().rstrip(".")
    month = int(mon[:-1]) if mon[-1:] in ("月", "월") else _MONTHS.get(mon)
    if month is None:
        return None
    try:
        h, mi, sec = (int(x) for x in m.group("hms").split(":"))
        return datetime(year, month, int(m.group("day")), h, mi, sec, tzinfo=UTC)
    except ValueError:
        return None


def _prefix(line: str, node: str | None, year: int | None) -> tuple[str | None, datetime | None]:
    """(host, time) from the line's prefix: journal/syslog, Talos, dmesg --time-format iso or dmesg -T."""
    if m := _ISO.match(line):
        return m.group("host"), _iso_time(m.group("ts"))
    if m := _TALOS.match(line):
        return m.group("host"), _iso_time(m.group("ts"))
    if (m := _SYSLOG.match(line)) and (m.group("mon").lower().rstrip(".") in _MONTHS or m.group("mon")[-1] in "月월"):
        return m.group("host"), _syslog_time(m, year)
    if m := _DMESG_ISO.match(line):
        return node, _iso_time(m.group("ts"))
    if m := _CTIME.match(line):  # dmesg -T prints the host's local time; like syslog stamps it is taken as UTC
        try:
            return node, datetime.strptime(" ".join(m.group("ts").split()), "%a %b %d %H:%M:%S %Y").replace(tzinfo=UTC)
        except ValueError:
            return node, None
    return node, None


def _split_rest(rest: str) -> tuple[int | None, str | None, str]:
    pid: int | None = None
    name: str | None = None
    m = _PID.match(rest)
    if m:
        raw = m.group("pid").strip().strip("'")
        pid = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 10 else None
        rest = rest[m.end():]
    m = _NAME.match(rest)
    if m:
        name = m.group("name").strip().strip("'")
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
    last_sxid: tuple[int, str, str, Signal, dict[str, Any]] | None = None  # (line, device, code, signal, row)
    ordered: list[tuple[int, Signal]] = []  # (line, signal): signals come out in the log's order
    fell_off: list[tuple[int, str | None, dict[str, Any], Signal]] = []  # "fallen off the bus" without an Xid line
    xid79: list[tuple[int, str]] = []  # (line, bus) of every Xid 79 line, to fold the two forms into one event
    pending_gpu: tuple[int, str] | None = None  # (line, bus) of "NVRM: The NVIDIA GPU <bus>" / "NVRM: GPU at PCI:<bus>"

    def unparsed(line_no: int, line: str) -> None:
        res.unparsed += 1
        if len(res.unparsed_samples) < max_samples:
            res.unparsed_samples.append((line_no, line[:300]))

    for line_no, raw in enumerate(bounded_lines(text, "kernel log"), start=1):
        res.lines += 1
        line = raw.rstrip()
        if not line.strip():
            res.ignored += 1
            continue
        xm = _XID.search(line)
        sm = None if xm else _SXID.search(line)
        if not xm and not sm:
            if (cont := _SXID_MORE.search(line)) and last_sxid and _continues(last_sxid, cont, line_no):
                # NVSwitch SXid events print as 2-3 lines (the event, "Severity N Engine instance ...", "Data {...}"):
                # the later lines belong to the first, they are one event, not unreadable lines.
                _, _, _, sig, row = last_sxid
                sig.labels["detail"] = (sig.labels.get("detail", "") + " | " + cont.group("rest").strip())[-500:].lstrip(" |")
                res.continued += 1
                continue
            if (more := _SXID_MORE.search(line)) and _DETAIL.match(more.group("rest")):
                # the detail line of an event whose first line is not in this input (a log cut at its start):
                # it carries no severity, so nothing to decide; counted, not an unreadable line
                res.orphan_details += 1
                continue
            if gm := _GPU_NAMED.search(line):
                pending_gpu = (line_no, gm.group("bus"))
            if "fallen off the bus" in line and "NVRM" in line:
                nvrm = line[line.find("NVRM:"):]
                bus_m = _BUS_ANY.search(nvrm)
                near = pending_gpu[1] if pending_gpu and line_no - pending_gpu[0] <= _FALLEN_NAMED_LINES else None
                b = normalize_bus_id(bus_m.group(0)) if bus_m else (normalize_bus_id(near) if near else None)
                host, at = _prefix(line, node, year)
                labels = {"form": "fallen-off-the-bus", **({"bus_id": b} if b else {})}
                gpu = gpu_map.get(b) if b else None
                sig = Signal(node=host or "unknown", kind=SignalKind.XID, gpu=gpu, xid=79, at=at, labels=labels,
                             source="kernel-log", raw=line.strip())
                up = _UPTIME.search(line)
                row = dict(line_no=line_no, node=host, at=at, uptime_seconds=float(up.group("up")) if up else None,
                           bus_id=b or "unknown", gpu=gpu, code=79, kind="xid", severity=None, pid=None, process=None,
                           message="GPU has fallen off the bus (driver message without an Xid line)")
                fell_off.append((line_no, b, row, sig))
                pending_gpu = None
                continue
            if _MENTION.search(line):
                unparsed(line_no, line)
            else:
                res.ignored += 1
            continue
        m = xm or sm
        assert m is not None
        code = int(m.group("code"))
        if not 1 <= code <= 65535:
            unparsed(line_no, line)
            continue
        host, at = _prefix(line, node, year)
        up = _UPTIME.search(line[: m.start()])
        bus = normalize_bus_id(m.group("bus"))
        gpu = gpu_map.get(bus)
        rest = (m.group("rest") or "").strip()
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
            if code == 79:
                xid79.append((line_no, bus))
            ordered.append((line_no, Signal(
                node=host or "unknown", kind=SignalKind.XID, gpu=gpu, xid=code, at=at, labels=labels,
                source="kernel-log", raw=line.strip(),
            )))
        else:
            sev = m.group("sev")
            severity = "fatal" if sev.lower() == "fatal" else "non-fatal"
            row = dict(kind="sxid", severity=sev, pid=None, process=None, message=rest)
            labels = {"bus_id": bus, "sxid": str(code), "severity": severity, "device": m.group("dev")}
            link = _LINK.search(rest)
            if link:
                labels["link"] = str(int(link.group("link")))  # "Link 04" and "Link 4" are one link
            sig = Signal(node=host or "unknown", kind=SignalKind.SXID, at=at, labels=labels, source="kernel-log",
                         raw=line.strip())
            ordered.append((line_no, sig))
        full = dict(line_no=line_no, node=host, at=at, uptime_seconds=float(up.group("up")) if up else None,
                    bus_id=bus, gpu=gpu, code=code, **row)
        rows.append(full)
        if sm:
            last_sxid = (line_no, m.group("dev"), str(code), sig, full)
    # "fallen off the bus" is XID 79 by another name (NVIDIA's catalog: XID 79 = GPU has fallen off the bus). When
    # the driver also printed the Xid 79 line for that GPU nearby, it is the same event: keep one, never two.
    for line_no, b, row, sig in fell_off:
        if any((b is None or bus == b) and abs(n - line_no) <= _SAME_EVENT_LINES for n, bus in xid79):
            res.continued += 1
            continue
        res.matched += 1
        rows.append(row)
        ordered.append((line_no, sig))
    rows.sort(key=lambda r: r["line_no"])
    signals.extend(s for _, s in sorted(ordered, key=lambda p: p[0]))
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
