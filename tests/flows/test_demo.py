"""`remedy demo --json` end to end: simulator + Prefect server + replace_node flow through the real client.

The demo runs in this process, through `remedy.cli.main` as the `remedy` script calls it (argument parsing, the
umask, the exit code, stdout), against the session's Prefect server named by PREFECT_API_URL: a `remedy demo`
process would spend ~6 of its ~8 CPU s importing Prefect, the Kubernetes client and the flows again, and these
tests check what the demo does, not how Python starts (issue 28). `remedy demo` as its own process, with its own
Prefect server, keeps its test in tests/platform/test_own_servers.py; `remedy breaker status` and
`remedy xid explain` still run as processes here, reading what the demo left."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.prefect


def _prefect_env() -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    return os.environ | {"PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": ""}


def _run_demo(args: list[str], *, cwd: Path | None = None) -> tuple[int, str, str]:
    """`remedy demo ARGS` as the script runs it, in this process: (exit code, stdout, stderr). What the demo sets
    for itself (its cluster, ledger and approvers in the environment, remedy's cached settings, the working
    directory) is put back afterwards, as a process's exit would drop it."""
    from prefect.settings import PREFECT_API_URL

    from remedy import runtime
    from remedy.cli import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ["PREFECT_API_URL"] = PREFECT_API_URL.value()  # the operator's named server: the session's
        os.environ.pop("REMEDY_DB_URL", None)
        runtime.reset()
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["demo", *args])
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        runtime.reset()
        context = sys.modules.get("prefect.context")
        if context is not None:  # the demo pointed Prefect's global settings at the server: back to this env's
            context.refresh_global_settings_context()
    return code, out.getvalue(), err.getvalue()


def _demo(tmp_path, *args) -> dict:
    code, out, err = _run_demo(["--json", "--workdir", str(tmp_path), *args])
    assert code == 0, err[-3000:]
    return json.loads(out)


@pytest.fixture(scope="module")
def xid79_demo(prefect_server, tmp_path_factory) -> dict:
    """`remedy demo --json` as the operator first runs it (XID 79), run once for the tests that read its outcome:
    they only read it."""
    return _demo(tmp_path_factory.mktemp("xid79-demo"))


def test_demo_json_replaces_the_failed_node(xid79_demo):
    out = xid79_demo
    assert out["status"] == "replaced"
    assert out["node"] == "gpu042" and out["replacement"]
    assert out["job"] == {"ready": 60, "desired": 60}
    steps = [row["step"] for row in out["timeline"]]
    assert steps[:5] == ["detected", "cordoned", "drained", "spare ready", "job resumed"]
    times = [row["since_detection_s"] for row in out["timeline"]]
    assert times == sorted(times)
    kinds = [a["kind"] for a in out["actions"]]
    assert {"cordon_node", "drain_node", "taint_node", "untaint_node", "set_state_active"} <= set(kinds)
    assert all(a["outcome"] == "succeeded" for a in out["actions"])
    assert [i["xid"] for i in out["incidents"]] == [79]


def test_demo_dry_run_changes_nothing(prefect_server, tmp_path):
    code, stdout, stderr = _run_demo(["--json", "--dry-run", "--workdir", str(tmp_path)])
    assert code == 0, stderr[-3000:]
    out = json.loads(stdout)
    assert out["status"] == "planned"
    assert out["job"]["desired"] == 60
    assert out["actions"] and all(a["outcome"] == "planned" and a["dry_run"] for a in out["actions"])


def test_demo_preempt_approved_frees_a_session_node_for_the_job(prefect_server, tmp_path):
    """Seed 002 §4.3.5: 63 nodes, 60 training, no ready spare, 3 sessions; the operator approves the preemption."""
    out = _demo(tmp_path, "--scenario", "preempt", "--approve")
    assert out["status"] == "preempted", out.get("why")
    assert len(out["sessions_before"]) == 3 and len(out["sessions_after"]) == 2
    (victim,) = out["preempted"]
    assert out["replacement"] == out["sessions_before"][victim]
    assert out["job"] == {"ready": 60, "desired": 60}
    assert [a["kind"] for a in out["approvals"]] == ["preempt"]
    assert all(a["decision"] == "approve" for a in out["approvals"])
    assert [a["kind"] for a in out["actions"]].count("preempt_workload") == 1
    assert "preempted" in [row["step"] for row in out["timeline"]]


def test_demo_preempt_denied_keeps_the_sessions(prefect_server, tmp_path):
    out = _demo(tmp_path, "--scenario", "preempt", "--deny")
    assert out["status"] == "preemption-denied", out.get("why")
    assert out["sessions_after"] == out["sessions_before"] and not out["preempted"]
    assert out["job"] == {"ready": 59, "desired": 60}
    assert [(a["kind"], a["decision"]) for a in out["approvals"]] == [("preempt", "deny")]
    assert "preempt_workload" not in [a["kind"] for a in out["actions"]]
    assert [i["status"] for i in out["incidents"]] == ["escalated"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = _prefect_env()
    env.pop("PREFECT_FLOWS_HEARTBEAT_FREQUENCY")
    return subprocess.run([sys.executable, "-m", "remedy.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def _runs_of() -> list[dict]:
    import httpx
    from prefect.settings import PREFECT_API_URL

    return httpx.post(f"{PREFECT_API_URL.value()}/flow_runs/filter", json={"limit": 200}, timeout=30).json()


def test_the_xid79_demo_tells_the_story_xid_explain_and_triage_tell(xid79_demo):
    """Issue 16: `remedy xid explain 79` (reboot is the fix; with a spare ready triage replaces first, then reboots
    off the critical path) and the demo agree, because the demo runs triage itself."""
    explained = json.loads(_cli("xid", "explain", "79", "--json").stdout)
    assert explained["path"] == "reboot" and explained["triage"]["with_spare"] == "replace"
    out = xid79_demo
    assert out["choice"]["option"] == explained["triage"]["with_spare"]
    assert out["path"] == "replace" and out["status"] == "replaced"
    assert [s["step"] for s in out["recovery"]["steps"]] == [explained["path"]], "the catalog's fix, off the path"
    assert out["recovery"]["status"] == "returned-to-spares"


def test_with_no_spare_the_xid145_demo_resets_in_place_as_explain_says(prefect_server, tmp_path):
    explained = json.loads(_cli("xid", "explain", "145", "--json").stdout)
    out = _demo(tmp_path, "--scenario", "xid145")
    assert out["choice"]["option"] == explained["triage"]["without_spare"] == "reset-gpu"
    assert out["status"] == "fixed" and out["path"] == "reset-gpu" and not out.get("recovery")


def test_a_dry_run_says_would_prints_its_time_scale_and_every_run_is_tagged(prefect_server, tmp_path):
    before = {r["id"] for r in _runs_of()}
    code, stdout, stderr = _run_demo(["--dry-run", "--workdir", str(tmp_path)])
    assert code == 0, stderr[-3000:]
    assert "DRY RUN: nothing was changed" in stdout
    assert "would cordon" in stdout and "would drain" in stdout
    assert "\ncordoned " not in stdout and "\ndrained " not in stdout
    assert "time scale 0.05" in stdout and "time scale 0.05" in stderr
    runs = [r for r in _runs_of() if r["id"] not in before]
    assert runs and all("dry-run" in r["tags"] and "demo" in r["tags"] for r in runs), \
        [(r["name"], r["tags"]) for r in runs]
    remediation = [r for r in runs if r["name"].startswith(("replace ", "fix ", "recover ", "escalate "))]
    assert remediation and all("node:gpu042" in r["tags"] and any(t.startswith("rack:") for t in r["tags"])
                               for r in remediation), \
        [(r["name"], r["tags"]) for r in remediation]


def test_breaker_status_after_the_storm_demo_shows_the_open_breakers(prefect_server, tmp_path):
    """The operator runs the rack-storm demo (the held runs' question denied), then `remedy breaker status` from the
    same directory: it reads the demo's ledger, says so, and lists the breaker the storm left open (exit 1)."""
    code, stdout, stderr = _run_demo(["--json", "--scenario", "rack-storm", "--deny"], cwd=tmp_path)
    assert code in (0, 1) and stdout.strip(), (code, stderr[-3000:])
    assert json.loads(stdout)["tripped"], "the storm trips a breaker"
    env = _prefect_env()
    env.pop("PREFECT_FLOWS_HEARTBEAT_FREQUENCY")
    env.pop("REMEDY_DB_URL", None)
    status = subprocess.run([sys.executable, "-m", "remedy.cli", "breaker", "status"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert status.returncode == 1, status.stdout + status.stderr  # a breaker not closed: a finding
    lines = status.stdout.splitlines()
    assert lines[0].startswith("ledger: sqlite:///var/demo/ledger.db"), lines[0]
    assert "all breakers closed" not in status.stdout
    assert any("rack-2" in line and "open" in line for line in lines), status.stdout
    assert not (tmp_path / "gpu-remedy.db").exists()
