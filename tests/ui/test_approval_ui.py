"""Tested as a person uses it, in headless Chromium (Debian's package, through Playwright; tests/ui/driver.py), on
one Prefect server with its UI for the module (tests/ui/conftest.py: pytest-xdist gives a worker whole files, so the
UI tests share one server only in one file; a start is ~14 CPU-s).

- The approval form (issue 16, item 7): the operator answers a paused replacement's approval in the Resume form and
  sees the run carry on to Completed; the form refuses an answer without a decision, an answer by someone not on
  the approver list leaves the run paused; runs that need a person (held, no spare, escalated) are not shown green,
  in the runs list or on their page. Real parts: the cluster simulator, the flows in processes of their own as a
  served flow runs. bench/ui_screenshots.py takes the same steps to write screenshots a reviewer can look at.
- The first approval in a minute (issue 33): `remedy demo --scenario rack-storm` without --approve/--deny names the
  local user as the approver, waits for a person, and the person answers the Resume form by picking their name from
  the list; the demo then finishes. The demo CLI runs in a subprocess on this module's server (named by
  PREFECT_API_URL; tests/platform/test_own_servers.py starts the demo's own). A name outside the list is refused by
  the Prefect server itself (the form's schema), before the run sees it.
- What the operator sees after a demo incident: the replacement run found by its name in the runs list, its
  timeline artifact's steps in order, its story naming the spare. Screenshots land in test-artifacts/ (gitignored).
"""

from __future__ import annotations

import getpass
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from remedy.approvals.model import ANSWERED_ELSEWHERE as ELSEWHERE
from tests.fixtures.prefect import clean_env
from tests.ui import driver as ui

pytestmark = [pytest.mark.prefect, pytest.mark.servers]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
RUN_NAME = "replace gpu042 (XID 79)"


@pytest.fixture(scope="class")
def stack(tmp_path_factory, ui_prefect_api):
    ui.need_browser()
    with ui.ui_stack(tmp_path_factory.mktemp("ui-stack"), api=ui_prefect_api) as s:
        yield s


@pytest.fixture(scope="class")
def outcomes(stack):
    """The held / no-spare / escalated runs, started early: their flows run while the form is answered."""
    return ui.OutcomeRuns(stack)


@pytest.fixture(scope="module")
def browser():
    """One Chromium for the module."""
    ui.need_browser()
    with ui.chromium(ui.TEST_CHROMIUM_ARGS) as b:
        yield b


@pytest.fixture
def page(browser):
    """A fresh page per test; a test that waits for flows leaves it for about:blank meanwhile."""
    with ui.new_page(browser) as p:
        yield p


@pytest.fixture(scope="class")
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


class TestApprovalForm:
    """The approval form and the runs that need a person, on one stack: its simulators live in this process and
    stop when the class ends (class-scoped fixtures), not after the module's demo tests."""

    def test_an_approval_answered_in_the_form_lets_the_replacement_finish(self, stack, outcomes, page, shots):
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


    def test_runs_that_need_a_person_are_not_green(self, stack, outcomes, page, shots):
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


    def test_a_warned_node_with_no_spare_is_a_green_watched_run_that_says_why(self, stack, outcomes, page, shots):
        """The warned node still works: no spare means it is left working and watched. Nothing needs a person, so the
        run is green (Completed, named Watched), and its state message says the node was not swapped and why."""
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


# ------------------------------------------------------- the first approval in a minute (issue 33)
def test_rack_storm_waits_for_the_local_user_who_answers_in_the_form(tmp_path, ui_prefect_api, page):
    me = getpass.getuser()
    api = ui_prefect_api
    others = {r["id"] for r in _paused_for_a_person(api, set())}  # another test's run left paused is not the demo's
    env = clean_env(tmp_path) | {"PYTHONPATH": str(ROOT), "PREFECT_API_URL": api}
    env.pop("REMEDY_APPROVALS__APPROVERS", None)
    err_path = tmp_path / "demo.err"
    demo = subprocess.Popen([sys.executable, "-m", "remedy.cli", "demo", "--scenario", "rack-storm",
                             "--workdir", str(tmp_path / "demo")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=open(err_path, "w"), text=True)
    try:
        ui_url = ui.wait_until("the demo's Prefect UI line", lambda: re.search(
            r"Prefect UI: (http://127\.0\.0\.1:\d+)", err_path.read_text()), timeout=240).group(1)
        assert f"{ui_url}/api" == api, err_path.read_text()
        said = err_path.read_text()
        assert f"approvals: {me} (the local user" in said, said

        def paused():
            if demo.poll() is not None:
                raise RuntimeError(f"the demo ended before asking anyone:\n{err_path.read_text()[-3000:]}")
            return _paused_for_a_person(api, others)

        # each look is a filter and a read per paused run on the server, which is busy running the storm
        run = ui.wait_until("a held run to pause for a person", paused, timeout=300, every=1.0)[0]
        # the server refuses a name that is not on the list: the form's schema lists the approvers
        bad = httpx.post(f"{api}/flow_runs/{run['id']}/resume", timeout=30,
                         json={"run_input": {"decision": "approve", "approver": "mallory", "reason": ""}}).json()
        assert bad["status"] == "REJECT" and "mallory" in bad["details"]["reason"], bad
        ui.open_run(page, ui.UiStack(ui=ui_url, api=api, sim=None, home=tmp_path), run["id"], "Paused")
        dialog = ui.open_resume_form(page)
        assert ui.list_options(dialog, "Approver") == [me, ELSEWHERE]
        ui.fill_form(dialog, decision="approve", approver=me, reason="rack-2 is one PDU: go on")
        ui.submit(dialog)
        # the click only sends the answer: the page stays until the server has it (the run leaves this pause), or
        # leaving it could drop the request
        ui.wait_until("the form's answer to reach the server",
                      lambda: _state_id(api, run["id"]) != run["state"]["id"], timeout=120, every=0.25)
        ui.put_away(page)
        # A storm can trip the rack's and the PDU's breakers (one question each, by timing) and then ask about the
        # spare reserve: the same person answers those through the same form's API, as the UI would send it.
        answered = {run["state"]["id"]}  # a run answered once may pause again with another question (a new state)
        while demo.poll() is None:
            for r in _paused_for_a_person(api, others):
                if r["state"]["id"] in answered:
                    continue
                ok = httpx.post(f"{api}/flow_runs/{r['id']}/resume", timeout=30, json={"run_input": {
                    "decision": "approve", "approver": me, "reason": "seen: go on"}}).json()
                assert ok["status"] == "ACCEPT", ok
                answered.add(r["state"]["id"])
            time.sleep(1)
        out, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        subprocess.run([sys.executable, "-m", "remedy.cli", "down", "--workdir", str(tmp_path / "demo")], cwd=tmp_path,
                       env=env, capture_output=True, timeout=120)
    assert demo.returncode == 0, out + err_path.read_text()[-3000:]
    asked = re.findall(r"^approval \d+ \([^)]*\): (.*)$", out, re.M)
    assert asked and set(asked) == {f"approve by {me}"}, out  # every question answered by the person, none timed out
    runs = re.search(r"^runs: (.*)$", out, re.M)
    assert runs and len(runs.group(1).split(", ")) == 5 and "held" not in runs.group(1), out
    assert "breaker rack/rack-2" in out


def _state_id(api: str, run_id: str) -> str:
    return (httpx.get(f"{api}/flow_runs/{run_id}", timeout=30).json().get("state") or {}).get("id", "")


def _paused_for_a_person(api: str, others: set[str]) -> list[dict]:
    """The runs paused with their form saved, but for the run ids in `others`."""
    runs = httpx.post(f"{api}/flow_runs/filter", json={"flow_runs": {"state": {"type": {"any_": ["PAUSED"]}}}},
                      timeout=30).json()
    # PAUSED comes first, the form's schema a moment after (prefect/flow_runs.py pause with wait_for_input)
    return [r for r in runs if r["id"] not in others and _schema_saved(api, r)]


def _schema_saved(api: str, run: dict) -> bool:
    keyset = (run.get("state") or {}).get("state_details", {}).get("run_input_keyset") or {}
    return bool(keyset.get("schema")) and httpx.get(f"{api}/flow_runs/{run['id']}/input/{keyset['schema']}",
                                                    timeout=30).status_code == 200


# ------------------------------------------------------------- the replacement's timeline after a demo
@pytest.fixture
def prefect_ui(ui_prefect_api):
    """(UI URL, API URL) of a real Prefect server with its UI (the UI tests' own: tests/ui/conftest.py)."""
    return ui_prefect_api.removesuffix("/api"), ui_prefect_api


def test_operator_finds_the_replacement_run_and_its_timeline(prefect_ui, tmp_path, page):
    ui_url, api = prefect_ui

    demo = subprocess.run(
        [sys.executable, "-m", "remedy.cli", "demo", "--json", "--workdir", str(tmp_path / "demo")],
        env=clean_env(tmp_path) | {"PREFECT_API_URL": api}, capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr[-3000:]
    outcome = json.loads(demo.stdout)
    assert outcome["status"] == "replaced" and outcome["prefect_ui"] == ui_url
    replacement = outcome["replacement"]
    runs = httpx.post(f"{api}/flow_runs/filter", json={"flow_runs": {"name": {"any_": [RUN_NAME]}}}).json()
    assert len(runs) == 1, runs
    run_id = runs[0]["id"]

    ARTIFACTS.mkdir(exist_ok=True)
    # 1. The runs list: the run is found by the name that says what happened.
    page.goto(f"{ui_url}/runs", wait_until="domcontentloaded")
    link = page.get_by_text(RUN_NAME, exact=True).first
    link.wait_for(timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "ui-runs.png"))
    # 2. The run: completed, with its two artifacts (timeline table and story).
    link.click()
    page.wait_for_url("**/runs/flow-run/**", timeout=60_000)
    page.get_by_text("Completed", exact=True).first.wait_for(timeout=30_000)
    assert page.url.split("/")[-1] == run_id  # this server's run, not one from another server
    artifacts_tab = page.get_by_role("tab", name="Artifacts").or_(page.get_by_text("Artifacts", exact=True)).first
    artifacts_tab.click()
    card = page.get_by_text("replace-gpu042-timeline", exact=True).first
    card.wait_for(timeout=30_000)
    assert page.get_by_text("replace-gpu042-story", exact=True).first.is_visible()
    page.screenshot(path=str(ARTIFACTS / "ui-replacement-run.png"), full_page=True)
    # 3. The timeline artifact: the runbook's steps in order, and the spare that took over.
    card.click()
    page.wait_for_url("**/artifacts/artifact/**", timeout=60_000)
    page.get_by_text("job resumed").first.wait_for(timeout=30_000)
    page.get_by_text(RUN_NAME).first.wait_for(timeout=30_000)  # the side panel names the run it belongs to
    body = page.inner_text("body")
    steps = ["detected", "cordoned", "drained", "spare ready", "job resumed"]
    positions = [body.find(s) for s in steps]
    assert -1 not in positions and positions == sorted(positions), body[:2000]
    page.screenshot(path=str(ARTIFACTS / "ui-replacement-timeline.png"), full_page=True)
    # 4. The story: which spare took over, and why that one.
    page.go_back()
    page.wait_for_url("**/runs/flow-run/**", timeout=60_000)
    artifacts_tab.click()
    page.get_by_text("replace-gpu042-story", exact=True).first.click()
    page.wait_for_url("**/artifacts/artifact/**", timeout=60_000)
    page.get_by_text(replacement).first.wait_for(timeout=30_000)
    assert "gpu042: replaced" in page.inner_text("body")
    page.screenshot(path=str(ARTIFACTS / "ui-replacement-story.png"), full_page=True)
