"""In-place fix ladder: XID 94 restarts with 10/20/40 back-off, 145 reset → reboot → replace, 79 stop-retrying."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from remedy.domain.xid import RemediationPath as P
from remedy.domain.xid import Resolution as R
from remedy.safety.ladder import (
    Attempt,
    AttemptOutcome,
    LadderExhausted,
    Step,
    backoff_schedule,
    next_step,
)
from remedy.settings.safety import LadderSettings

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
# Seed 002 Table 3, passed in as the caller would (the real table lives in remedy.domain.xid).
TABLE3 = {79: R.RESTART_BM, 119: R.RESET_GPU, 145: R.RESET_GPU, 149: R.RESET_GPU, 31: R.RESTART_APP, 43: R.RESTART_APP, 94: R.RESTART_APP}


def resolution_of(xid: int) -> R:
    return TABLE3.get(xid, R.UNKNOWN)


def walk(xid: int, gpu: int | None, outcomes: list[AttemptOutcome], settings=None):
    """Ask for a step, 'run' it with the given outcome, repeat; return every answer."""
    history: list[Attempt] = []
    answers = []
    now = T0
    for outcome in outcomes + [None]:
        ans = next_step(history, xid, gpu, resolution_of, now, settings)
        answers.append(ans)
        if outcome is None or isinstance(ans, LadderExhausted):
            break
        start = max(now, ans.not_before)
        end = start + 5 * MIN
        history.append(Attempt(ans.kind, start, outcome, xid, gpu, finished_at=end))
        now = end
    return answers


def test_backoff_schedule_is_10_20_40_by_default():
    assert backoff_schedule(LadderSettings()) == [10 * MIN, 20 * MIN, 40 * MIN]
    assert backoff_schedule(LadderSettings(restart_backoff_minutes=5, restart_max_attempts=4)) == [
        5 * MIN, 10 * MIN, 20 * MIN, 40 * MIN
    ]


def test_xid94_restarts_with_backoff_then_caps_and_climbs_to_replace():
    F = AttemptOutcome.FAILED
    answers = walk(94, 2, [F, F, F, F, F, F])
    kinds = [a.kind if isinstance(a, Step) else "exhausted" for a in answers]
    assert kinds == [P.RESTART_APP, P.RESTART_APP, P.RESTART_APP, P.RESET_GPU, P.REBOOT, P.REPLACE, "exhausted"]
    restarts = answers[:3]
    assert [a.attempt for a in restarts] == [1, 2, 3]
    # back-off measured from the decision (first) or the end of the failed attempt (later): 10, 20, 40 min
    assert restarts[0].not_before - T0 == 10 * MIN
    assert restarts[1].not_before - (restarts[0].not_before + 5 * MIN) == 20 * MIN  # each attempt runs 5 min
    assert restarts[2].not_before - (restarts[1].not_before + 5 * MIN) == 40 * MIN
    assert "failed 3 times (cap 3)" in answers[3].reason
    assert answers[0].timeout == 60 * MIN  # seed 002: checkpoint load median 31 min
    exhausted = answers[-1]
    assert isinstance(exhausted, LadderExhausted) and exhausted.path is P.ESCALATE
    assert exhausted.tried == (P.RESTART_APP,) * 3 + (P.RESET_GPU, P.REBOOT, P.REPLACE)


def test_xid94_recurring_on_same_gpu_after_a_successful_restart_escalates():
    history = [Attempt(P.RESTART_APP, T0, AttemptOutcome.SUCCEEDED, 94, 2, finished_at=T0 + 30 * MIN)]
    same_gpu = next_step(history, 94, 2, resolution_of, T0 + timedelta(hours=3))
    assert same_gpu.kind is P.RESET_GPU and "did not hold" in same_gpu.reason
    # another GPU of the node is a new fault: start over at the first rung
    other_gpu = next_step(history, 94, 5, resolution_of, T0 + timedelta(hours=3))
    assert other_gpu.kind is P.RESTART_APP and other_gpu.attempt == 1
    # outside the 24-h window it is a new episode too
    much_later = next_step(history, 94, 2, resolution_of, T0 + timedelta(hours=25))
    assert much_later.kind is P.RESTART_APP


def test_xid145_reset_then_reboot_then_replace():
    F = AttemptOutcome.FAILED
    answers = walk(145, 1, [F, AttemptOutcome.TIMED_OUT, F])
    assert [a.kind for a in answers[:3]] == [P.RESET_GPU, P.REBOOT, P.REPLACE]
    assert answers[0].not_before == T0  # no back-off on hardware rungs
    assert "reboot timed out — escalating to replace" in answers[2].reason
    assert isinstance(answers[3], LadderExhausted)


def test_running_attempt_past_its_timeout_counts_as_timed_out():
    history = [Attempt(P.RESET_GPU, T0, AttemptOutcome.RUNNING, 145, 1)]
    with pytest.raises(ValueError, match="still running"):
        next_step(history, 145, 1, R.RESET_GPU, T0 + 5 * MIN)
    late = next_step(history, 145, 1, R.RESET_GPU, T0 + 11 * MIN)  # reset timeout 10 min
    assert late.kind is P.REBOOT and "timed out" in late.reason


def test_xid79_reboots_first_and_recurrence_on_the_node_means_replace():
    first = next_step([], 79, 0, resolution_of, T0)
    assert first.kind is P.REBOOT and first.not_before == T0
    rebooted = [Attempt(P.REBOOT, T0, AttemptOutcome.SUCCEEDED, 79, 0, finished_at=T0 + 20 * MIN)]
    # XID 79 again, even on another GPU of the same node: stop retrying
    again = next_step(rebooted, 79, 3, resolution_of, T0 + timedelta(hours=6))
    assert again.kind is P.REPLACE and "stop retrying" in again.reason
    # without the stop-retrying rule, another GPU would have been a new fault → reboot again
    plain = LadderSettings(stop_retrying_xids=[])
    assert next_step(rebooted, 79, 3, resolution_of, T0 + timedelta(hours=6), plain).kind is P.REBOOT


@pytest.mark.parametrize("resolution", [R.UNKNOWN, R.CONTACT_SUPPORT, R.CHECK_MECHANICALS])
def test_unknown_and_contact_support_escalate(resolution):
    ans = next_step([], 999, 0, resolution, T0)
    assert isinstance(ans, LadderExhausted) and ans.path is P.ESCALATE
    assert f"NVIDIA says {resolution.value}" in ans.reason


def test_unknown_xid_via_resolution_callable_escalates():
    assert isinstance(next_step([], 4242, 0, resolution_of, T0), LadderExhausted)


def test_ignore_is_a_no_action_step():
    ans = next_step([], 63, 0, R.IGNORE, T0)
    assert ans.kind is P.IGNORE and "record it" in ans.reason


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="timezone-aware"):
        next_step([], 94, 0, R.RESTART_APP, datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="not a step of the RESET_GPU ladder"):
        next_step([Attempt(P.RESTART_APP, T0, AttemptOutcome.FAILED, 145, 0)], 145, 0, R.RESET_GPU, T0 + MIN)
    with pytest.raises(ValueError, match="needs an XID"):
        next_step([], None, 0, resolution_of, T0)
