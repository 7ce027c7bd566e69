"""The simulator over HTTP: the Kubernetes API (remedy.sim.api) plus, outside it, `/metrics`
(dcgm-exporter format), `/metrics/nfs` (node_exporter's mountstats of every node: remedy.sim.nfs), `/sim/state`,
`/sim/inject` and `/sim/nodes/<node>/dmesg`.

    with SimServer(build_cluster(time_scale=0.01)).start() as sim:
        client = kubernetes.client.CoreV1Api(ApiClient(Configuration(host=sim.url)))

stdlib ThreadingHTTPServer on 127.0.0.1, HTTP/1.1 keep-alive; bodies are built under the cluster lock
and written after it is released; a watch (remedy.sim.watch) is a chunked stream on its connection's thread.
Not served: server-side apply, OpenAPI documents (so `kubectl create/apply -f` needs `--validate=false`).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from remedy.errors import NodeNotFound, RemedyError
from remedy.sim import api, faults, metrics, nfs, throttle
from remedy.sim.cluster import Cluster, build_cluster

log = logging.getLogger(__name__)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    cluster: Cluster
    connections: set[socket.socket]

    def close_connections(self) -> None:
        """End every open connection: a stopped server must not go on answering on keep-alive ones (a watch
        client would otherwise start its next watch on the old connection and never notice)."""
        for conn in list(self.connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HttpServer

    def setup(self) -> None:
        super().setup()
        # small request/response pairs on keep-alive connections: without this, Nagle + delayed ACK add 40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self.connection)

    def finish(self) -> None:
        self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet; errors go to logging
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        cluster = self.server.cluster
        try:
            if parts.path in ("/metrics", "/metrics/nfs") or parts.path.startswith("/sim/"):
                reply = _sim_route(cluster, method, parts.path, parts.query, body)
            elif (wait := _throttled(cluster, parts.path, parts.query)) is not None:
                reply = api.Reply(429, throttle.MESSAGE, "text/plain; charset=utf-8",
                                  {"Retry-After": str(wait), "X-Content-Type-Options": "nosniff"})
            else:
                host = f"{self.server.server_address[0]}:{self.server.server_address[1]}"
                reply = api.handle(cluster, method, parts.path, parts.query, headers, body, host)
        except Exception as exc:  # never kill the connection thread without an answer
            log.exception("simulator error on %s %s", method, self.path)
            err = api.ApiError(500, "InternalError", f"simulator error: {type(exc).__name__}: {exc}")
            reply = api.error_reply(err)
        self._send(reply)

    def _send(self, reply: api.Reply) -> None:
        try:
            self.send_response(reply.code)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Cache-Control", "no-cache, private")
            for name, value in (reply.headers or {}).items():
                self.send_header(name, value)
            if isinstance(reply.body, (bytes, bytearray)):
                self.send_header("Content-Length", str(len(reply.body)))
                self._headers_buffer.append(b"\r\n")  # headers and body in one write
                self.wfile.write(b"".join(self._headers_buffer) + reply.body)
                self._headers_buffer = []
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in reply.body:
                if chunk:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            close = getattr(reply.body, "close", None)
            if close is not None:  # a watch: unregister it from the store now, not when it is collected
                close()


EXEMPT = ("/healthz", "/readyz", "/livez")  # APF's "probes" flow schema is exempt


def _throttled(cluster: Cluster, path: str, query: str) -> int | None:
    """Retry-After seconds if the throttle turns this API request away. Long-running requests (a followed log, a
    watch) are not seated by APF, so never turned away."""
    gate = cluster.throttle
    if gate is None or path.rstrip("/") in EXEMPT or "follow=true" in query or "watch=true" in query:
        return None
    return gate.admit()


def _json(obj, code: int = 200) -> api.Reply:
    return api.Reply(code, json.dumps(obj).encode())


def _sim_route(cluster: Cluster, method: str, path: str, qs: str, body: bytes) -> api.Reply:
    query = {k: v[-1] for k, v in parse_qs(qs).items()}
    if path == "/metrics" and method == "GET":
        nodes = query.get("node") or query.get("Hostname")
        text = metrics.render(cluster, nodes.split(",") if nodes else None)
        return api.Reply(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")
    if path == "/metrics/nfs" and method == "GET":  # node_exporter's mountstats of every node (remedy.sim.nfs)
        return api.Reply(200, nfs.render(cluster).encode(), "text/plain; version=0.0.4; charset=utf-8")
    if path == "/sim/state" and method == "GET":
        return _json(cluster.state(include_objects=query.get("objects", "true") != "false"))
    if path == "/sim/inject" and method == "POST":
        try:
            req = json.loads(body or b"{}")
            if not isinstance(req, dict) or "kind" not in req or "node" not in req:
                return _json({"error": "inject needs a JSON object with 'kind' and 'node'"}, 400)
            params = dict(req.get("params") or {})
            return _json(faults.inject(cluster, req["kind"], req["node"], req.get("gpu"), **params))
        except json.JSONDecodeError as exc:
            return _json({"error": f"inject body is not JSON: {exc}"}, 400)
        except NodeNotFound as exc:
            return _json({"error": str(exc)}, 404)
        except (ValueError, RemedyError) as exc:
            return _json({"error": str(exc)}, 400)
    parts = [p for p in path.split("/") if p]
    if method == "GET" and len(parts) == 4 and parts[:2] == ["sim", "nodes"] and parts[3] == "dmesg":
        with cluster.lock:
            lines = cluster.dmesg.get(parts[2])
        if lines is None:
            return _json({"error": f"node not found: {parts[2]}"}, 404)
        return api.Reply(200, "".join(line + "\n" for line in lines).encode(), "text/plain; charset=utf-8")
    return _json({"error": f"no simulator endpoint {method} {path}"}, 404)


class SimServer:
    """The simulator on a loopback port. `start()` returns self; use as a context manager to stop it."""

    def __init__(self, cluster: Cluster | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cluster = cluster if cluster is not None else build_cluster()
        self.host, self._want_port = host, port
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("SimServer is not started")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> SimServer:
        if self._httpd is not None:
            return self
        try:
            self._httpd = _HttpServer((self.host, self._want_port), _Handler)
        except OSError as exc:
            raise RemedyError(f"cannot listen on {self.host}:{self._want_port}: {exc.strerror or exc}") from None
        self._httpd.cluster = self.cluster
        self._httpd.connections = set()
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"sim-http-{self.port}", daemon=True)
        self._thread.start()
        self.cluster.start_clock()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self.cluster.store.close_watches()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.close_connections()
        if self._thread:
            self._thread.join(timeout=2)
        self.cluster.stop_clock()
        self._httpd = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
