"""Screenshots of what an operator sees in the Prefect UI, for a reviewer to look at (issue 16, item 7).

    .venv/bin/python bench/ui_screenshots.py [--out var/screenshots]

Starts its own Prefect server (API + UI, SQLite) and 16-node cluster simulators on free loopback ports, runs the
real flows against them, and drives headless Chromium (Debian's package, through Playwright) as a person would
(tests/ui/driver.py; tests/ui/test_approval_ui.py asserts on the same steps):

    01-05  a replacement paused for a person (spend the spare reserve?): the run page with its Resume button, the
           form, the form submitted without a decision (refused by the form), the run paused again after an answer
           by the entry no listed approver is (refused), the form answered by "bob"
    06-09  the run after the answer (Completed), its artifacts, the timeline table, the story
    10     the runs list with the runs that need a person: Held, No spare, Escalated (none of them green)
    11-19  each of those runs: its page, its Details tab (the state message), its story artifact
    20-21  a warned node with no spare to swap in: the green Watched run and its state message

Writes NN-name.png to --out (default var/screenshots/, not committed) and prints one line per file. ~1.5 min on a
quiet machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from remedy.approvals.model import ANSWERED_ELSEWHERE as ELSEWHERE  # noqa: E402 - after the path is set
from tests.ui.driver import (  # noqa: E402 - after the path is set
    APPROVER,
    CHROMIUM,
    OUTCOME_RUNS,
    UI_WAIT_MS,
    OutcomeRuns,
    Shots,
    UiStack,
    artifacts_tab,
    browser_page,
    details_tab,
    fill_form,
    open_artifact,
    open_resume_form,
    open_run,
    png_size,
    start_paused_replacement,
    submit,
    ui_stack,
    wait_badge,
    wait_until,
)


def walk(stack: UiStack, page, shots: Shots) -> dict[str, str]:
    """The tour (the steps tests/ui/test_approval_ui.py asserts on), a screenshot at each step; returns the run ids."""
    outcomes = OutcomeRuns(stack)  # these flows run while the form is answered
    proc, run_id = start_paused_replacement(stack)
    open_run(page, stack, run_id, "Paused")
    shots(page, "paused-run", full_page=False)
    dialog = open_resume_form(page)
    shots(page, "resume-form", full_page=False)
    submit(dialog)
    dialog.get_by_text("'decision' is a required property").wait_for(timeout=UI_WAIT_MS)
    shots(page, "no-decision-refused", full_page=False)
    # the approver field lists the configured approvers and the entry Slack/go-ahead answers resume with; that entry
    # picked in the form is not a listed approver's answer: refused, and the run waits again
    fill_form(dialog, decision="approve", approver=ELSEWHERE, reason="not on the list")
    submit(dialog)
    wait_until("the refusal", lambda: stack.ledger().actions(kind="approval_refused"), timeout=60)
    wait_until("the run to pause again", lambda: stack.run(run_id)["state_type"] == "PAUSED", timeout=60)
    open_run(page, stack, run_id, "Paused")
    refusal = page.get_by_text(f"by {ELSEWHERE} refused").first  # the run's log says why it is waiting again
    refusal.wait_for(timeout=UI_WAIT_MS)
    refusal.scroll_into_view_if_needed()
    shots(page, "unlisted-approver-refused")
    dialog = open_resume_form(page)
    fill_form(dialog, decision="approve", approver=APPROVER, reason="reserve may go: the job is at risk")
    shots(page, "form-answered", full_page=False)
    submit(dialog)
    wait_badge(page, "Completed", timeout_ms=90_000)
    proc.wait(60)
    shots(page, "completed-run", full_page=False)
    artifacts_tab(page)
    page.get_by_text("replace-gpu003-timeline", exact=True).first.wait_for(timeout=UI_WAIT_MS)
    shots(page, "artifacts")
    for key, text in (("timeline", "job resumed"), ("story", "gpu003: replaced")):
        open_artifact(page, f"replace-gpu003-{key}", text)
        shots(page, f"artifact-{key}")
        page.go_back()
        artifacts_tab(page)

    others = outcomes.wait()
    page.goto(f"{stack.ui}/runs", wait_until="domcontentloaded")
    for name in OUTCOME_RUNS:
        page.get_by_text(name, exact=True).first.wait_for(timeout=UI_WAIT_MS)
    shots(page, "runs-list")
    for name, rid in others.items():
        state = OUTCOME_RUNS[name]
        open_run(page, stack, rid, state)
        slug = state.lower().replace(" ", "-")
        shots(page, f"{slug}-run", full_page=False)
        details_tab(page)
        shots(page, f"{slug}-details")
        artifacts_tab(page)
        story = f"escalate-{name.split()[1]}" if name.startswith("escalate") else f"replace-{name.split()[1]}-story"
        open_artifact(page, story, name.split()[1])
        shots(page, f"{slug}-story")
    watched = outcomes.watched()  # a warned node with no spare: left working, green, and the message says why
    open_run(page, stack, watched, "Watched")
    shots(page, "watched-run", full_page=False)
    details_tab(page)
    shots(page, "watched-details")
    return {"replacement": run_id, "watched": watched} | others


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "var" / "screenshots", help="where the PNGs go")
    args = ap.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set CHROMIUM)", file=sys.stderr)
        return 2
    start = time.monotonic()
    shots = Shots(args.out)
    with tempfile.TemporaryDirectory(prefix="ui-screens-") as tmp, ui_stack(Path(tmp)) as stack, \
            browser_page() as page:
        walk(stack, page, shots)
    for path in shots.taken:
        w, h = png_size(path)
        print(f"{path}  {w}×{h}  {path.stat().st_size // 1024} KiB")
    print(f"{len(shots.taken)} screenshots in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
