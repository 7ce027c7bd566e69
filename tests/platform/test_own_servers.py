"""remedy writes only into a Prefect server it started (and proved to be that one) or one the operator named, and
`remedy down` stops what `remedy up` / `remedy demo` started, and nothing else.

Real processes throughout: the CLI in a subprocess with a clean environment (no PREFECT_API_URL), a foreign HTTP
server that records every request it gets, remedy's own Prefect server (marked `prefect`: ~20 s to start)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.fixtures.prefect import clean_env
from tests.fixtures.stack import (  # noqa: F401 - a fixture
    LEAN_SERVER_ENV,
    NO_STACK_PROMETHEUS,
    prefect_db_template,
    seed_prefect_home,
)

ROOT = Path(__file__).resolve().parents[2]


class Foreign:
    """Someone else's server on a loopback port: answers 200 with `{}` to everything (so it even passes for a healthy
    Prefect API) and records each request's method and path."""

    def __init__(self, owner_answer: dict | None = None):
        self.requests: list[tuple[str, str]] = []
        owner = owner_answer
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                seen.append((self.command, self.path))
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                body = json.dumps(owner if owner is not None and self.path.startswith("/remedy/owner") else {})
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.requests if m not in ("GET", "HEAD", "OPTIONS")]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def foreign():
    server = Foreign()
    yield server
    server.close()


def stack_env(tmp_path: Path, *, prometheus: bool = False) -> dict[str, str]:
    """The environment the CLI runs in here: clean (no PREFECT_*/REMEDY_* of this process), with the Prefect server
    services no test here reads switched off, and no Prometheus for `remedy up` to start (tests/fixtures/stack.py)
    unless the test reads it (`prometheus=True`: the NFS audit under `remedy up`)."""
    env = clean_env(tmp_path) | LEAN_SERVER_ENV | {"PYTHONPATH": str(ROOT)}
    return env if prometheus else env | NO_STACK_PROMETHEUS


def remedy(tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = stack_env(tmp_path)
    return subprocess.run([sys.executable, "-m", "remedy.cli", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timeout)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.parametrize("command", [["demo"], ["up", "--sim-port", "0", "--receiver-port", "0"]])
def test_a_foreign_server_on_the_port_gets_nothing_written_and_the_operator_is_told(tmp_path, foreign, command):
    started = time.monotonic()
    proc = remedy(tmp_path, *command, "--prefect-port", str(foreign.port), "--workdir", "w", timeout=120)
    line = one_error_line(proc)
    assert proc.returncode == 2
    assert f"port {foreign.port} is in use by a Prefect server remedy did not start" in line
    assert "nothing was written to it" in line and "--prefect-port" in line
    assert foreign.writes() == []
    assert time.monotonic() - started < 30, "a taken port is known at once, not after a start-up timeout"
    assert not (tmp_path / "w" / "running.json").exists()


@pytest.mark.prefect
def test_a_real_prefect_server_start_on_4200_gets_nothing_from_the_demo(tmp_path, prefect_db_template):
    """Someone else's `prefect server start` on its default port 4200 (or, when 4200 is taken on this machine, on the
    port REMEDY_PREFECT_PORT names: the same code path): `remedy demo` writes no run, deployment or automation into
    it, and says so in one line."""
    from remedy.platform.prefect_server import DEFAULT_PORT, port_in_use
    from tests.fixtures.prefect import prefect_server_process

    port = None if port_in_use(DEFAULT_PORT) else DEFAULT_PORT
    someone_else = seed_prefect_home(tmp_path / "someone-else", prefect_db_template)
    with prefect_server_process(someone_else, plain=True, port=port) as api:
        port = int(api.rsplit(":", 1)[1].split("/")[0])

        def contents() -> tuple[int, int, int]:
            return (httpx.post(f"{api}/flow_runs/count", json={}, timeout=30).json(),
                    httpx.post(f"{api}/deployments/count", json={}, timeout=30).json(),
                    len(httpx.post(f"{api}/automations/filter", json={}, timeout=30).json()))

        before = contents()
        env = clean_env(tmp_path) | {"PYTHONPATH": str(ROOT)}
        if port != DEFAULT_PORT:
            env["REMEDY_PREFECT_PORT"] = str(port)
        proc = subprocess.run([sys.executable, "-m", "remedy.cli", "demo", "--workdir", "w"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        line = one_error_line(proc)
        assert proc.returncode == 2
        assert f"port {port} is in use by a Prefect server remedy did not start; nothing was written to it" in line
        assert contents() == before
    assert not (tmp_path / "w" / "running.json").exists()


def test_a_program_that_is_not_prefect_on_the_port_is_named_as_such(tmp_path):
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        proc = remedy(tmp_path, "demo", "--prefect-port", str(port), "--workdir", "w", timeout=120)
    assert proc.returncode == 2
    assert f"port {port} is in use by a program remedy did not start" in one_error_line(proc)


def test_up_names_the_flag_of_each_taken_port(tmp_path, foreign):
    proc = remedy(tmp_path, "up", "--sim-port", str(foreign.port), "--prefect-port", "0", "--workdir", "w")
    assert proc.returncode == 2
    assert f"port {foreign.port} is in use" in one_error_line(proc) and "--sim-port" in one_error_line(proc)
    assert foreign.writes() == []


def test_a_record_pointing_at_a_server_that_cannot_prove_it_is_ours_is_not_trusted(tmp_path, monkeypatch):
    """A stale running.json (remedy's server gone, its pid alive as something else, its port taken by another
    server that answers the owner check wrongly): use_server does not reuse it, forgets it, and says the port is
    taken."""
    from remedy.errors import RemedyError
    from remedy.platform import processes
    from remedy.platform.prefect_server import ROLE, use_server

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("REMEDY_PREFECT_PORT", raising=False)
    impostor = Foreign(owner_answer={"proof": "0" * 64})
    try:
        processes.record(tmp_path, ROLE, os.getpid(), port=impostor.port,
                         api_url=f"http://127.0.0.1:{impostor.port}/api", nonce="the-nonce-remedy-gave-its-server")
        with pytest.raises(RemedyError, match=f"port {impostor.port} is in use by a Prefect server remedy did not"):
            use_server(tmp_path, port=impostor.port)
        assert ("GET", "/remedy/owner") in [(m, p.split("?")[0]) for m, p in impostor.requests]
        assert impostor.writes() == []
        assert ROLE not in processes.read_state(tmp_path)
    finally:
        impostor.close()


def test_a_named_server_that_does_not_answer_is_one_line(tmp_path):
    proc = remedy(tmp_path, "demo", "--prefect-url", "http://127.0.0.1:9/api", "--workdir", "w")
    assert proc.returncode == 2
    assert "the Prefect API named by --prefect-url (http://127.0.0.1:9/api) does not answer" in one_error_line(proc)


def test_down_with_nothing_running_says_so_and_signals_nothing(tmp_path):
    """A record whose pid now belongs to another process (start time differs) is not signalled."""
    from remedy.platform import processes

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "var" / "stack").mkdir(parents=True)
        processes._write_state(tmp_path / "var" / "stack", {"remedy-up": {"pid": sleeper.pid, "start_time": 1}})
        proc = remedy(tmp_path, "down")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "nothing of remedy's is running (looked in var/stack, var/demo)"
        assert sleeper.poll() is None, "a process remedy did not start must not be signalled"
        assert not (tmp_path / "var" / "stack" / "running.json").exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :][0] != "Z"


def _ours(nonce: str, pgid: int) -> list[int]:
    """Live processes that carry the server's nonce in their environment, or sit in its process group."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or not _running(int(proc.name)):
            continue
        try:
            environ = (proc / "environ").read_bytes()
            group = os.getpgid(int(proc.name))
        except (OSError, ProcessLookupError):
            continue
        if nonce.encode() in environ or group == pgid:
            found.append(int(proc.name))
    return found


@pytest.mark.prefect
def test_demo_writes_to_its_own_server_reuses_it_and_down_leaves_no_process_of_ours(tmp_path, prefect_db_template):
    seed_prefect_home(tmp_path / "var" / "demo" / "prefect", prefect_db_template)
    proc = remedy(tmp_path, "demo", "--json", "--prefect-port", "0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["status"] == "replaced" and out["prefect_server"] == "remedy's own"
    record = json.loads((tmp_path / "var" / "demo" / "running.json").read_text())["prefect-server"]
    assert out["prefect_ui"] == record["api_url"].removesuffix("/api")
    runs = httpx.post(f"{record['api_url']}/flow_runs/filter", json={}, timeout=30).json()
    assert "replace gpu042 (XID 79)" in [r["name"] for r in runs], "the demo's run is in the server it printed"

    again = remedy(tmp_path, "demo", "--json", "--scenario", "xid94")
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["prefect_ui"] == out["prefect_ui"], "the running server of ours is reused"
    assert "starting remedy's own Prefect server" not in again.stderr

    assert _running(record["pid"]) and _ours(record["nonce"], record["pid"])
    down = remedy(tmp_path, "down")
    assert down.returncode == 0, down.stderr
    assert f"stopped remedy's Prefect server for var/demo (pid {record['pid']}" in down.stdout
    assert _ours(record["nonce"], record["pid"]) == []
    assert not (tmp_path / "var" / "demo" / "running.json").exists()
    assert remedy(tmp_path, "down").stdout.startswith("nothing of remedy's is running")


def _up_with_paused_runs(tmp_path: Path, template: Path):
    """`remedy up` (its own Prefect server on a free port), then a rack storm whose held runs pause for a person.
    Returns (the up process, its URLs, its server's record, the paused runs' ids).

    The rack's breaker acts on one failed node here (the default is two): a storm of two nodes then holds the second,
    so the test waits for one node's replacement and one held run instead of two replacements and three held runs
    (each a flow in `remedy up` and writes to its server: CPU this test does not need)."""
    seed_prefect_home(tmp_path / "var" / "stack" / "prefect", template)
    env = stack_env(tmp_path) | {"REMEDY_BREAKER__RACK__MAX_FAILURES": "1"}
    # SIGINT as a terminal's Ctrl-C delivers it: a test runner started in the background ignores SIGINT, and a child
    # inherits that (Python then installs no KeyboardInterrupt handler)
    up = subprocess.Popen([sys.executable, "-m", "remedy.cli", "up", "--json", "--prefect-port", "0", "--sim-port", "0",
                           "--receiver-port", "0"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=open(tmp_path / "up.err", "w"), text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    urls = json.loads(up.stdout.readline() or "{}")
    assert urls, (tmp_path / "up.err").read_text()[-3000:]
    record = json.loads((tmp_path / "var" / "stack" / "running.json").read_text())["prefect-server"]
    # rack-2: the breaker holds the second. The first through the CLI as an operator types it; the second straight to
    # the simulator's endpoint the CLI posts to (a CLI process costs 1 s CPU and up to 8 s at load)
    inject = remedy(tmp_path, "sim", "inject", "xid", "79", "--node", "gpu009", "--url", urls["simulator"])
    assert inject.returncode == 0, inject.stderr
    r = httpx.post(f"{urls['simulator']}/sim/inject", json={"kind": "xid", "node": "gpu010", "gpu": None,
                                                            "params": {"code": 79}}, timeout=30)
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 120
    paused: list[str] = []
    while not paused and time.monotonic() < deadline:
        time.sleep(1)
        runs = httpx.post(f"{urls['prefect_api']}/flow_runs/filter", json={}, timeout=30).json()
        paused = [r["id"] for r in runs if r["state_type"] == "PAUSED"]
    assert paused, "the storm's held runs pause for a person"
    return up, urls, record, paused


def _final_states(tmp_path: Path, run_ids: list[str]) -> dict[str, tuple[str, str]]:
    """Each run's last state (type, message) as remedy's Prefect server stored it, read from its SQLite database once
    the server has stopped. The stop follows the cancellation within milliseconds, so a poll of the API could miss
    it; what the server wrote before it stopped cannot be missed."""
    db = tmp_path / "var" / "stack" / "prefect" / "prefect.db"
    with contextlib.closing(sqlite3.connect(db)) as con:
        rows = con.execute("select r.id, r.state_type, coalesce(s.message, '') from flow_run r "
                           "left join flow_run_state s on s.id = r.state_id").fetchall()
    return {run_id: (state, message) for run_id, state, message in rows if run_id in run_ids}


def _assert_up_left_nothing(tmp_path: Path, up: subprocess.Popen, record: dict, paused: list[str]) -> None:
    """After `remedy up` has exited (stopped by `remedy down` or Ctrl-C): it exited 0, its paused runs were cancelled
    while the server still ran, and no process of its server nor its running.json is left."""
    assert up.returncode == 0, (tmp_path / "up.err").read_text()[-3000:]
    assert _ours(record["nonce"], record["pid"]) == []
    states = _final_states(tmp_path, paused)
    assert set(states) == set(paused) and {state for state, _ in states.values()} == {"CANCELLED"}, states
    assert not (tmp_path / "var" / "stack" / "running.json").exists()


def _clean_up(tmp_path: Path, up: subprocess.Popen) -> None:
    """After a test that failed half-way: nothing of its stack left running. A `remedy down` only where a record is
    left to act on (after a passing test there is none, and a CLI process is ~1 CPU s)."""
    if up.poll() is None:
        up.kill()
        up.wait()
    if (tmp_path / "var" / "stack" / "running.json").exists():
        remedy(tmp_path, "down")


@pytest.mark.prefect
def test_down_stops_up_which_cancels_its_paused_runs_and_stops_its_server(tmp_path, prefect_db_template):
    """`remedy up`, a rack storm whose held runs pause for a person, then `remedy down` from another terminal: the
    paused runs end Cancelled (no live Resume button), and nothing of ours is left running."""
    up, urls, record, paused = _up_with_paused_runs(tmp_path, prefect_db_template)
    try:
        down = remedy(tmp_path, "down")
        assert down.returncode == 0, down.stderr
        assert "stopped `remedy up` for var/stack" in down.stdout
        up.wait(timeout=30)
        _assert_up_left_nothing(tmp_path, up, record, paused)
    finally:
        _clean_up(tmp_path, up)


@pytest.mark.prefect
def test_ctrl_c_on_up_cancels_its_paused_runs_and_stops_what_it_started(tmp_path, prefect_db_template):
    """Ctrl-C is SIGINT to the foreground process: `remedy up` cancels its paused runs, stops its server and its
    parts, and leaves no record behind (so `remedy down` has nothing to do)."""
    up, urls, record, paused = _up_with_paused_runs(tmp_path, prefect_db_template)
    try:
        up.send_signal(signal.SIGINT)
        out, _ = up.communicate(timeout=60)
        _assert_up_left_nothing(tmp_path, up, record, paused)
        assert "cancelled" in out and "stopped remedy's Prefect server" in out
        for url in (urls["simulator"], urls["receiver"]):
            with pytest.raises(httpx.HTTPError):
                httpx.get(url, timeout=2)
        assert remedy(tmp_path, "down").stdout.startswith("nothing of remedy's is running")
    finally:
        _clean_up(tmp_path, up)


@pytest.mark.prefect
def test_down_after_a_killed_up_cancels_the_runs_it_left_and_stops_its_server(tmp_path, prefect_db_template):
    """`remedy up` killed outright (SIGKILL: no clean-up) leaves its server and its paused runs; `remedy down`
    cancels those runs ("stopped by remedy down") before it stops the server."""
    up, urls, record, paused = _up_with_paused_runs(tmp_path, prefect_db_template)
    try:
        up.send_signal(signal.SIGKILL)
        up.wait(timeout=10)
        assert _running(record["pid"]), "the server outlives a killed `remedy up`"
        down = remedy(tmp_path, "down")
        assert down.returncode == 0, down.stderr
        assert "run(s) `remedy up` for var/stack left open" in down.stdout
        assert f"stopped remedy's Prefect server for var/stack (pid {record['pid']}" in down.stdout
        assert _ours(record["nonce"], record["pid"]) == []
        states = _final_states(tmp_path, paused)
        assert set(states) == set(paused) and all(state == "CANCELLED" and message.startswith("stopped by remedy down")
                                                  for state, message in states.values()), states
        assert not (tmp_path / "var" / "stack" / "running.json").exists()
    finally:
        _clean_up(tmp_path, up)
