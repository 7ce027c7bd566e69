"""Parsers on large odd input (issue 32 item 9): median seconds per parse, growth per 4x more lines, and the ratio to
`str.splitlines()` on the same text (the least work any line parser does). Linear parsers grow ~4x per row step.

The "old dcgm table regex" row is the pattern the dcgm-diag parser used before (`^\\s*\\|...` with re.M, whose `\\s*`
ran across blank lines): the baseline the fix is measured against, on sizes it can still finish.

    .venv/bin/python bench/parsers.py [--sizes 10000,40000,160000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from remedy.detect.dcgm import parse_dcgm_metrics  # noqa: E402
from remedy.detect.joblog import parse_job_log  # noqa: E402
from remedy.detect.kernel_log import parse_kernel_log  # noqa: E402
from remedy.health.dcgm import parse_dcgm_diag  # noqa: E402
from remedy.health.ib import parse_ibstat  # noqa: E402
from remedy.health.nccl import parse_nccl  # noqa: E402
from remedy.health.smi import parse_nvidia_smi  # noqa: E402

OLD_DCGM_TABLE_ROW = re.compile(r"^\s*\|[^|\n]*\|[^\n]*\|\s*$", re.M)

PARSERS: dict[str, Callable[[str], object]] = {
    "dcgm-diag": parse_dcgm_diag, "nvidia-smi": parse_nvidia_smi, "nccl": parse_nccl, "ibstat": parse_ibstat,
    "kernel-log": parse_kernel_log, "job-log": parse_job_log, "dcgm-exporter": parse_dcgm_metrics,
}
ODD = {
    "blank lines": "\n",
    "table bars": "| a | b |\n",
    "gpu headers": "GPU 00000000:18:00.0\n    Product Name : X\n",
    "xid pid spaces": "NVRM: Xid (PCI:0000:3b:00): 79, pid=" + " " * 200 + "x\n",
}


def timed(f: Callable[[str], object], text: str, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            f(text)
        except ValueError:
            pass
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,40000,160000", help="lines per input, comma separated")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'parser':22} {'input':15} {'lines':>8} {'median s':>9} {'growth':>7} {'x splitlines':>13}")
    rows = [(name, f) for name, f in PARSERS.items()]
    for kind, unit in ODD.items():
        entries = rows + ([("old dcgm table regex", OLD_DCGM_TABLE_ROW.search)] if kind == "blank lines" else [])
        for name, f in entries:
            prev = None
            for n in sizes:
                if name.startswith("old") and n > 40_000:
                    print(f"{name:22} {kind:15} {n:>8} {'(skipped: quadratic, minutes)':>31}")
                    continue
                text = unit * n
                t = timed(f, text, args.repeat)
                base = timed(str.splitlines, text, args.repeat)
                growth = f"{t / prev:6.1f}x" if prev else "      -"
                print(f"{name:22} {kind:15} {n:>8} {t:9.4f} {growth:>7} {t / max(base, 1e-9):12.1f}x")
                prev = t
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
