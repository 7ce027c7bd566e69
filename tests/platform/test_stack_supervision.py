"""`remedy up` is supervised and consistent: a Prefect server that dies stops the stack with one line; the ledger
starts fresh with the simulator's new cluster (the last one kept, said in the banner); a port left in TIME_WAIT
by the last session is free. Real processes: the CLI in a subprocess, remedy's own Prefect server."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from remedy.platform.prefect_server import port_in_use
from tests.fixtures.prefect import clean_env
from tests.fixtures.stack import (  # noqa: F401 - a fixture
    LEAN_SERVER_ENV,
    NO_STACK_PROMETHEUS,
    prefect_db_template,
    seed_prefect_home,
)

ROOT = Path(__file__).resolve().parents[2]


def _time_wait_port() -> int:
    """A loopback port whose listener is closed and whose accepted connection, closed by the server side first,
    sits in TIME_WAIT: what a stack stopped a moment ago leaves."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = srv.accept()
    conn.close()  # the server closes first: its end goes to TIME_WAIT
    client.recv(1)
    client.close()
    srv.close()
    return port


def test_a_port_in_time_wait_is_not_in_use_but_a_listener_is():
    port = _time_wait_port()
    plain = socket.socket()
    try:
        with pytest.raises(OSError):  # the old check's bind (no SO_REUSEADDR) called this port taken
            plain.bind(("127.0.0.1", port))
    finally:
        plain.close()
    assert port_in_use(port) is False
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert port_in_use(listener.getsockname()[1]) is True


@pytest.mark.prefect
def test_up_starts_ledger_fresh_and_stops_in_one_line_when_its_prefect_server_dies(tmp_path, prefect_db_template):
    old = tmp_path / "var" / "stack" / "ledger.db"
    old.parent.mkdir(parents=True)
    with sqlite3.connect(old) as db:  # last session's ledger: kept beside the new one, never read by it
        db.execute("create table last_session (x)")
    seed_prefect_home(tmp_path / "var" / "stack" / "prefect", prefect_db_template)  # tests/fixtures/stack.py
    env = clean_env(tmp_path) | LEAN_SERVER_ENV | NO_STACK_PROMETHEUS | {"PYTHONPATH": str(ROOT)}
    up = subprocess.Popen([sys.executable, "-m", "remedy.cli", "up", "--prefect-port", "0", "--sim-port", "0",
                           "--receiver-port", "0"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        banner = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = up.stdout.readline()
            if not line:
                break
            banner.append(line)
            if line.startswith("Ctrl-C"):
                break
        text = "".join(banner)
        assert "Ctrl-C" in text, text + up.stderr.read() if up.poll() is not None else text
        ledger_line = next(line for line in banner if line.startswith("ledger:"))
        assert "start fresh each session" in ledger_line and "ledger.previous.db" in ledger_line
        with sqlite3.connect(old.with_name("ledger.previous.db")) as db:
            assert db.execute("select name from sqlite_master where name='last_session'").fetchone()
        with sqlite3.connect(old) as db:
            assert not db.execute("select name from sqlite_master where name='last_session'").fetchone()
        import json

        record = json.loads((tmp_path / "var" / "stack" / "running.json").read_text())["prefect-server"]
        os.killpg(record["pid"], signal.SIGKILL)  # the server dies under the stack
        killed = time.monotonic()
        out, err = up.communicate(timeout=120)
        took = time.monotonic() - killed
        assert took < 30, f"noticed and stopped within seconds, not {took:.0f} s: {out[-2000:]} {err[-2000:]}"
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert up.returncode == 1
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"remedy up: remedy's Prefect server ({record['api_url'].removesuffix('/api')}, pid "
                               f"{record['pid']}) exited") and lines[0].endswith("stopping the stack")
    assert "stopping…" in out


@pytest.mark.prefect
@pytest.mark.parametrize("how", ["its thread ended", "stopped"])
def test_a_simulator_that_stops_under_up_is_one_line(prefect_server, how):
    """The simulator is the other part `remedy up` watches: its serving thread ending (what a crash in it leaves) or
    the server stopped is reported at once (not waited out for the grace a slow answer gets), in one line, while
    the Prefect server still answers."""
    import threading
    from types import SimpleNamespace

    from prefect.settings import PREFECT_API_URL

    from remedy.platform.stack import supervise
    from remedy.sim.server import SimServer

    api = PREFECT_API_URL.value()
    sim = SimServer().start()
    url = sim.url
    stack = SimpleNamespace(api_url=api, sim=sim)
    server = SimpleNamespace(owned=False, ui_url=api.removesuffix("/api"))
    threading.Timer(1.0, sim._httpd.shutdown if how == "its thread ended" else sim.stop).start()
    started = time.monotonic()
    try:
        said = supervise(stack, server, every=0.2, grace=60)  # a grace this long: only a part gone can end it
    finally:
        sim.stop()
    # stop() ends the thread before it lets go of the URL: a check in between still names it
    assert said in ({f"the cluster simulator ({url}) stopped"} if how == "its thread ended"
                    else {"the cluster simulator stopped", f"the cluster simulator ({url}) stopped"}), said
    assert time.monotonic() - started < 30


@pytest.mark.prefect
def test_ctrl_c_under_a_pipe_that_closed_still_stops_everything(tmp_path, prefect_db_template):
    """`remedy up | tee up.log`, then Ctrl-C: the terminal's SIGINT ends tee too, so `remedy up` writes its
    'stopping…' into a closed pipe. It still stops its Prefect server and its parts (it used to die on the
    BrokenPipeError and leave them running for `remedy down`)."""
    import json

    seed_prefect_home(tmp_path / "var" / "stack" / "prefect", prefect_db_template)  # tests/fixtures/stack.py
    env = clean_env(tmp_path) | LEAN_SERVER_ENV | NO_STACK_PROMETHEUS | {"PYTHONPATH": str(ROOT)}
    up = subprocess.Popen([sys.executable, "-m", "remedy.cli", "up", "--prefect-port", "0", "--sim-port", "0",
                           "--receiver-port", "0"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=open(tmp_path / "up.err", "w"), text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = up.stdout.readline()
            if not line or line.startswith("Ctrl-C"):
                break
        assert line.startswith("Ctrl-C"), (tmp_path / "up.err").read_text()[-3000:]
        record = json.loads((tmp_path / "var" / "stack" / "running.json").read_text())["prefect-server"]
        up.stdout.close()  # the reader (tee) is gone
        up.send_signal(signal.SIGINT)
        up.wait(timeout=90)
        err = (tmp_path / "up.err").read_text()
        assert "Traceback" not in err and up.returncode == 0, err[-3000:]
        assert not (tmp_path / "var" / "stack" / "running.json").exists(), "nothing is left for `remedy down`"
        assert not _alive(record["pid"]), "remedy's Prefect server is stopped"
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        if (tmp_path / "var" / "stack" / "running.json").exists():  # a test that failed half-way left its stack
            subprocess.run([sys.executable, "-m", "remedy.cli", "down"], cwd=tmp_path, env=env, capture_output=True,
                           timeout=120)


def _alive(pid: int) -> bool:
    """Running, not a zombie nobody reaped (a server whose parent exited is reparented)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:][0] != "Z"
