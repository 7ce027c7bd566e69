"""A ledger with a known fleet, and a receiver on a loopback port built the way `remedy up` builds it."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from remedy.config import load_settings
from remedy.domain.model import Node, Topology
from remedy.ledger import Ledger
from remedy.receiver.server import ReceiverServer, build_receiver

TOKEN = "s3cret-receiver-token"
FLEET = [Node(name=f"gpu{i:03d}", topology=Topology(rack=f"rack{i // 8}")) for i in range(16)]


@pytest.fixture
def ledger(tmp_path):
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    led.migrate()
    led.upsert_nodes(FLEET)
    yield led
    led.close()


@pytest.fixture
def settings(ledger):
    return load_settings(db_url=ledger.url, receiver={"token": TOKEN, "dedup_window_seconds": 600})


class EventStub:
    """A stand-in for Prefect's POST /api/events that records what it took; `fail=True` answers 503."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.fail = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                code = 503 if outer.fail else 204
                if not outer.fail and self.path == "/api/events":
                    outer.events.extend(json.loads(body))
                self.send_response(code if self.path == "/api/events" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.api_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/api"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def event_stub():
    stub = EventStub()
    yield stub
    stub.close()


def dead_api_url() -> str:
    """A loopback URL where nothing listens (the port was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/api"


@pytest.fixture
def receiver_factory(settings, ledger):
    started = []

    def start(api_url: str | None = None, **kwargs):
        server = ReceiverServer(build_receiver(settings, ledger, api_url=api_url, **kwargs)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def post():
    client = httpx.Client(timeout=10)

    def send(server, payload, token: str | None = TOKEN, raw: bytes | None = None):
        """POST with `Bearer <token>`; a token with a space is sent as the whole header value."""
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = token if token == "Basic" else f"Bearer {token}"
        body = raw if raw is not None else json.dumps(payload).encode()
        return client.post(server.alerts_url, content=body, headers=headers)

    yield send
    client.close()
