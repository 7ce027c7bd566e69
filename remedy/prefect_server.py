"""Start, find and stop the Prefect server the embedded stack and the demo use (SQLite under <workdir>/prefect).

remedy writes only into a Prefect server it started or one the operator named (`use_server`): a server it starts
gets a secret nonce and answers a challenge with it (`OwnerProof`), so a server that merely answers on the port,
someone's own `prefect server start` on 4200 for one, is told apart before anything is written. The server runs
detached, so the demo's runs stay visible in the UI after it exits; it is recorded in <workdir>/running.json and
`remedy down` (`stop_server()`) ends it.

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
import hashlib
import hmac
import json
import logging
import os
import random
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs

import httpx

from remedy.domain.durations import human_duration
from remedy.errors import RemedyError

DEFAULT_PORT = 4200
PORT_ENV = "REMEDY_PREFECT_PORT"  # the port remedy's own server takes when --prefect-port is not given
NONCE_ENV = "REMEDY_PREFECT_SERVER_NONCE"  # handed to the server it starts; proves it is ours (OwnerProof)
OWNER_PATH = "/remedy/owner"
ROLE = "prefect-server"  # its record in the workdir's running.json (remedy.processes)
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


class OwnerProof:
    """ASGI wrapper answering `GET /remedy/owner?challenge=X` with HMAC-SHA256(nonce, X), so the process that started
    this server (and holds the nonce) can tell it from any other server on the port before writing anything."""

    def __init__(self, app, nonce: str):
        self.app = app
        self.nonce = nonce

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != OWNER_PATH:
            return await self.app(scope, receive, send)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        body = json.dumps({"proof": owner_proof(self.nonce, query.get("challenge", [""])[0]),
                           "pid": os.getpid()}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


def owner_proof(nonce: str, challenge: str) -> str:
    return hmac.new(nonce.encode(), challenge.encode(), hashlib.sha256).hexdigest()


def serve(host: str, port: int) -> None:
    """Run Prefect's server app (API, UI and background services) behind `ReplayRetryable`, in this process."""
    import uvicorn
    from prefect.server.api.server import create_app
    from prefect.settings import PREFECT_SERVER_LOGGING_LEVEL, get_current_settings

    database = get_current_settings().server.database.connection_url
    sqlite = database is None or database.get_secret_value().startswith("sqlite")
    app = ReplayRetryable(create_app(final=True), one_writer=sqlite)
    nonce = os.environ.pop(NONCE_ENV, "")  # out of the environment: Prefect's subprocesses need not see it
    if nonce:
        app = OwnerProof(app, nonce)
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


def point_clients_at(api_url: str, extra_env: dict[str, str] | None = None) -> None:
    """Make this process's Prefect clients talk to api_url. Prefect reads its settings from the environment once,
    when it is first imported (its global settings context): a process that imported it earlier, e.g. for the demo's
    flows, would otherwise keep the settings of that moment and quietly start a temporary server of its own."""
    os.environ.update(extra_env or {})
    os.environ["PREFECT_API_URL"] = api_url
    context = sys.modules.get("prefect.context")
    if context is not None:
        context.refresh_global_settings_context()


@dataclass(frozen=True)
class PrefectServer:
    """The Prefect API a command writes to, and why it may: remedy started it (`owned`), or the operator named it."""

    api_url: str
    owned: bool  # started by remedy for this workdir (proved by its nonce); False: named by the operator
    source: str  # "started", "already running", "PREFECT_API_URL", "--prefect-url"
    pid: int | None = None

    @property
    def ui_url(self) -> str:
        return self.api_url.removesuffix("/api")


def verify_owner(api_url: str, nonce: str, timeout: float = 2.0) -> bool:
    """Does the server at api_url hold `nonce` (so it is the one remedy started)? A fresh challenge each time."""
    challenge = secrets.token_hex(16)
    base = api_url.rstrip("/").removesuffix("/api")
    try:
        answer = httpx.get(f"{base}{OWNER_PATH}", params={"challenge": challenge}, timeout=timeout)
        proof = answer.json().get("proof", "") if answer.status_code == 200 else ""
    except (httpx.HTTPError, ValueError, AttributeError):
        return False
    return isinstance(proof, str) and hmac.compare_digest(proof, owner_proof(nonce, challenge))


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Something listens on host:port (or holds it so we could not bind it).

    The trial bind sets SO_REUSEADDR, as every server remedy starts does (uvicorn, Prefect's), so connections of a
    stack stopped a moment ago, left in TIME_WAIT for ~60 s, do not count as a program holding the port."""
    with socket.socket() as probe:
        probe.settimeout(0.5)
        if probe.connect_ex((host, port)) == 0:
            return True
    with socket.socket() as trial:
        trial.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            trial.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_taken_message(port: int, flag: str, env: str | None = None) -> str:
    """One line: which port, that nothing was written to it, and how to choose another."""
    from remedy import processes

    for workdir in processes.DEFAULT_WORKDIRS:  # remedy's own server for the other workdir (up vs demo)?
        record = processes.read_state(workdir).get(ROLE)
        if record and record.get("port") == port and processes.alive(record):
            return (f"port {port} is in use by remedy's Prefect server for {workdir}; choose another port with {flag} "
                    f"PORT (0 = any free port), or use that server with PREFECT_API_URL={record.get('api_url')}")
    what = "a program remedy did not start"
    if flag == "--prefect-port" and healthy(f"http://127.0.0.1:{port}/api", timeout=1.0):
        what = "a Prefect server remedy did not start"
    alt = f" or {env}" if env else ""
    named = "; to use that server instead, name it with PREFECT_API_URL" if "Prefect server" in what else ""
    return (f"port {port} is in use by {what}; nothing was written to it. Choose another port with {flag} PORT{alt} "
            f"(0 = any free port){named}")


def use_server(workdir: Path, *, port: int | None = None, named_url: str | None = None,
               named_by: str = "--prefect-url", say=None, timeout: float = 150.0) -> PrefectServer:
    """The Prefect API for `remedy up` / `remedy demo`, verified before anything is written to it.

    - the operator named one (`--prefect-url`, else $PREFECT_API_URL): that one, if it answers;
    - else the server remedy started earlier for this workdir, if it is still running and proves it holds the
      nonce remedy gave it (a server that took over its port cannot);
    - else a new one on `port` (default $REMEDY_PREFECT_PORT, else 4200; 0 = any free port). A port in use is one
      clear line naming the port and the flag, at once: remedy never writes into a server it did not start.
    """
    from remedy import processes

    if not named_url and os.environ.get("PREFECT_API_URL"):
        named_url, named_by = os.environ["PREFECT_API_URL"], "PREFECT_API_URL"
    if named_url:
        named_url = named_url.rstrip("/")
        if not named_url.endswith("/api"):
            raise RemedyError(f"{named_by}={named_url}: a Prefect API URL ends in /api "
                              "(e.g. http://127.0.0.1:4200/api)")
        if not healthy(named_url):
            raise RemedyError(f"the Prefect API named by {named_by} ({named_url}) does not answer; start it, or unset "
                              f"{named_by} and remedy starts its own server")
        return PrefectServer(named_url, owned=False, source=named_by)

    if port is None and PORT_ENV in os.environ:
        port = configured_port()
    record = processes.read_state(workdir).get(ROLE)
    if record and processes.alive(record) and verify_owner(record.get("api_url", ""), record.get("nonce", "")):
        if port in (None, 0, record.get("port")):
            return PrefectServer(record["api_url"], owned=True, source="already running", pid=record["pid"])
        raise RemedyError(f"remedy's Prefect server for {workdir} already runs on port {record['port']}; use "
                          f"--prefect-port {record['port']}, or stop it first with `remedy down`")
    if record:  # gone, or something else answers there now: the record is stale
        processes.forget(workdir, ROLE)
    port = DEFAULT_PORT if port is None else free_port() if port == 0 else port
    if port_in_use(port):
        raise RemedyError(port_taken_message(port, "--prefect-port", PORT_ENV))
    if say:
        say(f"starting remedy's own Prefect server on port {port} (first start takes ~20 s)…")
    return start_server(workdir, port, timeout=timeout)


def configured_port() -> int:
    raw = os.environ.get(PORT_ENV)
    if raw is None:
        return DEFAULT_PORT
    try:
        port = int(raw)
    except ValueError:
        raise RemedyError(f"{PORT_ENV}={raw!r}: not a port number") from None
    if not 0 <= port <= 65535:
        raise RemedyError(f"{PORT_ENV}={port}: a port is 0..65535 (0 = any free port)")
    return port


def start_server(workdir: Path, port: int, timeout: float = 150.0) -> PrefectServer:
    """Start remedy's Prefect server on 127.0.0.1:port (detached: it outlives the demo so its runs stay visible),
    record it in workdir's state file, and return once it answers AND proves it is the process we started."""
    from remedy import processes

    api_url = f"http://127.0.0.1:{port}/api"
    home = workdir / "prefect"
    from remedy.domain.filemodes import PRIVATE_UMASK, private_dir, private_file

    private_dir(home)  # Prefect's database and settings live here: 0700
    nonce = secrets.token_hex(32)
    env = os.environ | offline_env(home)
    env.pop("PREFECT_API_URL", None)
    env["PREFECT_UI_API_URL"] = api_url  # the UI calls the API on this URL, not on --port
    env[NONCE_ENV] = nonce
    log_path = private_file(home / "server.log")
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(  # its database (and -wal/-shm) born 0600, whatever our caller's umask
            server_command(port), umask=PRIVATE_UMASK,
            env=env, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    entry = processes.record(workdir, ROLE, proc.pid, port=port, api_url=api_url, nonce=nonce, log=str(log_path))
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                if "address already in use" in _tail(log_path).lower():
                    raise RemedyError(port_taken_message(port, "--prefect-port", PORT_ENV))
                raise RemedyError(f"Prefect server exited with code {proc.returncode}; see {log_path}")
            if healthy(api_url, timeout=1.0):
                if verify_owner(api_url, nonce):
                    return PrefectServer(api_url, owned=True, source="started", pid=proc.pid)
                # something answers that cannot prove it is ours: another server took the port first
                raise RemedyError(port_taken_message(port, "--prefect-port", PORT_ENV))
            time.sleep(0.3)
        raise RemedyError(f"Prefect server did not become healthy on {api_url} within {human_duration(timeout)}; see {log_path}")
    except BaseException:  # also Ctrl-C while waiting: leave nothing running
        processes.terminate(entry, group=True)
        processes.forget(workdir, ROLE)
        raise


def _tail(path: Path, size: int = 20000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - size))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def ensure_server(workdir: Path, port: int = DEFAULT_PORT, timeout: float = 150.0) -> str:
    """API URL of remedy's own server for workdir on `port` (bench scripts): reused when running, else started."""
    return use_server(workdir, port=port, named_url=None, timeout=timeout).api_url


def stop_server(workdir: Path) -> dict | None:
    """Stop the Prefect server remedy started for workdir (never any other). Its record, or None if none ran."""
    from remedy import processes

    record = processes.read_state(workdir).get(ROLE)
    if not record:
        return None
    stopped = processes.terminate(record, group=True)
    processes.forget(workdir, ROLE)
    return record if stopped else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m remedy.prefect_server",
                                     description="Prefect's server (API, UI, services) with 503 replay")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    serve(args.host, args.port)


if __name__ == "__main__":
    main()
