"""The gate procedure (remedy.safety.procedure): the loop's pure decisions, and the whole loop over in-memory
ports — approvals answered by a fake person, a breaker re-closed on approval, a second hold of the same question
ending held. The ports are the procedure's only contact with the world, so no Prefect and no cluster here."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.outcome import Outcome
from remedy.safety import procedure
from remedy.safety.procedure import Answer, GateCheck, GateRequest, Question, Step


def check(act=False, skip=None, scope=None) -> GateCheck:
    return GateCheck(act=act, explain="x", skip=skip, scope=scope)


def test_next_step_after_one_decision():
    assert procedure.next_step(check(act=True), ask=True) is Step.ACT
    assert procedure.next_step(check(skip="already-in-remediation"), ask=True) is Step.DUPLICATE
    assert procedure.next_step(check(skip="breaker-tripped", scope="rack:r1"), ask=True) is Step.ASK
    assert procedure.next_step(check(skip="capacity-budget"), ask=False) is Step.HELD


def test_only_a_first_yes_lets_the_gate_run_again():
    yes = Answer("approve", "alice")
    assert procedure.answer_counts(yes, "rack:r1", [])
    assert not procedure.answer_counts(yes, "rack:r1", ["rack:r1"])  # the same question back: something else holds
    assert not procedure.answer_counts(Answer("deny", "bob"), "rack:r1", [])
    assert not procedure.answer_counts(Answer("timeout"), "capacity-budget", [])


def test_question_kind_and_decision_key():
    assert procedure.question_kind(check(skip="breaker-open", scope="rack:r1")) == "breaker:rack:r1"
    assert procedure.question_kind(check(skip="spare-reserve")) == "hold:spare-reserve"
    assert procedure.approval_key(5, ["b", "a"], False) == "incident-5:gate_decision:approved=a,b"
    assert procedure.approval_key(5, [], True) == "incident-5:gate_decision:dry-run"


class FakePorts:
    """The procedure's ports over a real SQLite ledger and the simulator's nodes; a scripted person."""

    def __init__(self, answers: list[str]) -> None:
        from remedy import runtime

        self.settings, self.ledger = runtime.settings(), runtime.ledger()
        self._nodes = runtime.cluster().list_gpu_nodes()
        self.answers, self.asked, self.announced = list(answers), [], []

    def lock(self):
        return contextlib.nullcontext()

    def gpu_nodes(self):
        return self._nodes

    def fence(self, incident_id):
        return None

    def requester(self) -> str:
        return "test"

    def announce(self, transition) -> None:
        self.announced.append(transition)

    def ask(self, question: Question) -> Answer:
        self.asked.append(question)
        return Answer(self.answers.pop(0), "alice", approval_id=len(self.asked))

    def sleep(self, seconds: float) -> None:
        pass

    def monotonic(self) -> float:
        return 1e9 if not hasattr(self, "_t") else self._t

    def log(self, message: str) -> None:
        pass


@pytest.fixture
def rack(remedy_on_sim, monkeypatch):
    from remedy import runtime
    from remedy.domain.model import Incident

    monkeypatch.setenv("REMEDY_BUDGET__MAX_PERCENT_IN_REMEDIATION", "50")
    monkeypatch.setenv("REMEDY_BREAKER__CLUSTER__MAX_PERCENT", "100")
    monkeypatch.setenv("REMEDY_BREAKER__SPARE_RESERVE", "0")
    monkeypatch.setenv("REMEDY_DRY_RUN", "false")
    runtime.reset()
    led = runtime.ledger()
    nodes = runtime.cluster().list_gpu_nodes()
    led.upsert_nodes(nodes)
    r = sorted(n.topology.rack for n in nodes if n.state and n.state.value == "active")[0]
    names = sorted(n.name for n in nodes if n.topology.rack == r and n.state and n.state.value == "active")
    incs = [led.open_incident(Incident(n, "xid", gpu=0, xid=79), window_seconds=600)[0] for n in names[:3]]
    yield incs
    runtime.reset()


def _request(inc, seconds_ago: float) -> GateRequest:
    return GateRequest(inc.node, inc.id, "xid", datetime.now(UTC) - timedelta(seconds=seconds_ago), False)


def test_an_approval_recloses_the_breaker_and_the_gate_runs_again(rack):
    first = FakePorts([])
    assert procedure.pass_gate(first, _request(rack[0], 3)).acts
    assert procedure.pass_gate(first, _request(rack[1], 2)).acts
    ports = FakePorts(["approve"])
    passed = procedure.pass_gate(ports, _request(rack[2], 1))
    # the third failure tripped the rack's breaker and asked once; yes re-closed it and the gate let it through
    assert passed.status is None and [a.decision for a in passed.approvals] == ["approve"]
    assert passed.approvals[0].answers.split(":")[0] in ("rack", "switch", "pdu")
    (question,) = ports.asked
    assert question.kind.startswith("breaker:") and "waiting on this answer" in question.summary_markdown
    assert [t.to_state.value for t in ports.announced] == ["open", "closed"]
    assert procedure.load_board(ports).not_closed() == []
    # a re-run replays the decisions already made (the ledger has them once); the breaker its hold asked about is
    # closed now, so nobody is asked about it again
    again = FakePorts(["approve"])
    assert procedure.pass_gate(again, _request(rack[2], 1)).acts
    assert again.asked == []
    assert len([a for a in ports.ledger.actions(kind="gate_decision", incident_id=rack[2].id)]) == 2


def test_a_replayed_hold_reads_the_breaker_as_a_person_left_it(rack):
    """Issue 33: after a restart a run asked again about a breaker a person had closed (`remedy breaker close`),
    while `breaker status` said all closed. The replayed hold now reads the board as it is and decides again."""
    for inc, ago in zip(rack[:2], (3, 2)):
        procedure.pass_gate(FakePorts([]), _request(inc, ago))
    held = procedure.pass_gate(FakePorts(["deny"]), _request(rack[2], 1))
    assert held.status is Outcome.HELD
    ports = FakePorts([])
    procedure.close_breaker(ports, held.hold.scope, by="alice")  # the operator closes it by hand
    assert procedure.load_board(ports).not_closed() == []
    again = procedure.pass_gate(ports, _request(rack[2], 1))  # the run comes back (a takeover, a re-trigger)
    assert again.acts and ports.asked == []


def test_a_denial_holds_and_leaves_the_breaker_open(rack):
    for inc, ago in zip(rack[:2], (3, 2)):
        procedure.pass_gate(FakePorts([]), _request(inc, ago))
    ports = FakePorts(["deny"])
    held = procedure.pass_gate(ports, _request(rack[2], 1))
    assert held.status is Outcome.HELD and held.hold and held.hold.skip == "breaker-tripped"
    assert held.outcome_fields()["approval"]["decision"] == "deny"
    assert procedure.load_board(ports).not_closed() == [held.hold.scope]


def test_nobody_is_asked_when_asking_is_off(rack):
    for inc, ago in zip(rack[:2], (3, 2)):
        procedure.pass_gate(FakePorts([]), _request(inc, ago))
    ports = FakePorts([])
    held = procedure.pass_gate(ports, _request(rack[2], 1), ask=False)
    assert held.status is Outcome.HELD and ports.asked == [] and held.approvals == ()


def test_a_dry_run_asks_nobody_and_moves_no_breaker(rack):
    for inc, ago in zip(rack[:2], (3, 2)):
        procedure.pass_gate(FakePorts([]), _request(inc, ago))
    ports = FakePorts([])
    req = GateRequest(rack[2].node, rack[2].id, "xid", datetime.now(UTC), True)
    out = procedure.pass_gate(ports, req)
    assert ports.asked == [] and [a.decision for a in out.approvals] in (["planned"], [])


def test_safety_imports_no_task_no_flow_and_no_prefect():
    import ast
    from pathlib import Path

    root = Path(procedure.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for n in names:
                assert n.split(".")[0] not in ("tasks", "flows", "prefect"), f"{path.name} imports {n}"
