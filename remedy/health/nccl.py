"""nccl-tests `all_reduce_perf` output: parse the sweep table and judge it against seed 001's criteria.

Output shape (nccl-tests 2.x), one row per payload size:

    #       size   count   type  redop  root |  time  algbw  busbw  #wrong |  time  algbw  busbw  #wrong
           8388608  2097152  float  sum   -1   128.4  65.33  122.5      0    127.9  65.58  123.0      0
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 230.123

The first four numbers after `root` are the out-of-place half, the next four the in-place half.
`#wrong` is `N/A` when validation is off (-c 0). Multi-node group runs print the same table.
Also read: nccl-tests 2.x with per-iteration columns (`i_min i_max i_p99 i_cv%` after each half, told by the
header) and a trailing timestamp column (-T); and the old table without `root` whose fourth column per half
is `error`, the largest relative error as a float (`1e-06`), not a count of wrong elements.

"p95 latency": one run gives one time per size and half. With several runs (several outputs, or the
sweep repeated inside one output with -N) the p95 is taken, nearest-rank, over every time measured
for that size (out-of-place and in-place, all runs); with a single run that is the slower of its two
halves. BusBW per run is the lower of the two halves; across runs the median is judged.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field

from remedy.health.limits import bounded_lines
from remedy.health.result import CheckOutputError, CheckResult, Judgement, tail
from remedy.settings.health import NcclCriteriaProfile
from remedy.textinput import as_text

CHECK = "nccl"


@dataclass
class NcclHalf:
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None  # None when the tool printed N/A (validation off) or only an old-style error
    max_error: float | None = None  # old tables: largest relative error (a tolerance, not a failure count)


@dataclass
class NcclRow:
    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int
    out_of_place: NcclHalf
    in_place: NcclHalf | None


@dataclass
class NcclRun:
    rows: list[NcclRow] = field(default_factory=list)
    avg_busbw_gbps: float | None = None
    out_of_bounds: int | None = None
    ranks: int = 0
    errors: list[str] = field(default_factory=list)  # lines the tool printed about failures

    def row(self, size_bytes: int) -> NcclRow | None:
        return next((r for r in self.rows if r.size_bytes == size_bytes), None)


_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d{1,12})")
_RANK = re.compile(r"^#\s*Rank\s+\d+\s")
_ERROR = re.compile(r"(NCCL (WARN|failure|error)|Test failure|Test NCCL failure|CUDA failure)", re.I)


def _num(token: str, what: str, lineno: int) -> float:
    try:
        return float(token)
    except ValueError:
        raise CheckOutputError(f"nccl output line {lineno}: {what} is not a number: {token[:20]!r}") from None


def _wrong(token: str, lineno: int) -> int | None:
    if token.upper() == "N/A":
        return None
    value = _num(token, "#wrong", lineno)  # printed with %g: a million wrong elements is "1e+06"
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise CheckOutputError(f"nccl output line {lineno}: #wrong is neither a count nor N/A: {token[:20]!r}")
    return int(value)


def _half(tokens: list[str], lineno: int, old: bool = False) -> NcclHalf:
    return NcclHalf(
        time_us=_num(tokens[0], "time", lineno),
        algbw_gbps=_num(tokens[1], "algbw", lineno),
        busbw_gbps=_num(tokens[2], "busbw", lineno),
        wrong=None if old else _wrong(tokens[3], lineno),
        max_error=_num(tokens[3], "error", lineno) if old and tokens[3].upper() != "N/A" else None,
    )


_NUMERIC = re.compile(r"^(?:-?\d+(?:\.\d*)?(?:e[-+]?\d+)?|N/A)$", re.I)
_INT = re.compile(r"^-?\d{1,12}$")
_SIZE = re.compile(r"^\d{1,20}$")


def _row(tokens: list[str], lineno: int, header: set[str]) -> NcclRow | None:
    """One result row, or None when the line is not one. `header`: the column names of the last table header.

    Every published layout is `size count type [redop] [root] time algbw busbw #wrong|error [time algbw busbw
    #wrong|error]`, with per-iteration columns after each half when the header names them and a -T timestamp
    at the end. redop is a word (sum, max, none, ...), never a number; root is an integer, but so is a time of
    10 ms or more (printed "%7.0f"), so without a header the root is told by the count: the halves carry 4
    numbers each, a root makes the count one more than a multiple of 4.
    """
    if len(tokens) < 7 or not _SIZE.match(tokens[0]) or not _SIZE.match(tokens[1]) or _NUMERIC.match(tokens[2]):
        return None
    i, redop = 3, ""
    if not _NUMERIC.match(tokens[i]):
        redop, i = tokens[i], i + 1
    nums: list[str] = []
    for t in tokens[i:]:  # a trailing timestamp (-T) is not a number and ends the row
        if not _NUMERIC.match(t):
            break
        nums.append(t)
    if header:
        has_root = "root" in header
        per_iter = "i_min" in header
        old = "error" in header or "res" in header
    else:
        has_root = len(nums) % 4 == 1 and _INT.match(nums[0]) is not None
        per_iter = len(nums) - has_root >= 16
        # "#wrong" counts are integers; the older "error" column is a float ("1e-06", "0e+00")
        fourth = nums[int(has_root) + 3] if len(nums) > int(has_root) + 3 else ""
        old = not has_root and not _INT.match(fourth)
    root = -1
    if has_root and nums and _INT.match(nums[0]):
        root, nums = int(nums[0]), nums[1:]
    step = 8 if per_iter else 4
    if len(nums) < 4:
        rest = tokens[i + int(has_root):]
        bad = rest[len(nums)] if len(nums) < len(rest) else "(missing)"
        what = ("time", "algbw", "busbw", "#wrong")[len(nums)]
        raise CheckOutputError(f"nccl output line {lineno}: {what} is not a number: {bad[:20]!r}")
    return NcclRow(
        size_bytes=int(tokens[0]),
        count=int(tokens[1]),
        dtype=tokens[2],
        redop=redop,
        root=root,
        out_of_place=_half(nums[0:4], lineno, old=old),
        in_place=_half(nums[step : step + 4], lineno, old=old) if len(nums) >= step + 4 else None,
    )


def parse_nccl(text: str) -> NcclRun:
    """Read one all_reduce_perf (or any nccl-tests) output; raise CheckOutputError if it has no table."""
    text = as_text(text, "nccl output", CheckOutputError)
    run = NcclRun()
    header: set[str] = set()
    for lineno, raw in enumerate(bounded_lines(text, "nccl output", CheckOutputError), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            words = set(line.lstrip("#").split())
            if {"size", "count", "type"} <= words or {"bytes", "type"} <= words:
                header = {w.lower() for w in words}
            elif m := _AVG.match(line):
                run.avg_busbw_gbps = _num(m.group(1), "Avg bus bandwidth", lineno)
            elif m := _OOB.match(line):
                run.out_of_bounds = int(m.group(1)[:12])
            elif _RANK.match(line):
                run.ranks += 1
            continue
        tokens = line.split()
        if row := _row(tokens, lineno, header):
            run.rows.append(row)
        elif _ERROR.search(line):
            run.errors.append(line)
    if not run.rows and not run.errors:
        raise CheckOutputError("nccl output has no result table (expected rows of 'size count type redop root ...')")
    return run


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile (the value at rank ceil(0.95 n))."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def human_size(n: int) -> str:
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def judge_nccl(runs: list[NcclRun], criteria: NcclCriteriaProfile, *, require_all_sizes: bool = True,
               raw: str = "") -> CheckResult:
    """Judge one or more sweeps of the same group against a criteria table (see module doc for p95/BusBW)."""
    if not runs:
        raise CheckOutputError("no nccl runs to judge")
    j = Judgement()
    for i, run in enumerate(runs):
        prefix = f"run {i + 1}: " if len(runs) > 1 else ""
        for err in run.errors[:3]:
            j.fail(f"{prefix}tool reported: {err}")
        if not run.rows:
            j.fail(f"{prefix}no result rows (the test did not complete)")
        if run.out_of_bounds:
            j.fail(f"{prefix}{run.out_of_bounds} out-of-bounds values")
        for row in run.rows:
            wrong = sum(h.wrong or 0 for h in (row.out_of_place, row.in_place) if h is not None)
            if wrong:
                j.fail(f"{prefix}{wrong} wrong elements at {human_size(row.size_bytes)} (data corruption)")

    # Every row is a sample: several outputs, or a sweep repeated inside one output (-N), add up.
    samples: dict[int, tuple[list[float], list[float]]] = {}
    for run in runs:
        for row in run.rows:
            times, busbws = samples.setdefault(row.size_bytes, ([], []))
            halves = [h for h in (row.out_of_place, row.in_place) if h is not None]
            times += [h.time_us for h in halves]
            busbws.append(min(h.busbw_gbps for h in halves))
    per_size = {
        str(size): {
            "p50_latency_us": statistics.median(times),
            "p95_latency_us": p95(times),
            "busbw_gbps": statistics.median(busbws),
            "samples": len(times),
        }
        for size, (times, busbws) in sorted(samples.items())
    }

    thresholds: dict[str, dict] = {}
    for c in criteria.sizes:
        label = human_size(c.size_bytes)
        thresholds[label] = {k: v for k, v in (("max_p95_latency_us", c.max_p95_latency_us),
                                               ("min_busbw_gbps", c.min_busbw_gbps)) if v is not None}
        m = per_size.get(str(c.size_bytes))
        if m is None:
            if require_all_sizes and any(run.rows for run in runs):
                j.fail(f"no result for {label}: the sweep did not reach it")
            continue
        if c.max_p95_latency_us is not None and m["p95_latency_us"] > c.max_p95_latency_us:
            j.fail(f"{label}: p95 latency {m['p95_latency_us']:g} us > {c.max_p95_latency_us:g} us")
        if c.min_busbw_gbps is not None and m["busbw_gbps"] < c.min_busbw_gbps:
            j.fail(f"{label}: BusBW {m['busbw_gbps']:g} GB/s < {c.min_busbw_gbps:g} GB/s")

    avgs = [r.avg_busbw_gbps for r in runs if r.avg_busbw_gbps is not None]
    measurements = {
        "runs": len(runs),
        "ranks": max(r.ranks for r in runs),
        "avg_busbw_gbps": statistics.median(avgs) if avgs else None,
        "sizes": per_size,
    }
    return CheckResult(
        check=CHECK,
        verdict=j.verdict,
        measurements=measurements,
        thresholds={"profile": {"gpu_model": criteria.gpu_model, "fabric": criteria.fabric}, "sizes": thresholds},
        reasons=j.reasons,
        raw_tail=tail(raw),
    )


def check_nccl(outputs: list[str] | str | bytes, criteria: NcclCriteriaProfile, *, require_all_sizes: bool = True) -> CheckResult:
    """Parse one or several all_reduce_perf outputs of the same group and judge them."""
    items: list[str | bytes | bytearray]
    if isinstance(outputs, (str, bytes, bytearray)):
        items = [outputs]
    elif isinstance(outputs, (list, tuple)):
        items = list(outputs)
    else:
        raise CheckOutputError(f"nccl output: expected text or bytes, got {type(outputs).__name__}")
    texts = [as_text(t, "nccl output", CheckOutputError) for t in items]
    runs = [parse_nccl(t) for t in texts]
    return judge_nccl(runs, criteria, require_all_sizes=require_all_sizes, raw=texts[-1] if texts else "")
