"""Tested as a person uses it (issue 16, item 7): in headless Chromium, the operator answers a paused replacement's
approval in the Prefect UI's Resume form and sees the run carry on to Completed; the form refuses an answer without
a decision, an answer by someone not on the approver list leaves the run paused; and runs that need a person
(held, no spare, escalated) are not shown green, in the runs list or on their page.

Real parts: a Prefect server with its UI (remedy's own, on a free port), the cluster simulator, the flows in
processes of their own as a served flow runs, Debian's Chromium through Playwright (tests/ui/driver.py).
bench/ui_screenshots.py takes the same steps to write screenshots a reviewer can look at."""

from __future__ import annotations

import pytest

from remedy.approvals.model import ANSWERED_ELSEWHERE as ELSEWHERE
from tests.ui import driver as ui

pytestmark = [pytest.mark.prefect, pytest.mark.servers]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, ui_prefect_api):
    ui.need_browser()
    with ui.ui_stack(tmp_path_factory.mktemp("ui-stack"), api=ui_prefect_api) as s:
        yield s


@pytest.fixture(scope="module")
def outcomes(stack):
    """The held / no-spare / escalated runs, started early: their flows run while the form is answered."""
    return ui.OutcomeRuns(stack)


@pytest.fixture(scope="module")
def page(stack):
    with ui.browser_page(args=ui.TEST_CHROMIUM_ARGS) as p:
        yield p


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return ui.Shots(tmp_path_factory.mktemp("screenshots"))


def pause_key(stack, run_id: str) -> str | None:
    run = stack.run(run_id)
    return run["state"]["state_details"].get("pause_key") if run["state_type"] == "PAUSED" else None


def assert_pictures(paths) -> None:
    """Screenshots a reviewer can use: real PNGs of the whole viewport, not blank pages."""
    assert paths
    for path in paths:
        assert path.exists(), path
        assert ui.png_size(path) >= (1400, 1000), path
        assert path.stat().st_size > 30_000, f"{path} looks blank ({path.stat().st_size} bytes)"


def test_an_approval_answered_in_the_form_lets_the_replacement_finish(stack, outcomes, page, shots):
    proc, run_id = ui.start_paused_replacement(stack)
    led = stack.ledger()
    (asked,) = led.approvals(pending=True)
    assert asked.kind == "hold:spare-reserve" and asked.flow_run_id == run_id
    ui.open_run(page, stack, run_id, "Paused")
    taken = [shots(page, "paused-run", full_page=False)]

    # Resume opens the run's question as a form; submitted untouched it is refused by the form itself
    dialog = ui.open_resume_form(page)
    assert "a person must decide whether to spend the reserve" in dialog.inner_text()
    first_pause = pause_key(stack, run_id)
    ui.submit(dialog)
    dialog.get_by_text("'decision' is a required property").wait_for(timeout=ui.UI_WAIT_MS)
    taken.append(shots(page, "no-decision-refused", full_page=False))
    page.wait_for_timeout(1000)  # a submit that got through would have resumed the run by now
    assert pause_key(stack, run_id) == first_pause and led.get_approval(asked.id).pending
    assert not led.actions(kind="approval_refused")

    # the form lists the approvers (approvals.approvers) and the entry ledger-first answers resume with; picking
    # that entry in the form is not a listed approver's answer: refused and recorded, the run waits again
    assert ui.list_options(dialog, "Approver") == [ui.APPROVER, ELSEWHERE]
    ui.fill_form(dialog, decision="approve", approver=ELSEWHERE, reason="looks fine to me")
    ui.submit(dialog)
    refused = ui.wait_until("the refusal", lambda: led.actions(kind="approval_refused"))
    ui.put_away(page)  # the server has the answer (the run read it): nothing to see until the run pauses again
    assert refused[0].detail["approver"] == ELSEWHERE and refused[0].error == f"{ELSEWHERE} is not an approver"
    ui.wait_until("the run to pause again", lambda: pause_key(stack, run_id) not in (None, first_pause))
    assert led.get_approval(asked.id).pending
    ui.open_run(page, stack, run_id, "Paused")
    refusal = page.get_by_text(f"by {ELSEWHERE} refused").first
    refusal.wait_for(timeout=ui.UI_WAIT_MS)  # the run's log says so
    refusal.scroll_into_view_if_needed()
    taken.append(shots(page, "unlisted-approver-refused"))

    # a listed approver answers: the run resumes and finishes the replacement
    dialog = ui.open_resume_form(page)
    ui.fill_form(dialog, decision="approve", approver=ui.APPROVER, reason="spend the reserve: the job is waiting")
    taken.append(shots(page, "form-answered", full_page=False))
    ui.submit(dialog)
    ui.wait_badge(page, "Completed", timeout_ms=90_000)
    taken.append(shots(page, "completed-run", full_page=False))
    assert proc.wait(60) == 0, stack.log("replace-gpu003")[-3000:]
    run = stack.run(run_id)
    assert (run["state_type"], run["state_name"]) == ("COMPLETED", "Completed")
    assert run["state"]["message"].startswith("gpu003: replaced by gpu0"), run["state"]["message"]
    answer = led.get_approval(asked.id)
    assert (answer.decision, answer.decided_by, answer.reason) == (
        "approve", "bob", "spend the reserve: the job is waiting")

    # its artifacts: the timeline and the story name the approver
    ui.artifacts_tab(page)
    ui.open_artifact(page, "replace-gpu003-story", "approval: approve by bob")
    taken.append(shots(page, "story"))
    assert_pictures(taken)


def test_runs_that_need_a_person_are_not_green(stack, outcomes, page, shots):
    ui.put_away(page)  # while the flows finish
    runs = outcomes.wait()
    assert set(runs) == set(ui.OUTCOME_RUNS), runs
    page.goto(f"{stack.ui}/runs", wait_until="domcontentloaded")
    taken = []
    for name, state in ui.OUTCOME_RUNS.items():
        row = page.locator(".state-list-item").filter(has=page.get_by_text(name, exact=True)).first
        row.wait_for(timeout=ui.UI_WAIT_MS)
        assert row.locator(".state-badge").first.inner_text().strip() == state
        assert_not_green(row, "state-list-item--")
    taken.append(shots(page, "runs-list"))

    for name, state in ui.OUTCOME_RUNS.items():
        ui.open_run(page, stack, runs[name], state)
        badge = ui.badge(page)
        assert badge.inner_text().strip() == state
        assert_not_green(badge, "state--")
        assert stack.run(runs[name])["state_name"] == state
        taken.append(shots(page, f"{state.lower().replace(' ', '-')}-run", full_page=False))
    assert_pictures(taken)


def test_a_warned_node_with_no_spare_is_a_green_watched_run_that_says_why(stack, outcomes, page, shots):
    """The warned node still works: no spare means it is left working and watched. Nothing needs a person, so the
    run is green (Completed, named Watched), and its state message says the node was not swapped and why."""
    ui.put_away(page)  # while the flows finish
    outcomes.wait()
    run_id = outcomes.watched()
    ui.open_run(page, stack, run_id, "Watched")
    badge = ui.badge(page)
    classes = badge.get_attribute("class").split()
    assert "state--completed" in classes, classes
    taken = [shots(page, "watched-run", full_page=False)]
    ui.details_tab(page)
    message = page.get_by_text("gpu013 was not swapped on its early warning").first
    message.wait_for(timeout=ui.UI_WAIT_MS)
    assert "no spare was ready" in message.inner_text()  # the UI cuts the rest off behind "See More"
    taken.append(shots(page, "watched-details"))
    run = stack.run(run_id)
    assert run["state_name"] == "Watched" and run["state_type"] == "COMPLETED", run
    text = run["state"]["message"]
    assert "no spare was ready at the checkpoint boundary — none of the 2 ready spare(s) is validated" in text, text
    assert text.endswith("it keeps working and is watched."), text
    assert_pictures(taken)


def assert_not_green(element, prefix: str) -> None:
    """Prefect colours by state type (class `state--failed`, `state-list-item--completed` …): not the completed
    one, and the colour drawn is not green."""
    classes = element.get_attribute("class").split()
    types = [c.removeprefix(prefix) for c in classes if c.startswith(prefix)]
    assert types and types[0] in ("failed", "cancelled", "crashed"), classes
    prop = "background-color" if prefix == "state--" else "border-left-color"
    r, g, b, _ = element.evaluate(_PAINTED, prop)
    assert not (g > r and g > b), f"{prop} is green: rgb({r}, {g}, {b})"


# the colour as drawn (the UI's colours may be oklch(), which only the browser converts): paint one pixel, read it
_PAINTED = """(e, prop) => {
    const c = document.createElement('canvas'); c.width = c.height = 1;
    const x = c.getContext('2d'); x.fillStyle = getComputedStyle(e).getPropertyValue(prop); x.fillRect(0, 0, 1, 1);
    return Array.from(x.getImageData(0, 0, 1, 1).data);
}"""
