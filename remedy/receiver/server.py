"""Run the receiver: wire it from settings, serve it with uvicorn in a thread (embedded stack, tests) or in the
foreground (`remedy receiver serve`, production)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from remedy.errors import RemedyError
from remedy.receiver.alerts import AlertIntake, NodeDirectory
from remedy.receiver.app import ALERTS_PATH, Receiver, create_app, is_loopback
from remedy.receiver.events import IncidentAnnouncer, PrefectEventSink
from remedy.receiver.identity import ClusterIndex, NodeResolver
from remedy.receiver.metrics import ReceiverMetrics
from remedy.settings.triage import triage_settings


def build_receiver(settings, ledger, *, api_url: str | None, node_lister: Callable[[], Iterable[Any]] | None = None,
                   on_sent: Callable[[list[int]], None] | None = None, api_key: str | None = None,
                   auth_string: str | None = None, cluster: Callable[[], Any] | None = None) -> Receiver:
    """A Receiver for `settings`; with `api_url` (Prefect's, ending in /api) incidents are announced to it.
    `node_lister` yields the cluster's node names or `Node`s (then their GPU counts bound the alerts' GPU index).
    `cluster` (the cluster adapter's factory) lets the announcer cordon at intake (`receiver.quarantine`)."""
    t = triage_settings(settings)
    metrics = ReceiverMetrics()
    nodes = NodeDirectory(ledger, node_lister, refresh_seconds=t.known_nodes_refresh_seconds)
    identity = settings.receiver.identity
    # with the cluster at hand, a Hostname that is a pod and an instance IP resolve through it (remedy.receiver.identity)
    index = ClusterIndex(cluster, ttl=identity.index_ttl_seconds) if cluster is not None else None
    intake = AlertIntake(ledger, nodes, window_seconds=settings.receiver.dedup_window_seconds,
                         thresholds=settings.signals, limits=settings.receiver.limits,
                         refresh_seconds=t.known_nodes_refresh_seconds,
                         resolver=NodeResolver(nodes.knows, index, identity.extra_labels))
    announcer = None
    if api_url:
        sink = PrefectEventSink(api_url, timeout=t.emit_timeout_seconds, api_key=api_key, auth_string=auth_string)
        announcer = IncidentAnnouncer(ledger, sink, metrics, retry_seconds=t.emit_retry_seconds,
                                      thresholds=settings.signals, on_sent=on_sent)
        announcer.watchdog = lease_watchdog(settings, ledger, announcer)
        if cluster is not None:
            from remedy.receiver.quarantine import IntakeQuarantine

            announcer.quarantine = IntakeQuarantine(ledger, settings, cluster)
    return Receiver(intake=intake, token=settings.receiver.token.get_secret_value(), metrics=metrics,
                    announcer=announcer, limits=settings.receiver.limits)


def lease_watchdog(settings, ledger, announcer: IncidentAnnouncer):
    """The watchdog that re-announces incidents of gone runs through the announcer's sink (whatever it is then: the
    embedded stack swaps in its direct-triage sink after this)."""
    from remedy.approvals import messages
    from remedy.receiver.watchdog import LeaseWatchdog
    from remedy.settings.leases import lease_settings

    def notify(text: str) -> None:
        notifier = messages.notifier(settings)
        if notifier is not None:
            notifier.post(text)

    s = lease_settings(settings)
    return LeaseWatchdog(ledger, lambda events: announcer.sink.send(events), every_seconds=s.watchdog_seconds,
                         max_reannounces=s.max_reannounces, thresholds=settings.signals, notify=notify)


def check_bind(host: str, token: str) -> str:
    """Refuse (RemedyError, one line) to serve a non-loopback address without a token; on loopback without one,
    return the line to say so (alerts are then taken from loopback clients only); "" when a token is set."""
    if token:
        return ""
    if not is_loopback(host):
        raise RemedyError(f"receiver.token is not set: refusing to serve alerts on {host} without a bearer token "
                          "(set REMEDY_RECEIVER__TOKEN, or bind 127.0.0.1)")
    return (f"receiver.token is not set: taking alerts without a token, from loopback clients only ({host}); "
            "set REMEDY_RECEIVER__TOKEN before exposing it")


class ReceiverServer:
    """uvicorn in a background thread on host:port (port 0 = a free one). `url` is the webhook URL's base."""

    def __init__(self, receiver: Receiver, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self.warning = check_bind(host, receiver.token)
        self.receiver = receiver
        self.host = host
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(create_app(receiver), log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def alerts_url(self) -> str:
        return self.url + ALERTS_PATH

    def start(self, timeout: float = 10.0) -> ReceiverServer:
        if self.receiver.announcer is not None:
            self.receiver.announcer.start()
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name="receiver-uvicorn", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"receiver did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread:
            self._thread.join(10)
        if self.receiver.announcer is not None:
            self.receiver.announcer.stop()
        self._sock.close()

    def __enter__(self) -> ReceiverServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
