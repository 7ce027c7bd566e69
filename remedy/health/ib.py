"""InfiniBand: `ibstat` port state plus the sysfs error counters, judged per port.

    CA 'mlx5_0'
            CA type: MT4129
            Number of ports: 1
            Port 1:
                    State: Active
                    Physical state: LinkUp
                    Rate: 400
                    Link layer: InfiniBand

Ports whose link layer is not the fabric's (`ib.link_layer`, InfiniBand by default) are Ethernet (RoCE) NICs
or the like sharing the host: they are listed in the measurements but their state, rate and counters are not
judged as fabric failures. A missing fabric port still shows as a port-count failure.

Counters come from /sys/class/infiniband/<dev>/ports/<n>/counters/<name>, given as that directory
tree, as a dict {(dev, port): {name: value}}, or as `<path>: <value>` lines the ib Job prints after
ibstat (`for f in /sys/class/infiniband/*/ports/*/counters/{symbol_error,...}; do echo "$f: $(cat $f)"; done`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from remedy.health.limits import bounded_lines
from remedy.health.result import CheckOutputError, CheckResult, Judgement, tail
from remedy.settings.health import IbThresholds
from remedy.textinput import as_text

CHECK = "ib"
COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors")
_CA = re.compile(r"^CA '([^']+)'")
_PORT = re.compile(r"^Port (\d{1,4}):\s*$")
_RATE = re.compile(r"^\d{1,7}$")
_COUNTER_LINE = re.compile(r"^\S*/sys/class/infiniband/([^/]+)/ports/(\d{1,4})/counters/(\w+):\s*(\d{1,20})\s*$")


@dataclass
class IbPort:
    device: str
    port: int
    state: str = ""
    physical_state: str = ""
    rate_gbps: int | None = None
    link_layer: str = ""
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"


def parse_ibstat(text: str) -> list[IbPort]:
    """Ports from ibstat output (counter lines, if present, are attached to their ports)."""
    text = as_text(text, "ibstat output", CheckOutputError)
    ports: list[IbPort] = []
    device, port = "", None
    counters: dict[tuple[str, int], dict[str, int]] = {}
    for raw in bounded_lines(text, "ibstat output", CheckOutputError):
        line = raw.strip()
        if m := _COUNTER_LINE.match(line):
            counters.setdefault((m.group(1), int(m.group(2))), {})[m.group(3)] = int(m.group(4))
        elif m := _CA.match(line):
            device, port = m.group(1), None
        elif m := _PORT.match(line):
            if not device:
                raise CheckOutputError(f"ibstat output: '{line}' appears before any CA line")
            port = IbPort(device, int(m.group(1)))
            ports.append(port)
        elif port is not None and ":" in line:
            key, value = (s.strip() for s in line.split(":", 1))
            if key == "State":
                port.state = value
            elif key == "Physical state":
                port.physical_state = value
            elif key == "Rate":
                port.rate_gbps = int(value) if _RATE.match(value) else None
            elif key == "Link layer":
                port.link_layer = value
    if not ports and not counters:
        raise CheckOutputError("ibstat output has no \"CA '<device>'\" / 'Port N:' blocks")
    attach_counters(ports, counters)
    return ports


def read_ib_counters(source: str | os.PathLike[str] | dict) -> dict[tuple[str, int], dict[str, int]]:
    """Counters from a sysfs-like directory (<root>/<dev>/ports/<n>/counters/<name>) or a dict."""
    if isinstance(source, dict):
        return {(str(k[0]), int(k[1])): {n: int(v) for n, v in c.items()} for k, c in source.items()}
    root = Path(source)
    if not root.is_dir():
        raise CheckOutputError(f"InfiniBand counters directory not found: {root}")
    out: dict[tuple[str, int], dict[str, int]] = {}
    for f in sorted(root.glob("*/ports/*/counters/*")):
        if f.name not in COUNTERS:
            continue
        dev, port = f.parts[-5], int(f.parts[-3])
        text = f.read_text(errors="replace").strip()
        if not (text.isascii() and text.isdigit() and len(text) <= 20):
            raise CheckOutputError(f"{f}: counter is not a number: {text!r}")
        out.setdefault((dev, port), {})[f.name] = int(text)
    return out


def attach_counters(ports: list[IbPort], counters: dict[tuple[str, int], dict[str, int]]) -> None:
    by_key = {(p.device, p.port): p for p in ports}
    for key, values in counters.items():
        port = by_key.get(key)
        if port is None:  # counters for a port ibstat did not list: still judge them
            port = IbPort(key[0], key[1], state="(not in ibstat)")
            ports.append(port)
            by_key[key] = port
        port.counters.update(values)


def on_fabric(port: IbPort, t: IbThresholds) -> bool:
    """True when the port is on the fabric being judged: its link layer is the expected one, or unknown."""
    return not t.link_layer or not port.link_layer or port.link_layer.lower() == t.link_layer.lower()


def judge_ib(ports: list[IbPort], t: IbThresholds, *, expected_ports: int = 0, raw: str = "") -> CheckResult:
    j = Judgement()
    fabric = [p for p in ports if on_fabric(p, t)]
    listed = [p for p in fabric if p.state != "(not in ibstat)"]
    if expected_ports and len(listed) != expected_ports:
        j.fail(f"{len(listed)} {t.link_layer or 'fabric'} ports found, expected {expected_ports}")
    for p in listed:
        if p.state != "Active":
            j.fail(f"{p.name}: state {p.state or 'unknown'} (physical {p.physical_state or 'unknown'})")
        elif p.physical_state and p.physical_state != "LinkUp":
            j.fail(f"{p.name}: physical state {p.physical_state}")
        if p.rate_gbps is not None and p.rate_gbps < t.expected_rate_gbps and p.state == "Active":
            j.fail(f"{p.name}: rate {p.rate_gbps} Gb/s below {t.expected_rate_gbps}")
    for p in fabric:
        c = p.counters
        for name, warn, fail in (
            ("symbol_error", t.symbol_error_warn, t.symbol_error_fail),
            ("link_downed", None, t.link_downed_fail),
            ("link_error_recovery", None, t.link_error_recovery_fail),
            ("port_rcv_errors", t.port_rcv_errors_warn, t.port_rcv_errors_fail),
        ):
            v = c.get(name, 0)
            if v >= fail:
                j.fail(f"{p.name}: {name} = {v} (fail at {fail})")
            elif warn is not None and v >= warn:
                j.warn(f"{p.name}: {name} = {v} (warn at {warn})")
    return CheckResult(
        check=CHECK,
        verdict=j.verdict,
        measurements={
            "ports": {
                p.name: {"state": p.state, "physical_state": p.physical_state, "rate_gbps": p.rate_gbps,
                         "link_layer": p.link_layer, "counters": p.counters}
                for p in ports
            },
            "active_ports": sum(1 for p in listed if p.state == "Active"),
            "not_judged": sorted(p.name for p in ports if not on_fabric(p, t)),  # e.g. RoCE NICs on an IB node
        },
        thresholds={"expected_ports": expected_ports, **t.model_dump()},
        reasons=j.reasons,
        raw_tail=tail(raw),
    )


def check_ib(text: str, t: IbThresholds, *, counters: str | os.PathLike[str] | dict | None = None,
             expected_ports: int = 0) -> CheckResult:
    text = as_text(text, "ibstat output", CheckOutputError)
    ports = parse_ibstat(text)
    if counters is not None:
        attach_counters(ports, read_ib_counters(counters))
    return judge_ib(ports, t, expected_ports=expected_ports, raw=text)
