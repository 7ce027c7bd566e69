"""Limits of what the receiver accepts (issue 17, part 5): every bad input is a 4xx, never a 500.

Composed into `remedy.config.ReceiverSettings` as `receiver.limits` (env: `REMEDY_RECEIVER__LIMITS__MAX_BODY_BYTES`).
They bound what one token holder (or a broken exporter) can make the receiver read, parse and write.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class ReceiverLimits(BaseModel):
    max_body_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description=(
            "Largest request body the receiver reads, on every route (413 beyond it, checked on Content-Length "
            "before reading and again while reading). A webhook with 500 alerts is ~1 MB; Slack clicks are a few KB."
        ),
    )
    max_json_depth: int = Field(
        32,
        ge=4,
        le=200,
        description=(
            "Deepest nesting of JSON objects and arrays accepted (400 beyond it). An Alertmanager payload is 3 deep, "
            "a Slack block_actions payload about 10."
        ),
    )
    max_incidents_per_request: int = Field(
        128,
        ge=1,
        description=(
            "Most distinct faults (node + GPU + signal + XID) one webhook may carry (422 beyond it, nothing written). "
            "The shipped Alertmanager route groups by node, GPU and alert, so a request normally carries one; raise "
            "it if your route groups more widely."
        ),
    )
    max_incidents_per_node: int = Field(
        16,
        ge=1,
        description=(
            "Most distinct faults recorded for one node within `node_window_seconds`; alerts for further new faults "
            "on that node are rejected (counted, reported in the answer) while repeats of known ones still count. "
            "A node that really has this many faults is being replaced already."
        ),
    )
    node_window_seconds: float = Field(
        3600.0, gt=0, description="The window of `max_incidents_per_node`: faults seen on the node this recently."
    )
    max_gpus_per_node: int = Field(
        32,
        ge=1,
        le=1024,
        description=(
            "GPU index bound for a node whose GPU count is not known (no nvidia.com/gpu.count label): an alert's "
            "`gpu` must be below the node's GPU count when known, else below this."
        ),
    )
    health_timeout_seconds: float = Field(
        5.0,
        gt=0,
        le=60,
        description="`/healthz` answers 503 when a test write to the ledger (rolled back) takes longer than this.",
    )


class IntakeQuarantineSettings(BaseModel):
    """Cordon at intake (remedy.safety.intake): the receiver cordons a node whose fault the catalog takes out of
    service the moment its incident opens, before the flows start; the flows then drain, fix or replace it."""

    enabled: bool = Field(
        True,
        description=(
            "Cordon at intake. A cordon evicts nothing; it keeps new pods off the node while triage decides "
            "(about 1 s through Prefect). Off: the first cordon is the remediation flow's, after its gate."
        ),
    )
    max_nodes: int = Field(
        4,
        ge=0,
        description=(
            "Most nodes cordoned at intake that no remediation has taken over yet (its gate decides on them). "
            "An alert storm can never cordon more than this before a gate has looked; 0 switches intake "
            "quarantine off."
        ),
    )


class NodeIdentitySettings(BaseModel):
    """Which node an alert is about, whatever deployment put the labels there (remedy.receiver.identity)."""

    extra_labels: list[str] = Field(
        default_factory=list,
        description=(
            "Label names tried first, before the built-in order (node, kubernetes_node, nodename, Hostname, "
            "instance, pod+namespace): for a relabelling of your own (e.g. `k8s_node_name`). Each value is still "
            "checked against the cluster."
        ),
    )
    index_ttl_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description=(
            "How long the receiver's index of the cluster's node addresses and exporter pods (for `instance=IP:port` "
            "and a `Hostname` that is a pod name) is used before it is read again; a miss re-reads it at most this "
            "often."
        ),
    )
