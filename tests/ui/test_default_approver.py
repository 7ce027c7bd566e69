"""The first approval in a minute (issue 33): `remedy demo --scenario rack-storm` without --approve/--deny names
the local user as the approver, waits for a person, and the person answers the Prefect UI's Resume form by picking
their name from the list; the demo then finishes. Real parts: the demo CLI in a subprocess (the simulator, the
flows) on the UI tests' Prefect server (tests/ui/conftest.py: named by PREFECT_API_URL, so the demo does not start
one of its own; tests/platform/test_own_servers.py starts the demo's own), Debian's Chromium through Playwright. A name outside the list is
refused by the Prefect server itself (the form's schema), before the run sees it."""

from __future__ import annotations

import getpass
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from remedy.approvals.model import ANSWERED_ELSEWHERE
from tests.fixtures.prefect import clean_env
from tests.ui import driver as ui

pytestmark = [pytest.mark.prefect, pytest.mark.servers]
ROOT = Path(__file__).resolve().parents[2]


def test_rack_storm_waits_for_the_local_user_who_answers_in_the_form(tmp_path, ui_prefect_api):
    ui.need_browser()
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

        # each look is a filter and a read per paused run on the demo's server, which is busy running the storm
        run = ui.wait_until("a held run to pause for a person", paused, timeout=300, every=1.0)[0]
        # the server refuses a name that is not on the list: the form's schema lists the approvers
        bad = httpx.post(f"{api}/flow_runs/{run['id']}/resume", timeout=30,
                         json={"run_input": {"decision": "approve", "approver": "mallory", "reason": ""}}).json()
        assert bad["status"] == "REJECT" and "mallory" in bad["details"]["reason"], bad
        with ui.browser_page(args=ui.TEST_CHROMIUM_ARGS) as page:
            ui.open_run(page, ui.UiStack(ui=ui_url, api=api, sim=None, home=tmp_path), run["id"], "Paused")
            dialog = ui.open_resume_form(page)
            assert ui.list_options(dialog, "Approver") == [me, ANSWERED_ELSEWHERE]
            ui.fill_form(dialog, decision="approve", approver=me, reason="rack-2 is one PDU: go on")
            ui.submit(dialog)
            # the click only sends the answer: the page stays open until the server has it (the run leaves this
            # pause), or closing the browser could drop the request
            ui.wait_until("the form's answer to reach the server",
                          lambda: _state_id(api, run["id"]) != run["state"]["id"], timeout=120, every=0.25)
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
