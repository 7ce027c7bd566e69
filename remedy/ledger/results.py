"""Typed results of the ledger's tasks (issue 29, item 2). Plain Python, no Prefect."""

from __future__ import annotations

from dataclasses import dataclass

from remedy.ledger.records import IncidentRecord


@dataclass(frozen=True)
class FleetSynced:
    """The cluster's GPU nodes made known to the ledger: how many it lists, and how many were seen for the first
    time and adopted into the lifecycle from their pool label."""

    nodes: int
    adopted: int


@dataclass(frozen=True)
class NodeMoved:
    """A node moved in the lifecycle (or, in a dry run, the move planned), as its ledger action recorded it;
    `replayed`: a re-run found the move done and did not repeat it."""

    node: str
    from_state: str | None
    to: str
    replaces: str | None = None
    dry_run: bool = False
    replayed: bool = False

    @classmethod
    def from_record(cls, detail: dict[str, object]) -> NodeMoved:
        """From the action's recorded detail (`from` is the state it left)."""
        prior = detail.get("from")
        replaces = detail.get("replaces")
        return cls(node=str(detail["node"]), from_state=None if prior is None else str(prior), to=str(detail["to"]),
                   replaces=None if replaces is None else str(replaces), dry_run=bool(detail.get("dry_run")),
                   replayed=bool(detail.get("replayed")))


@dataclass(frozen=True)
class IncidentOpened:
    """The incident for a fault: opened now (`created`), or the open one it attaches to (the receiver usually
    opened it already)."""

    incident: IncidentRecord
    created: bool

    @property
    def id(self) -> int:
        return self.incident.id
