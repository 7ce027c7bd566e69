"""Training job logs → nccl-timeout and loss-nan signals.

Recognised (PyTorch ProcessGroupNCCL and common trainer log formats):

    [rank3]:[E1121 10:00:01.000000 1234 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation
        timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for
        600021 milliseconds before timing out.
    step 1200 | loss: nan            iteration 10 | lm loss: 0.0000E+00 | ...        {'loss': nan, ...}

NaN/Inf or an exact zero loss are both failures (seed 001: numerical corruption shows as NaN losses).
One signal per kind per log with the count in labels["count"] (a NaN loss repeats on every step after).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from remedy.detect.signals import Signal, SignalKind
from remedy.health.limits import bounded_lines
from remedy.textinput import as_text

_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout")
# two searches, not "SeqNum=(\d+).*?OpType=": that lazy scan restarts at every SeqNum and is quadratic on a line that
# repeats it without an OpType (issue 32 item 9)
_SEQ = re.compile(r"SeqNum=(?P<seq>\d{1,20})")
_OP = re.compile(r"OpType=(?P<op>[A-Z_]{1,40})")
_RAN_FOR = re.compile(r"ran for (?P<ms>\d{1,15}) milliseconds")
_RANK = re.compile(r"\[Rank (?P<rank>\d+)\]|\[rank(?P<rank2>\d+)\]")
_LOSS = re.compile(
    r"""(?<![A-Za-z0-9_])['"]?loss['"]?\s*[:=]\s*(?P<v>[-+]?(?:nan|inf(?:inity)?|\d+(?:\.\d*)?(?:e[-+]?\d+)?))\b""",
    re.IGNORECASE,
)
_LOSS_MENTION = re.compile(r"(?<![A-Za-z0-9_])['\"]?loss['\"]?\s*[:=]", re.IGNORECASE)


@dataclass
class JobLogResult:
    signals: list[Signal]
    lines: int = 0
    nccl_timeouts: int = 0
    bad_losses: int = 0
    losses: int = 0  # well-formed loss values seen
    ignored: int = 0
    unparsed: int = 0  # 'loss:' with something that is not a number
    unparsed_samples: list[tuple[int, str]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "lines": self.lines, "nccl_timeouts": self.nccl_timeouts, "losses": self.losses,
            "bad_losses": self.bad_losses, "ignored": self.ignored, "unparsed": self.unparsed,
            "unparsed_samples": [{"line": n, "text": t} for n, t in self.unparsed_samples],
        }


def parse_job_log(text: str, *, node: str = "unknown", job: str = "", max_samples: int = 20) -> JobLogResult:
    """Scan a job log; `node` is where the log came from (logs rarely name it), `job` is kept as a label."""
    text = as_text(text, "job log")
    if not node:
        raise ValueError("parse_job_log: node must be non-empty (use 'unknown' if the log's node is not known)")
    res = JobLogResult(signals=[])
    first: dict[SignalKind, tuple[int, str, dict[str, str], float | None]] = {}
    for n, line in enumerate(bounded_lines(text, "job log"), start=1):
        res.lines += 1
        if _WATCHDOG.search(line):
            res.nccl_timeouts += 1
            labels: dict[str, str] = {}
            if (m := _SEQ.search(line)) and (op := _OP.search(line, m.end())):
                labels.update(seq=m.group("seq"), op=op.group("op"))
            if m := _RANK.search(line):
                labels["rank"] = m.group("rank") or m.group("rank2")
            ran = _RAN_FOR.search(line)
            first.setdefault(SignalKind.NCCL_TIMEOUT, (n, line, labels, int(ran.group("ms")) / 1000 if ran else None))
            continue
        m = _LOSS.search(line)
        if m:
            res.losses += 1
            v = float(m.group("v"))
            if math.isnan(v) or math.isinf(v) or v == 0.0:
                res.bad_losses += 1
                lab = {"loss": m.group("v")}
                if r := _RANK.search(line):
                    lab["rank"] = r.group("rank") or r.group("rank2")
                first.setdefault(SignalKind.LOSS_NAN, (n, line, lab, None))
            continue
        if _LOSS_MENTION.search(line):
            res.unparsed += 1
            if len(res.unparsed_samples) < max_samples:
                res.unparsed_samples.append((n, line[:300]))
            continue
        res.ignored += 1
    counts = {SignalKind.NCCL_TIMEOUT: res.nccl_timeouts, SignalKind.LOSS_NAN: res.bad_losses}
    for kind, (n, line, labels, value) in first.items():
        labels = {**labels, "count": str(counts[kind]), "first_line": str(n), **({"job": job} if job else {})}
        res.signals.append(Signal(node=node, kind=kind, value=value, labels=labels, source="joblog", raw=line.strip()[:2000]))
    return res
