"""The breaker's vocabulary: failure events, failure-domain scopes, the fleet snapshot, transitions and decisions.

Kept apart from the decision logic in `breaker.py` so the ledger, the flows and the policy simulator can build and
read these records without importing the board.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from remedy.domain.model import Node, Topology

AUTOMATION = "automation"  # `by` of transitions the board makes on its own

DOMAIN_KINDS = ("rack", "switch", "pdu")  # peers; checked before the cluster-wide scope
SCOPE_KINDS = DOMAIN_KINDS + ("cluster",)


def scope_key(kind: str, name: str) -> str:
    """'rack:rack-3' — one string per scope, stable across serialisation."""
    if kind not in SCOPE_KINDS:
        raise ValueError(f"unknown breaker scope kind {kind!r} (expected one of {', '.join(SCOPE_KINDS)})")
    if not name:
        raise ValueError(f"breaker scope of kind {kind} needs a name")
    return f"{kind}:{name}"


def split_key(key: str) -> tuple[str, str]:
    kind, sep, name = key.partition(":")
    if not sep or kind not in SCOPE_KINDS or not name:
        raise ValueError(f"not a breaker scope: {key!r} (expected kind:name, e.g. rack:rack-3)")
    return kind, name


def scopes_of(topology: Topology) -> list[str]:
    """Scope keys a node belongs to: its rack, switch and PDU (when labelled), then the cluster."""
    found = topology.scopes()
    return [scope_key(k, found[k]) for k in DOMAIN_KINDS if k in found] + [scope_key("cluster", "cluster")]


def require_aware(when: datetime, what: str) -> datetime:
    if when.tzinfo is None:
        raise ValueError(f"{what} must be timezone-aware (UTC), got naive {when.isoformat()}")
    return when


class BreakerState(StrEnum):
    CLOSED = "closed"  # automation acts
    OPEN = "open"  # automation paused in the scope until approval or cool-down
    HALF_OPEN = "half-open"  # one remediation may go through as a probe


@dataclass(frozen=True)
class FailureEvent:
    """A node the detector wants remediated. `at` is when the failure was seen (windows count by it)."""

    node: str
    at: datetime
    topology: Topology = field(default_factory=Topology)
    needs_spare: bool = True  # replacement takes a spare; in-place fixes do not
    signal: str = ""  # e.g. "xid-79", for the explanation only
    takes_node_out: bool = True  # False for a job restart: the node stays in service, no capacity is spent

    def __post_init__(self) -> None:
        if not self.node:
            raise ValueError("failure event needs a node name")
        require_aware(self.at, f"failure time of {self.node}")


class ScopeSizes(Mapping[str, int]):
    """Nodes per scope key, checked when built: a fleet view of 12,500 nodes holds thousands of them, and the
    gate's summary (remedy.safety.fleet) builds them once per change of the nodes, not once per decision."""

    __slots__ = ("_counts",)

    def __init__(self, counts: Mapping[str, int]) -> None:
        for key, count in counts.items():
            split_key(key)
            if count < 0:
                raise ValueError(f"node count of {key} must be >= 0, got {count}")
        self._counts = dict(counts)

    def __getitem__(self, key: str) -> int:
        return self._counts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._counts)

    def __len__(self) -> int:
        return len(self._counts)

    def __repr__(self) -> str:
        return f"ScopeSizes({self._counts!r})"


def scope_sizes(nodes: Iterable[Node]) -> ScopeSizes:
    """Nodes per scope key (`cluster:cluster` always present). A node listed twice is refused: the count would be
    wrong. 12,500 nodes share a few thousand topologies: each is scoped once."""
    seen: set[str] = set()
    per_topology: dict[Topology, int] = {}
    for node in nodes:
        if node.name in seen:
            raise ValueError(f"node {node.name} listed twice in the fleet")
        seen.add(node.name)
        per_topology[node.topology] = per_topology.get(node.topology, 0) + 1
    counts: dict[str, int] = {scope_key("cluster", "cluster"): 0}
    for topology, n in per_topology.items():
        for key in scopes_of(topology):
            counts[key] = counts.get(key, 0) + n
    return ScopeSizes(counts)


@dataclass(frozen=True)
class FleetView:
    """What the fleet looks like when a decision is made (built by the caller from the cluster and the ledger).

    `nodes_in_scope` counts managed GPU nodes (serving work or under remediation; not spares) per scope key,
    including `cluster:cluster` for the whole fleet. `ready_spares` counts validated spares not yet promoted;
    `spare_claims` names failed nodes whose spare has already been promoted (so the board does not count their
    claim twice).
    """

    nodes_in_scope: Mapping[str, int]
    ready_spares: int = 0
    in_remediation: frozenset[str] = frozenset()
    flagged: frozenset[str] = frozenset()  # nodes the detector currently calls unhealthy
    spare_claims: frozenset[str] = frozenset()
    out_of_service: Mapping[str, str] = field(default_factory=dict)  # node → state (repair, retired)

    def __post_init__(self) -> None:
        if self.ready_spares < 0:
            raise ValueError(f"ready_spares must be >= 0, got {self.ready_spares}")
        if not isinstance(self.nodes_in_scope, ScopeSizes):  # checked once where built, not once per decision
            object.__setattr__(self, "nodes_in_scope", ScopeSizes(self.nodes_in_scope))

    @property
    def total(self) -> int:
        return self.nodes_in_scope.get(scope_key("cluster", "cluster"), 0)

    def size(self, key: str) -> int:
        if key not in self.nodes_in_scope:
            raise ValueError(f"fleet view has no node count for {key}: build it from every managed node")
        return self.nodes_in_scope[key]

    @classmethod
    def from_nodes(
        cls,
        nodes: Iterable[Node],
        *,
        ready_spares: int = 0,
        in_remediation: Iterable[str] = (),
        flagged: Iterable[str] = (),
        spare_claims: Iterable[str] = (),
        out_of_service: Mapping[str, str] | None = None,
    ) -> FleetView:
        counts = scope_sizes(nodes)
        return cls(
            nodes_in_scope=counts,
            ready_spares=ready_spares,
            in_remediation=frozenset(in_remediation),
            flagged=frozenset(flagged),
            spare_claims=frozenset(spare_claims),
            out_of_service=dict(out_of_service or {}),
        )


@dataclass(frozen=True)
class BreakerTransition:
    """One state change of one scope's breaker; the flow records it in the ledger and emits an event."""

    scope_kind: str
    scope: str
    from_state: BreakerState
    to_state: BreakerState
    reason: str
    at: datetime
    by: str = AUTOMATION  # a person's name for approvals and manual opens
    node: str | None = None  # the failure or probe that caused it

    @property
    def key(self) -> str:
        return scope_key(self.scope_kind, self.scope)

    def to_dict(self) -> dict:
        return {
            "scope_kind": self.scope_kind,
            "scope": self.scope,
            "from": self.from_state.value,
            "to": self.to_state.value,
            "reason": self.reason,
            "at": self.at.isoformat(),
            "by": self.by,
            "node": self.node,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> BreakerTransition:
        return cls(
            scope_kind=d["scope_kind"],
            scope=d["scope"],
            from_state=BreakerState(d["from"]),
            to_state=BreakerState(d["to"]),
            reason=d["reason"],
            at=datetime.fromisoformat(d["at"]),
            by=d.get("by", AUTOMATION),
            node=d.get("node"),
        )


class Verdict(StrEnum):
    ACT = "act"
    HOLD = "hold"


class SkipReason(StrEnum):
    ALREADY_IN_REMEDIATION = "already-in-remediation"
    ALREADY_OUT_OF_SERVICE = "already-out-of-service"  # in repair or retired: another incident took it out
    BREAKER_TRIPPED = "breaker-tripped"  # this failure crossed a scope's limit
    BREAKER_OPEN = "breaker-open"
    PROBE_IN_FLIGHT = "probe-in-flight"
    DETECTOR_SUSPECT = "detector-suspect"  # more nodes look unhealthy than the budget allows out
    CAPACITY_BUDGET = "capacity-budget"
    SPARE_RESERVE = "spare-reserve"


# Holds that say "this node is already being dealt with", not "stop": the board does not count them as failures.
NOT_A_NEW_FAILURE = frozenset({SkipReason.ALREADY_IN_REMEDIATION, SkipReason.ALREADY_OUT_OF_SERVICE})


@dataclass(frozen=True)
class Skip:
    """Why automation held: a stable reason code and one plain-English sentence for people."""

    reason: SkipReason
    detail: str
    scope: str | None = None  # scope key, when a breaker held it

    def __str__(self) -> str:
        return self.detail


@dataclass(frozen=True)
class Decision:
    """ACT or HOLD for one failure, with the explanation and every breaker transition it caused."""

    verdict: Verdict
    failure: FailureEvent
    at: datetime  # when decided (`now`)
    skip: Skip | None = None
    transitions: tuple[BreakerTransition, ...] = ()
    probe_for: tuple[str, ...] = ()  # half-open scopes this remediation probes
    counted_in_cluster: bool = True  # False when a rack/switch/PDU breaker already contains it
    note: str = ""

    @property
    def acted(self) -> bool:
        return self.verdict is Verdict.ACT

    @property
    def node(self) -> str:
        return self.failure.node

    def explain(self) -> str:
        if self.acted:
            probe = f" (probe for {', '.join(self.probe_for)})" if self.probe_for else ""
            return f"act on {self.node}{probe}: {self.note}"
        assert self.skip is not None
        return f"hold {self.node}: {self.skip.detail}"

    def to_dict(self) -> dict:
        f = self.failure
        return {
            "verdict": self.verdict.value,
            "failure": {
                "node": f.node,
                "at": f.at.isoformat(),
                "topology": {"zone": f.topology.zone, "rack": f.topology.rack, "switch": f.topology.switch, "pdu": f.topology.pdu},
                "needs_spare": f.needs_spare,
                "takes_node_out": f.takes_node_out,
                "signal": f.signal,
            },
            "at": self.at.isoformat(),
            "skip": None if self.skip is None else {"reason": self.skip.reason.value, "detail": self.skip.detail, "scope": self.skip.scope},
            "transitions": [t.to_dict() for t in self.transitions],
            "probe_for": list(self.probe_for),
            "counted_in_cluster": self.counted_in_cluster,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Decision:
        f = d["failure"]
        skip = d.get("skip")
        return cls(
            verdict=Verdict(d["verdict"]),
            failure=FailureEvent(
                node=f["node"],
                at=datetime.fromisoformat(f["at"]),
                topology=Topology(**f.get("topology", {})),
                needs_spare=f.get("needs_spare", True),
                takes_node_out=f.get("takes_node_out", True),
                signal=f.get("signal", ""),
            ),
            at=datetime.fromisoformat(d["at"]),
            skip=None if skip is None else Skip(SkipReason(skip["reason"]), skip["detail"], skip.get("scope")),
            transitions=tuple(BreakerTransition.from_dict(t) for t in d.get("transitions", ())),
            probe_for=tuple(d.get("probe_for", ())),
            counted_in_cluster=d.get("counted_in_cluster", True),
            note=d.get("note", ""),
        )
