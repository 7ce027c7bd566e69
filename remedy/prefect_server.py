"""Find or start the local Prefect server the embedded stack and the demo use (SQLite under ./var/prefect).

A server that already answers on the URL is reused. Otherwise one is started detached, so the run stays visible
in the UI after the demo exits; `stop_server()` ends it.

The server started here is Prefect's own app (`create_app`: API, UI and services, as `prefect server start` runs
it) behind `ReplayRetryable`. On SQLite, concurrent writers make Prefect answer 503 (SQLITE_BUSY_SNAPSHOT: a
deferred transaction lost a write race and must restart; waiting cannot help), and Prefect's client then sleeps
2, 4, 8 … s before it retries: 2–15 s stalls on the alert → cordon path (docs/operations.md). So on SQLite the
wrapper lets one API write run at a time (SQLite has one writer anyway; the races were pure loss) and restarts,
a few milliseconds later, a request that still lost a race to a background service.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from remedy.errors import RemedyError

DEFAULT_PORT = 4200
REPLAYS_HEADER = "remedy-replays"  # on a response that needed replays: how many
log = logging.getLogger("remedy.prefect_server")


class ReplayRetryable:
    """ASGI wrapper that restarts a request the app answered with 503, instead of passing the 503 on.

    A 503 from Prefect's server means "retryable: the transaction was rolled back" (its exception handler sends
    503 only for SQLite busy/locked and dropped database connections), so running the request again is exactly
    what the client would do, minus the client's 2**n-second back-off. The request body is read once and
    replayed; a response other than 503 streams through untouched; after `attempts` tries the last 503 goes to the
    client, whose own retries still apply. WebSockets and lifespan pass through.

    one_writer (SQLite): requests that may write (not GET/HEAD/OPTIONS) take turns, so API writes no longer race each
    other; what that buys is measured by bench/prefect_sqlite_writes.py (numbers in docs/operations.md).
    """

    def __init__(self, app, *, attempts: int = 12, first_delay: float = 0.005, max_delay: float = 0.25,
                 one_writer: bool = False):
        self.app = app
        self.attempts = attempts
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.one_writer = asyncio.Lock() if one_writer else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        body = await _read_body(receive)  # before the lock: a slow upload must not hold up other writers
        if self.one_writer is not None and scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            async with self.one_writer:
                return await self._with_replays(scope, body, receive, send)
        return await self._with_replays(scope, body, receive, send)

    async def _with_replays(self, scope, body: bytes, receive, send):
        delay = self.first_delay
        for attempt in range(1, self.attempts + 1):
            last = attempt == self.attempts
            # a fresh copy each time: routing (Mount, APIRouter) writes into the scope it is given
            held = await self._try_once(dict(scope), _replay(body, receive), send, attempt, pass_503=last)
            if not held:
                return
            log.debug("503 on %s %s; replay %d after %.3f s", scope["method"], scope["path"], attempt, delay)
            # jittered, growing: two writers that collided should not collide again in lockstep
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, self.max_delay)

    async def _try_once(self, scope, receive, send, attempt: int, *, pass_503: bool) -> bool:
        """Run the app once. True if it answered 503 and the answer was held back (so the caller replays)."""
        held = False

        async def send_or_hold(message):
            nonlocal held
            if message["type"] == "http.response.start":
                if message["status"] == 503 and not pass_503:
                    held = True
                    return
                if attempt > 1:
                    headers = [*message.get("headers", []), (REPLAYS_HEADER.encode(), str(attempt - 1).encode())]
                    message = {**message, "headers": headers}
            if not held:
                await send(message)

        try:
            await self.app(scope, receive, send_or_hold)
        except Exception:
            # Starlette's ServerErrorMiddleware re-raises after its handler has answered (so the server can log
            # it): for a held 503 that error is the rolled-back race we are about to replay, not a failure.
            if not held:
                raise
        return held


async def _read_body(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive):
    """A `receive` that hands the app the buffered body once, then waits on the real one (for the disconnect)."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def serve(host: str, port: int) -> None:
    """Run Prefect's server app (API, UI and background services) behind `ReplayRetryable`, in this process."""
    import uvicorn
    from prefect.server.api.server import create_app
    from prefect.settings import PREFECT_SERVER_LOGGING_LEVEL, get_current_settings

    database = get_current_settings().server.database.connection_url
    sqlite = database is None or database.get_secret_value().startswith("sqlite")
    app = ReplayRetryable(create_app(final=True), one_writer=sqlite)
    print(f"Prefect server (remedy/prefect_server.py) on http://{host}:{port} — API /api, UI /; "
          f"{'SQLite: one API writer at a time, ' if sqlite else ''}503s replayed in the server", flush=True)
    uvicorn.run(app, host=host, port=port, log_level=PREFECT_SERVER_LOGGING_LEVEL.value().lower())


def server_command(port: int, host: str = "127.0.0.1") -> list[str]:
    return [sys.executable, "-m", "remedy.prefect_server", "--host", host, "--port", str(port)]


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
        server_command(port),
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m remedy.prefect_server",
                                     description="Prefect's server (API, UI, services) with 503 replay")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    serve(args.host, args.port)


if __name__ == "__main__":
    main()
