"""Find or start the local Prefect server the embedded stack and the demo use (SQLite under ./var/prefect).

A server that already answers on the URL is reused. Otherwise one is started detached, so the run stays visible
in the UI after the demo exits; `stop_server()` ends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from remedy.errors import RemedyError

DEFAULT_PORT = 4200


def healthy(api_url: str, timeout: float = 2.0) -> bool:
    try:
        return httpx.get(f"{api_url.rstrip('/')}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def offline_env(home: Path) -> dict[str, str]:
    """Environment for a server and clients on a machine without internet: no telemetry, local home."""
    return {
        "PREFECT_HOME": str(home),
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    }


def ensure_server(workdir: Path, port: int = DEFAULT_PORT, timeout: float = 150.0) -> str:
    """Return the API URL of a healthy server on 127.0.0.1:port, starting one if none answers."""
    api_url = f"http://127.0.0.1:{port}/api"
    if healthy(api_url):
        return api_url
    home = workdir / "prefect"
    home.mkdir(parents=True, exist_ok=True)
    env = os.environ | offline_env(home)
    env.pop("PREFECT_API_URL", None)
    env["PREFECT_UI_API_URL"] = api_url  # the UI calls the API on this URL, not on --port
    log = open(home / "server.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    (home / "server.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RemedyError(f"Prefect server exited with code {proc.returncode}; see {home / 'server.log'}")
        if healthy(api_url):
            return api_url
        time.sleep(0.5)
    raise RemedyError(f"Prefect server did not become healthy on {api_url} within {timeout:.0f} s; see {home / 'server.log'}")


def stop_server(workdir: Path) -> bool:
    pid_file = workdir / "prefect" / "server.pid"
    if not pid_file.exists():
        return False
    try:
        os.killpg(int(pid_file.read_text()), signal.SIGTERM)
    except (ProcessLookupError, ValueError, PermissionError):
        pass
    pid_file.unlink(missing_ok=True)
    return True
