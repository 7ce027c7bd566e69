"""Where an open Prefect UI page spends CPU in the UI tests (issue 28): headless Chromium on a paused flow run's
page, per Chromium flag set, against the Prefect server's own CPU meanwhile.

    .venv/bin/python bench/ui_chromium_cpu.py [--window 10] [--repeat 3]

Starts its own Prefect server (API + UI) and simulator (tests/ui/driver.py), pauses a replacement for a person,
then for each flag set opens the run's page and reads, over `--window` seconds, the CPU of Chromium's processes
(from /proc) and of the Prefect server. Prints CPU-s per second of an open page (median of --repeat windows) and
the ratio to the flags bench/ui_screenshots.py uses (CHROMIUM_ARGS). ~3 min on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from tests.fixtures.cpu import _children, tree_cpu  # noqa: E402 - after the path is set
from tests.ui.driver import (  # noqa: E402 - after the path is set
    CHROMIUM,
    CHROMIUM_ARGS,
    TEST_CHROMIUM_ARGS,
    open_run,
    put_away,
    start_paused_replacement,
    ui_stack,
)

FLAG_SETS = {
    "CHROMIUM_ARGS (screenshots)": CHROMIUM_ARGS,
    "TEST_CHROMIUM_ARGS (tests)": TEST_CHROMIUM_ARGS,
}


def _split() -> tuple[float, float]:
    """(Chromium and its Playwright driver, the Prefect server) CPU seconds so far: this process's children by
    command line."""
    kids = _children()
    browser = server = 0.0
    for pid in kids.get(os.getpid(), []):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"prefect" in cmd:
            server += tree_cpu(pid, kids)
        elif b"playwright" in cmd or b"node" in cmd.split(b"\0")[0]:
            browser += tree_cpu(pid, kids)
    return browser, server


def _rate(seconds: float) -> tuple[float, float]:
    b0, s0, t0 = *_split(), time.monotonic()
    time.sleep(seconds)
    b1, s1, t1 = *_split(), time.monotonic()
    return (b1 - b0) / (t1 - t0), (s1 - s0) / (t1 - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=10.0, help="seconds per reading (default 10)")
    parser.add_argument("--repeat", type=int, default=3, help="readings per flag set and page (default 3)")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"Chromium not found at {CHROMIUM}", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    rows = []
    with tempfile.TemporaryDirectory(prefix="ui-cpu-") as tmp, ui_stack(Path(tmp)) as stack:
        _, run_id = start_paused_replacement(stack)
        idle = [_rate(args.window) for _ in range(args.repeat)]
        rows.append(("no browser", "-", 0.0, statistics.median(s for _, s in idle)))
        with sync_playwright() as p:
            for name, flags in FLAG_SETS.items():
                browser = p.chromium.launch(executable_path=CHROMIUM, args=flags, headless=True)
                try:
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    open_run(page, stack, run_id, "Paused")
                    time.sleep(2)  # the first load's work done
                    on = [_rate(args.window) for _ in range(args.repeat)]
                    rows.append((name, "paused run", statistics.median(b for b, _ in on),
                                 statistics.median(s for _, s in on)))
                    put_away(page)
                    off = [_rate(args.window) for _ in range(args.repeat)]
                    rows.append((name, "about:blank", statistics.median(b for b, _ in off),
                                 statistics.median(s for _, s in off)))
                finally:
                    browser.close()
    base = {page: b for name, page, b, _ in rows if name.startswith("CHROMIUM_ARGS")}
    print(f"CPU-s per second, median of {args.repeat} x {args.window:g} s (load {os.getloadavg()[0]:.1f})")
    print(f"{'flags':30s} {'page':12s} {'Chromium':>9s} {'ratio':>6s} {'server':>7s}")
    for name, page, b, s in rows:
        ratio = f"{b / base[page]:.2f}" if base.get(page) else "-"
        print(f"{name:30s} {page:12s} {b:9.3f} {ratio:>6s} {s:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
