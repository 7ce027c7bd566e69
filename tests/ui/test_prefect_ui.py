"""What the operator sees: after a demo incident, headless Chromium (Debian's package, driven by Playwright)
finds the replacement run by its name in the Prefect UI, opens it, opens its timeline artifact and reads the
steps. Screenshots land in test-artifacts/ (gitignored).

The UI comes from a real `prefect server start` on a free port (the test harness serves the API only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.fixtures.prefect import clean_env
from tests.ui import driver

pytestmark = [pytest.mark.prefect, pytest.mark.servers]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
RUN_NAME = "replace gpu042 (XID 79)"


@pytest.fixture
def prefect_ui(ui_prefect_api):
    """(UI URL, API URL) of a real Prefect server with its UI (the UI tests' own: tests/ui/conftest.py)."""
    return ui_prefect_api.removesuffix("/api"), ui_prefect_api


def test_operator_finds_the_replacement_run_and_its_timeline(prefect_ui, tmp_path):
    driver.need_browser()
    ui, api = prefect_ui

    demo = subprocess.run(
        [sys.executable, "-m", "remedy.cli", "demo", "--json", "--workdir", str(tmp_path / "demo")],
        env=clean_env(tmp_path) | {"PREFECT_API_URL": api}, capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr[-3000:]
    outcome = json.loads(demo.stdout)
    assert outcome["status"] == "replaced" and outcome["prefect_ui"] == ui
    replacement = outcome["replacement"]
    runs = httpx.post(f"{api}/flow_runs/filter", json={"flow_runs": {"name": {"any_": [RUN_NAME]}}}).json()
    assert len(runs) == 1, runs
    run_id = runs[0]["id"]

    ARTIFACTS.mkdir(exist_ok=True)
    with driver.browser_page(args=driver.TEST_CHROMIUM_ARGS) as page:  # opened once the run is there to see
        # 1. The runs list: the run is found by the name that says what happened.
        page.goto(f"{ui}/runs", wait_until="domcontentloaded")
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
