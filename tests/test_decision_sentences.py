"""What was decided for a node, in one sentence (remedy.domain.outcome.decision_sentence): the held run's state
message and the first line of the replace-node and retire-node stories (issue 16)."""

from __future__ import annotations

import pytest

from remedy.domain.outcome import decision_sentence, one_line

HELD = {"node": "gpu005", "status": "held",
        "why": "hold gpu005: cluster cluster: 2 nodes failed within 10 min, over the limit of 1 — automation paused",
        "hold": {"skip": "breaker-tripped", "scope": "cluster:cluster"},
        "approval": {"decision": "timeout", "by": "timeout", "reason": "no answer within 1 s"}}


@pytest.mark.parametrize("result, sentence", [
    (HELD, "gpu005 was held and left as it is: this failure tripped the cluster breaker, and nobody answered "
           "within 1 s."),
    (HELD | {"hold": {"skip": "spare-reserve", "scope": None}, "approval": {"decision": "deny", "by": "alice"}},
     "gpu005 was held and left as it is: taking a spare would go below the spare reserve, and alice denied going "
     "ahead."),
    (HELD | {"hold": {"skip": "breaker-open", "scope": "rack:rack-2"}, "approval": {"decision": "planned"}},
     "gpu005 was held and left as it is: the rack rack-2 breaker is open, and a person would have been asked "
     "(dry-run)."),
    ({"node": "gpu011", "status": "no-spare",
      "why": "no spare: none of the 2 ready spare(s) is validated (validate-on-promote is off)\nnot gpu061: …"},
     "gpu011 was taken out of service but not replaced: none of the 2 ready spare(s) is validated "
     "(validate-on-promote is off)."),
    ({"node": "gpu003", "status": "replaced", "replacement": "gpu062"}, "gpu003 was replaced by gpu062."),
    ({"node": "gpu003", "status": "watched",
      "why": "no spare was ready at the checkpoint boundary (no ready spare in the pool)"},
     "gpu003 was not swapped on its early warning: no spare was ready at the checkpoint boundary (no ready spare in "
     "the pool); it keeps working and is watched."),
    ({"node": "gpu003", "status": "planned", "dry_run": True},
     "Dry-run: every step for gpu003 was planned and recorded, nothing was changed."),
    ({"node": "gpu007", "status": "not-retired", "approval": {"decision": "timeout", "reason": "no answer within 1 h"}},
     "gpu007 was not retired: nobody answered within 1 h."),
    ({"node": "gpu007", "status": "retired", "reason": "3 fail → pass → fail cycles in 30 d"},
     "gpu007 was retired for good: 3 fail → pass → fail cycles in 30 d."),
    ({"node": "gpu007", "status": "retired", "reason": "3 fail → pass → fail cycles in 30 d", "replacement": "gpu016"},
     "gpu007 was retired for good: 3 fail → pass → fail cycles in 30 d; gpu016 took its place in the job."),
    ({"node": "gpu007", "status": "deferred", "why": "no spare is ready to take its place in the job"},
     "gpu007 was not retired yet: no spare is ready to take its place in the job."),
])
def test_each_decision_is_one_sentence(result, sentence):
    assert decision_sentence(result) == sentence
    assert "\n" not in sentence and sentence.count(". ") == 0


def test_a_held_runs_state_message_is_its_decision():
    assert one_line(HELD) == decision_sentence(HELD)


def test_a_watched_runs_state_message_says_the_node_keeps_working():
    watched = {"node": "gpu013", "status": "watched",
               "why": "no spare was ready at the checkpoint boundary — none of the 2 ready spare(s) is validated"}
    assert one_line(watched) == ("gpu013 was not swapped on its early warning: no spare was ready at the checkpoint "
                                 "boundary — none of the 2 ready spare(s) is validated; it keeps working and is "
                                 "watched.")


def test_a_held_warned_swap_does_not_call_the_warning_a_failure():
    from remedy.domain.outcome import hold_cause

    hold = {"skip": "breaker-tripped", "scope": "cluster:cluster"}
    assert hold_cause(hold) == "this failure tripped the cluster breaker"
    assert hold_cause(hold, warned=True) == "one more node out would trip the cluster breaker"
    assert hold_cause({"skip": "breaker-open", "scope": "rack:rack-3"}, warned=True) == "the rack rack-3 breaker is open"
