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
