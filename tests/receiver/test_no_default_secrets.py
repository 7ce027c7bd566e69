"""No default secrets (issue 17, part 6): no receiver token unless configured; `remedy receiver serve` refuses a
non-loopback address without one (one line, exit 2) and on loopback runs but says so; the open-loop endpoint has
its own token; `remedy up`'s stack generates its tokens and its simulator's alerts carry the generated one."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from remedy.config import load_settings
from remedy.errors import RemedyError
from remedy.receiver.server import check_bind
from remedy.sim.alerts import make_alert, webhook_payload
from tests.approvals.helpers import remedy_env, run_receiver  # noqa: F401 - remedy_env is a fixture
from tests.fixtures.prefect import clean_env

ROOT = Path(__file__).resolve().parents[2]


def test_no_token_by_default(monkeypatch) -> None:
    for key in ("REMEDY_CONFIG", "REMEDY_RECEIVER__TOKEN", "REMEDY_RECEIVER__EXECUTE_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    s = load_settings()
    assert s.receiver.token.get_secret_value() == ""
    assert s.receiver.execute_token.get_secret_value() == ""
    assert "change-me" not in json.dumps(s.model_dump(mode="json"))


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "gpu-remedy-receiver"])
def test_only_loopback_without_a_token(host) -> None:
    with pytest.raises(RemedyError, match=f"refusing to serve alerts on {re.escape(host)} without a bearer token"):
        check_bind(host, "")
    assert check_bind(host, "a-token") == ""
    assert "loopback clients only" in check_bind("127.0.0.1", "")
    assert "loopback clients only" in check_bind("::1", "")


def _cli(tmp_path: Path, *args: str, env: dict | None = None, **kwargs) -> subprocess.Popen:
    base = clean_env(tmp_path) | {"PYTHONPATH": str(ROOT), "REMEDY_DB_URL": f"sqlite:///{tmp_path / 'ledger.db'}",
                                  "REMEDY_CLUSTER__MODE": "simulator"}
    return subprocess.Popen([sys.executable, "-m", "remedy.cli", *args], cwd=tmp_path, env=base | (env or {}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def test_serve_on_all_interfaces_without_a_token_refuses_to_start(tmp_path) -> None:
    proc = _cli(tmp_path, "receiver", "serve", "--host", "0.0.0.0", "--port", "0",
                env={"PREFECT_API_URL": "http://127.0.0.1:9/api"})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, (out, err)
    assert err.strip().splitlines() == [
        "remedy: error: receiver.token is not set: refusing to serve alerts on 0.0.0.0 without a bearer token "
        "(set REMEDY_RECEIVER__TOKEN, or bind 127.0.0.1)"]
    assert out == ""


def test_serve_on_loopback_without_a_token_runs_says_so_and_takes_loopback_alerts(tmp_path) -> None:
    from remedy.domain.model import Node
    from remedy.ledger import Ledger

    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        led.migrate()
        led.upsert_nodes([Node(name="gpu003", gpu_count=8)])
    # Prefect is not running: incidents wait in the ledger's outbox, which is all this test needs. Nor is the
    # cluster: a 0.25 s request timeout and no retries keep the receiver's wait for its node cache (2 x the timeout)
    # and its node reads short (20 s and 4 attempts by default); nothing listens on port 9, so a read is refused at once
    proc = _cli(tmp_path, "receiver", "serve", "--host", "127.0.0.1", "--port", "0",
                env={"PREFECT_API_URL": "http://127.0.0.1:9/api", "REMEDY_CLUSTER__SIMULATOR_URL": "http://127.0.0.1:9",
                     "REMEDY_CLUSTER__REQUEST_TIMEOUT_SECONDS": "0.25", "REMEDY_CLUSTER__API_RETRIES": "0"})
    try:
        warning = proc.stderr.readline()
        assert warning.startswith("remedy: warning: receiver.token is not set: taking alerts without a token, "
                                  "from loopback clients only"), warning
        line = proc.stdout.readline()
        url = re.search(r"on (http://127\.0\.0\.1:\d+/v1/alerts/alertmanager)", line).group(1)
        alert = make_alert({"alertname": "GpuXidError", "Hostname": "gpu003", "gpu": "1", "xid": "79"}, {})
        r = httpx.post(url, json=webhook_payload([alert]), timeout=30)
        assert r.status_code == 200 and r.json()["opened"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_execute_has_its_own_token(remedy_env) -> None:
    """Alertmanager's token does not let anyone run a remediation; no execute token configured refuses every call."""
    remedy_env(RECEIVER__TOKEN="alertmanager-token", RECEIVER__EXECUTE_TOKEN="")
    with run_receiver() as url:
        execute = f"{url}/v1/remediations/1/execute"
        r = httpx.post(execute, headers={"Authorization": "Bearer alertmanager-token"}, timeout=30)
        assert r.status_code == 503 and "execute_token is not configured" in r.json()["error"]
    remedy_env(RECEIVER__TOKEN="alertmanager-token", RECEIVER__EXECUTE_TOKEN="break-fix-token")
    with run_receiver() as url:
        execute = f"{url}/v1/remediations/1/execute"
        assert httpx.post(execute, headers={"Authorization": "Bearer alertmanager-token"},
                          timeout=30).status_code == 401
        r = httpx.post(execute, headers={"Authorization": "Bearer break-fix-token"}, timeout=30)
        assert r.status_code == 404 and "no remediation of incident 1" in r.json()["error"]
        # bad input with the right token: 4xx, never 500
        auth = {"Authorization": "Bearer break-fix-token"}
        for body in (b"[" * 100_000, b'{"approve": "yes"}', b'{"by": {"x": 1}}', b'"text"', b'{"reason": NaN}'):
            assert httpx.post(execute, content=body, headers=auth, timeout=30).status_code == 400, body
        huge = f"{url}/v1/remediations/{10**30}/execute"
        assert httpx.post(huge, headers=auth, timeout=30).status_code == 404


@pytest.mark.prefect
def test_the_embedded_stack_generates_tokens_and_wires_the_simulator(prefect_server, tmp_path) -> None:
    from prefect.settings import PREFECT_API_URL

    from remedy import runtime
    from remedy.platform.stack import start_stack
    from remedy.sim.faults import inject

    saved = dict(os.environ)  # the stack configures itself through the environment: restore all of it afterwards
    for key in ("REMEDY_RECEIVER__TOKEN", "REMEDY_RECEIVER__EXECUTE_TOKEN", "REMEDY_CONFIG"):
        os.environ.pop(key, None)
    try:
        st = start_stack(workdir=tmp_path / "stack", api_url=PREFECT_API_URL.value(), nodes=9, spares=1,
                         time_scale=0.01, fresh_ledger=True)
    except BaseException:
        os.environ.clear()
        os.environ.update(saved)
        raise
    try:
        token = runtime.settings().receiver.token.get_secret_value()
        execute_token = runtime.settings().receiver.execute_token.get_secret_value()
        assert len(token) >= 32 and len(execute_token) >= 32 and token != execute_token
        assert st.sim.cluster.alert_token == token
        alert = make_alert({"alertname": "GpuXidError", "Hostname": "gpu004", "gpu": "1", "xid": "48"}, {})
        assert httpx.post(st.receiver.alerts_url, json=webhook_payload([alert]), timeout=30).status_code == 401
        out = inject(st.sim.cluster, "xid", "gpu003", gpu=1, code=48)
        assert out["alert"]["posted"] is True and out["alert"]["status"] == 200, out["alert"]
        deadline = time.monotonic() + 30
        while not st.ledger.incidents(node="gpu003") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert st.ledger.incidents(node="gpu003")
        # no Alertmanager in this stack: the warning scan posts its findings to the stack's receiver
        assert runtime.settings().lemon.early_warning.scan.receiver_url == st.receiver.alerts_url
    finally:
        st.stop()
        os.environ.clear()
        os.environ.update(saved)
        runtime.reset()
