"""The gate procedure, in one place: lock, read, decide, ask, re-check after an approval, breaker transitions, fences.

Every remediation that takes a node out (or spends a spare) passes here first:

    lock → rebuild the breaker board from the ledger (bounded: remedy.safety.history) → read the fleet → decide
         (remedy.safety.breaker.decide) → write the decision and its transitions, fenced by the incident's lease
         → unlock → HOLD: ask the one question the hold raises (or wait on the question already asked for that
         scope) → approved: re-close the scope's breaker and run the whole gate again with that question answered

The arithmetic lives in `breaker`, `board`, `budget`, `scopes`; this module only sequences it over ports
(`GatePorts`): the ledger, the cluster's node list, the lock, the fence, a person to ask. It imports no Prefect,
no task and no flow; `tasks.gate` wires the ports for a flow run, `remedy.safety.cli` for a person at a terminal.
The decisions inside the loop (`next_step`, `answer_counts`) are pure functions with their own tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from remedy.domain.durations import human_duration
from remedy.domain.model import Action, ActionOutcome, Node
from remedy.domain.outcome import Outcome
from remedy.safety import history
from remedy.safety.board import BreakerBoard
from remedy.safety.breaker import decide
from remedy.safety.fleet import SUMMARIES, FleetNodes
from remedy.safety.history import GATE_KIND, OUTCOME_KIND
from remedy.safety.scopes import NOT_A_NEW_FAILURE, BreakerTransition, FailureEvent, FleetView

if TYPE_CHECKING:
    from remedy.config import RemedySettings
    from remedy.ledger.records import Fence

# holds whose question the failure that tripped the scope asks; the others held there wait on its answer
SHARED_QUESTION = ("breaker-open", "probe-in-flight")
FIND_QUESTION_SECONDS = 30.0  # the asker may be a moment behind the failures that wait on it


@dataclass(frozen=True)
class GateRequest:
    """One failure at the gate."""

    node: str
    incident_id: int | None
    signal: str
    detected_at: datetime
    dry_run: bool
    needs_spare: bool = True
    takes_node_out: bool = True


@dataclass(frozen=True)
class GateCheck:
    """One decision of the gate (ACT or HOLD), as written to the ledger."""

    act: bool
    explain: str
    skip: str | None = None
    scope: str | None = None
    approved: tuple[str, ...] = ()
    open_scopes: tuple[str, ...] = ()
    transitions: tuple[dict[str, Any], ...] = ()
    decision: dict[str, Any] = field(default_factory=dict)
    replayed: bool = False

    @property
    def token(self) -> str:
        """What a person's approval answers for this hold: the tripped scope, else the gate that held."""
        return self.scope or self.skip or ""

    def to_detail(self) -> dict[str, Any]:
        """The ledger row's detail (remedy.safety.history reads `decision` from it)."""
        return {"act": self.act, "explain": self.explain, "approved": list(self.approved),
                "open_scopes": list(self.open_scopes), "skip": self.skip, "scope": self.scope,
                "transitions": list(self.transitions), "decision": self.decision}

    @classmethod
    def from_detail(cls, d: dict[str, Any], *, replayed: bool = False) -> GateCheck:
        return cls(act=bool(d["act"]), explain=d["explain"], skip=d.get("skip"), scope=d.get("scope"),
                   approved=tuple(d.get("approved") or ()), open_scopes=tuple(d.get("open_scopes") or ()),
                   transitions=tuple(d.get("transitions") or ()), decision=d.get("decision") or {}, replayed=replayed)


@dataclass(frozen=True)
class Answer:
    """A person's answer to one question of the gate (or the safe default)."""

    decision: str  # approve | deny | timeout | planned (dry-run)
    by: str = ""
    reason: str = ""
    approval_id: int | None = None
    answers: str = ""  # the token it answered (a scope or a gate)

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "by": self.by, "reason": self.reason, "approval_id": self.approval_id,
                "answers": self.answers}


@dataclass(frozen=True)
class Question:
    """What the gate asks a person."""

    kind: str  # breaker:<scope> | hold:<gate>
    title: str
    summary_markdown: str
    incident_id: int | None
    node: str
    timeout_seconds: float


@dataclass(frozen=True)
class Hold:
    skip: str | None
    scope: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"skip": self.skip, "scope": self.scope}


@dataclass(frozen=True)
class GatePass:
    """The gate's answer for a remediation: `status` None means act; else the Outcome (DUPLICATE: another incident
    has the node; HELD: a question was denied or not answered, or nobody was to be asked)."""

    status: Outcome | None
    gate: str
    approvals: tuple[Answer, ...] = ()
    hold: Hold | None = None
    skip: str | None = None  # the last decision's reason not to act (remedy.safety.scopes.SkipReason), if any

    @property
    def approval(self) -> Answer | None:
        return self.approvals[-1] if self.approvals else None

    @property
    def acts(self) -> bool:
        return self.status is None

    def outcome_fields(self) -> dict[str, Any]:
        """What a run's result shows of the gate (the keys replace-node and fix-in-place always reported)."""
        return {"gate": self.gate, "approvals": [a.to_dict() for a in self.approvals],
                "approval": self.approval.to_dict() if self.approval else None,
                **({"hold": self.hold.to_dict()} if self.hold else {})}


class BoardPorts(Protocol):
    """What reading and changing the breaker board needs (a person's CLI has only this)."""

    settings: RemedySettings
    ledger: Any  # remedy.ledger.Ledger

    def lock(self) -> AbstractContextManager[None]: ...
    def fence(self, incident_id: int | None) -> Fence | None: ...
    def announce(self, transition: BreakerTransition) -> None: ...


class GatePorts(BoardPorts, Protocol):
    """What the whole procedure needs of the world."""

    def gpu_nodes(self) -> Sequence[Node] | FleetNodes: ...
    def requester(self) -> str: ...
    def ask(self, question: Question) -> Answer: ...
    def sleep(self, seconds: float) -> None: ...
    def monotonic(self) -> float: ...
    def log(self, message: str) -> None: ...


# -- the decisions inside the loop (pure) --------------------------------------------------------------------------

class Step(StrEnum):
    ACT = "act"
    DUPLICATE = "duplicate"  # another incident on this node is (or was) dealt with it
    HELD = "held"
    ASK = "ask"


def next_step(check: GateCheck, *, ask: bool) -> Step:
    """What the gate does after one decision."""
    if check.act:
        return Step.ACT
    if check.skip in NOT_A_NEW_FAILURE:
        return Step.DUPLICATE
    return Step.ASK if ask else Step.HELD


def answer_counts(answer: Answer, token: str, approved: Sequence[str]) -> bool:
    """Does this answer let the gate run again? Only an approval of a question not answered before: the same
    question held a second time after a yes means something else still holds it — a person looks."""
    return answer.decision == "approve" and token not in approved


def question_kind(check: GateCheck) -> str:
    return f"breaker:{check.scope}" if check.scope else f"hold:{check.skip}"


def approval_key(incident_id: int | None, approved: Sequence[str], dry_run: bool) -> str:
    """One decision per (incident, approvals): a re-run replays it instead of deciding again."""
    return (f"incident-{incident_id}:{GATE_KIND}" + (f":approved={','.join(sorted(approved))}" if approved else "")
            + (":dry-run" if dry_run else ""))


# -- reads ---------------------------------------------------------------------------------------------------------

def load_board(ports: BoardPorts, failure_at: datetime | None = None, now: datetime | None = None) -> BreakerBoard:
    """The breaker board as of now, rebuilt from a bounded window of the ledger: real decisions only, dry-runs
    never move a breaker. `failure_at`: the failure about to be decided."""
    s = ports.settings
    return history.load_board(ports.ledger, s.breaker, s.budget, now or datetime.now(UTC), failure_at)


def fleet_view(ports: GatePorts, board: BreakerBoard, now: datetime | None = None) -> FleetView:
    """Managed GPU nodes per scope, ready spares, what is already out, what the detector flags. The nodes' side is
    summed once per change of the node list (remedy.safety.fleet); the ledger's side is read fresh every time."""
    from remedy.spares.lemons import lemon_candidates  # never handed out, so no reserve (as in the simulator)
    from remedy.spares.selection import validated_for_work

    led = ports.ledger
    got = ports.gpu_nodes()
    nodes = SUMMARIES.of(got if isinstance(got, FleetNodes) else FleetNodes(got))
    now = now or datetime.now(UTC)
    validated = led.spare_validations()
    lemons = lemon_candidates(led)
    ready_spares = sum(1 for name in nodes.ready_spares if name not in lemons
                       and validated_for_work(validated.get(name), now, ports.settings.spares))
    open_incidents = {i.node for i in led.incidents(status="open", severity="critical")}
    return FleetView(nodes.nodes_in_scope, ready_spares=ready_spares,
                     in_remediation=nodes.quarantined - set(board.active), flagged=frozenset(open_incidents),
                     spare_claims=frozenset(history.spare_claims(led, board)), out_of_service=nodes.out_of_service)


def held_on(ports: BoardPorts, token: str, within_hours: float = 24.0) -> list[str]:
    """Nodes whose latest gate decision holds them on this scope (or gate), newest first: who waits on the answer."""
    return history.held_on(ports.ledger, token, datetime.now(UTC) - timedelta(hours=within_hours))


# -- writes (under the lock, fenced) -------------------------------------------------------------------------------

def record_transitions(ports: BoardPorts, transitions: Sequence[BreakerTransition],
                       incident_id: int | None = None) -> None:
    """Write the transitions (all or none), then announce them. With an incident, fenced like the decision that
    caused them: a run that lost its incident moves no breaker (LeaseLost). A person's close (the CLI) has none."""
    if not transitions:
        return
    ports.ledger.record_breaker_events(
        [{"scope_kind": t.scope_kind, "scope": t.scope, "from_state": t.from_state.value,
          "to_state": t.to_state.value, "reason": t.reason, "by": t.by} for t in transitions],
        incident_id=incident_id, fence=ports.fence(incident_id))
    for t in transitions:
        ports.announce(t)


def decide_once(ports: GatePorts, req: GateRequest, approved: Sequence[str] = ()) -> GateCheck:
    """ACT or HOLD for this failure, with the reason and the transitions it caused. `approved`: what people already
    said yes to for this incident; each (incident, approvals) is decided once, a re-run replays it."""
    led = ports.ledger
    key = approval_key(req.incident_id, approved, req.dry_run)
    with ports.lock():
        earlier = led.find_action(key)
        if earlier is not None:  # a re-run (or a concurrent duplicate) of this incident: decided once
            return GateCheck.from_detail(earlier.detail, replayed=True)
        now = datetime.now(UTC)
        at = min(req.detected_at, now)
        board = load_board(ports, failure_at=at, now=now)
        cooled = board.cool_downs(now)
        failure = FailureEvent(req.node, at, led.get_node(req.node).topology, needs_spare=req.needs_spare,
                               signal=req.signal, takes_node_out=req.takes_node_out)
        decision = decide(failure, board, fleet_view(ports, board, now), now, approved=frozenset(approved))
        check = GateCheck(act=decision.acted, explain=decision.explain(), approved=tuple(sorted(approved)),
                          open_scopes=tuple(board.not_closed()),
                          skip=decision.skip.reason.value if decision.skip else None,
                          scope=decision.skip.scope if decision.skip else None,
                          transitions=tuple(t.to_dict() for t in (*cooled, *decision.transitions)),
                          decision=decision.to_dict())
        record, _ = led.start_action(Action(kind=GATE_KIND, node=req.node, requested_by=ports.requester(),
                                            dry_run=req.dry_run, incident_id=req.incident_id, idempotency_key=key),
                                     fence=ports.fence(req.incident_id))
        acted = ActionOutcome.PLANNED if req.dry_run else ActionOutcome.SUCCEEDED
        led.finish_action(record.id, acted if decision.acted else ActionOutcome.SKIPPED,
                          error="" if decision.acted else check.explain, detail=check.to_detail())
        if not req.dry_run:
            record_transitions(ports, [*cooled, *decision.transitions], req.incident_id)
    return check


def record_outcome(ports: GatePorts, node: str, succeeded: bool, incident_id: int | None,
                   dry_run: bool) -> tuple[BreakerTransition, ...]:
    """A remediation ended: it frees its capacity; a half-open probe closes or re-opens its scope. Once per
    (incident, node)."""
    led = ports.ledger
    with ports.lock():
        board = load_board(ports)
        now = datetime.now(UTC)
        # dry-run decisions never entered the board, so their outcomes do not leave it either
        transitions = [] if dry_run or not board.is_active(node) else board.record_outcome(node, succeeded, now)
        record, new = led.start_action(Action(kind=OUTCOME_KIND, node=node, requested_by=ports.requester(),
                                              dry_run=dry_run, incident_id=incident_id,
                                              idempotency_key=f"incident-{incident_id}:{OUTCOME_KIND}:{node}"
                                              + (":dry-run" if dry_run else "")), fence=ports.fence(incident_id))
        if new:
            led.finish_action(record.id, ActionOutcome.PLANNED if dry_run else ActionOutcome.SUCCEEDED,
                              detail={"succeeded": succeeded})
            if not dry_run:
                record_transitions(ports, transitions, incident_id)
    return tuple(transitions)


def change_breaker(ports: BoardPorts, change: Callable[[BreakerBoard, datetime], list[BreakerTransition]],
                   incident_id: int | None = None) -> tuple[BreakerTransition, ...]:
    """A person's change to the board (close after an approval, the CLI's open/close), under the lock."""
    with ports.lock():
        transitions = change(load_board(ports), datetime.now(UTC))
        record_transitions(ports, transitions, incident_id)
    return tuple(transitions)


def close_breaker(ports: BoardPorts, scope: str, by: str, incident_id: int | None = None
                  ) -> tuple[BreakerTransition, ...]:
    """A person approved: re-close the scope's breaker (the failures it explained are forgotten). Written for
    `incident_id`, fenced: a run taken over while it waited closes nothing (the run that has it now asks again)."""
    return change_breaker(ports, lambda board, now: board.approve_close(scope, by, now), incident_id)


# -- the whole procedure -------------------------------------------------------------------------------------------

def pass_gate(ports: GatePorts, req: GateRequest, *, ask: bool = True) -> GatePass:
    """Run the gate until it acts, stands down or is held. Each hold asks its one question; an approval answers
    only that one (a scope, the budget or the reserve) and the gate runs again, so every other open scope, the
    node's other incidents, the budget and the reserve still apply."""
    approved: list[str] = []
    answers: list[Answer] = []
    while True:
        check = decide_once(ports, req, approved)
        if closed_since(ports, check) and check.token not in approved:
            # a replayed hold on a scope a person has closed since (CLI, or an approval another run waited on):
            # the close answers it; decide again on the board as it is now instead of asking about a closed breaker
            ports.log(f"{req.node}: {check.scope} was closed since this hold was decided; deciding again")
            approved.append(check.token)
            continue
        step = next_step(check, ask=ask)
        if step is Step.ACT:
            return GatePass(None, check.explain, tuple(answers))
        if step is Step.DUPLICATE:
            return GatePass(Outcome.DUPLICATE, check.explain, tuple(answers), skip=check.skip)
        hold = Hold(check.skip, check.scope)
        if step is Step.HELD:
            return GatePass(Outcome.HELD, check.explain, tuple(answers), hold, check.skip)
        answer = replace(ask_once(ports, req, check), answers=check.token)
        answers.append(answer)
        if not answer_counts(answer, check.token, approved):
            return GatePass(Outcome.HELD, check.explain, tuple(answers), hold, check.skip)
        approved.append(check.token)


def closed_since(ports: BoardPorts, check: GateCheck) -> bool:
    """A replayed hold on a breaker scope that is closed now: the board read as it is, not as it was decided."""
    if not (check.replayed and not check.act and check.scope):
        return False
    return check.scope not in load_board(ports).not_closed()


def ask_once(ports: GatePorts, req: GateRequest, check: GateCheck) -> Answer:
    """One approval per tripped scope: the failure that tripped it asks, the others held there wait on its answer.
    An approval of a scope re-closes its breaker."""
    if req.dry_run:
        return Answer("planned", reason="dry-run: a person would be asked")
    timeout = ports.settings.approvals.timeout_seconds
    kind = question_kind(check)
    if check.scope and check.skip in SHARED_QUESTION:
        asked = find_open_question(ports, kind, FIND_QUESTION_SECONDS)
        if asked is not None:
            ports.log(f"{req.node} waits on approval {asked} ({kind}): {check.explain}")
            return wait_for_decision(ports, asked, timeout)
    answer = ports.ask(Question(kind=kind, title=f"gpu-remedy paused automation: {check.explain}",
                                summary_markdown=hold_summary(check, req.node, held_on(ports, check.token)),
                                incident_id=req.incident_id, node=req.node, timeout_seconds=timeout))
    if check.scope and answer.decision == "approve":
        close_breaker(ports, check.scope, by=answer.by or "approver", incident_id=req.incident_id)
    return answer


def find_open_question(ports: GatePorts, kind: str, within_seconds: float) -> int | None:
    """The pending approval already asking about `kind` (polled briefly: the asker may be a moment behind)."""
    deadline = ports.monotonic() + within_seconds
    while True:
        pending = [a for a in ports.ledger.approvals(pending=True) if a.kind == kind]
        if pending:
            return int(pending[0].id)
        if ports.monotonic() >= deadline:
            return None
        ports.sleep(0.25)


def wait_for_decision(ports: GatePorts, approval_id: int, timeout_seconds: float) -> Answer:
    """Held work whose scope already has an approval request waits for that one decision (one Slack message)."""
    deadline = ports.monotonic() + timeout_seconds
    while ports.monotonic() < deadline:
        a = ports.ledger.get_approval(approval_id)
        if a.decision:
            return Answer(a.decision, a.decided_by or "", a.reason, a.id)
        ports.sleep(0.5)
    return Answer("timeout", "", f"no decision within {human_duration(timeout_seconds)}", approval_id)


def hold_summary(check: GateCheck, node: str, waiting: Sequence[str]) -> str:
    """The approval request's text: what held, who waits on the answer, what an approval does and does not mean."""
    lines = [f"**{node}**: {check.explain}", ""]
    for t in check.transitions:
        lines.append(f"- breaker {t['scope_kind']} {t['scope']}: {t['from']} → {t['to']} — {t['reason']}")
    lines.append(f"- waiting on this answer: {', '.join(waiting or [node])}")
    others = [s for s in check.open_scopes if s != check.token]
    lines.append(f"- other scopes not closed: {', '.join(others) if others else 'none'}")
    lines += ["", "Approve answers this question only: the held failures then go through the rest of the gate "
              "(other scopes, capacity budget, spare reserve) and may ask again. Deny or no answer leaves the nodes "
              "as they are for a person to investigate."]
    return "\n".join(lines)
