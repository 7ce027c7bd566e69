"""Nodes, lifecycle transitions and validations: the part of the ledger that owns a node's state."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.exc import IntegrityError

from remedy.domain.model import Node, NodeState, check_transition
from remedy.ledger import schema
from remedy.ledger.base import LedgerBase, inserted_id
from remedy.ledger.convert import (
    as_enum,
    node_record,
    require_choice,
    require_json,
    require_text,
    transition_record,
    validation_record,
)
from remedy.ledger.errors import IdempotentReplay, LedgerConflict, UnmanagedNode
from remedy.ledger.records import Fence, NodeRecord, TransitionRecord, ValidationRecord

VALIDATION_LEVELS = ("quick", "standard", "extended")
_MAX_NAME = 253  # Kubernetes node names are DNS subdomains
# Without expected_from a lost compare-and-swap is re-read and re-checked; this bounds a pathological storm.
_CAS_ATTEMPTS = 5


def _upsert(conn: Connection, values: dict[str, Any], update_cols: tuple[str, ...]) -> None:
    from sqlalchemy.dialects import postgresql, sqlite

    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = insert(schema.nodes).values(**values)
    stmt = stmt.on_conflict_do_update(index_elements=["name"], set_={c: stmt.excluded[c] for c in update_cols})
    conn.execute(stmt)


def _facts(node: Node, now: datetime) -> dict[str, Any]:
    name = require_text(node.name, "node name")
    if len(name) > _MAX_NAME:
        raise ValueError(f"node name longer than {_MAX_NAME} characters: {name[:40]}...")
    if not isinstance(node.gpu_count, int) or isinstance(node.gpu_count, bool) or node.gpu_count < 0:
        raise ValueError(f"{name}: gpu_count must be a non-negative integer, got {node.gpu_count!r}")
    return {
        "gpu_model": node.gpu_model or "", "gpu_count": node.gpu_count,
        "zone": node.topology.zone, "rack": node.topology.rack, "switch": node.topology.switch,
        "pdu": node.topology.pdu, "instance_type": node.instance_type or "",
        "provider_id": node.provider_id or "", "updated_at": now,
    }


class NodesMixin(LedgerBase):
    def upsert_node(self, node: Node, *, at: datetime | None = None) -> NodeRecord:
        """Record topology and GPU facts; never touches the lifecycle state (a new node starts unmanaged)."""
        facts = _facts(node, self._now(at))
        with self._write() as conn:
            _upsert(conn, {"name": node.name, "state": None, "state_version": 0, **facts}, tuple(facts))
            return node_record(self._node_row(conn, node.name))

    def upsert_nodes(self, nodes: list[Node], *, at: datetime | None = None) -> int:
        """upsert_node for a whole inventory in one transaction (a 2,048-node sync is one commit, not 2,048).

        Every node is checked before anything is written: one bad entry, nothing changes.
        """
        now = self._now(at)
        rows = [_facts(n, now) for n in nodes]
        seen: set[str] = set()
        for n in nodes:
            if n.name in seen:
                raise ValueError(f"node {n.name} appears twice in one upsert")
            seen.add(n.name)
        with self._write() as conn:
            for n, facts in zip(nodes, rows):
                _upsert(conn, {"name": n.name, "state": None, "state_version": 0, **facts}, tuple(facts))
        return len(rows)

    def get_node(self, name: str) -> NodeRecord:
        with self._read() as conn:
            return node_record(self._node_row(conn, name))

    def nodes(self, state: NodeState | None = None) -> list[NodeRecord]:
        q = select(schema.nodes).order_by(schema.nodes.c.name)
        if state is not None:
            q = q.where(schema.nodes.c.state == as_enum(NodeState, state, "state").value)
        with self._read() as conn:
            return [node_record(r) for r in conn.execute(q)]

    def spare_validations(self) -> dict[str, datetime | None]:
        """Every spare's last validation time (None: never validated): two columns, not whole records, since the
        gate reads it for every spare on every decision."""
        n = schema.nodes.c
        q = select(n.name, n.validated_at).where(n.state == NodeState.SPARE.value)
        with self._read() as conn:
            return {r.name: r.validated_at for r in conn.execute(q)}

    def transition(
        self,
        node: str,
        to: NodeState,
        *,
        reason: str,
        requested_by: str,
        expected_from: NodeState | None = None,
        idempotency_key: str | None = None,
        by_operator: bool = False,
        allow_unmanaged: bool = True,
        at: datetime | None = None,
        incident_id: int | None = None,
        fence: Fence | None = None,
    ) -> TransitionRecord:
        """Move `node` to `to` if the lifecycle allows it, recording who and why.

        With `expected_from`, the move happens only if the node is still in that state (else LedgerConflict):
        of two writers racing from the same state exactly one wins. Without it, the move applies to whatever
        the current state is, if legal. A repeated `idempotency_key` returns the original record.

        `fence` with `incident_id` (a run moving the node for the incident it holds): refused with LeaseLost, and
        nothing moved, unless that run still holds the incident (LedgerBase._fenced). The operator's CLI and the
        spare cycle move nodes for no incident and pass neither.
        """
        to = as_enum(NodeState, to, "transition target")
        if expected_from is not None:
            expected_from = as_enum(NodeState, expected_from, "expected_from")
        require_text(reason, "reason")
        require_text(requested_by, "requested_by")
        if idempotency_key is not None:
            require_text(idempotency_key, "idempotency_key")
        given, now = at, self._now(at)
        try:
            with self._write() as conn:
                self._fenced(conn, incident_id, fence, given)
                return self._transition(
                    conn, node, to, reason=reason, requested_by=requested_by, expected_from=expected_from,
                    idempotency_key=idempotency_key, by_operator=by_operator, allow_unmanaged=allow_unmanaged, at=now,
                )
        except IntegrityError:
            # Another writer inserted the same idempotency key between our check and our insert.
            if idempotency_key is None:
                raise
            with self._read() as conn:
                original = self._replay(conn, idempotency_key, node, to)
            if original is None:
                raise
            return original

    def _replay(self, conn: Connection, key: str, node: str, to: NodeState) -> TransitionRecord | None:
        row = conn.execute(select(schema.transitions).where(schema.transitions.c.idempotency_key == key)).first()
        if row is None:
            return None
        original = transition_record(row)
        if (original.node, original.to_state) != (node, to):
            raise IdempotentReplay(
                key, f"{original.node} → {original.to_state.value}", f"{node} → {to.value}"
            )
        return original

    def _transition(
        self, conn: Connection, node: str, to: NodeState, *, reason: str, requested_by: str,
        expected_from: NodeState | None, idempotency_key: str | None, by_operator: bool,
        allow_unmanaged: bool, at: datetime,
    ) -> TransitionRecord:
        if idempotency_key is not None and (original := self._replay(conn, idempotency_key, node, to)):
            return original
        n = schema.nodes.c
        for _ in range(_CAS_ATTEMPTS):
            row = self._node_row(conn, node)
            current = NodeState(row.state) if row.state is not None else None
            if expected_from is not None and current != expected_from:
                actual = current.value if current else "unmanaged"
                raise LedgerConflict(
                    f"{node}: expected state {expected_from.value} but it is {actual} "
                    f"(changed by another writer); not moving it to {to.value}"
                )
            if current is None:
                if not allow_unmanaged:
                    raise UnmanagedNode(node, to)
            else:
                check_transition(node, current, to, by_operator=by_operator)
            # Compare-and-swap: only applies if nobody changed the node since we read it.
            bump = 0 if current == to else 1
            swapped = conn.execute(
                update(schema.nodes)
                .where(n.name == node, n.state_version == row.state_version)
                .values(state=to.value, state_version=row.state_version + bump, updated_at=at)
            ).rowcount
            if swapped == 1:
                break
            # Lost the race. If the winner carried our idempotency key, its record is our answer.
            if idempotency_key is not None and (original := self._replay(conn, idempotency_key, node, to)):
                return original
        else:
            raise LedgerConflict(f"{node}: state kept changing under us ({_CAS_ATTEMPTS} attempts); try again")
        values = {
            "node": node, "from_state": current.value if current else None, "to_state": to.value,
            "reason": reason, "requested_by": requested_by, "at": at, "idempotency_key": idempotency_key,
        }
        new_id = inserted_id(conn.execute(schema.transitions.insert().values(**values)))
        return transition_record(
            conn.execute(select(schema.transitions).where(schema.transitions.c.id == new_id)).one()
        )

    def transitions(self, node: str) -> list[TransitionRecord]:
        t = schema.transitions.c
        with self._read() as conn:
            rows = conn.execute(select(schema.transitions).where(t.node == node).order_by(t.at, t.id))
            return [transition_record(r) for r in rows]

    def record_validation(
        self, node: str, *, level: str, passed: bool, summary: dict, requested_by: str, at: datetime | None = None,
        incident_id: int | None = None, fence: Fence | None = None,
    ) -> ValidationRecord:
        """A burn-in / health-check verdict; a pass also stamps the node's validated_at and level.

        `fence` with `incident_id`: a run checking the node for the incident it holds records nothing once it has
        lost the incident (a pass stamps validated_at, which makes a spare fit for work)."""
        require_choice(level, VALIDATION_LEVELS, "validation level")
        if not isinstance(passed, bool):
            raise ValueError(f"passed must be True or False, got {passed!r}")
        require_json(summary, "validation summary")
        require_text(requested_by, "requested_by")
        given, at = at, self._now(at)
        with self._write() as conn:
            self._fenced(conn, incident_id, fence, given)
            self._node_row(conn, node)
            values = {"node": node, "level": level, "passed": passed, "at": at, "summary": summary,
                      "requested_by": requested_by}
            new_id = inserted_id(conn.execute(schema.validations.insert().values(**values)))
            if passed:
                conn.execute(
                    update(schema.nodes).where(schema.nodes.c.name == node)
                    .values(validated_at=at, validation_level=level, updated_at=at)
                )
            return validation_record(
                conn.execute(select(schema.validations).where(schema.validations.c.id == new_id)).one()
            )

    def validations(self, node: str) -> list[ValidationRecord]:
        v = schema.validations.c
        with self._read() as conn:
            return [validation_record(r) for r in conn.execute(
                select(schema.validations).where(v.node == node).order_by(v.at, v.id))]
