"""The 503 replay in front of Prefect's server (remedy/platform/prefect_server.py): a request Prefect answers 503 (SQLite
write race, rolled back) is run again in the server with its body intact, and the client sees the real answer.

Driven over ASGI against small apps that behave like Prefect's 503 handler; the launcher serving Prefect itself is
covered by tests/ui (UI on SQLite) and tests/prefect_pg (API on PostgreSQL)."""

from __future__ import annotations

import asyncio
import json

import pytest

from remedy.platform.prefect_server import REPLAYS_HEADER, ReplayRetryable
from tests.fixtures.stack import prefect_db_template, seed_prefect_home  # noqa: F401 - a fixture


def call(app, *, method="POST", body=b"", chunks=None, scope_type="http"):
    """One ASGI request; returns (status, headers dict, body) as the client would see them."""
    sent = []
    parts = chunks if chunks is not None else [body]
    incoming = [{"type": "http.request", "body": c, "more_body": i < len(parts) - 1} for i, c in enumerate(parts)]

    async def receive():
        if incoming:
            return incoming.pop(0)
        await asyncio.sleep(3600)  # a client that stays connected

    async def send(message):
        sent.append(message)

    scope = {"type": scope_type, "method": method, "path": "/api/flow_runs/", "headers": []}
    asyncio.run(app(scope, receive, send))
    start = [m for m in sent if m["type"] == "http.response.start"]
    assert len(start) == 1, f"the client must see exactly one response, saw {sent}"
    headers = {k.decode(): v.decode() for k, v in start[0].get("headers", [])}
    return start[0]["status"], headers, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


class LosesRaces:
    """Answers 503 (Prefect's retryable-error body) the first `busy` times, then echoes the body it read."""

    def __init__(self, busy: int):
        self.busy = busy
        self.bodies: list[bytes] = []

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        if len(self.bodies) <= self.busy:
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": json.dumps({"exception_message": "Service Unavailable"}).encode()})
            return
        await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"created:" + body})


def fast(app, attempts=12):
    return ReplayRetryable(app, attempts=attempts, first_delay=0.001, max_delay=0.002)


def test_a_request_that_lost_a_write_race_is_replayed_with_its_body_and_the_client_sees_the_real_answer():
    app = LosesRaces(busy=3)
    status, headers, body = call(fast(app), chunks=[b'{"flow_id": ', b'"f1"}'])
    assert (status, body) == (201, b'created:{"flow_id": "f1"}')
    assert app.bodies == [b'{"flow_id": "f1"}'] * 4, "each attempt must read the whole, same body"
    assert headers[REPLAYS_HEADER] == "3"


def test_each_attempt_is_routed_from_the_original_scope():
    """Starlette's Mount strips its prefix by writing into the scope: a replay must not start from that."""
    paths = []

    async def mounted(scope, receive, send):
        paths.append(scope["path"])
        scope.update(path=scope["path"].removeprefix("/api"), root_path="/api")  # as Mount does
        status = 503 if len(paths) == 1 else 201
        await receive()
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    assert call(fast(mounted))[0] == 201
    assert paths == ["/api/flow_runs/", "/api/flow_runs/"]


def test_the_error_re_raised_after_a_held_503_is_replayed_not_a_500():
    """Starlette's ServerErrorMiddleware answers 503 through Prefect's handler, then re-raises for the server log."""
    calls = []

    async def answers_then_raises(scope, receive, send):
        calls.append(await receive())
        if len(calls) == 1:
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b"Service Unavailable"})
            raise RuntimeError("sqlite3.OperationalError: database is locked")
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    assert call(fast(answers_then_raises))[::2] == (201, b"ok") and len(calls) == 2

    async def raises_outright(scope, receive, send):
        raise RuntimeError("a bug, not a race")

    with pytest.raises(RuntimeError, match="a bug"):
        call(fast(raises_outright))


def test_a_first_time_answer_goes_through_untouched():
    app = LosesRaces(busy=0)
    status, headers, body = call(fast(app), body=b"x")
    assert (status, body) == (201, b"created:x")
    assert REPLAYS_HEADER not in headers and len(app.bodies) == 1


def test_after_the_last_attempt_the_503_reaches_the_client_whose_own_retries_still_apply():
    app = LosesRaces(busy=100)
    status, headers, body = call(fast(app, attempts=4), body=b"x")
    assert status == 503 and json.loads(body) == {"exception_message": "Service Unavailable"}
    assert len(app.bodies) == 4 and headers[REPLAYS_HEADER] == "3"


def test_other_errors_are_not_replayed():
    calls = []

    async def conflict(scope, receive, send):
        calls.append(await receive())
        await send({"type": "http.response.start", "status": 409, "headers": []})
        await send({"type": "http.response.body", "body": b"conflict"})

    assert call(fast(conflict), body=b"x")[::2] == (409, b"conflict")
    assert len(calls) == 1


def test_a_streamed_response_passes_through_in_pieces():
    async def streams(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for piece in (b"a", b"b", b"c"):
            await send({"type": "http.response.body", "body": piece, "more_body": piece != b"c"})

    assert call(fast(streams), method="GET")[::2] == (200, b"abc")


def test_the_body_is_handed_over_once_then_the_app_waits_on_the_real_connection():
    seen = []

    async def reads_twice(scope, receive, send):
        seen.append(await receive())
        try:
            seen.append(await asyncio.wait_for(receive(), 0.05))
        except TimeoutError:
            seen.append("waiting")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    call(fast(reads_twice), body=b"payload")
    assert seen == [{"type": "http.request", "body": b"payload", "more_body": False}, "waiting"]


def test_one_writer_at_a_time_and_reads_alongside():
    """On SQLite, writes take turns (there is one writer anyway); reads do not wait for them."""
    inside, most, order = 0, 0, []

    async def slow(scope, receive, send):
        nonlocal inside, most
        await receive()
        writes = scope["method"] != "GET"
        inside += writes
        most = max(most, inside)
        order.append(scope["method"])
        await asyncio.sleep(0.05 if writes else 0)
        inside -= writes
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    wrapped = ReplayRetryable(slow, one_writer=True)

    async def request(method):
        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            if message["type"] == "http.response.start":
                done.append(method)

        await wrapped({"type": "http", "method": method, "path": "/api/x", "headers": []}, receive, send)

    done: list[str] = []

    async def main():
        await asyncio.gather(*(request(m) for m in ("POST", "PATCH", "DELETE", "POST", "GET", "GET")))

    asyncio.run(main())
    assert most == 1, "two writes ran at once"
    assert done[:2] == ["GET", "GET"], f"reads waited behind writes: {done}"

    most = 0
    wrapped = ReplayRetryable(slow)  # PostgreSQL: no turn-taking
    done = []
    asyncio.run(main())
    assert most == 4


@pytest.mark.parametrize("scope_type", ["websocket", "lifespan"])
def test_non_http_traffic_is_not_touched(scope_type):
    scopes = []

    async def app(scope, receive, send):
        scopes.append(scope["type"])
        await send({"type": "http.response.start", "status": 503, "headers": []})

    wrapped = fast(app)

    async def run():
        await wrapped({"type": scope_type}, None, lambda m: asyncio.sleep(0))

    asyncio.run(run())
    assert scopes == [scope_type], "a non-HTTP scope goes to the app once, as is"


@pytest.mark.prefect
def test_the_server_remedy_up_starts_takes_concurrent_writes_without_a_single_503(tmp_path, prefect_db_template):
    """The real launcher (python -m remedy.platform.prefect_server) on SQLite: API, UI, and 16 writers at once all answered
    with what they asked for. Plain `prefect server start` answered about half of these with 503 here
    (bench/prefect_sqlite_writes.py); an earlier cut of the wrapper turned them into 500s and 404s."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from tests.fixtures.prefect import prefect_server_process

    # its database migrated once for the run (tests/fixtures/stack.py): the writes, not the migrations, are the test
    with prefect_server_process(seed_prefect_home(tmp_path, prefect_db_template)) as api:
        assert "<!DOCTYPE html>" in httpx.get(api.removesuffix("/api") + "/", timeout=30).text
        flow_id = httpx.post(f"{api}/flows/", json={"name": "concurrent"}, timeout=30).json()["id"]

        def start_run(i: int) -> list[int]:
            with httpx.Client(base_url=api, timeout=60) as client:
                run = client.post("/flow_runs/", json={"flow_id": flow_id, "name": f"r{i}",
                                                       "state": {"type": "PENDING"}})
                if run.status_code != 201:
                    return [run.status_code]
                state = client.post(f"/flow_runs/{run.json()['id']}/set_state", json={"state": {"type": "RUNNING"}})
                task = client.post("/task_runs/", json={"flow_run_id": run.json()["id"], "task_key": "t",
                                                         "dynamic_key": "0", "name": "t", "state": {"type": "PENDING"}})
                return [run.status_code, state.status_code, task.status_code]

        with ThreadPoolExecutor(16) as pool:
            codes = [c for result in pool.map(start_run, range(96)) for c in result]
        runs = httpx.post(f"{api}/flow_runs/count", json={}, timeout=30).json()
    assert sorted(set(codes)) == [201], {c: codes.count(c) for c in set(codes)}
    assert len(codes) == 96 * 3 and runs == 96
    assert "one API writer at a time" in (tmp_path / "server.log").read_text()


def test_a_taken_port_is_one_line_naming_the_port_and_the_flag_before_anything_starts(tmp_path, monkeypatch):
    """Something else (not a Prefect server) holds the port: ensure_server says so at once, naming the port and
    the flag, instead of starting a server that exits, or waiting out its timeout (tests/platform/test_own_servers.py has
    the CLI's side)."""
    import socket
    import time

    from remedy.errors import RemedyError
    from remedy.platform.prefect_server import ensure_server

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(RemedyError, match=rf"port {port} is in use by a program remedy did not start; nothing "
                           r"was written to it\. Choose another port with --prefect-port"):
            ensure_server(tmp_path, port=port, timeout=120)
    assert time.monotonic() - started < 10
    assert not (tmp_path / "prefect" / "server.log").exists(), "no server was started"
