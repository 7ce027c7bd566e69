"""`remedy demo --json` end to end: simulator + Prefect server + replace_node flow through the real client."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.prefect


def _prefect_env() -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    return os.environ | {"PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": ""}


def test_demo_json_replaces_the_failed_node(prefect_server, tmp_path):
    env = _prefect_env()
    env.pop("PREFECT_FLOWS_HEARTBEAT_FREQUENCY")
    proc = subprocess.run(
        [sys.executable, "-m", "remedy.cli", "demo", "--json", "--workdir", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
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
    env = _prefect_env()
    env.pop("PREFECT_FLOWS_HEARTBEAT_FREQUENCY")
    proc = subprocess.run(
        [sys.executable, "-m", "remedy.cli", "demo", "--json", "--dry-run", "--workdir", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["status"] == "planned"
    assert out["job"]["desired"] == 60
    assert out["actions"] and all(a["outcome"] == "planned" and a["dry_run"] for a in out["actions"])


def _demo(tmp_path, *args) -> dict:
    env = _prefect_env()
    env.pop("PREFECT_FLOWS_HEARTBEAT_FREQUENCY")
    proc = subprocess.run([sys.executable, "-m", "remedy.cli", "demo", "--json", "--workdir", str(tmp_path), *args],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


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
