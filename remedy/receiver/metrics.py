"""The receiver's Prometheus metrics, in their own registry (several receivers can live in one test process).

Every alert in a request that reached the receiver lands in exactly one of opened / deduplicated / resolved /
rejected / ignored, so `received == opened + deduplicated + resolved + rejected + ignored` always holds (the storm bench checks it).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

# Latency buckets around the 50 ms p99 target.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class ReceiverMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.received = Counter("remedy_receiver_alerts_received", "Alerts received (in any request that reached the handler).", registry=r)
        self.opened = Counter("remedy_receiver_incidents_opened", "Alerts that opened a new incident.", registry=r)
        self.deduplicated = Counter("remedy_receiver_alerts_deduplicated", "Alerts folded into an existing incident (count bumped).", registry=r)
        self.resolved = Counter("remedy_receiver_alerts_resolved", "Resolved alerts recorded (never acted on).", registry=r)
        self.ignored = Counter("remedy_receiver_alerts_ignored", "Alerts acknowledged and not acted on, by reason: unhandled (not a fault gpu-remedy handles), sticky-gauge (a last-XID gauge re-fired after gpu-remedy fixed it).", ["reason"], registry=r)
        self.rejected = Counter("remedy_receiver_alerts_rejected", "Alerts refused, by reason.", ["reason"], registry=r)
        self.requests = Counter("remedy_receiver_requests", "Webhook requests by HTTP status.", ["code"], registry=r)
        self.events_emitted = Counter("remedy_receiver_events_emitted", "Incident events Prefect acknowledged.", registry=r)
        self.event_emit_failures = Counter("remedy_receiver_event_emit_failures", "Incident events Prefect did not take (held and retried).", registry=r)
        self.event_emit_retries = Counter("remedy_receiver_event_emit_retries", "Held incident events delivered on a later attempt.", registry=r)
        self.errors = Counter("remedy_receiver_internal_errors", "Requests that failed inside the receiver: the ledger (answered 503) or a case validation missed (422).", registry=r)
        self.latency = Histogram("remedy_receiver_request_seconds", "Webhook request handling time.", buckets=_BUCKETS, registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def value(self, name: str, **labels: str) -> float:
        """Current value of a sample, e.g. value("remedy_receiver_alerts_rejected_total", reason="unresolved-node")."""
        v = self.registry.get_sample_value(name, labels or None)
        return 0.0 if v is None else v
