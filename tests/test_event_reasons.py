"""Kubernetes Event reasons are named constants (remedy.domain.events), not strings built at run time."""

from __future__ import annotations

import re
from pathlib import Path

from remedy.domain import events
from remedy.domain.outcome import NOTE_REASONS, Outcome, RunLook, node_event, note_reason

REASONS = {k: v for k, v in vars(events).items() if k.isupper()}
ROOT = Path(__file__).resolve().parents[1]


def test_reasons_are_unique_kubernetes_style_words():
    assert len(set(REASONS.values())) == len(REASONS)
    assert [v for v in REASONS.values() if not re.fullmatch(r"Remedy[A-Z][A-Za-z]+", v)] == []


def test_every_run_that_stops_short_has_a_named_reason():
    noted = {o for o in Outcome if o.look is not RunLook.DONE} | {Outcome.WATCHED}
    assert set(NOTE_REASONS) == noted
    assert set(NOTE_REASONS.values()) <= set(REASONS.values())
    # the reasons kubectl users filter on did not change when they became constants
    assert note_reason(Outcome.HELD) == "RemedyHeld"
    assert note_reason(Outcome.REPLACED_NOT_JOINED) == "RemedySpareDidNotJoin"
    assert note_reason(Outcome.STOPPED_BY_OPERATOR) == "RemedyStoppedByOperator"


def test_node_event_uses_the_constant():
    assert node_event({"status": "held", "node": "gpu005", "why": "rack breaker open"})[0] == events.HELD
    assert node_event({"status": "replaced", "node": "gpu005"}) is None  # the action's own events say it


def test_every_reason_the_code_writes_is_a_constant():
    """A `reason="Remedy…"` literal in remedy/, tasks/ or flows/ must be one of the constants (greppable once)."""
    written = set()
    for path in [*ROOT.joinpath("remedy").rglob("*.py"), *ROOT.joinpath("tasks").rglob("*.py"),
                 *ROOT.joinpath("flows").rglob("*.py")]:
        if "sim" in path.relative_to(ROOT).parts:
            continue  # the simulator writes the kubelet's and controllers' reasons, not ours
        written |= set(re.findall(r"reason=\"(Remedy\w*)\"", path.read_text()))
    assert written, "the scan found no reasons: the pattern is wrong"
    assert written - set(REASONS.values()) == set()
